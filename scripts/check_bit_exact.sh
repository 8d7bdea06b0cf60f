#!/usr/bin/env bash
# Proves that a refactoring left training unchanged, bit for bit on the CPU: trains 30 steps of each tiny preset
# from a fixed seed and compares every train_loss and val_loss of metrics.jsonl, printed with %.17g (which reads
# back to the same double), against scripts/bit_exact_losses.txt.
#
#   scripts/check_bit_exact.sh [--uoe build/uoe] [--data FILE] [--record]
#
# --record rewrites scripts/bit_exact_losses.txt from this build (do it on the code you trust, before the change).
# Threads: OpenMP reductions may sum in a thread-count-dependent order, so the values hold for --threads 2 only;
# both the recording and the check use THREADS below. float32, batch 4 x 64 tokens: a few seconds per preset.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
uoe="$root/build/uoe"
data="$root/../shared/data/tinyshakespeare.txt"
record=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --uoe) uoe="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --record) record=1; shift ;;
    *) echo "check_bit_exact.sh: unknown argument '$1' (expected --uoe PATH, --data FILE or --record)" >&2; exit 2 ;;
  esac
done
[[ -x "$uoe" ]] || { echo "check_bit_exact.sh: no uoe program at $uoe (build first, or pass --uoe)" >&2; exit 2; }
[[ -f "$data" ]] || { echo "check_bit_exact.sh: no corpus at $data (pass --data)" >&2; exit 2; }

readonly PRESETS="tiny-dense tiny-moe tiny-uoe tiny-aoe"
readonly THREADS=2 SEED=7 STEPS=30
expected="$here/bit_exact_losses.txt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One line per logged loss: "<preset> step <n> <train_loss|val_loss> <%.17g>".
for preset in $PRESETS; do
  "$uoe" train --config "$preset" --data "$data" --out "$work/$preset" --steps $STEPS --batch 4 --seq 64 \
    --threads $THREADS --seed $SEED --dtype f32 --eval-every 10 --eval-batches 2 --no-save --quiet >/dev/null
  python3 - "$preset" "$work/$preset/metrics.jsonl" >>"$work/losses.txt" <<'EOF'
import json, sys
preset, path = sys.argv[1], sys.argv[2]
for line in open(path):
    m = json.loads(line)
    for key in ("train_loss", "val_loss"):
        if key in m:
            print("%s step %d %s %.17g" % (preset, m["step"], key, m[key]))
EOF
done

if [[ $record == 1 ]]; then
  cp "$work/losses.txt" "$expected"
  echo "check_bit_exact.sh: recorded $(wc -l <"$expected") losses in $expected"
  exit 0
fi
[[ -f "$expected" ]] || { echo "check_bit_exact.sh: no recorded losses at $expected (run with --record)" >&2; exit 2; }
if diff -u "$expected" "$work/losses.txt"; then
  echo "check_bit_exact.sh: all $(wc -l <"$expected") losses bit-identical to $expected"
else
  echo "check_bit_exact.sh: losses differ from the recorded ones (lines above: - recorded, + this build)" >&2
  exit 1
fi
