#!/usr/bin/env bash
# The whole test suite: set up and build with warnings as errors, run every test, then run the
# unit tests again in a separate AddressSanitizer + UndefinedBehaviorSanitizer build (where an allocation too
# large for the machine returns null, as in the plain build, so the allocator's out-of-memory error is tested).
# Both passes run the fuzz campaigns (Fuzz.*: 4000 mutants per file format, tests/fuzz/README.md); what they find is
# saved under <build dir>/fuzz-findings.
set -euo pipefail
cd "$(dirname "$0")/.."
UOE_CMAKE_ARGS="-DUOE_WERROR=ON ${UOE_CMAKE_ARGS:-}" ./scripts/setup.sh
UOE_FUZZ_FINDINGS="$PWD/build/fuzz-findings" ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600
UOE_BUILD_DIR=build-sanitize UOE_CMAKE_ARGS="-DUOE_SANITIZE=ON -DUOE_CUDA=OFF -DUOE_BUILD_BENCH=OFF -DUOE_WERROR=ON" \
  ./scripts/setup.sh
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  UOE_FUZZ_FINDINGS="$PWD/build-sanitize/fuzz-findings" \
  ctest --test-dir build-sanitize --output-on-failure -j"$(nproc)" -L sanitize --timeout 900
