// matmul with broadcast batch dims, on the packed CPU GEMM or cuBLASLt: forward and backward (dA = dC·Bᵀ,
// dB = Aᵀ·dC).
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/gemm.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

struct MatmulBackward final : autograd::Node {
  std::string name() const override { return "matmul"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const Tensor a = saved(0), b = saved(1);
    return {next[0] ? sum_to(matmul(g, b.mT()), a.shape()) : Tensor(),
            next[1] ? sum_to(matmul(a.mT(), g), b.shape()) : Tensor()};
  }
};

// A [batch, rows, cols] operand as the GEMM sees it: a base pointer, a batch stride (0 when
// broadcast), whether it is stored transposed, and its leading dimension. Transposed views
// are absorbed by the GEMM's packing; other layouts are copied once.
struct GemmOperand {
  Tensor keep;  // holds the storage (and any copy) alive
  int64_t batch_stride = 0, ld = 0;
  bool trans = false;
};

GemmOperand gemm_operand(const Tensor& t, const Shape& batch_shape) {
  Shape full = batch_shape;
  full.push_back(t.size(-2));
  full.push_back(t.size(-1));
  Tensor e = t.detach().expand(full);
  const int64_t rows = e.size(-2), cols = e.size(-1);
  auto batch_stride_of = [&](const Tensor& x) -> std::optional<int64_t> {
    // The batch dims must collapse to one stride: all broadcast, or nested evenly.
    const int64_t nb = int64_t(batch_shape.size());
    int64_t stride = -1, span = 1;
    bool all_zero = true;
    for (int64_t d = nb - 1; d >= 0; --d) {
      if (x.size(d) == 1) continue;
      if (x.stride(d) != 0) all_zero = false;
      if (stride < 0) stride = x.stride(d);
      else if (x.stride(d) != stride * span) return std::nullopt;
      span *= x.size(d);
    }
    if (all_zero) return 0;
    return stride < 0 ? 0 : stride;
  };
  const bool row_major = e.stride(-1) == 1 && (rows <= 1 || e.stride(-2) >= cols);
  const bool col_major = e.stride(-2) == 1 && (cols <= 1 || e.stride(-1) >= rows);
  auto bs = batch_stride_of(e);
  if ((row_major || col_major) && bs) {
    if (row_major) return {e, *bs, std::max<int64_t>(rows > 1 ? e.stride(-2) : cols, 1), false};
    return {e, *bs, std::max<int64_t>(cols > 1 ? e.stride(-1) : rows, 1), true};
  }
  Tensor c = e.contiguous();
  return {c, rows * cols, std::max<int64_t>(cols, 1), false};
}

Tensor matmul_2d_or_batched(const Tensor& a, const Tensor& b) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  const Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ab, bb, "matmul");
  const int64_t nbatch = shape_numel(batch);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  // bfloat16 stays bfloat16 on either device: the family's bfloat16 GEMM reads it (float32 sums, rounded once).
  const bool bf16 = a.dtype() == DType::BFloat16;
  const Tensor ac = bf16 ? a : kernel_view(a), bc = bf16 ? b : kernel_view(b);
  Tensor out = empty(out_shape, like(ac));
  if (out.numel() == 0) return restore_dtype(out, a.dtype());
  const GemmOperand A = gemm_operand(ac, batch), B = gemm_operand(bc, batch);
  const OnDevice on_device(ac);
  if (bf16) {
    UOE_KERNEL(ac, gemm_batched_bf16(nbatch, A.trans, B.trans, M, N, K, 1.0f, A.keep.data_ptr<BFloat16>(), A.ld,
                                     A.batch_stride, B.keep.data_ptr<BFloat16>(), B.ld, B.batch_stride, 0.0f,
                                     out.data_ptr<BFloat16>(), N, M * N));
  } else {
    dispatch_float(ac.dtype(), "matmul", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(ac, gemm_batched<T>(nbatch, A.trans, B.trans, M, N, K, T(1), A.keep.data_ptr<T>(), A.ld,
                                     A.batch_stride, B.keep.data_ptr<T>(), B.ld, B.batch_stride, T(0),
                                     out.data_ptr<T>(), N, M * N));
    });
  }
  return restore_dtype(out, a.dtype());
}

}  // namespace

void set_allow_tf32(bool allow) { cuda::set_allow_tf32(allow); }
bool allow_tf32() { return cuda::allow_tf32(); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same_device("matmul", {a, b});
  UOE_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] needs tensors of at least 1 dim, got a ", shape_str(a.shape()),
            " and b ", shape_str(b.shape()));
  check_floating("matmul", "a", a);
  UOE_CHECK(a.dtype() == b.dtype(), "[matmul] dtypes differ: a is ", describe(a), " and b is ", describe(b));
  if (a.dim() == 1) return matmul(a.unsqueeze(0), b).squeeze(b.dim() == 1 ? 0 : -2);  // [K] x [K]: a 0-dim dot
  if (b.dim() == 1) return matmul(a, b.unsqueeze(-1)).squeeze(-1);
  UOE_CHECK(a.size(-1) == b.size(-2), "[matmul] a is ", shape_str(a.shape()), " and b is ", shape_str(b.shape()),
            ": a's last dim ", a.size(-1), " must equal b's dim -2 (", b.size(-2), ")");
  // A batched a times a 2-D b is one GEMM with the batch folded into the rows.
  if (a.dim() > 2 && b.dim() == 2 && a.is_contiguous()) {
    Shape out_shape(a.shape().begin(), a.shape().end() - 1);
    out_shape.push_back(b.size(1));
    return matmul(a.reshape({-1, a.size(-1)}), b).reshape(out_shape);
  }
  Tensor c = matmul_2d_or_batched(a, b);
  if (auto node = autograd::record<MatmulBackward>(c, {a, b})) node->save({a, b});
  return c;
}

}  // namespace uoe::ops
