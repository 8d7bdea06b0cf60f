#!/usr/bin/env bash
# One device call checks everything on a GPU (target: H200, sm_90), within about 10 minutes:
#   build for sm_90 -> every CUDA test (parity of every op, the training step, runtime) -> the GPU benchmarks
#   -> 3b-uoe training with activation checkpointing (issue 6: MFU, memory peak vs `uoe info`) -> the same
#   GEMM, attention and small-preset training in eager PyTorch (bench/pytorch_peer.py) -> a summary table, printed
#   last. Logs and the benchmark JSON go to $OUT (the device tool returns them).
# Needs gpu-deps/ (bench/gpu_deps.sh) carried along: run(command="bench/gpu_check.sh", carry=["gpu-deps"]).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/uoe-gpu-check}
mkdir -p "$OUT"
build=build-gpu
start=$(date +%s)
stamp() { echo "[gpu_check $(( $(date +%s) - start ))s] $*"; }
budget_s=${UOE_GPU_CHECK_SECONDS:-570}  # of the device tool's 600 s per call (more for a dry run on a CPU)
left() { echo $(( budget_s - ($(date +%s) - start) )); }  # seconds left
share() { local l; l=$(left); echo $(( l * $1 / 100 < $2 ? l * $1 / 100 : $2 )); }  # min(left * $1 %, $2)

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
stamp "configure"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUOE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA_FLAGS=-lineinfo -DCMAKE_PREFIX_PATH="$PWD/gpu-deps" -DUOE_WERROR=OFF > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
stamp "build"
timeout 330 cmake --build "$build" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -m 20 -E "error|Error" "$OUT/build.log"; tail -5 "$OUT/build.log"; exit 1; }

tests_rc=125 bench_rc=125  # 125: not run
if [[ "${1:-all}" != "3b" ]]; then  # `bench/gpu_check.sh 3b`: 3b-uoe and the peer alone (a second call)
  # Each crash, hang or sticky CUDA error costs one test (or one benchmark family), not the rest of the call.
  stamp "CUDA tests"
  bench/gpu_runner.py tests "$build/uoe_tests" '*Cuda*' "$(share 40 150)" "$OUT" | tee "$OUT/tests-summary.txt"
  tests_rc=${PIPESTATUS[0]}

  stamp "GPU benchmarks"
  bench/gpu_runner.py bench "$build/uoe_bench" 'Gpu' "$(share 70 170)" "$OUT" | tee "$OUT/bench-summary.txt"
  bench_rc=${PIPESTATUS[0]}
fi

stamp "3b-uoe training"
# Any text will do for throughput: the repository's own documents, byte tokens. Model FLOPs, no checkpoint.
cat docs/*.md README.md > "$OUT/text.txt"
# 32 x 1024 tokens per step: the AdamW update of all 2.9B parameters (memory-bound, ~28 bytes each) is paid once
# per 32k tokens instead of once per 8k (about 48 GiB by `uoe info`).
train3b=(--config 3b-uoe --batch 32 --seq 1024 --dtype bf16 --checkpoint-activations)
"$build/uoe" info "${train3b[@]}" > "$OUT/info3b.txt" 2>&1
budget=$(left)
if (( budget >= 90 )); then
  timeout "$(( budget < 200 ? budget : 200 ))" "$build/uoe" train "${train3b[@]}" --data "$OUT/text.txt" \
    --out "$OUT/run3b" --device cuda --steps 10 --warmup 2 --eval-every 0 --eval-batches 1 --no-save --quiet \
    > "$OUT/train3b.log" 2>&1
  train_rc=$?
  tail -3 "$OUT/train3b.log"
else
  echo "3b-uoe training skipped: only ${budget}s left of this call; run \`bench/gpu_check.sh 3b\` (the build is kept)"
  train_rc=125
fi

stamp "PyTorch peer"
# The same work in eager PyTorch on the same GPU (the image's torch: cuBLAS GEMM, FlashAttention through
# scaled_dot_product_attention, the small presets under bf16 autocast), when this call has a minute left.
if (( $(left) >= 60 )); then
  {
    timeout 30 python3 bench/pytorch_peer.py ops
    for arch in dense moe uoe; do
      (( $(left) >= 15 )) && timeout "$(( $(left) < 40 ? $(left) : 40 ))" python3 bench/pytorch_peer.py train \
        --preset small --device cuda --dtype bf16 --arch $arch --batch 16 --steps 8 --data ''
    done
  } > "$OUT/peer.log" 2>&1
else
  echo "PyTorch peer skipped: only $(left)s left of this call; \`bench/gpu_check.sh 3b\` runs it after 3b-uoe"
fi

stamp "summary"
python3 - "$OUT" "$tests_rc" "$bench_rc" "$train_rc" <<'PY'
import json, re, sys, os
out, tests_rc, bench_rc, train_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
print("\n==== uoe GPU check:", open(os.path.join(out, "gpu.txt")).read().strip())
try:
    counts = json.load(open(os.path.join(out, "tests.json")))["counts"]
    print("CUDA tests:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), f"(exit {tests_rc}; "
          "tests-summary.txt names each one not passed)")
except Exception as e:
    print("CUDA tests: no result:", e, f"(exit {tests_rc})")
try:
    runs = json.load(open(os.path.join(out, "bench.json")))["benchmarks"]
except Exception as e:
    runs = []
    print("no benchmark results:", e, f"(exit {bench_rc})")
print(f"{'benchmark':58s} {'value':>14s} {'unit':>9s} {'extra':>22s}")
for b in runs:
    if b.get("run_type") == "aggregate" or b.get("error_occurred"):
        continue
    name = b["name"]
    unit = next((u for u in ("TFLOP/s", "tokens/s", "GB/s") if u in b), None)
    value = f"{b[unit]:.4g}" if unit else f"{b.get('real_time', 0):.4g}"
    extra = " ".join(f"{k}={b[k]:.3g}" for k in ("MFU", "loop_TFLOP/s", "dense_TFLOP/s", "ratio") if k in b)
    if b.get("label"):
        extra = (b["label"] + " " + extra).strip()
    print(f"{name:58s} {value:>14s} {unit or b.get('time_unit', ''):>9s} {extra:>22s}")
errors = [b for b in runs if b.get("error_occurred")]
if errors:
    print(f"{len(errors)} benchmarks reported an error:")
    for message in list(dict.fromkeys(b.get("error_message", "?") for b in errors))[:5]:
        print("  " + " ".join(b["name"] for b in errors if b.get("error_message") == message)[:100] + ": " + message)
mfu3b = drift3b = None  # issue 6's figures: MFU, |estimate - peak| / peak
try:
    lines = [json.loads(l) for l in open(os.path.join(out, "run3b", "metrics.jsonl"))]
    last = lines[-1]
    estimate = re.search(r"total\s+([0-9.]+) MiB", open(os.path.join(out, "info3b.txt")).read())
    est = float(estimate.group(1)) if estimate else float("nan")
    peak = last["peak_memory_mib"]
    # steady state: the median of the steps after the first two (cuBLASLt heuristics, allocator growth)
    steady = sorted(l["step_tokens_per_s"] for l in lines[2:]) or [last["tokens_per_s"]]
    tps = steady[len(steady) // 2]
    tflops = tps * last["model_tflops"] / last["tokens_per_s"]
    print(f"3b-uoe (bf16, activation checkpointing, batch 32 x 1024): {tps:.0f} tokens/s (median of steps 3+; "
          f"{last['tokens_per_s']:.0f} over the session), {tflops:.1f} model TFLOP/s = {100 * tflops / 989:.1f}% MFU "
          f"of 989; peak {peak:.0f} MiB vs estimate {est:.0f} MiB ({100 * (est - peak) / peak:+.1f}%) (exit {train_rc})")
    mfu3b, drift3b = tflops / 989, abs(est - peak) / peak
except Exception as e:
    print("3b-uoe training: no result:", e, f"(exit {train_rc})")
try:
    peer = [l.strip() for l in open(os.path.join(out, "peer.log")) if l.startswith("pytorch ")]
    print("PyTorch peer, same GPU:" if peer else "PyTorch peer: no result (peer.log)")
    for l in peer:
        print("  " + l)
except OSError:
    print("PyTorch peer: not run")

# The issue's bars, each against the figure above that decides it (a bar whose figure is missing says so).
def bench(pattern, key):
    hits = [b for b in runs if re.search(pattern, b["name"]) and not b.get("error_occurred") and key in b]
    return hits[0][key] if hits else None
def bar(what, value, goal, unit, more=True):
    if value is None:
        print(f"  {what:58s} no figure")
    else:
        ok = value >= goal if more else value <= goal
        shown = f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"
        print(f"  {what:58s} {'PASS' if ok else 'FAIL'}  {shown} {unit} (bar {'>=' if more else '<='} {goal:,} {unit})")
train = {b.get("label"): b for b in runs if b["name"].startswith("BM_GpuTrainStep") and not b.get("error_occurred")}
train_tps = lambda preset: train.get(preset, {}).get("tokens/s")
print("bars (issue 5; issue 6 for 3b-uoe):")
bar("bf16 GEMM 8192^3", bench(r"^BM_GpuGemmBf16/8192/", "TFLOP/s"), 600, "TFLOP/s")
bar("causal attention forward, head dim 128, T 4096", bench(r"^BM_GpuAttentionFwdBf16/128/4096/0/", "TFLOP/s"), 250, "TFLOP/s")
bar("causal attention backward, head dim 128, T 4096", bench(r"^BM_GpuAttentionBwdBf16/128/4096/0/", "TFLOP/s"), 150, "TFLOP/s")
bar("expert_ffn / dense GEMMs, 512 tokens per expert", bench(r"^BM_GpuExpertFfnBf16/512/0/", "ratio"), 0.7, "")
bar("small-dense training", train_tps("small-dense"), 250000, "tokens/s")
bar("small-uoe MFU", train.get("small-uoe", {}).get("MFU"), 0.25, "")
uoe, moe = train_tps("small-uoe"), train_tps("small-moe")
bar("small-uoe tokens/s over small-moe's", uoe / moe if uoe and moe else None, 1.0, "x")
bar("3b-uoe MFU (activation checkpointing)", mfu3b, 0.25, "")
bar("3b-uoe |estimate - peak| / peak", drift3b, 0.10, "", more=False)
PY
stamp "done"
