#!/usr/bin/env bash
# The memory table of docs/GUIDE.md section 10: for each config, compute dtype, parameter dtype and activation
# checkpointing, `uoe info`'s estimate of the peak training memory against the trainer's measured
# peak_memory_mib of step 2 (one process, CPU, batch 16 x 256, AdamW). Prints markdown rows.
# Usage: bench/memory_table.sh [--uoe build/uoe] [--data ../shared/data/tinyshakespeare.txt] [config...]
#        (configs default to tiny-dense tiny-moe tiny-aoe tiny-uoe; each row is a 2-step run, seconds at tiny)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
uoe="$here/build/uoe" data="$here/../shared/data/tinyshakespeare.txt" configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --uoe) uoe="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[ ${#configs[@]} -gt 0 ] || configs=(tiny-dense tiny-moe tiny-aoe tiny-uoe)
[ -x "$uoe" ] || { echo "memory_table.sh: no uoe program at $uoe (pass --uoe)" >&2; exit 1; }
[ -f "$data" ] || { echo "memory_table.sh: no corpus at $data (pass --data)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "| config | dtype | params | checkpointing | estimate | measured | error |"
echo "|---|---|---|---|---|---|---|"
for config in "${configs[@]}"; do
  for params in f32 bf16; do
    for dtype in f32 bf16; do
      for ckpt in no yes; do
        flags=(--config "$config" --dtype "$dtype" --param-dtype "$params" --batch 16 --seq 256)
        [ "$ckpt" = yes ] && flags+=(--checkpoint-activations)
        estimate=$("$uoe" info "${flags[@]}" | awk '$1 == "total" { print $2; exit }')
        "$uoe" train "${flags[@]}" --data "$data" --out "$out/run" --steps 2 --eval-every 0 --eval-batches 1 \
          --no-save --quiet --overwrite > /dev/null
        measured=$(grep -o '"peak_memory_mib":[0-9.]*' "$out/run/metrics.jsonl" | tail -1 | cut -d: -f2)
        awk -v c="$config" -v d="$dtype" -v p="$params" -v k="$ckpt" -v e="$estimate" -v m="$measured" \
          'BEGIN { printf "| %s | %s | %s | %s | %.1f | %.1f | %+.1f%% |\n", c, d, p, k, e, m, 100 * (e - m) / m }'
      done
    done
  done
done
