// uoe::cuda expert plan on the device: per-expert slot counts (also load_balance_loss's) and the stable counting sort
// of the routed slots into sorted rows, the CPU's cpu::plan_experts exactly.
#include "ops/kernels/moe.h"

#include <cuda_runtime.h>

#include <vector>

#include "cuda/moe_common.cuh"
#include "cuda/moe_plan.cuh"

namespace uoe::cuda {

// ---- the expert plan ------------------------------------------------------------------------------------------
DeviceExpertPlan plan_experts(const int64_t* indices, int64_t T, int64_t K, int64_t n) {
  const char* op = "expert_ffn";
  UOE_CHECK(n >= 1 && n <= kMaxPlanExperts, "[", op, "] a GPU plan takes 1 to ", kMaxPlanExperts, " experts, got ",
            n);
  const LaunchContext c = launch_context(op);
  const int64_t TK = T * K;
  DeviceExpertPlan plan;
  // counts [n] and first_bad, together: one copy back
  DeviceBuffer tally = buffer<unsigned long long>(c, n + 1);
  unsigned long long* counts = tally.get<unsigned long long>();
  zero(c, counts, n, op);
  UOE_CUDA_CHECK(op, cudaMemsetAsync(counts + n, 0xFF, sizeof(unsigned long long), c.stream));  // none bad
  if (TK > 0) {
    count_slots_kernel<<<blocks_for(TK, kPlanThreads), kPlanThreads, size_t(n) * sizeof(unsigned long long),
                         c.stream>>>(indices, TK, n, counts, counts + n);
    check_launch(op);
  }
  std::vector<unsigned long long> host(size_t(n + 1));
  UOE_CUDA_CHECK(op, cudaMemcpyAsync(host.data(), counts, host.size() * sizeof(unsigned long long),
                                     cudaMemcpyDeviceToHost, c.stream));
  UOE_CUDA_CHECK(op, cudaStreamSynchronize(c.stream));
  if (host[size_t(n)] != ~0ull) {  // a bad index: report the first, plan nothing
    plan.bad_slot = int64_t(host[size_t(n)]);
    UOE_CUDA_CHECK(op, cudaMemcpy(&plan.bad_index, indices + plan.bad_slot, sizeof(int64_t), cudaMemcpyDeviceToHost));
    return plan;
  }
  plan.offsets.assign(size_t(n + 1), 0);
  for (int64_t e = 0; e < n; ++e) plan.offsets[size_t(e + 1)] = plan.offsets[size_t(e)] + int64_t(host[size_t(e)]);
  const int64_t P = plan.rows();
  plan.storage = empty({2 * P + TK}, TensorOptions{}.with_dtype(DType::Int64).with_device(Device::cuda(c.device)));
  int64_t* pair = plan.storage.data_ptr<int64_t>();
  int64_t* row = pair + P;
  if (TK > 0) UOE_CUDA_CHECK(op, cudaMemsetAsync(row, 0xFF, size_t(TK) * sizeof(int64_t), c.stream));  // -1: empty
  if (P > 0) {
    plan_slots_kernel<<<unsigned(n), kPlanThreads, 0, c.stream>>>(indices, TK, counts, pair, row, row + TK);
    check_launch(op);
  }
  return plan;
}

// ---- load balance -----------------------------------------------------------------------------------------
void count_routed(const int64_t* indices, int64_t pairs, int64_t n, int64_t* counts) {
  const char* op = "load_balance_loss";
  UOE_CHECK(n >= 1 && n <= kMaxPlanExperts, "[", op, "] counts 1 to ", kMaxPlanExperts, " experts on a GPU, got ", n);
  const LaunchContext c = launch_context(op);
  static_assert(sizeof(int64_t) == sizeof(unsigned long long), "counts are added as unsigned long long");
  auto* tally = reinterpret_cast<unsigned long long*>(counts);
  zero(c, tally, n, op);
  if (pairs == 0) return;
  count_slots_kernel<<<blocks_for(pairs, kPlanThreads), kPlanThreads, size_t(n) * sizeof(unsigned long long),
                       c.stream>>>(indices, pairs, n, tally, nullptr);
  check_launch(op);
}

}  // namespace uoe::cuda
