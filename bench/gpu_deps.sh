#!/usr/bin/env bash
# Collects GoogleTest and Google Benchmark (headers, libraries, CMake package files) from this Debian machine
# into gpu-deps/, an ignored folder the device tool carries to the GPU machine, whose image has CMake, ninja and
# nvcc but neither library and no network. Usage: bench/gpu_deps.sh, then run bench/gpu_check.sh on the device
# with carry ["gpu-deps"].
set -euo pipefail
cd "$(dirname "$0")/.."
dest=gpu-deps
rm -rf "$dest"
mkdir -p "$dest/include" "$dest/lib/x86_64-linux-gnu/cmake"
cp -r /usr/include/gtest /usr/include/gmock /usr/include/benchmark "$dest/include/"
cp -a /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a \
      /usr/lib/x86_64-linux-gnu/libbenchmark* "$dest/lib/x86_64-linux-gnu/"
cp -r /usr/lib/x86_64-linux-gnu/cmake/GTest /usr/lib/x86_64-linux-gnu/cmake/benchmark "$dest/lib/x86_64-linux-gnu/cmake/"
du -sh "$dest"
