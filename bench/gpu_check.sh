#!/usr/bin/env bash
# One device call checks everything on a GPU (target: H200, sm_90), within about 8 minutes:
#   build for sm_90 -> every CUDA test (parity of every op, the training step, runtime) -> the GPU benchmarks
#   -> a summary table, printed last. Logs and the benchmark JSON go to $OUT (the device tool returns them).
# Needs gpu-deps/ (bench/gpu_deps.sh) carried along: run(command="bench/gpu_check.sh", carry=["gpu-deps"]).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/uoe-gpu-check}
mkdir -p "$OUT"
build=build-gpu
start=$(date +%s)
stamp() { echo "[gpu_check $(( $(date +%s) - start ))s] $*"; }

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
stamp "configure"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUOE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/gpu-deps" -DUOE_WERROR=OFF > "$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
stamp "build"
timeout 330 cmake --build "$build" -j "$(nproc)" > "$OUT/build.log" 2>&1 || { grep -m 20 -E "error|Error" "$OUT/build.log"; tail -5 "$OUT/build.log"; exit 1; }

stamp "CUDA tests"
timeout 120 "$build/uoe_tests" --gtest_filter='*Cuda*' --gtest_brief=1 > "$OUT/tests.log" 2>&1
tests_rc=$?
grep -E "^\[  FAILED  \]|Failure" "$OUT/tests.log" | head -40

stamp "GPU benchmarks"
timeout 150 "$build/uoe_bench" --benchmark_filter='Gpu' --benchmark_min_time=0.2 \
  --benchmark_out="$OUT/bench.json" --benchmark_out_format=json > "$OUT/bench.log" 2>&1
bench_rc=$?

stamp "summary"
python3 - "$OUT" "$tests_rc" "$bench_rc" <<'PY'
import json, re, sys, os
out, tests_rc, bench_rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
log = open(os.path.join(out, "tests.log"), errors="replace").read()
passed = re.search(r"\[  PASSED  \] (\d+) test", log)
failed = re.search(r"\[  FAILED  \] (\d+) test", log)
print("\n==== uoe GPU check:", open(os.path.join(out, "gpu.txt")).read().strip())
print(f"CUDA tests: {passed.group(1) if passed else 0} passed, {failed.group(1) if failed else 0} failed (exit {tests_rc})")
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
    extra = " ".join(f"{k}={b[k]:.3g}" for k in ("MFU", "dense_TFLOP/s", "ratio") if k in b)
    if b.get("label"):
        extra = (b["label"] + " " + extra).strip()
    print(f"{name:58s} {value:>14s} {unit or b.get('time_unit', ''):>9s} {extra:>22s}")
PY
stamp "done"
