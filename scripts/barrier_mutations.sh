#!/usr/bin/env bash
# How well the emulated kernel tests guard the CUDA kernels' barriers: removes each __syncthreads / __syncwarp of
# cuda/ in turn, rebuilds build-race/'s uoe_cuda_emu_tests (scripts/race_check.sh's ThreadSanitizer build; run that
# first), runs the kernel tests, and prints one line per barrier: "race" (ThreadSanitizer reported one), "wrong"
# (a test failed without a race report), or "missed" (nothing noticed). The source is restored after each, and on
# exit. Arguments: the test filter (default: the kernel tests). About a minute per barrier on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${UOE_RACE_BUILD_DIR:-build-race}"
filter="${1:-CudaEmulation.*:*Emulated*}"
[ -x "$dir/uoe_cuda_emu_tests" ] || { echo "barrier_mutations: build $dir first (scripts/race_check.sh)" >&2; exit 1; }
log=$(mktemp)
current=""
restore() { [ -n "$current" ] && git checkout -q -- "$current"; rm -f "$log"; }
trap restore EXIT
git diff --quiet -- cuda/ || { echo "barrier_mutations: cuda/ has uncommitted changes" >&2; exit 1; }
while IFS=: read -r file line call; do
  current=$file
  sed -i "${line}s/__sync\(threads\|warp\)()/((void)0)/" "$file"
  if ! cmake --build "$dir" --target uoe_cuda_emu_tests >"$log" 2>&1; then
    verdict="build failed"
  else
    OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1" timeout 900 "$dir/uoe_cuda_emu_tests" --gtest_filter="$filter" \
      >"$log" 2>&1 && status=0 || status=$?
    if grep -q "WARNING: ThreadSanitizer" "$log"; then verdict="race"
    elif [ "$status" -ne 0 ]; then verdict="wrong ($(grep -m1 -o '\[  FAILED  \] [A-Za-z0-9_./]*' "$log" | cut -c14-))"
    else verdict="missed"; fi
  fi
  git checkout -q -- "$file"
  current=""
  printf '%s:%s %s\t%s\n' "$file" "$line" "$call" "$verdict"
done < <(grep -n -o -E "__sync(threads|warp)\(\)" cuda/*.cu cuda/*.cuh)
cmake --build "$dir" --target uoe_cuda_emu_tests >/dev/null
