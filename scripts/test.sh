#!/usr/bin/env bash
# The whole test suite, in four phases with a header and the time elapsed: (1) set up and build with warnings as
# errors, (2) run every test, (3) build again with AddressSanitizer + UndefinedBehaviorSanitizer (where an allocation
# too large for the machine returns null, as in the plain build, so the allocator's out-of-memory error is tested),
# (4) run the unit tests (label `sanitize`) in that build. Both test phases run the fuzz campaigns (Fuzz.*: 4000
# mutants per file format, tests/fuzz/README.md); what they find is saved under <build dir>/fuzz-findings.
# Each test phase ends with one line: passed, failed, and skipped tests grouped by the reason they give. Skipped tests
# are not listed one by one; failures print their output. The script fails when any test fails.
# 15 to 28 minutes on 2 cores from scratch, most of it the two builds (from a clean clone: 860 s on an AMD Zen 5,
# 1,186 s on a Zen 4, 1,672 s once on CI's machine; 2026-12-06); UOE_TEST_JOBS sets ctest's -j.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${UOE_TEST_JOBS:-$(nproc)}"

phase() {
  printf '\n==== [%02d:%02d elapsed] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}

# The one-line summary of a ctest JUnit file: counts by status, skipped tests by the reason GTEST_SKIP gave.
summarize() {
  awk '
    /<testcase / { status = $0; sub(/.* status="/, "", status); sub(/".*/, "", status); reason = ""; take = 0 }
    take { reason = $0; take = 0 }
    /: Skipped$/ { take = 1 }
    /<\/testcase>/ {
      if (status == "run") passed++
      else if (status == "fail") failed++
      else { skipped++; why[reason == "" ? "not run" : reason]++ }
    }
    END {
      line = sprintf("%d passed, %d failed, %d skipped", passed, failed, skipped)
      sep = ": "
      for (r in why) { line = line sep why[r] " " r; sep = "; " }
      print line
    }' "$1"
}

# ctest in build dir $1 with the other arguments; progress lines of skipped tests are left out.
run_tests() {
  local dir=$1 results status
  shift
  results="$PWD/$dir/ctest-results.xml"
  set +e
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --output-junit "$results" "$@" 2>&1 |
    grep --line-buffered -v -E '\*\*\*Skipped|\(Skipped\)$|^The following tests did not run:$'
  status=${PIPESTATUS[0]}
  set -e
  echo "summary ($dir): $(summarize "$results")"
  return "$status"
}

phase "1/4 build (build/, warnings as errors)"
UOE_CMAKE_ARGS="-DUOE_WERROR=ON ${UOE_CMAKE_ARGS:-}" ./scripts/setup.sh
phase "2/4 tests (build/)"
UOE_FUZZ_FINDINGS="$PWD/build/fuzz-findings" run_tests build --timeout 600
phase "3/4 sanitizer build (build-sanitize/, ASan + UBSan)"
UOE_BUILD_DIR=build-sanitize UOE_CMAKE_ARGS="-DUOE_SANITIZE=ON -DUOE_CUDA=OFF -DUOE_BUILD_BENCH=OFF -DUOE_WERROR=ON" \
  ./scripts/setup.sh
phase "4/4 sanitizer tests (build-sanitize/, label sanitize)"
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  UOE_FUZZ_FINDINGS="$PWD/build-sanitize/fuzz-findings" run_tests build-sanitize -L sanitize --timeout 900
phase "done: every phase passed"
