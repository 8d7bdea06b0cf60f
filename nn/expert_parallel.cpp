// Expert parallelism: differentiable all_to_all, dispatch of (token, slot) pairs to the owning rank and combine.
#include "nn/expert_parallel.h"

#include "autograd/node.h"
#include "core/error.h"
#include "ops/moe.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

int64_t total(const std::vector<int64_t>& rows) {
  int64_t s = 0;
  for (int64_t r : rows) s += r;
  return s;
}

// The undifferentiated exchange: x [Σ send_rows, ...] -> [Σ recv_rows, ...].
Tensor exchange(const Tensor& x, Communicator& comm, const std::vector<int64_t>& send_rows,
                const std::vector<int64_t>& recv_rows) {
  Shape shape = x.shape();
  shape[0] = total(recv_rows);
  Tensor out = empty(shape, TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  comm.all_to_all(x.detach().contiguous(), send_rows, out, recv_rows);
  return out;
}

struct AllToAllBackward final : autograd::Node {
  Communicator& comm;
  std::vector<int64_t> send_rows, recv_rows;
  AllToAllBackward(Communicator& c, std::vector<int64_t> s, std::vector<int64_t> r)
      : comm(c), send_rows(std::move(s)), recv_rows(std::move(r)) {}
  std::string name() const override { return "all_to_all"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {exchange(g, comm, recv_rows, send_rows)}; }
};

// Backward of all_gather_rows: every rank's gradient of the gathered whole, summed, this rank's rows of it.
struct AllGatherRowsBackward final : autograd::Node {
  Communicator& comm;
  explicit AllGatherRowsBackward(Communicator& c) : comm(c) {}
  std::string name() const override { return "all_gather_rows"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const DType sum_dtype = reduction_dtype(g.dtype());
    Shape shape = g.shape();
    shape[0] /= comm.size();
    Tensor own = empty(shape, TensorOptions{}.with_dtype(sum_dtype).with_device(g.device()));
    comm.reduce_scatter(g.detach().to(sum_dtype).contiguous(), own);
    return {own.to(g.dtype())};
  }
};

Tensor index_tensor(const std::vector<int64_t>& v, Device device) {
  return from_vector(v, {int64_t(v.size())}).to(device);
}

}  // namespace

Tensor all_to_all(const Tensor& x, Communicator& comm, const std::vector<int64_t>& send_rows,
                  const std::vector<int64_t>& recv_rows) {
  const size_t P = size_t(comm.size());
  UOE_CHECK(send_rows.size() == P && recv_rows.size() == P && total(send_rows) == x.size(0), "[all_to_all] rank ",
            comm.rank(), " of ", P, ": need one send and one receive count per rank, the send counts summing to ",
            x.size(0), " rows");
  Tensor out = exchange(x, comm, send_rows, recv_rows);
  autograd::record<AllToAllBackward>(out, {x}, comm, send_rows, recv_rows);
  return out;
}

Tensor all_gather_rows(const Tensor& x, Communicator& comm) {
  Shape shape = x.shape();
  UOE_CHECK(!shape.empty(), "[all_gather_rows] rank ", comm.rank(), " of ", comm.size(), ": a scalar has no rows");
  shape[0] *= comm.size();
  Tensor out = empty(shape, TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  comm.all_gather(x.detach().contiguous(), out);
  autograd::record<AllGatherRowsBackward>(out, {x}, comm);
  return out;
}

Tensor expert_parallel_ffn(Communicator& comm, const Tensor& x, const Tensor& indices, const Tensor& weights,
                           const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, int64_t r0, int64_t r1,
                           const Tensor& gate_input) {
  const int64_t P = comm.size(), n_local = w_gate.size(0), n = P * n_local, T = x.size(0), K = indices.size(1),
                d = x.size(1);
  // The non-empty (token, slot) pairs in expert order (stable): so grouped by the rank owning their expert, and
  // within a rank by its local expert.
  const std::vector<int64_t> idx = indices.to(DType::Int64).to_vector<int64_t>();
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(n));
  for (int64_t p = 0; p < T * K; ++p)
    if (idx[size_t(p)] >= 0) by_expert[size_t(idx[size_t(p)])].push_back(p);
  std::vector<int64_t> pairs, tokens, gate_rows, send_rows(size_t(P), 0), send_counts;
  for (int64_t e = 0; e < n; ++e) {
    const std::vector<int64_t>& ps = by_expert[size_t(e)];
    send_rows[size_t(e / n_local)] += int64_t(ps.size());
    send_counts.push_back(int64_t(ps.size()));
    for (int64_t p : ps) {
      pairs.push_back(p);
      tokens.push_back(p / K);
      gate_rows.push_back(p / K * n + e);
    }
  }
  // Pair counts per expert: rank j tells every rank how many pairs it sends to each of that rank's experts, which
  // gives the rows to expect and each received pair's local expert.
  const Tensor recv_counts = zeros({P * n_local}, TensorOptions{}.with_dtype(DType::Int64));
  const std::vector<int64_t> per_rank(size_t(P), n_local);
  comm.all_to_all(from_vector(send_counts, {P * n_local}), per_rank, recv_counts, per_rank);
  const std::vector<int64_t> counts = recv_counts.to_vector<int64_t>();  // [P][n_local]
  std::vector<int64_t> recv_rows(size_t(P), 0), local_experts;
  for (int64_t j = 0; j < P; ++j)
    for (int64_t e = 0; e < n_local; ++e) {
      const int64_t c = counts[size_t(j * n_local + e)];
      recv_rows[size_t(j)] += c;
      local_experts.insert(local_experts.end(), size_t(c), e);
    }
  const int64_t M = total(recv_rows);  // pairs this rank computes

  const Device dev = x.device();
  const Tensor token_index = index_tensor(tokens, dev);
  // One exchange carries each pair's token row and, for AoE, its gate input: [pairs, d (+ d_g)] -> [M, d (+ d_g)]
  Tensor payload = ops::index_select(x, 0, token_index);
  const int64_t dg = gate_input.defined() ? gate_input.size(2) : 0;
  if (gate_input.defined())
    payload = ops::cat({payload, ops::index_select(gate_input.reshape({T * n, dg}), 0, index_tensor(gate_rows, dev))},
                       1);
  const Tensor received = all_to_all(payload, comm, send_rows, recv_rows);
  const Tensor x_in = received.narrow(1, 0, d);  // [M, d]
  Tensor y_out;  // [M, d]: each received pair through its expert, with weight 1
  if (M == 0) {
    // Still connected to `received`, so that this rank joins the backward exchange, and to the expert weights, so
    // that their gradients are defined (0) on every rank.
    y_out = x_in * 0.0 + (ops::sum(w_gate) + ops::sum(w_up) + ops::sum(w_down)) * 0.0;
  } else {
    Tensor gate_in;  // [M, 1, d_g]: each pair's own gate input, shared by the local experts (one is chosen)
    if (gate_input.defined()) gate_in = received.narrow(1, d, dg).unsqueeze(1);
    y_out = ops::expert_ffn(x_in.contiguous(), index_tensor(local_experts, dev).view({M, 1}),
                            ones({M, 1}, TensorOptions{}.with_dtype(x.dtype()).with_device(dev)), w_gate, w_up, w_down,
                            r0, r1, gate_in);
  }
  // Back to the senders, weighted, summed per token: y_t = Σ_k weights[t,k] · E_{indices[t,k]}(x_t)
  const Tensor y_pairs = all_to_all(y_out, comm, recv_rows, send_rows);  // [pairs, d]
  const Tensor w_pairs = ops::index_select(weights.reshape({T * K}), 0, index_tensor(pairs, dev)).unsqueeze(1);
  return ops::index_add(zeros({T, d}, TensorOptions{}.with_dtype(x.dtype()).with_device(dev)), 0, token_index,
                        y_pairs * w_pairs);
}

}  // namespace uoe::nn
