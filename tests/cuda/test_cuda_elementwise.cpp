// CUDA copy, elementwise, reduction, indexing and random kernels against their CPU twins (kernel level; the
// op-level parity harness lives beside this file). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/allocator.h"
#include "core/rng.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "ops/kernels/copy.h"
#include "ops/kernels/elementwise.h"
#include "ops/kernels/index.h"
#include "ops/kernels/random.h"
#include "ops/kernels/reduce.h"
#include "ops/ops.h"

namespace uoe {
namespace {

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

const Device kGpu = Device::cuda(0);
Tensor dev(const Tensor& t) { return t.to(kGpu); }
Tensor host(const Tensor& t) { return t.to(Device::cpu()).contiguous(); }

// Same shape, dtype and values bit for bit (+-0 told apart); any two NaNs count as equal (NaN payloads of float
// conversions and of invalid operations differ between x86 and the GPU).
void expect_same_bits(const Tensor& got_any, const Tensor& want_any, const std::string& what) {
  const Tensor got = host(got_any), want = host(want_any);
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (!is_floating(got.dtype())) {
    if (got.numel() > 0) {  // an empty tensor may have no storage: memcmp wants pointers even for 0 bytes
      EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), size_t(got.numel()) * got.itemsize()), 0) << what;
    }
    return;
  }
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    uint64_t gb, wb;
    std::memcpy(&gb, &g[i], 8);
    std::memcpy(&wb, &w[i], 8);
    if ((std::isnan(g[i]) && std::isnan(w[i])) || gb == wb) continue;
    ++bad;
    ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
  }
}

// |got - want| <= atol + rtol |want| elementwise; NaN only where want is NaN.
void expect_close(const Tensor& got_any, const Tensor& want_any, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got_any.shape(), want_any.shape()) << what;
  const std::vector<double> g = got_any.to_vector<double>(), w = want_any.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    const bool ok =
        std::isnan(w[i]) ? std::isnan(g[i]) : (g[i] == w[i] || std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]));
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
    }
  }
}

// Values that every dtype holds approximately: integers, halves (rounding ties), fractions, +-0.
Tensor mixed_values(int64_t n, bool specials) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) {
    const double base = double((i * 37) % 201 - 100);
    switch (i % 5) {
      case 0:
        v.push_back(base);
        break;
      case 1:
        v.push_back(base + 0.5);
        break;
      case 2:
        v.push_back(base * 3.14159265358979 + 1e-3);
        break;
      case 3:
        v.push_back(i % 2 ? -0.0 : 0.0);
        break;
      default:
        v.push_back(base / 7.0 + 1.0 / 3.0);
        break;
    }
  }
  if (specials && n >= 8) {
    v[1] = std::numeric_limits<double>::quiet_NaN();
    v[3] = std::numeric_limits<double>::infinity();
    v[5] = -std::numeric_limits<double>::infinity();
    v[7] = 1e-42;  // float subnormal; f16 / bf16 underflow
  }
  return from_vector(v, {n});
}

const std::vector<DType> kAllDtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                       DType::Int32,   DType::Int64,   DType::Bool};

TEST_F(CudaKernels, CopyCastMatchesCpuBitForBitForEveryDtypePair) {
  for (DType from : kAllDtypes) {
    for (DType to : kAllDtypes) {
      const bool specials = is_floating(from) && is_floating(to);  // float -> int of NaN/inf is undefined
      const Tensor src_cpu = mixed_values(3 * 40, specials).to(from).reshape({3, 40});
      const std::string what = std::string(dtype_name(from)) + " -> " + dtype_name(to);
      // Contiguous, transposed and broadcast-row sources, each into a transposed (strided) destination.
      for (int layout = 0; layout < 3; ++layout) {
        const Tensor s = layout == 1 ? src_cpu.transpose(0, 1) : (layout == 2 ? src_cpu.narrow(0, 1, 1) : src_cpu);
        const Tensor sd =
            layout == 1 ? dev(src_cpu).transpose(0, 1) : (layout == 2 ? dev(src_cpu).narrow(0, 1, 1) : dev(src_cpu));
        const Shape out_shape = layout == 1 ? Shape{40, 3} : Shape{3, 40};
        const Tensor want = empty(out_shape, TensorOptions{}.with_dtype(to));
        cpu::copy_cast(want, s);
        const Tensor got_buf = empty({out_shape[1], out_shape[0]}, TensorOptions{}.with_dtype(to).with_device(kGpu));
        const Tensor got = got_buf.transpose(0, 1);
        cuda::copy_cast(got, sd);
        expect_same_bits(got, want, what + " layout " + std::to_string(layout));
      }
    }
  }
}

TEST_F(CudaKernels, FillWritesEveryElementOfAStridedView) {
  for (DType t : kAllDtypes) {
    const Tensor buf = zeros({6, 10}, TensorOptions{}.with_dtype(t).with_device(kGpu));
    cuda::fill(buf.slice(1, 1, 10, 3), -2.75);
    const Tensor want = zeros({6, 10}, TensorOptions{}.with_dtype(t));
    cpu::fill(want.slice(1, 1, 10, 3), -2.75);
    expect_same_bits(buf, want, dtype_name(t));
  }
}

TEST_F(CudaKernels, UnaryMatchesCpu) {
  using kernels::UnaryKind;
  const Tensor x64 = (randn({7, 129}, TensorOptions{}.with_dtype(DType::Float64)) * 4.0).transpose(0, 1);
  const std::vector<double> special = {0.0,
                                       -0.0,
                                       1e-30,
                                       -25.0,
                                       25.0,
                                       100.0,
                                       -100.0,
                                       std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN()};
  const Tensor sp64 = from_vector(special, {int64_t(special.size())});
  for (UnaryKind k : {UnaryKind::Neg, UnaryKind::Exp, UnaryKind::Log, UnaryKind::Sqrt, UnaryKind::Rsqrt, UnaryKind::Abs,
                      UnaryKind::Sign, UnaryKind::Tanh, UnaryKind::Sigmoid, UnaryKind::Relu, UnaryKind::Gelu,
                      UnaryKind::GeluTanh, UnaryKind::Silu, UnaryKind::Softplus}) {
    const bool exact = k == UnaryKind::Neg || k == UnaryKind::Abs || k == UnaryKind::Sign || k == UnaryKind::Relu ||
                       k == UnaryKind::Sqrt || k == UnaryKind::Rsqrt;
    for (DType t : {DType::Float32, DType::Float64}) {
      for (const Tensor& x : {x64.to(t), sp64.to(t)}) {
        const std::string what = "unary kind " + std::to_string(int(k)) + " " + dtype_name(t);
        const Tensor want = cpu::unary(k, x), got = cuda::unary(k, dev(x));
        if (exact)
          expect_same_bits(got, want, what);
        else if (t == DType::Float32)
          expect_close(got, want, 1e-5, 1e-6, what);
        else
          expect_close(got, want, 1e-13, 1e-15, what);
      }
    }
  }
  for (DType t : {DType::Int32, DType::Int64}) {
    const Tensor x = arange(-50, 50, 1, TensorOptions{}.with_dtype(t)).reshape({10, 10}).transpose(0, 1);
    for (UnaryKind k : {UnaryKind::Neg, UnaryKind::Abs, UnaryKind::Sign, UnaryKind::Relu})
      expect_same_bits(cuda::unary(k, dev(x)), cpu::unary(k, x), dtype_name(t));
  }
}

TEST_F(CudaKernels, ContiguousViewsOffTheVectorAlignmentMatchCpu) {
  // Contiguous 1-d views one or two elements past a 16-byte boundary (the flat loop's vector loads must not be used
  // on them), and a length that is not a multiple of the vector width.
  using kernels::BinaryKind;
  using kernels::UnaryKind;
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const Tensor base = randn({1003}).to(t), other = randn({1003}).to(t);
    const Tensor a = base.narrow(0, 1, 1001), b = other.narrow(0, 2, 1001);
    const Tensor da = dev(base).narrow(0, 1, 1001), db = dev(other).narrow(0, 2, 1001);
    const std::string what = dtype_name(t);
    if (t == DType::BFloat16) {
      expect_same_bits(cuda::unary(UnaryKind::Neg, da), cuda::unary(UnaryKind::Neg, dev(a)), what + " neg");
      expect_same_bits(cuda::binary(BinaryKind::Add, da, db), cuda::binary(BinaryKind::Add, dev(a), dev(b)),
                       what + " add");
      continue;
    }
    expect_same_bits(cuda::unary(UnaryKind::Neg, da), cpu::unary(UnaryKind::Neg, a), what + " neg");
    expect_same_bits(cuda::binary(BinaryKind::Add, da, db), cpu::binary(BinaryKind::Add, a, b), what + " add");
    // into a misaligned output view
    const Tensor out_buf = zeros({1003}, TensorOptions{}.with_dtype(t).with_device(kGpu));
    cuda::binary_into(BinaryKind::Mul, out_buf.narrow(0, 1, 1001), da, db);
    expect_same_bits(out_buf.narrow(0, 1, 1001), cpu::binary(BinaryKind::Mul, a, b), what + " mul into");
    cuda::copy_cast(out_buf.narrow(0, 2, 1001), da);
    expect_same_bits(out_buf.narrow(0, 2, 1001), a, what + " copy");
  }
}

TEST_F(CudaKernels, ActivationGradMatchesCpu) {
  using kernels::ActivationGrad;
  for (DType t : {DType::Float32, DType::Float64}) {
    const Tensor x = (randn({33, 17}, TensorOptions{}.with_dtype(DType::Float64)) * 5.0).to(t);
    const Tensor g = randn({17}, TensorOptions{}.with_dtype(t));
    for (ActivationGrad k : {ActivationGrad::Gelu, ActivationGrad::GeluTanh, ActivationGrad::Silu}) {
      const Tensor want = cpu::activation_grad(k, x, g), got = cuda::activation_grad(k, dev(x), dev(g));
      if (t == DType::Float32)
        expect_close(got, want, 2e-5, 2e-6, "activation_grad f32");
      else
        expect_close(got, want, 1e-13, 1e-15, "activation_grad f64");
    }
  }
}

TEST_F(CudaKernels, BinaryBroadcastsAndComparesAsTheCpu) {
  using kernels::BinaryKind;
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64}) {
    const bool fl = is_floating(t);
    Tensor a = (randn({4, 1, 5}, TensorOptions{}.with_dtype(DType::Float64)) * 10.0).to(t);
    Tensor b = (randn({3, 1}, TensorOptions{}.with_dtype(DType::Float64)) * 10.0).to(t);
    if (!fl)
      b = ops::where(ops::eq(b, scalar_tensor(0, TensorOptions{}.with_dtype(t))),
                     ones({3, 1}, TensorOptions{}.with_dtype(t)), b);
    b = ops::cat({b, b.narrow(0, 0, 1)}, 0).narrow(0, 1, 3);  // a view with an offset
    for (BinaryKind k :
         {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div, BinaryKind::Pow, BinaryKind::Eq,
          BinaryKind::Ne, BinaryKind::Lt, BinaryKind::Le, BinaryKind::Gt, BinaryKind::Ge}) {
      if (k == BinaryKind::Pow && !fl) continue;
      const Tensor aa = k == BinaryKind::Pow ? ops::abs(a) : a;
      const Tensor want = cpu::binary(k, aa, b), got = cuda::binary(k, dev(aa), dev(b));
      const std::string what = std::string(dtype_name(t)) + " kind " + std::to_string(int(k));
      if (k == BinaryKind::Pow)
        expect_close(got, want, t == DType::Float32 ? 1e-5 : 1e-13, 0, what);
      else
        expect_same_bits(got, want, what);
    }
    // In place, out aliasing a (add_ / mul_ path).
    const Tensor x = (randn({6, 7}, TensorOptions{}.with_dtype(DType::Float64)) * 10.0).to(t);
    const Tensor y = (randn({7}, TensorOptions{}.with_dtype(DType::Float64)) * 10.0).to(t);
    const Tensor xw = x.clone(), xg = dev(x);
    cpu::binary_into(BinaryKind::Mul, xw, xw, y);
    cuda::binary_into(BinaryKind::Mul, xg, xg, dev(y));
    expect_same_bits(xg, xw, std::string("binary_into ") + dtype_name(t));
  }
}

TEST_F(CudaKernels, Bfloat16KernelsEqualTheFloat32KernelsBetweenCasts) {
  // The bfloat16 kernels read bfloat16, compute in float32 and round once: bit for bit the float32 kernel on the
  // widened operands, rounded to bfloat16. Strided and broadcast operands, specials included.
  using kernels::ActivationGrad;
  using kernels::BinaryKind;
  using kernels::UnaryKind;
  const Tensor x = ops::cat({mixed_values(64, true), (randn({64}) * 3.0).to(DType::Float64)}, 0).to(DType::BFloat16).reshape({16, 8})
                       .transpose(0, 1);                                          // [8, 16], strided
  const Tensor y = (randn({16}) * 2.0).to(DType::BFloat16);                      // broadcast over rows
  const Tensor xf = x.to(DType::Float32), yf = y.to(DType::Float32);
  auto bf16 = [](const Tensor& t) { return t.to(DType::BFloat16); };
  for (UnaryKind k : {UnaryKind::Neg, UnaryKind::Exp, UnaryKind::Log, UnaryKind::Sqrt, UnaryKind::Rsqrt, UnaryKind::Abs,
                      UnaryKind::Sign, UnaryKind::Tanh, UnaryKind::Sigmoid, UnaryKind::Relu, UnaryKind::Gelu,
                      UnaryKind::GeluTanh, UnaryKind::Silu, UnaryKind::Softplus})
    expect_same_bits(cuda::unary(k, dev(x)), bf16(cuda::unary(k, dev(xf))), "bf16 unary kind " + std::to_string(int(k)));
  for (ActivationGrad k : {ActivationGrad::Gelu, ActivationGrad::GeluTanh, ActivationGrad::Silu})
    expect_same_bits(cuda::activation_grad(k, dev(x), dev(y)), bf16(cuda::activation_grad(k, dev(xf), dev(yf))),
                     "bf16 activation_grad kind " + std::to_string(int(k)));
  for (BinaryKind k : {BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div, BinaryKind::Pow,
                       BinaryKind::Eq, BinaryKind::Ne, BinaryKind::Lt, BinaryKind::Le, BinaryKind::Gt, BinaryKind::Ge}) {
    const Tensor want = cuda::binary(k, dev(xf), dev(yf));
    expect_same_bits(cuda::binary(k, dev(x), dev(y)), k >= BinaryKind::Eq ? want : bf16(want),
                     "bf16 binary kind " + std::to_string(int(k)));
  }
  const Tensor inplace = dev(x).contiguous();
  cuda::binary_into(BinaryKind::Add, inplace, inplace, dev(y));
  expect_same_bits(inplace, bf16(cuda::binary(BinaryKind::Add, dev(xf), dev(yf))), "bf16 binary_into");
}

TEST_F(CudaKernels, Bfloat16OpsAllocateOnlyTheirResult) {
  // bfloat16 ops on a GPU run the bfloat16 kernels on their operands: no float32 copies on the way.
  const Tensor a = dev(randn({1024, 1024}).to(DType::BFloat16)), b = dev(randn({1024, 1024}).to(DType::BFloat16));
  const size_t result = size_t(a.numel()) * 2;
  Allocator& alloc = allocator_for(kGpu);
  auto extra = [&](const std::function<Tensor()>& f, const char* what) {
    cuda::synchronize(0, what);
    alloc.reset_peak();
    const size_t before = alloc.stats().allocated;
    const Tensor y = f();
    EXPECT_EQ(y.dtype(), DType::BFloat16) << what;
    EXPECT_LE(alloc.stats().peak - before, result) << what << " allocated more than its result";
  };
  extra([&] { return a * b; }, "mul");
  extra([&] { return a + b; }, "add");
  extra([&] { return ops::silu(a); }, "silu");
  extra([&] { return ops::silu_backward(a, b); }, "silu_backward");
  Tensor c = a.clone();
  alloc.reset_peak();
  const size_t before = alloc.stats().allocated;
  c.add_(b);
  EXPECT_EQ(alloc.stats().peak, before) << "add_ allocated";
}

TEST_F(CudaKernels, WhereSelectsWithBroadcasting) {
  const Tensor cond = ops::gt(randn({5, 1, 4}), scalar_tensor(0.0));
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64, DType::Bool}) {
    const Tensor a = randn({3, 4}).to(t), b = randn({5, 3, 1}).to(t);
    expect_same_bits(cuda::where(dev(cond), dev(a), dev(b)), cpu::where(cond, a, b), dtype_name(t));
  }
}

TEST_F(CudaKernels, ReduceSumMatchesCpuAndRepeatsBitForBit) {
  struct Case {
    Shape shape;
    std::vector<bool> mask;
  };
  const std::vector<Case> cases = {{{4, 6, 5}, {true, true, true}},   {{4, 6, 5}, {false, false, true}},
                                   {{4, 6, 5}, {true, false, false}}, {{4, 6, 5}, {false, true, false}},
                                   {{3, 100003}, {false, true}},      {{70001, 5}, {true, false}},
                                   {{2, 3000}, {false, true}},        {{1 << 20}, {true}},
                                   {{0, 4}, {true, false}},           {{4, 0}, {false, true}}};
  for (const Case& c : cases) {
    for (DType t : {DType::Float32, DType::Float64, DType::Int64}) {
      const Tensor x = t == DType::Int64 ? randint(-100, 100, c.shape) : randn(c.shape, TensorOptions{}.with_dtype(t));
      const Tensor want = cpu::reduce_sum(x.to(DType::Float64), c.mask);
      const Tensor got = cuda::reduce_sum(dev(x), c.mask), again = cuda::reduce_sum(dev(x), c.mask);
      const std::string what = shape_str(c.shape) + " " + dtype_name(t);
      expect_same_bits(got, again, what + " repeat");
      if (t == DType::Int64)
        expect_same_bits(got.to(DType::Float64), want, what);
      else
        expect_close(got, want, t == DType::Float32 ? 1e-4 : 1e-12,
                     (t == DType::Float32 ? 1e-6 : 1e-13) * double(x.numel()) + 1e-4, what);
    }
  }
}

TEST_F(CudaKernels, MinMaxPicksTheFirstOccurrenceAndNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t n : {7, 3000}) {
    std::vector<double> v(size_t(4 * n));
    for (int64_t i = 0; i < 4 * n; ++i) v[size_t(i)] = double((i * 7919) % 13);  // many ties
    v[size_t(n + n / 2)] = nan;                                                  // row 1: one NaN
    v[size_t(2 * n + 1)] = nan;                                                  // row 2: two NaNs, the first wins
    v[size_t(2 * n + n - 1)] = nan;
    const Tensor x64 = from_vector(v, {4, n});
    for (DType t : {DType::Float32, DType::Float64, DType::Int64}) {
      const Tensor x =
          t == DType::Int64 ? from_vector(std::vector<double>(size_t(4 * n), 3.0), {4, n}).to(t) : x64.to(t);
      for (bool is_max : {true, false}) {
        for (int64_t dim : {0, 1}) {
          auto [wv, wi] = cpu::reduce_minmax(x, dim, is_max);
          auto [gv, gi] = cuda::reduce_minmax(dev(x), dim, is_max);
          const std::string what =
              std::string(dtype_name(t)) + (is_max ? " max" : " min") + " dim " + std::to_string(dim);
          expect_same_bits(gv, wv, what);
          expect_same_bits(gi, wi, what + " indices");
        }
      }
    }
  }
}

TEST_F(CudaKernels, MinMaxKeepsTheOrderOfTheOtherDims) {
  // 4-d input, every dim reduced in turn: the result's other dims stay in their order (want: the 2-d reduction of
  // the input with `dim` moved last, the other dims in order).
  const Tensor x = randn({3, 4, 5, 6});
  for (int64_t dim = 0; dim < 4; ++dim) {
    Shape perm, out_shape;
    for (int64_t d = 0; d < 4; ++d)
      if (d != dim) {
        perm.push_back(d);
        out_shape.push_back(x.size(d));
      }
    perm.push_back(dim);
    const Tensor rows = x.permute(perm).contiguous().reshape({x.numel() / x.size(dim), x.size(dim)});
    for (bool is_max : {true, false}) {
      auto [wv, wi] = cpu::reduce_minmax(rows, 1, is_max);
      auto [gv, gi] = cuda::reduce_minmax(dev(x), dim, is_max);
      const std::string what = std::string(is_max ? "max" : "min") + " of [3, 4, 5, 6] over dim " + std::to_string(dim);
      expect_same_bits(gv, wv.reshape(out_shape), what);
      expect_same_bits(gi, wi.reshape(out_shape), what + " indices");
    }
  }
}

TEST_F(CudaKernels, IndexKernelsMatchCpuIncludingSumOrder) {
  const Tensor x = randn({6, 5, 4});
  const Tensor ix = from_vector<int64_t>({3, 0, 3, 2, 3, 0, 1}, {7});  // repeated targets
  for (int64_t dim : {0, 1, 2}) {
    expect_same_bits(cuda::index_select(dev(x), dim, dev(ix)), cpu::index_select(x, dim, ix), "index_select");
    Shape src_shape = x.shape();
    src_shape[size_t(dim)] = ix.numel();
    const Tensor src = randn(src_shape);
    expect_same_bits(cuda::index_add(dev(x), dim, dev(ix), dev(src)), cpu::index_add(x, dim, ix, src), "index_add");
  }
  // gather / scatter_add with repeated targets along each dim, index smaller than x in the other dims.
  for (int64_t dim : {0, 1, 2}) {
    const Tensor index = randint(0, x.size(dim), {4, 3, 3});
    const Tensor big = randn({5, 4, 6});
    const Tensor s = big.narrow(0, 0, 4).narrow(1, 0, 3).narrow(2, 1, 3);  // strided src of index's shape
    const Tensor sd = dev(big).narrow(0, 0, 4).narrow(1, 0, 3).narrow(2, 1, 3);
    expect_same_bits(cuda::gather(dev(x), dim, dev(index)), cpu::gather(x, dim, index), "gather");
    expect_same_bits(cuda::scatter_add(dev(x), dim, dev(index), sd), cpu::scatter_add(x, dim, index, s), "scatter_add");
  }
}

TEST_F(CudaKernels, TopkMatchesCpuWithTies) {
  for (int64_t n : {8, 40, 2000}) {
    const Tensor x = randint(0, 9, {5, n}).to(DType::Float32);  // many ties
    for (bool largest : {true, false}) {
      for (int64_t k : {int64_t(0), int64_t(1), int64_t(3), std::min<int64_t>(n, 20)}) {
        auto [wv, wi] = cpu::topk(x, k, 1, largest);
        auto [gv, gi] = cuda::topk(dev(x), k, 1, largest);
        expect_same_bits(gv, wv, "topk values n=" + std::to_string(n));
        expect_same_bits(gi, wi, "topk indices n=" + std::to_string(n));
        auto [wv0, wi0] = cpu::topk(x.transpose(0, 1).contiguous(), k, 0, largest);
        auto [gv0, gi0] = cuda::topk(dev(x).transpose(0, 1), k, 0, largest);
        expect_same_bits(gv0, wv0, "topk dim 0 values");
        expect_same_bits(gi0, wi0, "topk dim 0 indices");
      }
    }
  }
}

TEST_F(CudaKernels, IndexRangeCheckFindsTheFirstBadPosition) {
  EXPECT_EQ(cuda::first_out_of_range(dev(from_vector<int64_t>({0, 3, 2}, {3})), 4), -1);
  EXPECT_EQ(cuda::first_out_of_range(dev(from_vector<int64_t>({0, 7, -1, 9}, {4})), 4), 1);
  EXPECT_EQ(cuda::first_out_of_range(dev(from_vector<int64_t>({0, 1, -1}, {3})), 4), 2);
}

TEST_F(CudaKernels, UniformMatchesTheCpuStreamBitForBit) {
  for (int64_t n : {1, 5, 4099}) {
    for (DType t : {DType::Float32, DType::Float64}) {
      const uint64_t seed = 1234567890123ull, start = 8;
      const Tensor want = empty({n}, TensorOptions{}.with_dtype(t));
      if (t == DType::Float32)
        fill_uniform(want.data_ptr<float>(), n, seed, start, -2.0f, 3.0f);
      else
        fill_uniform(want.data_ptr<double>(), n, seed, start, -2.0, 3.0);
      const Tensor got = empty({n}, TensorOptions{}.with_dtype(t).with_device(kGpu));
      cuda::fill_uniform(got, seed, start, -2.0, 3.0);
      expect_same_bits(got, want, std::string("uniform ") + dtype_name(t));
    }
  }
  // rand on the device equals rand on the CPU for the same generator state.
  Generator g1(42), g2(42);
  expect_same_bits(rand({3, 333}, TensorOptions{}.with_device(kGpu), &g1), rand({3, 333}, {}, &g2), "rand");
  EXPECT_EQ(g1.offset(), g2.offset());
}

}  // namespace
}  // namespace uoe
