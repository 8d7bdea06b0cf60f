#!/usr/bin/env bash
# Data races in the CUDA kernels, on the CPU: builds uoe_cuda_emu_tests (the whole CUDA backend on the CPU stand-in,
# docs/ARCHITECTURE.md) with ThreadSanitizer in build-race/ and runs its kernel tests. Every GPU thread is a thread to
# ThreadSanitizer, so two threads of a block that touch the same shared or global memory, one of them writing, with
# no __syncthreads, warp-collective step or atomic between, are reported (with both stacks), in whichever order the
# emulation ran them. Races between blocks are not looked for (tests/cuda_emu/include/cuda_emu/blocks.h).
# Not part of scripts/test.sh (a third build of the library); run it after changing a kernel. Exits non-zero on a
# race or a failing test. Arguments go to the test program (default: the kernel tests, --gtest_filter below).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${UOE_RACE_BUILD_DIR:-build-race}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DUOE_CUDA=OFF -DUOE_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -g1" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build "$dir" --target uoe_cuda_emu_tests -j"$(nproc)"
# One OpenMP thread: libgomp's own synchronisation is not instrumented, and the CPU references need no more.
args=("$@")
[ $# -eq 0 ] && args=(--gtest_filter='CudaEmulation.*:*Emulated*')
OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$dir/uoe_cuda_emu_tests" "${args[@]}"
