// Small host-to-device uploads (e.g. the pointer arrays of a cuBLAS grouped GEMM) that never make the host wait
// for the GPU work queued before them.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace uoe::cuda {

// Copies `bytes` from host memory `src` to device memory `dst` of `device`, in order on `stream`, and returns at
// once: the bytes are staged in pinned host memory first (a copy from pageable memory may wait for everything
// queued on the stream, CUDA's "API synchronization behavior"). `src` may be reused as soon as this returns. The
// staging buffers are a ring; a buffer is refilled only after its previous copy has run, so the host waits only
// when it is a whole ring of uploads ahead of the GPU. `op` names the caller in errors.
void upload_async(void* dst, const void* src, size_t bytes, int device, cudaStream_t stream, const char* op);

}  // namespace uoe::cuda
