#!/usr/bin/env bash
# A dry run of bench/gpu_check.sh on the CPU machine, with no GPU: proves that its evidence comes back the way the
# device tool returns it, before a GPU call is spent on it. Stand-ins, each marked DRY RUN: nvidia-smi on PATH;
# the preflight's device-to-device copy (not measured); bench/gpu_dryrun_fake_tests.py beside uoe_tests, whose
# tests fail, crash and hang on purpose. The script runs on the given CPU build (no configure or build).
# Checks: $OUT holds at most 6 files; the archive lists the logs; the last block printed is the summary, under
# 10 KB, with its headings, naming the failing, crashing and hanging test with their first error lines; a second
# run stopped by SIGTERM still leaves the archive and a summary; the bars compare attention with PyTorch's SDPA
# and show expert_ffn's figure with its plan beside the ratio (the summary of a fixture folder with made-up
# figures, labelled as such).
# Usage: bench/gpu_check_dryrun.sh [BUILD_DIR]   (default: build, the build of docs/GUIDE.md, which includes CUDA
# wherever nvcc is installed; a build without CUDA is refused); about a minute.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${1:-build}
for binary in uoe_tests uoe_bench uoe; do
  [[ -x $build/$binary ]] || { echo "dry run: $build/$binary missing: build first (cmake --build $build)"; exit 2; }
done
# The benchmark families are checked by name; a build without CUDA registers none of the GPU ones.
[[ $("$build/uoe_bench" --benchmark_list_tests=true 2> /dev/null) == *$'\n'BM_Gpu* ]] ||
  { echo "dry run: $build/uoe_bench has no BM_Gpu* benchmarks: give a build configured with CUDA (the default)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
cat > "$tmp/bin/nvidia-smi" << 'SMI'
#!/bin/sh
echo "DRY RUN stand-in nvidia-smi (no GPU), 143771 MiB, 143000 MiB, 0.0, 1980 MHz"
SMI
chmod +x "$tmp/bin/nvidia-smi"
failed=0
check() {  # what, then a command that succeeds when it holds
  local what=$1
  shift
  if "$@" > /dev/null 2>&1; then echo "  PASS  $what"; else echo "  FAIL  $what"; failed=1; fi
}
dry_run() {  # OUT folder, console file, then the command's prefix (e.g. timeout)
  local out=$1 console=$2
  shift 2
  PATH="$tmp/bin:$PATH" OUT=$out UOE_GPU_CHECK_DRY_RUN=1 UOE_GPU_CHECK_BUILD=$build UOE_GPU_CHECK_SECONDS=600 \
    UOE_GPU_RUNNER_STALL_SECONDS=5 "$@" bench/gpu_check.sh > "$console" 2>&1
}

echo "== dry run 1: the whole script"
t0=$(date +%s)
dry_run "$tmp/out" "$tmp/console.txt" env
rc=$?
summary=$(sed -n '/^==== uoe GPU check summary/,$p' "$tmp/console.txt")
files=$(find "$tmp/out" -type f | wc -l)
echo "exit $rc after $(( $(date +%s) - t0 )) s; \$OUT: $files files ($(find "$tmp/out" -type f -printf '%f %s bytes, ' \
  | sed 's/, $//')); last block printed: $(printf '%s\n' "$summary" | wc -c) bytes"
tar -tzf "$tmp/out/gpu-check.tar.gz" > "$tmp/archive.txt"
echo "archive: $(tr '\n' ' ' < "$tmp/archive.txt")"
check "exit status 1 (the injected tests fail)" test "$rc" = 1
check "\$OUT holds at most 6 files" test "$files" -le 6
for log in preflight.txt stages.tsv tests.log tests.json failures.json bench.log bench.json summary.txt info3b.txt \
           train3b.log peer-ops.log; do
  check "the archive lists $log" grep -qx "gpu-check/$log" "$tmp/archive.txt"
done
check "the last block printed is \$OUT/summary.txt" test "$summary" = "$(cat "$tmp/out/summary.txt")"
check "the summary is under 10 KB" test "$(printf '%s\n' "$summary" | wc -c)" -lt 10240
for heading in "== stages" "== benchmark families" "== PyTorch on the same card" "== 3b-uoe" "== bars" \
               "== failed, crashed or hung"; do
  check "the summary has '$heading'" grep -q "^$heading" <<< "$summary"
done
check "the failing test, with gtest's message" grep -q \
  "FAILED   CudaDryRun.FailsWithMessage: test_dry_run.cpp:42: The difference between got and want is 0.5" <<< "$summary"
check "the crashing test, its signal and its rerun" grep -q \
  "CRASHED  CudaDryRun.Crashes: killed by SIGSEGV; .*rerun with CUDA_LAUNCH_BLOCKING=1: killed by SIGSEGV" <<< "$summary"
check "the hanging test, and the tests after it ran" grep -q "HUNG     CudaDryRun.Hangs: hung: no output for 5 s" \
  <<< "$summary"
check "the test after the hang ran" grep -q '"CudaDryRun.PassesAfterTheHang": "passed"' \
  <(tar -xzOf "$tmp/out/gpu-check.tar.gz" gpu-check/tests.json)
check "one line per benchmark family" test "$(grep -c '^  BM_Gpu' <<< "$summary")" -ge 10
check "the preflight says DRY RUN" grep -q "DRY RUN: no device-to-device copy" "$tmp/console.txt"

echo "== dry run 2: SIGTERM after 6 s (as a device-tool timeout would send)"
dry_run "$tmp/out2" "$tmp/console2.txt" timeout --preserve-status -s TERM 6
rc=$?
echo "exit $rc; \$OUT: $(find "$tmp/out2" -type f -printf '%f ')"
check "exit 143 (TERM)" test "$rc" = 143
check "the archive was packed" tar -tzf "$tmp/out2/gpu-check.tar.gz"
check "the summary names the interrupted stage" grep -qE "^  [a-z0-9-]+ +interrupted" "$tmp/out2/summary.txt"
check "the summary was printed last" test "$(tail -1 "$tmp/console2.txt")" = "$(tail -1 "$tmp/out2/summary.txt")"
sed -n '/^== stages/,/^== benchmark/p' "$tmp/out2/summary.txt" | grep -v '^== benchmark'

echo "== the bars against PyTorch SDPA, and expert_ffn's (fixture folder: made-up figures, not measurements)"
fixture=$tmp/fixture
mkdir -p "$fixture"
cat > "$fixture/bench.json" << 'JSON'
{"benchmarks": [
 {"name": "BM_GpuAttentionFwdBf16/128/4096/0/0/manual_time", "TFLOP/s": 300.0, "real_time": 1.0, "time_unit": "ms"},
 {"name": "BM_GpuAttentionBwdBf16/128/4096/0/0/manual_time", "TFLOP/s": 200.0, "real_time": 1.0, "time_unit": "ms"},
 {"name": "BM_GpuExpertFfnBf16/512/0/manual_time", "TFLOP/s": 450.0, "with_plan_TFLOP/s": 350.0,
  "dense_TFLOP/s": 600.0, "ratio": 0.75, "real_time": 1.0, "time_unit": "ms"}],
 "families": {"BM_GpuAttentionFwdBf16": "exit 0", "BM_GpuAttentionBwdBf16": "exit 0", "BM_GpuExpertFfnBf16": "exit 0"}}
JSON
cat > "$fixture/peer-ops.json" << 'JSON'
{"torch": "fixture", "device": "fixture", "gemm_bf16": [], "attention_bf16": [
 {"dh": 128, "T": 4096, "B": 4, "H": 16, "causal": true, "fwd_tflops": 400.0, "bwd_tflops": 220.0}]}
JSON
python3 bench/gpu_summary.py "$fixture" > "$tmp/fixture.txt"
grep "SDPA's" "$tmp/fixture.txt"
check "forward 300 vs SDPA 400: FAIL at 0.75x" grep -q "SDPA's forward .* FAIL  0.75 x (bar >= 0.8 x); uoe 300 vs SDPA 400" \
  "$tmp/fixture.txt"
check "backward 200 vs SDPA 220: PASS at 0.909x" grep -q "SDPA's backward .* PASS  0.909 x" "$tmp/fixture.txt"
grep "expert_ffn" "$tmp/fixture.txt"
check "expert_ffn 0.75 of dense: PASS, with the plan's figure" \
  grep -q "expert_ffn / dense GEMMs.* PASS  0.75 .*with its plan (one host sync) 350 TFLOP/s" "$tmp/fixture.txt"

echo "== the summary of dry run 1, as printed last"
printf '%s\n' "$summary"
echo "== dry run $( (( failed )) && echo FAILED || echo passed)"
exit "$failed"
