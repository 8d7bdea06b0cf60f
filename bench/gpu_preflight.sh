#!/usr/bin/env bash
# bench/gpu_check.sh's preflight, about 5 seconds before anything is built: prints the toolchain (GPU and free
# memory, nvcc, g++, cmake, ninja, cuBLAS/cuBLASLt, NCCL, compute-sanitizer, PyTorch, a 2 GiB device-to-device
# copy's GB/s) and stops at once (exit 2, one line "gpu_check: FATAL: ...") when what the check cannot do without
# is missing: a GPU, nvcc, g++, cmake, ninja, cuBLAS, or gpu-deps/ (unless the build is given). NCCL, PyTorch and
# compute-sanitizer missing are warnings: the NCCL tests skip, the PyTorch peer and its bars have no figure,
# crashed tests rerun with CUDA_LAUNCH_BLOCKING=1.
# Usage: bench/gpu_preflight.sh SCRATCH [prebuilt]; writes SCRATCH/gpu.txt (the nvidia-smi line) and
# SCRATCH/preflight.env (CUDACXX, NCCL_ROOT, PATH for gpu_check.sh to source). UOE_GPU_CHECK_DRY_RUN=1: the copy
# is not measured (no GPU; nvidia-smi is a stand-in).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
scratch=$1
prebuilt=${2:-}
env_file=$scratch/preflight.env
: > "$env_file"
fatal() { echo "gpu_check: FATAL: $*"; exit 2; }
warn() { echo "  WARNING: $*"; }
show() { printf '  %-17s %s\n' "$1" "$2"; }
first_line() { "$@" 2>&1 | grep -m1 -E '[0-9]+\.[0-9]+'; }  # the first line with a version number

# The GPU: one nvidia-smi line (name, memory, free memory, driver, max SM clock).
command -v nvidia-smi > /dev/null || fatal "nvidia-smi not found: no NVIDIA driver on this machine"
if ! gpu=$(timeout 20 nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version,clocks.max.sm --format=csv,noheader \
           2>&1) || [[ -z $gpu ]]; then
  fatal "no GPU: nvidia-smi says: $(echo "${gpu:-nothing}" | head -1)"
fi
gpu=$(echo "$gpu" | head -1)
echo "$gpu" > "$scratch/gpu.txt"
show "GPU" "$gpu (name, memory, free, driver, max SM clock)"

# The compilers and build tools; nvcc also from the toolkit's usual folder when PATH lacks it.
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2> /dev/null) || fatal "nvcc not found (PATH, /usr/local/cuda/bin)"
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
echo "export CUDACXX=$nvcc" >> "$env_file"
show "nvcc" "$("$nvcc" --version | grep -m1 release | sed 's/^Cuda compilation tools, //') ($nvcc)"
for tool in g++ cmake ninja; do
  command -v "$tool" > /dev/null || fatal "$tool not found: the CUDA build needs it"
  show "$tool" "$(first_line "$tool" --version)"
done

# Libraries: the toolkit's folders, then pip's nvidia packages, then the linker's cache.
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2> /dev/null)
find_lib() {  # the first file named $1.so* where the build or a wheel would find it
  local dir hit
  for dir in "$cuda_root"/lib64 "$cuda_root"/lib "$cuda_root"/targets/*/lib "$site"/nvidia/*/lib; do
    hit=$(compgen -G "$dir/$1.so*" | head -1) && { echo "$hit"; return; }
  done
  ldconfig -p 2> /dev/null | awk -v n="$1.so" 'index($1, n) == 1 { print $NF; exit }'
}
for lib in libcublas libcublasLt; do
  found=$(find_lib "$lib")
  [[ -n $found ]] || fatal "$lib not found (under $cuda_root, pip's nvidia packages, ldconfig): the build links it"
  show "${lib#lib}" "$found"
done

# NCCL: $NCCL_ROOT, the toolkit, the system, pip's nvidia-nccl-cu12/-cu13 (site-packages/nvidia/nccl).
nccl_root=""
for root in "${NCCL_ROOT:-}" "$cuda_root" /usr "$site/nvidia/nccl"; do
  [[ -n $root ]] || continue
  lib=$(compgen -G "$root/lib*/libnccl.so*" || compgen -G "$root/lib/*-linux-gnu/libnccl.so*") \
    && [[ -f $root/include/nccl.h ]] && { nccl_root=$root; break; }
done
if [[ -n $nccl_root ]]; then
  show "NCCL" "include $nccl_root/include, lib $(echo "$lib" | head -1) (NCCL_ROOT=$nccl_root)"
  echo "export NCCL_ROOT=$nccl_root" >> "$env_file"
else
  warn "NCCL not found (NCCL_ROOT, $cuda_root, /usr, pip's nvidia/nccl): the NCCL tests will skip"
fi

# compute-sanitizer locates the bad access of a crashed test.
sanitizer=$(command -v compute-sanitizer || compgen -G "$cuda_root/bin/compute-sanitizer" \
            || compgen -G "$cuda_root/compute-sanitizer/compute-sanitizer")
if [[ -n $sanitizer ]]; then
  show "compute-sanitizer" "$sanitizer"
  echo "export PATH=$(dirname "$sanitizer"):\$PATH" >> "$env_file"
else
  warn "compute-sanitizer not found: crashed tests rerun with CUDA_LAUNCH_BLOCKING=1 instead"
fi

if [[ -z $prebuilt ]]; then
  [[ -d gpu-deps/lib/x86_64-linux-gnu/cmake/GTest && -d gpu-deps/lib/x86_64-linux-gnu/cmake/benchmark ]] \
    || fatal "gpu-deps/ missing: run bench/gpu_deps.sh on the CPU machine and carry [\"gpu-deps\"] with the call"
  show "gpu-deps" "GoogleTest and Google Benchmark ($(du -sh gpu-deps | cut -f1))"
fi

# PyTorch (the peer) with the card's free memory and the copy rate, the memory-bound ceiling.
if [[ ${UOE_GPU_CHECK_DRY_RUN:-0} == 1 ]]; then
  echo "  DRY RUN: no device-to-device copy measured (no GPU here)"
  if torch=$(python3 -c 'import torch; print(torch.__version__)' 2>&1); then
    show "PyTorch" "$torch"
  else
    warn "PyTorch not importable ($(echo "$torch" | tail -1)): the PyTorch peer and its bars will have no figure"
  fi
elif probe=$(timeout 30 python3 bench/pytorch_peer.py probe 2>&1); then
  show "PyTorch" "$(echo "$probe" | tail -1)"
else
  warn "PyTorch probe failed ($(echo "$probe" | tail -1)): the PyTorch peer and its bars will have no figure"
fi
