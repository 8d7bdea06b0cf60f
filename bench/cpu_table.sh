#!/usr/bin/env bash
# Issue 20's CPU table in one run: the GEMM rows (uoe bf16 and f32, OpenBLAS sgemm, PyTorch's torch.matmul), uoe's
# training tokens/s for each tiny preset in float32, in bfloat16, and in bfloat16 on the float32 kernels, and PyTorch
# 2.x's configurations of the same models (bench/pytorch_peer.py cpu: eager f32, bf16 autocast, torch.compile of
# each). uoe and PyTorch alternate, --repeat times, and the summary gives each figure's best run: on a shared machine
# another tenant can only slow a run down, so the best of several is the fairest reading of both sides. Every run's
# figure is printed above it.
#   bench/cpu_table.sh [--build build] [--data FILE] [--python ~/.cache/uoe-peer/bin/python] [--threads 2] [--repeat 3]
# The peer's virtual environment comes from bench/peer_env.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build" data="$root/../shared/data/tinyshakespeare.txt" python="$HOME/.cache/uoe-peer/bin/python"
threads=2 repeat=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    *) echo "cpu_table.sh: unknown argument '$1' (expected --build DIR, --data FILE, --python PATH, --threads N," \
         "--repeat N)" >&2; exit 2 ;;
  esac
done
[[ -x "$build/uoe" && -x "$build/uoe_bench" ]] || { echo "cpu_table.sh: no uoe and uoe_bench in $build (build first)" >&2; exit 2; }
[[ -f "$data" ]] || { echo "cpu_table.sh: no corpus at $data (pass --data)" >&2; exit 2; }
[[ -x "$python" ]] || { echo "cpu_table.sh: no PyTorch peer at $python (run bench/peer_env.sh, or pass --python)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log="$work/log"

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs) ($(nproc) cores), threads $threads, $(date -u +%FT%TZ)"
"$python" -c "import torch; print('PyTorch', torch.__version__, 'CPU capability', torch.backends.cpu.get_cpu_capability())"

# One line per figure: "<who> <what> <value> <unit>".
uoe_gemm() {  # BM_GemmBf16_uoe's label names the bfloat16 path it ran
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=$threads "$build/uoe_bench" \
    --benchmark_filter='BM_GemmBf16_uoe/(1024|2048)/|BM_Gemm_uoe/(1024|2048)/|BM_Sgemm_OpenBLAS/(1024|2048)/' \
    --benchmark_min_time=1 2>&1 |
    sed -nE 's#^BM_([A-Za-z0-9_]+)/([0-9]+)/real_time.*GFLOPS=([0-9.]+)/s ?(.*)$#\1 gemm-\2 \3 GFLOP/s \4#p'
}
# Steps 3 to 20: their tokens over their time (each step's step_tokens_per_s in metrics.jsonl), as the peer times
# its steps after its first two (warm-up: first touch of every buffer; torch.compile's compilation). bf16-f32path: --dtype bf16 on the float32 kernels (UOE_PIN_ISA=f32), as
# on a CPU without AMX or AVX512-BF16; its warning about attention's float32 route is expected.
steady_tokens_per_s() {  # harmonic mean of the per-step rates after step 2 (every step has batch x seq tokens)
  grep -o '"step":[0-9]*\|"step_tokens_per_s":[0-9.e+-]*' "$1" | paste - - | tr -d '"' | tr ':' ' ' |
    awk '$2 > 2 { n++; t += 1 / $4 } END { if (n == 0) exit 1; printf "%.1f\n", n / t }'
}
uoe_train() {
  for preset in tiny-uoe tiny-moe tiny-dense; do
    for run in f32 bf16 bf16-f32path; do
      local pin=()
      [[ $run == bf16-f32path ]] && pin=(UOE_PIN_ISA=f32)
      env "${pin[@]}" OMP_NUM_THREADS=$threads "$build/uoe" train --config "$preset" --data "$data" --out "$work/run" \
        --steps 20 --batch 16 --seq 256 --threads "$threads" --dtype "${run%%-*}" --eval-every 0 --no-save --quiet \
        --overwrite >/dev/null
      echo "uoe $preset-$run $(steady_tokens_per_s "$work/run/metrics.jsonl") tokens/s (all 20 steps:" \
        "$(tail -1 "$work/run/metrics.jsonl" | grep -o '"tokens_per_s":[0-9]*' | cut -d: -f2))"
    done
  done
}
peer() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$python" "$root/bench/pytorch_peer.py" cpu --archs uoe,moe,dense \
    --threads "$threads" --batch 16 --steps 8 --data "$data" 2>/dev/null |
    sed -nE -e 's#^pytorch \S+ (tiny-[a-z]+): ([0-9]+) tokens/s \([0-9]+ threads (f32|bf16 autocast) (eager|compiled),.*#pytorch \1-\3-\4 \2 tokens/s#p' \
      -e 's#^pytorch \S+ torch.matmul (float32|bfloat16) ([0-9]+)\^3: ([0-9.]+) GFLOP/s#pytorch-\1 gemm-\2 \3 GFLOP/s#p' |
    sed 's/bf16 autocast/bf16-autocast/'
}
for r in $(seq "$repeat"); do
  echo "== run $r of $repeat"
  { uoe_gemm; uoe_train; peer; } | tee -a "$log"
done

echo "== best of $repeat runs"
python3 - "$log" <<'PY'
import sys
best, unit, note = {}, {}, {}
for line in open(sys.argv[1]):
    who, what, value, u, *rest = line.split()
    key = (who, what)
    if float(value) >= best.get(key, 0.0):  # the best run's figure, with that run's note
        best[key], unit[key], note[key] = float(value), u, " ".join(rest)
for (who, what), v in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"{what:28} {who:22} {v:10.1f} {unit[(who, what)]} {note[(who, what)]}".rstrip())
for preset in ("tiny-uoe", "tiny-moe", "tiny-dense"):
    peers = {w: v for (who, w), v in best.items() if who == "pytorch" and w.startswith(preset + "-")}
    mine = best.get(("uoe", preset + "-bf16"))
    if peers and mine:
        top = max(peers, key=peers.get)
        print(f"{preset}: uoe bf16 {mine:.0f} tokens/s = {mine / peers[top]:.2f}x the best PyTorch ({top[len(preset) + 1:]}, "
              f"{peers[top]:.0f}); {mine / peers.get(preset + '-bf16-autocast-eager', float('nan')):.2f}x eager bf16 autocast")
    f32, f32path = best.get(("uoe", preset + "-f32")), best.get(("uoe", preset + "-bf16-f32path"))
    if f32 and f32path:
        print(f"{preset}: uoe bf16 on the float32 kernels {f32path:.0f} tokens/s = {f32path / f32:.2f}x uoe f32")
PY
