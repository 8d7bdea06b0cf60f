// Per-device cuBLAS handles (cuda/blas_handle.h).
#include "cuda/blas_handle.h"

#include <cublasLt.h>

#include <mutex>
#include <vector>

#include "core/error.h"
#include "cuda/check.h"

namespace uoe::cuda {

void check_blas(cublasStatus_t s, const char* op, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail("[", op, "] ", what, " failed: ", cublasLtGetStatusName(s), ": ", cublasLtGetStatusString(s));
}

void with_blas_handle(cudaStream_t stream, const char* op, const std::function<void(cublasHandle_t)>& call) {
  static std::mutex mu;
  static auto* handles = new std::vector<cublasHandle_t>();
  int device = 0;
  UOE_CUDA_CHECK(op, cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (handles->size() <= size_t(device)) handles->resize(size_t(device) + 1, nullptr);
  cublasHandle_t& h = (*handles)[size_t(device)];
  if (!h) check_blas(cublasCreate(&h), op, "cublasCreate");
  check_blas(cublasSetStream(h, stream), op, "cublasSetStream");
  call(h);
}

}  // namespace uoe::cuda
