// The CUDA expert-plan kernels (launched by cuda/moe_plan.cu; run on the CPU by uoe_cuda_emu_tests): per-expert slot
// counts, and the stable counting sort of the routed slots into sorted rows (cpu::plan_experts exactly).
#pragma once
#include <cstdint>

#include "cuda/dynamic_smem.cuh"

namespace uoe::cuda {
namespace {

// ---- planning on the device -------------------------------------------------------------------------------------
constexpr int kPlanThreads = 1024;
constexpr int64_t kMaxPlanExperts = 4096;  // the counting histogram lives in shared memory

// counts[e] += the slots routed to expert e (a shared-memory histogram per block, then one atomic per expert);
// first_bad (nullable) = the smallest slot whose index is outside [-1, n). Integer atomics: exact whatever the order.
__global__ void count_slots_kernel(const int64_t* idx, int64_t TK, int64_t n, unsigned long long* counts,
                                   unsigned long long* first_bad) {
  auto* hist = reinterpret_cast<unsigned long long*>(dynamic_smem());  // [n]
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < TK; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = idx[i];
    if (v >= 0 && v < n)
      atomicAdd(&hist[v], 1ull);
    else if (v != -1 && first_bad)
      atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < n; e += blockDim.x)
    if (hist[e]) atomicAdd(&counts[e], hist[e]);
}

// One block per expert e, a stable counting sort: the j-th slot (in slot order) routed to e gets sorted row
// offsets[e] + j: pair[row] = slot, row_of[slot] = row, row_expert[row] = e. Ranks come from a block-wide
// prefix count of ballots, so the plan is the CPU's (cpu::plan_experts) exactly.
__global__ void __launch_bounds__(kPlanThreads)
    plan_slots_kernel(const int64_t* idx, int64_t TK, const unsigned long long* counts, int64_t* pair,
                      int64_t* row_of, int64_t* row_expert) {
  constexpr int kWarps = kPlanThreads / 32;
  __shared__ int64_t warp_count[kWarps];
  __shared__ int64_t first_row;
  const int64_t e = blockIdx.x;
  if (counts[e] == 0) return;
  if (threadIdx.x == 0) {
    int64_t b = 0;
    for (int64_t j = 0; j < e; ++j) b += int64_t(counts[j]);
    first_row = b;
  }
  __syncthreads();
  int64_t base = first_row;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  for (int64_t start = 0; start < TK; start += kPlanThreads) {
    const int64_t i = start + threadIdx.x;
    const bool mine = i < TK && idx[i] == e;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_count[warp] = __popc(ballot);
    __syncthreads();
    int64_t before = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      before += w < warp ? warp_count[w] : 0;
      total += warp_count[w];
    }
    if (mine) {
      const int64_t r = base + before + __popc(ballot & ((1u << lane) - 1u));
      pair[r] = i;
      row_of[i] = r;
      row_expert[r] = e;
    }
    base += total;
    __syncthreads();  // warp_count is rewritten by the next chunk
  }
}

}  // namespace
}  // namespace uoe::cuda
