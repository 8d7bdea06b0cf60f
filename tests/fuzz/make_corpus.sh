#!/usr/bin/env bash
# Regenerates the fuzzer's seed corpus tests/fuzz/corpus/ with uoe's own writers (uoe_fuzz corpus), replacing it.
# Run after a change to a file format or to tests/fuzz/corpus.cpp; FuzzCorpus.CommittedFilesAreTheGeneratorsOutput
# fails until then. Build dir: UOE_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir="${UOE_BUILD_DIR:-build}"
cmake --build "$build_dir" --target uoe_fuzz
rm -rf tests/fuzz/corpus
"$build_dir/uoe_fuzz" corpus tests/fuzz/corpus
