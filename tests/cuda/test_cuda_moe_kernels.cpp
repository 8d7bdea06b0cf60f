// CUDA MoE and attention kernels against their CPU twins (kernel level, raw pointers); skip without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/rng.h"
#include "cuda/attention_mma.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "ops/kernels/attention.h"
#include "ops/kernels/gemm.h"
#include "ops/kernels/moe.h"
#include "ops/moe.h"
#include "ops/ops.h"

namespace uoe {
namespace {

class CudaMoeKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

const Device kGpu = Device::cuda(0);

Tensor to_gpu(const Tensor& t) { return t.contiguous().to(kGpu); }
// A GPU tensor full of NaN (floats) or -7 (integers): every element a kernel must write is checked as written.
Tensor poisoned(const Shape& shape, DType dt) {
  return full(shape, is_floating(dt) ? std::numeric_limits<double>::quiet_NaN() : -7.0,
              TensorOptions{}.with_dtype(dt).with_device(kGpu));
}
template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
void sync() { cuda::synchronize(0, "test_cuda_moe_kernels"); }

// ||got - want|| / max(||want||, tiny); infinity when got has a NaN where want has none.
double rel_err(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  EXPECT_EQ(g.size(), w.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(w[i])) return std::numeric_limits<double>::infinity();
    if (std::isnan(w[i])) continue;
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
}

template <typename T>
double tol() {
  return std::is_same_v<T, double> ? 1e-12 : 2e-5;
}
template <typename T>
TensorOptions opts() {
  return TensorOptions{}.with_dtype(dtype_of<T>());
}

// ---- routing --------------------------------------------------------------------------------------------------
// Scores with ties (multiples of 0.5) and a NaN in some rows.
Tensor tie_scores(int64_t T, int64_t n, DType dt) {
  std::vector<double> v = (randn({T, n}, TensorOptions{}.with_dtype(DType::Float64)) * 2.0).to_vector<double>();
  for (double& x : v) x = std::round(x * 2.0) / 2.0;
  v[size_t(3 * n + 1)] = std::numeric_limits<double>::quiet_NaN();
  v[size_t(7 * n + 4)] = std::numeric_limits<double>::quiet_NaN();
  v[size_t(7 * n + 2)] = std::numeric_limits<double>::quiet_NaN();
  return from_vector(v, {T, n}).to(dt);
}

template <typename T>
void check_route(int64_t K, double p, bool full_softmax) {
  const int64_t Tn = 50, n = 7;
  const kernels::RouteSpec s{Tn, n, K, p, full_softmax};
  const Tensor scores = tie_scores(Tn, n, dtype_of<T>());
  Tensor idx = empty({Tn, K}, TensorOptions{}.with_dtype(DType::Int64)), w = empty({Tn, K}, opts<T>()),
         probs = empty({Tn, n}, opts<T>());
  cpu::route_forward<T>(s, ptr<T>(scores), ptr<int64_t>(idx), ptr<T>(w), ptr<T>(probs));
  const Tensor gs = to_gpu(scores);
  Tensor gidx = poisoned({Tn, K}, DType::Int64), gw = poisoned({Tn, K}, dtype_of<T>()),
         gprobs = poisoned({Tn, n}, dtype_of<T>());
  cuda::route_forward<T>(s, ptr<T>(gs), ptr<int64_t>(gidx), ptr<T>(gw), ptr<T>(gprobs));
  sync();
  EXPECT_EQ(gidx.to_vector<int64_t>(), idx.to_vector<int64_t>()) << "K=" << K << " p=" << p;
  EXPECT_LE(rel_err(gw, w), tol<T>());
  EXPECT_LE(rel_err(gprobs, probs), tol<T>());
  // backward
  const Tensor dw = randn({Tn, K}, opts<T>());
  Tensor ds = empty({Tn, n}, opts<T>()), gds = poisoned({Tn, n}, dtype_of<T>());
  cpu::route_backward<T>(s, ptr<int64_t>(idx), ptr<T>(w), ptr<T>(probs), ptr<T>(dw), ptr<T>(ds));
  const Tensor gdw = to_gpu(dw);
  cuda::route_backward<T>(s, ptr<int64_t>(gidx), ptr<T>(gw), ptr<T>(gprobs), ptr<T>(gdw), ptr<T>(gds));
  sync();
  EXPECT_LE(rel_err(gds, ds), tol<T>()) << "K=" << K << " p=" << p << " full=" << full_softmax;
}

TEST_F(CudaMoeKernels, RouteMatchesCpuWithTiesAndNaN) {
  for (bool full : {false, true}) {
    check_route<float>(3, -1.0, full);
    check_route<double>(3, -1.0, full);
    check_route<float>(4, 0.5, full);
    check_route<double>(4, 0.5, full);
    check_route<double>(7, 0.0, full);
  }
}

// ---- group L2 norm, z-loss, load balance ----------------------------------------------------------------------
template <typename T>
void check_norm_and_counts() {
  {  // group_l2norm with one all-zero group (gradient 0 there)
    const int64_t rows = 33, groups = 6, r = 5;
    Tensor h = randn({rows, groups * r}, opts<T>());
    h.narrow(0, 4, 1).narrow(1, 10, 5).zero_();
    Tensor norm = empty({rows, groups}, opts<T>()), dh = empty({rows, groups * r}, opts<T>());
    const Tensor dn = randn({rows, groups}, opts<T>());
    cpu::group_l2norm_forward<T>(rows, groups, r, ptr<T>(h), ptr<T>(norm));
    cpu::group_l2norm_backward<T>(rows, groups, r, ptr<T>(h), ptr<T>(norm), ptr<T>(dn), ptr<T>(dh));
    const Tensor gh = to_gpu(h), gdn = to_gpu(dn);
    Tensor gnorm = poisoned({rows, groups}, dtype_of<T>()), gdh = poisoned({rows, groups * r}, dtype_of<T>());
    cuda::group_l2norm_forward<T>(rows, groups, r, ptr<T>(gh), ptr<T>(gnorm));
    cuda::group_l2norm_backward<T>(rows, groups, r, ptr<T>(gh), ptr<T>(gnorm), ptr<T>(gdn), ptr<T>(gdh));
    sync();
    EXPECT_LE(rel_err(gnorm, norm), tol<T>());
    EXPECT_LE(rel_err(gdh, dh), tol<T>());
  }
  {  // expert counts (the load balance loss's f), with empty slots
    const int64_t rows = 300, n = 6, K = 2;
    const Tensor idx = randint(-1, n, {rows, K});
    std::vector<int64_t> counts(static_cast<size_t>(n));
    cpu::count_routed(ptr<int64_t>(idx), rows * K, n, counts.data());
    const Tensor gidx = to_gpu(idx);
    Tensor gcounts = to_gpu(full({n}, -7.0, TensorOptions{}.with_dtype(DType::Int64)));  // poisoned
    cuda::count_routed(ptr<int64_t>(gidx), rows * K, n, ptr<int64_t>(gcounts));
    sync();
    EXPECT_EQ(gcounts.to(Device::cpu()).to_vector<int64_t>(), counts);
  }
}

TEST_F(CudaMoeKernels, GroupNormAndExpertCountsMatchCpu) {
  check_norm_and_counts<float>();
  check_norm_and_counts<double>();
}

// ---- expert FFN -------------------------------------------------------------------------------------------------
// indices [T, K]: distinct experts among the first n - 1 (expert n - 1 gets no rows), some slots empty; or all
// slots empty.
Tensor make_indices(int64_t T, int64_t K, int64_t n, bool all_empty) {
  std::vector<int64_t> v(size_t(T * K), -1);
  Generator gen(1234);
  const std::vector<double> u = rand({T, n}, TensorOptions{}.with_dtype(DType::Float64), &gen).to_vector<double>();
  for (int64_t t = 0; t < T && !all_empty; ++t) {
    std::vector<int64_t> order;
    for (int64_t e = 0; e + 1 < n; ++e) order.push_back(e);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return u[size_t(t * n + a)] < u[size_t(t * n + b)]; });
    for (int64_t k = 0; k < K; ++k) v[size_t(t * K + k)] = (t + k) % 5 == 3 ? -1 : order[size_t(k)];
  }
  return from_vector(v, {T, K});
}

template <typename T>
void check_expert_ffn(bool with_gate, int64_t r0, int64_t r1, bool all_empty, double tolerance = tol<T>()) {
  const int64_t Tn = 37, K = 3, n = 5, d = 24, D = 40, dg = with_gate ? 12 : d;
  const kernels::ExpertShape s{Tn, K, n, d, dg, D, r0, r1, false};
  const Tensor idx = make_indices(Tn, K, n, all_empty);
  const kernels::ExpertPlan plan = cpu::plan_experts(ptr<int64_t>(idx), Tn, K, n);
  const Tensor gidx = to_gpu(idx);
  const kernels::DeviceExpertPlan gplan = cuda::plan_experts(ptr<int64_t>(gidx), Tn, K, n);
  const Tensor x = randn({Tn, d}, opts<T>()), w = rand({Tn, K}, opts<T>()), wg = randn({n, dg, D}, opts<T>()) * 0.3,
               wu = randn({n, d, D}, opts<T>()) * 0.3, wd = randn({n, D, d}, opts<T>()) * 0.3,
               gate = with_gate ? randn({Tn, n, dg}, opts<T>()) : Tensor(), dy = randn({Tn, d}, opts<T>());
  Tensor y = empty({Tn, d}, opts<T>()), dx = empty({Tn, d}, opts<T>()), dw = empty({Tn, K}, opts<T>()),
         dgate = with_gate ? empty({Tn, n, dg}, opts<T>()) : Tensor(), dwg = empty({n, dg, D}, opts<T>()),
         dwu = empty({n, d, D}, opts<T>()), dwd = empty({n, D, d}, opts<T>()),
         h = empty({2, plan.rows(), r1 - r0}, opts<T>());
  cpu::expert_ffn_forward<T>(s, plan, ptr<T>(x), ptr<T>(gate), ptr<T>(w), ptr<T>(wg), ptr<T>(wu), ptr<T>(wd),
                             ptr<T>(y), ptr<T>(h));
  cpu::expert_ffn_backward<T>(s, plan, ptr<T>(x), ptr<T>(gate), ptr<T>(w), ptr<T>(wg), ptr<T>(wu), ptr<T>(wd),
                              ptr<T>(h), ptr<T>(dy), ptr<T>(dx), ptr<T>(dw), ptr<T>(dgate), ptr<T>(dwg), ptr<T>(dwu),
                              ptr<T>(dwd));
  const Tensor gx = to_gpu(x), gw = to_gpu(w), gwg = to_gpu(wg), gwu = to_gpu(wu), gwd = to_gpu(wd),
               ggate = with_gate ? to_gpu(gate) : Tensor(), gdy = to_gpu(dy);
  const DType dt = dtype_of<T>();
  Tensor gy = poisoned({Tn, d}, dt), gdx = poisoned({Tn, d}, dt), gdw = poisoned({Tn, K}, dt),
         gdgate = with_gate ? poisoned({Tn, n, dg}, dt) : Tensor(), gdwg = poisoned({n, dg, D}, dt),
         gdwu = poisoned({n, d, D}, dt), gdwd = poisoned({n, D, d}, dt), gh = poisoned(h.shape(), dt);
  cuda::expert_ffn_forward<T>(s, gplan, ptr<T>(gx), ptr<T>(ggate), ptr<T>(gw), ptr<T>(gwg), ptr<T>(gwu), ptr<T>(gwd),
                              ptr<T>(gy), ptr<T>(gh));
  cuda::expert_ffn_backward<T>(s, gplan, ptr<T>(gx), ptr<T>(ggate), ptr<T>(gw), ptr<T>(gwg), ptr<T>(gwu), ptr<T>(gwd),
                               ptr<T>(gh), ptr<T>(gdy), ptr<T>(gdx), ptr<T>(gdw), ptr<T>(gdgate), ptr<T>(gdwg),
                               ptr<T>(gdwu), ptr<T>(gdwd));
  sync();
  const std::string what = std::string("gate=") + (with_gate ? "1" : "0") + " r=[" + std::to_string(r0) + "," +
                           std::to_string(r1) + ") empty=" + (all_empty ? "1" : "0");
  EXPECT_LE(rel_err(gy, y), tolerance) << what;
  EXPECT_LE(rel_err(gh, h), tolerance) << what;
  EXPECT_LE(rel_err(gdx, dx), tolerance) << what;
  EXPECT_LE(rel_err(gdw, dw), tolerance) << what;
  if (with_gate) {
    EXPECT_LE(rel_err(gdgate, dgate), tolerance) << what;
  }
  EXPECT_LE(rel_err(gdwg, dwg), tolerance) << what;
  EXPECT_LE(rel_err(gdwu, dwu), tolerance) << what;
  EXPECT_LE(rel_err(gdwd, dwd), tolerance) << what;
  // Deterministic: a second run gives the same bits.
  Tensor gy2 = poisoned({Tn, d}, dt);  // without h: H_g, H_p in scratch
  cuda::expert_ffn_forward<T>(s, gplan, ptr<T>(gx), ptr<T>(ggate), ptr<T>(gw), ptr<T>(gwg), ptr<T>(gwu), ptr<T>(gwd),
                              ptr<T>(gy2), nullptr);
  sync();
  EXPECT_EQ(gy2.to_vector<double>(), gy.to_vector<double>()) << what;
}

TEST_F(CudaMoeKernels, ExpertFfnMatchesCpu) {
  for (bool gate : {false, true}) {
    check_expert_ffn<double>(gate, 8, 40, false);
    check_expert_ffn<float>(gate, 8, 40, false);
    check_expert_ffn<double>(gate, 0, 40, false);
    check_expert_ffn<double>(gate, 5, 21, false);
  }
}

// TF32 grouped GEMMs need 16-byte aligned matrices: odd neuron offsets (r0 = 5) and odd row blocks run outside the
// grouped call and must give the same results (within TF32 rounding).
TEST_F(CudaMoeKernels, ExpertFfnWithTf32AndUnalignedSlicesMatchesCpu) {
  const bool previous = cuda::allow_tf32();
  cuda::set_allow_tf32(true);
  for (bool gate : {false, true}) {
    check_expert_ffn<float>(gate, 5, 21, false, 1e-2);
    check_expert_ffn<float>(gate, 8, 40, false, 1e-2);
  }
  cuda::set_allow_tf32(previous);
}

TEST_F(CudaMoeKernels, DevicePlanIsTheCpuPlan) {
  // Shapes: a few slots, more slots than one block of the counting sort (1024), an expert without rows, empty
  // slots, every slot empty.
  for (auto [T, K, n, all_empty] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {37, 3, 5, false}, {1500, 2, 8, false}, {700, 8, 64, false}, {9, 2, 4, true}}) {
    const Tensor idx = make_indices(T, K, n, all_empty);
    const kernels::ExpertPlan want = cpu::plan_experts(ptr<int64_t>(idx), T, K, n);
    const Tensor gidx = to_gpu(idx);
    const kernels::DeviceExpertPlan got = cuda::plan_experts(ptr<int64_t>(gidx), T, K, n);
    const std::string what = "T=" + std::to_string(T) + " K=" + std::to_string(K) + " n=" + std::to_string(n);
    ASSERT_EQ(got.bad_slot, -1) << what;
    EXPECT_EQ(got.offsets, want.offsets) << what;
    const std::vector<int64_t> storage = got.storage.to(Device::cpu()).to_vector<int64_t>();
    const int64_t P = want.rows();
    ASSERT_EQ(int64_t(storage.size()), 2 * P + T * K) << what;
    EXPECT_EQ(std::vector<int64_t>(storage.begin(), storage.begin() + P), want.pair) << what;
    EXPECT_EQ(std::vector<int64_t>(storage.begin() + P, storage.begin() + P + T * K), want.row) << what;
    for (int64_t e = 0; e < n; ++e)
      for (int64_t r = want.offsets[size_t(e)]; r < want.offsets[size_t(e + 1)]; ++r)
        ASSERT_EQ(storage[size_t(P + T * K + r)], e) << what << ": row " << r;
  }
}

TEST_F(CudaMoeKernels, DevicePlanReportsTheFirstBadIndex) {
  const Tensor idx = from_vector<int64_t>({0, 1, -1, 2, 7, 1, -3, 0}, {4, 2});
  const Tensor gidx = to_gpu(idx);
  const kernels::DeviceExpertPlan plan = cuda::plan_experts(ptr<int64_t>(gidx), 4, 2, 4);
  EXPECT_EQ(plan.bad_slot, 4);
  EXPECT_EQ(plan.bad_index, 7);
  // and the op names it as on the CPU
  const Tensor x = to_gpu(randn({4, 6})), w = to_gpu(rand({4, 2})), wg = to_gpu(randn({4, 6, 8})),
               wd = to_gpu(randn({4, 8, 6}));
  try {
    ops::expert_ffn(x, gidx, w, wg, wg, wd, 0, 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[expert_ffn] indices[2, 0] = 7 is out of range"), std::string::npos)
        << e.what();
  }
}

TEST_F(CudaMoeKernels, ExpertFfnEmptyCasesWriteZeros) {
  check_expert_ffn<double>(false, 8, 40, true);  // no routed pair
  check_expert_ffn<double>(true, 8, 40, true);
  check_expert_ffn<double>(false, 12, 12, false);  // empty neuron range
}

// ---- attention ----------------------------------------------------------------------------------------------
struct AttnCase {
  int64_t B, H, Hkv, T, Dh;
  bool causal;
};

// q, out, dout laid out [B, T, H, Dh] (the layout the op produces), k, v contiguous [B, Hkv, T, Dh].
kernels::AttnStrides bthd(const AttnCase& c, int64_t heads) { return {c.T * heads * c.Dh, c.Dh, heads * c.Dh}; }
kernels::AttnStrides bhtd(const AttnCase& c, int64_t heads) { return {heads * c.T * c.Dh, c.T * c.Dh, c.Dh}; }

template <typename T>
void check_attention(const AttnCase& c) {
  const kernels::AttnShape s{c.B, c.H, c.Hkv, c.T, c.Dh, 1.0 / std::sqrt(double(c.Dh)), c.causal};
  const kernels::AttnStrides qs = bthd(c, c.H), ks = bhtd(c, c.Hkv);
  const Tensor q = randn({c.B, c.T, c.H, c.Dh}, opts<T>()), k = randn({c.B, c.Hkv, c.T, c.Dh}, opts<T>()),
               v = randn({c.B, c.Hkv, c.T, c.Dh}, opts<T>()), dout = randn({c.B, c.T, c.H, c.Dh}, opts<T>());
  Tensor out = empty(q.shape(), opts<T>()), lse = empty({c.B, c.H, c.T}, opts<T>()), dq = empty(q.shape(), opts<T>()),
         dk = empty(k.shape(), opts<T>()), dv = empty(v.shape(), opts<T>());
  cpu::attention_forward<T>(s, ptr<T>(q), qs, ptr<T>(k), ks, ptr<T>(v), ks, ptr<T>(out), qs, ptr<T>(lse));
  cpu::attention_backward<T>(s, ptr<T>(q), qs, ptr<T>(k), ks, ptr<T>(v), ks, ptr<T>(out), qs, ptr<T>(lse),
                             ptr<T>(dout), qs, ptr<T>(dq), qs, ptr<T>(dk), ks, ptr<T>(dv), ks);
  const DType dt = dtype_of<T>();
  const Tensor gq = to_gpu(q), gk = to_gpu(k), gv = to_gpu(v), gdout = to_gpu(dout);
  Tensor gout = poisoned(q.shape(), dt), glse = poisoned(lse.shape(), dt), gdq = poisoned(q.shape(), dt),
         gdk = poisoned(k.shape(), dt), gdv = poisoned(v.shape(), dt);
  cuda::attention_forward<T>(s, ptr<T>(gq), qs, ptr<T>(gk), ks, ptr<T>(gv), ks, ptr<T>(gout), qs, ptr<T>(glse));
  cuda::attention_backward<T>(s, ptr<T>(gq), qs, ptr<T>(gk), ks, ptr<T>(gv), ks, ptr<T>(gout), qs, ptr<T>(glse),
                              ptr<T>(gdout), qs, ptr<T>(gdq), qs, ptr<T>(gdk), ks, ptr<T>(gdv), ks);
  sync();
  const std::string what = "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " Hkv=" + std::to_string(c.Hkv) +
                           " T=" + std::to_string(c.T) + " Dh=" + std::to_string(c.Dh) + " causal=" +
                           std::to_string(c.causal);
  const double t = std::is_same_v<T, double> ? 1e-12 : 1e-5;
  EXPECT_LE(rel_err(gout, out), t) << what;
  EXPECT_LE(rel_err(glse, lse), t) << what;
  EXPECT_LE(rel_err(gdv, dv), t) << what;
  if (c.T > 1) {
    EXPECT_LE(rel_err(gdq, dq), t) << what;
    EXPECT_LE(rel_err(gdk, dk), t) << what;
    return;
  }
  // One key: its softmax weight is 1 and dS = dO·v - D = 0, so dq and dk are 0 up to the rounding of two sums of
  // dO·v taken in different orders (the CPU's may cancel exactly where the GPU's does not).
  auto norm = [](const Tensor& x) {
    const Tensor d = x.to(Device::cpu()).to(DType::Float64);
    return std::sqrt(ops::sum(d * d).item<double>());
  };
  const double bound = t * double(s.scale) * norm(dout) * norm(v) * (norm(q) + norm(k));
  EXPECT_LE(norm(gdq), bound) << what;
  EXPECT_LE(norm(gdk), bound) << what;
}

const std::vector<AttnCase> kScalarCases = {
    {2, 4, 2, 67, 16, true}, {1, 2, 2, 130, 33, false}, {1, 1, 1, 1, 8, true},
    {2, 2, 1, 64, 64, true}, {1, 3, 3, 100, 128, true}, {1, 2, 1, 45, 7, false},
};

TEST_F(CudaMoeKernels, AttentionFloatMatchesCpu) {
  for (const AttnCase& c : kScalarCases) check_attention<float>(c);
}
TEST_F(CudaMoeKernels, AttentionDoubleMatchesCpu) {
  for (const AttnCase& c : kScalarCases) check_attention<double>(c);
}

// bf16 against the CPU float32 kernels on the same bf16-rounded inputs.
void check_attention_bf16(const AttnCase& c, bool expect_tensor_cores) {
  const kernels::AttnShape s{c.B, c.H, c.Hkv, c.T, c.Dh, 1.0 / std::sqrt(double(c.Dh)), c.causal};
  const kernels::AttnStrides qs = bthd(c, c.H), ks = bhtd(c, c.Hkv);
  const DType bf = DType::BFloat16;
  const Tensor q = randn({c.B, c.T, c.H, c.Dh}).to(bf), k = randn({c.B, c.Hkv, c.T, c.Dh}).to(bf),
               v = randn({c.B, c.Hkv, c.T, c.Dh}).to(bf), dout = randn({c.B, c.T, c.H, c.Dh}).to(bf);
  const Tensor qf = q.to(DType::Float32), kf = k.to(DType::Float32), vf = v.to(DType::Float32),
               dof = dout.to(DType::Float32);
  Tensor out = empty(q.shape()), lse = empty({c.B, c.H, c.T}), dq = empty(q.shape()), dk = empty(k.shape()),
         dv = empty(v.shape());
  cpu::attention_forward<float>(s, ptr<float>(qf), qs, ptr<float>(kf), ks, ptr<float>(vf), ks, ptr<float>(out), qs,
                                ptr<float>(lse));
  cpu::attention_backward<float>(s, ptr<float>(qf), qs, ptr<float>(kf), ks, ptr<float>(vf), ks, ptr<float>(out), qs,
                                 ptr<float>(lse), ptr<float>(dof), qs, ptr<float>(dq), qs, ptr<float>(dk), ks,
                                 ptr<float>(dv), ks);
  const Tensor gq = to_gpu(q), gk = to_gpu(k), gv = to_gpu(v), gdout = to_gpu(dout);
  const int m_tiles_before = cuda::detail::attention_forward_m_tiles();
  const bool tiles_inner_before = cuda::detail::attention_tiles_inner();
  for (int setting = 0; setting < 3; ++setting) {
    // both forward kernels (64- and 128-query tiles), both task orders (tiles inner, heads inner)
    const int m_tiles = setting == 0 ? 1 : 2;
    const bool tiles_inner = setting != 2;
    cuda::detail::set_attention_forward_m_tiles(m_tiles);
    cuda::detail::set_attention_tiles_inner(tiles_inner);
    Tensor gout = poisoned(q.shape(), DType::BFloat16), glse = poisoned(lse.shape(), DType::Float32),
           gdq = poisoned(q.shape(), DType::BFloat16), gdk = poisoned(k.shape(), DType::BFloat16),
           gdv = poisoned(v.shape(), DType::BFloat16);
    EXPECT_EQ(cuda::attention_bf16_uses_tensor_cores(s, {ptr<BFloat16>(gq), ptr<BFloat16>(gk), ptr<BFloat16>(gout)},
                                                     {qs, ks}),
              expect_tensor_cores);
    cuda::attention_forward_bf16(s, ptr<BFloat16>(gq), qs, ptr<BFloat16>(gk), ks, ptr<BFloat16>(gv), ks,
                                 ptr<BFloat16>(gout), qs, ptr<float>(glse));
    cuda::attention_backward_bf16(s, ptr<BFloat16>(gq), qs, ptr<BFloat16>(gk), ks, ptr<BFloat16>(gv), ks,
                                  ptr<BFloat16>(gout), qs, ptr<float>(glse), ptr<BFloat16>(gdout), qs,
                                  ptr<BFloat16>(gdq), qs, ptr<BFloat16>(gdk), ks, ptr<BFloat16>(gdv), ks);
    sync();
    const std::string what = "bf16 B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " Hkv=" +
                             std::to_string(c.Hkv) + " T=" + std::to_string(c.T) + " Dh=" + std::to_string(c.Dh) +
                             " causal=" + std::to_string(c.causal) + " m_tiles=" + std::to_string(m_tiles) +
                             " tiles_inner=" + std::to_string(tiles_inner);
    EXPECT_LE(rel_err(gout, out), 1e-2) << what;
    EXPECT_LE(rel_err(glse, lse), 1e-3) << what;
    EXPECT_LE(rel_err(gdq, dq), 2e-2) << what;
    EXPECT_LE(rel_err(gdk, dk), 2e-2) << what;
    EXPECT_LE(rel_err(gdv, dv), 2e-2) << what;
  }
  cuda::detail::set_attention_forward_m_tiles(m_tiles_before);
  cuda::detail::set_attention_tiles_inner(tiles_inner_before);
}

TEST_F(CudaMoeKernels, AttentionBf16MatchesCpuFloat) {
  check_attention_bf16({2, 4, 2, 200, 64, true}, true);
  check_attention_bf16({1, 2, 2, 129, 128, false}, true);
  check_attention_bf16({1, 2, 1, 64, 128, true}, true);
  check_attention_bf16({1, 1, 1, 5, 64, true}, true);
  check_attention_bf16({2, 6, 2, 150, 96, true}, true);    // head dim 96 (the 3b presets), grouped queries
  check_attention_bf16({1, 4, 2, 100, 64, false}, true);   // grouped queries without the causal mask
  check_attention_bf16({1, 2, 1, 300, 128, true}, true);    // 128-query tiles: a full one, a partial one
  check_attention_bf16({1, 3, 1, 77, 32, true}, false);  // scalar kernels on bf16 storage
}

}  // namespace
}  // namespace uoe
