#!/usr/bin/env bash
# One device call checks the CUDA backend on a GPU (target: H200, sm_90) in about 8 minutes of script time.
# How to run: on the CPU machine `bench/gpu_deps.sh` (GoogleTest and Google Benchmark into gpu-deps/, which the GPU
# machine lacks), then the device tool's run(command="bench/gpu_check.sh", carry=["gpu-deps"], timeout_s=600),
# then give_back. 3b-uoe runs only when 150 s are left; `bench/gpu_check.sh 3b` at once after (the machine is warm
# for 30 s and keeps build-gpu) runs it and the PyTorch small presets alone.
# Stages: preflight (bench/gpu_preflight.sh: 5 s; prints the toolchain and stops at once, with one FATAL line, when
# a GPU, nvcc, g++, cmake, ninja, cuBLAS or gpu-deps/ is missing) -> build for sm_90 in build-gpu -> every CUDA test
# and the GPU benchmarks (bench/gpu_runner.py: a crash or hang costs one test or family) -> PyTorch's GEMM and
# attention on the same card (the attention bars' reference) -> 3b-uoe training -> the PyTorch small presets.
# Evidence: the logs, JSON files and run folders go to a scratch folder, packed into $OUT/gpu-check.tar.gz after
# every stage and from the exit trap (a timeout keeps what exists); $OUT holds that archive and summary.txt. The
# last thing printed is the summary (bench/gpu_summary.py, < 10 KB): the stages, one line per benchmark family,
# PyTorch's figures, the bars with PASS/FAIL, then every failed, crashed or hung test with its first error line.
# For bench/gpu_check_dryrun.sh: UOE_GPU_CHECK_BUILD=DIR uses DIR, already built (no configure or build);
# UOE_GPU_CHECK_SECONDS is the budget (480); UOE_GPU_CHECK_DRY_RUN=1 also runs bench/gpu_dryrun_fake_tests.py.
set -uo pipefail
export PYTHONDONTWRITEBYTECODE=1  # the bench/*.py helpers leave no __pycache__ in the tree that travels
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/uoe-gpu-check-out}
mode=${1:-all}
prebuilt=${UOE_GPU_CHECK_BUILD:-}
build=${prebuilt:-build-gpu}
budget_s=${UOE_GPU_CHECK_SECONDS:-480}
work=$(mktemp -d "${TMPDIR:-/tmp}/uoe-gpu-check.XXXXXX") || exit 2
scratch=$work/gpu-check  # the archive's one folder
mkdir -p "$OUT" "$scratch" || exit 2
start=$(date +%s)
left() { echo $(( budget_s - ($(date +%s) - start) )); }  # seconds left of the budget
share() { local l; l=$(left); echo $(( l * $1 / 100 < $2 ? l * $1 / 100 : $2 )); }  # min(left * $1 %, $2)
cap() { local l=$(( $(left) - $2 )); (( l > $1 )) && l=$1; echo $(( l < 1 ? 1 : l )); }  # min($1, left - $2), >= 1
stamp() { echo "[gpu_check $(( $(date +%s) - start ))s] $*"; }

# The archive: written beside, then moved over, so $OUT never holds a half-written one. Files over 32 MB keep their
# first 4 and last 8 MB (a runaway log must not push the archive past what the device tool brings back).
pack() {
  local big
  while IFS= read -r big; do
    { head -c 4M "$big"; printf '\n[gpu_check: cut to its first 4 and last 8 MB]\n'; tail -c 8M "$big"; } > "$big.cut" \
      && mv -f "$big.cut" "$big"
  done < <(find "$scratch" -type f -size +32M)
  tar -C "$work" -czf "$OUT/gpu-check.tar.gz.part" gpu-check && mv -f "$OUT/gpu-check.tar.gz.part" "$OUT/gpu-check.tar.gz"
}

# The summary so far, in the scratch folder and $OUT (a SIGKILL, which no trap sees, still leaves the last one).
summarize() {
  python3 bench/gpu_summary.py "$scratch" > "$scratch/summary.txt" 2>&1 \
    || { echo "gpu_summary.py failed; the stages:"; cat "$scratch/stages.tsv"; } >> "$scratch/summary.txt"
  cp "$scratch/summary.txt" "$OUT/summary.txt"
}

# Stages: each records name, status, seconds and a note in stages.tsv (the summary's first lines), then the
# summary and the archive are brought up to date.
stage_name="" stage_t0=$start worst=0
begin() { stage_name=$1 stage_t0=$(date +%s); stamp "$1"; }
record() {  # status [note]
  printf '%s\t%s\t%s\t%s\n' "$stage_name" "$1" "$(( $(date +%s) - stage_t0 ))" "${2:-}" >> "$scratch/stages.tsv"
  [[ $1 == ok || $1 == skipped ]] || worst=1
  stage_name=""
  summarize
  pack
}
# A stage's command under a time limit, in the background so that a TERM reaches the trap at once (timeout runs
# the command in its own process group, which a signal to this script's group misses; the trap forwards it).
child=""
timed() {  # seconds log command...
  timeout -k 10 "$1" "${@:3}" > "$2" 2>&1 &
  child=$!
  wait "$child"
  local rc=$?
  child=""
  return "$rc"
}
status_of() { case $1 in 0) echo ok ;; 124|137) echo "timed out" ;; *) echo "failed" ;; esac; }
skip() { stage_name=$1 stage_t0=$(date +%s); record skipped "$2"; stamp "$1 skipped: $2"; }

# shellcheck disable=SC2317  # run by the EXIT trap
finish() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n $child ]] && kill -TERM "$child" 2> /dev/null  # timeout passes it on to the stage's command
  if [[ -n $stage_name ]]; then
    record interrupted "exit $rc (a signal) during this stage"
  else
    summarize
    pack
  fi
  stamp "done (exit $rc): $OUT holds $(find "$OUT" -maxdepth 1 -type f -printf '%f ')(archive $(du -h \
    "$OUT/gpu-check.tar.gz" | cut -f1)); the summary ($(wc -c < "$OUT/summary.txt") bytes) follows"
  cat "$OUT/summary.txt"
  rm -rf "$work"
  exit "$rc"
}
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

begin preflight
bench/gpu_preflight.sh "$scratch" "$prebuilt" 2>&1 | tee "$scratch/preflight.txt"
rc=${PIPESTATUS[0]}
record "$(status_of "$rc")" "$(grep -m1 FATAL "$scratch/preflight.txt")"
(( rc == 0 )) || exit "$rc"
# shellcheck source=/dev/null
source "$scratch/preflight.env"  # CUDACXX, NCCL_ROOT, PATH to compute-sanitizer

if [[ -n $prebuilt ]]; then
  skip build "UOE_GPU_CHECK_BUILD=$prebuilt (already built)"
else
  begin configure
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUOE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CUDA_FLAGS=-lineinfo -DCMAKE_PREFIX_PATH="$PWD/gpu-deps" -DUOE_WERROR=OFF \
    ${NCCL_ROOT:+-DNCCL_ROOT="$NCCL_ROOT"} > "$scratch/configure.log" 2>&1
  rc=$?
  record "$(status_of "$rc")" "$(grep -m1 -E 'uoe: NCCL' "$scratch/configure.log")"
  (( rc == 0 )) || exit 1
  begin build
  # only what the check runs (not the examples, fuzzers, link checks or the CPU-emulated kernel tests)
  timed "$(cap 300 150)" "$scratch/build.log" cmake --build "$build" -j "$(nproc)" --target uoe_tests uoe_bench uoe_cli
  rc=$?
  record "$(status_of "$rc")" "$(grep -c -E 'warning' "$scratch/build.log") warning lines"
  (( rc == 0 )) || exit 1
fi

if [[ $mode != 3b ]]; then
  test_binaries=("$build/uoe_tests")
  [[ ${UOE_GPU_CHECK_DRY_RUN:-0} == 1 ]] && test_binaries+=(bench/gpu_dryrun_fake_tests.py)
  begin tests
  seconds=$(share 40 150)
  timed $(( seconds + 30 )) "$scratch/tests-summary.txt" bench/gpu_runner.py tests --out "$scratch" \
    --seconds "$seconds" --filter '*Cuda*' "${test_binaries[@]}"
  rc=$?
  record "$(status_of "$rc")" "$(grep -m1 '^CUDA tests' "$scratch/tests-summary.txt")"

  begin benchmarks
  seconds=$(share 70 170)
  timed $(( seconds + 30 )) "$scratch/bench-summary.txt" bench/gpu_runner.py bench --out "$scratch" \
    --seconds "$seconds" --filter Gpu "$build/uoe_bench"
  rc=$?
  record "$(status_of "$rc")" "$(grep -c . "$scratch/bench-summary.txt") families not ok"

  # Right after uoe's benchmarks, on the same card: cuBLAS GEMM and FlashAttention through SDPA.
  begin pytorch-ops
  timed "$(cap 60 10)" "$scratch/peer-ops.log" python3 bench/pytorch_peer.py ops --json "$scratch/peer-ops.json"
  rc=$?
  record "$(status_of "$rc")" "$(tail -1 "$scratch/peer-ops.log" | cut -c1-100)"
else
  skip tests "\`gpu_check.sh 3b\`: 3b-uoe and the PyTorch small presets alone"
fi

# 32 x 1024 tokens per step: the AdamW update of all 2.9B parameters (memory-bound, ~28 bytes each) is paid once
# per 32k tokens instead of once per 8k (about 48 GiB by `uoe info`). Any text will do for throughput.
if (( $(left) >= 150 )); then
  begin 3b-uoe
  cat docs/*.md README.md > "$scratch/text.txt"
  train3b=(--config 3b-uoe --batch 32 --seq 1024 --dtype bf16 --checkpoint-activations)
  timed 30 "$scratch/info3b.txt" "$build/uoe" info "${train3b[@]}"
  timed "$(cap 200 30)" "$scratch/train3b.log" "$build/uoe" train "${train3b[@]}" --data "$scratch/text.txt" \
    --out "$scratch/run3b" --device cuda --steps 10 --warmup 2 --eval-every 0 --eval-batches 1 --no-save --quiet
  rc=$?
  record "$(status_of "$rc")" "$(tail -1 "$scratch/train3b.log" | cut -c1-100)"
else
  skip 3b-uoe "$(left) s left, under 150: run \`bench/gpu_check.sh 3b\` next"
fi

# The small presets in eager PyTorch (bf16 autocast), beside BM_GpuTrainStep's figures.
if (( $(left) >= 60 )); then
  begin pytorch-train
  for arch in dense moe uoe; do
    (( $(left) >= 25 )) && timed "$(cap 40 15)" "$scratch/peer-train-$arch.log" python3 bench/pytorch_peer.py train \
      --preset small --device cuda --dtype bf16 --arch "$arch" --batch 16 --steps 8 --data ''
  done
  cat "$scratch"/peer-train-*.log > "$scratch/peer-train.log"
  ran=$(grep -c '^pytorch ' "$scratch/peer-train.log")
  record "$( (( ran == 3 )) && echo ok || echo failed)" "$ran of 3 presets ran"
else
  skip pytorch-train "$(left) s left, under 60"
fi
exit "$worst"
