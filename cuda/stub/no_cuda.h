// The error of a CUDA kernel stub in a build without CUDA: one message naming the op.
#pragma once
#include "core/error.h"

namespace uoe::cuda {

[[noreturn]] inline void no_cuda(const char* op) {
  fail("[", op, "] on a GPU needs a CUDA build (configure with UOE_CUDA=ON)");
}

}  // namespace uoe::cuda
