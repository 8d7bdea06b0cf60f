// Data parallel gradient averaging: buckets filled by leaf hooks during backward, all-reduced without blocking in
// bucket order, then handed back as the parameters' .grad.
#include "nn/data_parallel.h"

#include "core/collective_checks.h"
#include "core/error.h"

namespace uoe::nn {

RowRange rank_rows(int64_t batch, int rank, int size) {
  const int64_t begin = batch * rank / size, end = batch * (rank + 1) / size;
  return {begin, end - begin};
}

struct DataParallel::State {
  struct Slot {
    std::string name;
    Tensor param;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket, in elements
    bool filled = false;
  };
  struct Bucket {
    Tensor flat;                 // [Σ numel] of its parameters, in slot order
    std::vector<size_t> slots;
    size_t pending = 0;          // slots not filled yet in this backward
    std::unique_ptr<Work> work;  // the running all-reduce
  };

  State(Communicator& c, double w) : comm(c), weight(w) {}

  // The slot of parameter i: a view of its bucket shaped like the parameter.
  Tensor view(const Slot& s) const {
    return buckets[s.bucket].flat.narrow(0, s.offset, s.param.numel()).view(s.param.shape());
  }

  // The hook: g is parameter i's incoming gradient of this backward (the engine has summed every path).
  void on_gradient(size_t i, const Tensor& g) {
    if (!armed) return;
    Slot& s = slots[i];
    UOE_CHECK(!s.filled, collective::where(comm, "data_parallel"), "the gradient of '", s.name,
              "' arrived twice in one backward; each parameter must receive its gradient once per backward");
    Tensor dst = view(s);
    const Tensor old = s.param.grad();
    dst.copy_(old.defined() ? old : g);
    if (old.defined()) dst.add_(g);
    s.filled = true;
    if (--buckets[s.bucket].pending == 0) start_ready();
    poll();
  }

  // Starts, in order, every bucket whose gradients are all in.
  void start_ready() {
    while (next < buckets.size() && buckets[next].pending == 0) start(next++);
  }

  void start(size_t b) {
    Bucket& bucket = buckets[b];
    for (size_t i : bucket.slots)  // no gradient in this backward: what earlier micro-batches accumulated, or 0
      if (!slots[i].filled) {
        const Tensor old = slots[i].param.grad();
        if (old.defined()) view(slots[i]).copy_(old);
        else view(slots[i]).zero_();
      }
    bucket.flat.mul_(weight);
    bucket.work = comm.all_reduce_async(bucket.flat);
  }

  // Drives the running all-reduces forward (MPI progresses non-blocking collectives inside its calls).
  void poll() {
    for (size_t b = 0; b < next; ++b)
      if (!buckets[b].work->test()) return;
  }

  Communicator& comm;
  double weight;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  bool armed = false;
  size_t next = 0;  // the next bucket to start
};

DataParallel::DataParallel(const NamedTensors& params, Communicator& comm, double weight, int64_t bucket_bytes)
    : state_(std::make_shared<State>(comm, weight)) {
  State& st = *state_;
  for (const auto& [name, p] : params) comm.broadcast(p, 0);
  // Buckets in reverse registration order, each of one dtype and device, of at most bucket_bytes (or one parameter).
  int64_t elems = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& p = it->second;
    UOE_CHECK(p.requires_grad() && p.is_contiguous(), collective::where(comm, "data_parallel"), "parameter '",
              it->first, "' must be a contiguous tensor that requires grad");
    const Tensor* prev = st.buckets.empty() ? nullptr : &st.slots[st.buckets.back().slots.back()].param;
    const bool fits = prev && reduction_dtype(prev->dtype()) == reduction_dtype(p.dtype()) &&
                      prev->device() == p.device() &&
                      (elems + p.numel()) * int64_t(dtype_size(reduction_dtype(p.dtype()))) <= bucket_bytes;
    if (!fits) {
      st.buckets.emplace_back();
      elems = 0;
    }
    st.buckets.back().slots.push_back(st.slots.size());
    st.slots.push_back({it->first, p, st.buckets.size() - 1, elems});
    elems += p.numel();
  }
  for (auto& b : st.buckets) {
    const State::Slot& last = st.slots[b.slots.back()];
    b.flat = zeros({last.offset + last.param.numel()},
                   TensorOptions{}.with_dtype(reduction_dtype(last.param.dtype())).with_device(last.param.device()));
  }
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < st.slots.size(); ++i)
    st.slots[i].param.register_hook([weak, i](const Tensor& g) {
      if (auto s = weak.lock()) s->on_gradient(i, g);
      return Tensor();
    });
}

void DataParallel::reduce_next_backward() {
  State& st = *state_;
  UOE_CHECK(!st.armed, collective::where(st.comm, "data_parallel"),
            "reduce_next_backward() was called again before finish()");
  for (auto& s : st.slots) s.filled = false;
  for (auto& b : st.buckets) b.pending = b.slots.size();
  st.next = 0;
  st.armed = true;
}

void DataParallel::finish() {
  State& st = *state_;
  UOE_CHECK(st.armed, collective::where(st.comm, "data_parallel"), "finish() without reduce_next_backward() first");
  while (st.next < st.buckets.size()) st.start(st.next++);
  for (auto& b : st.buckets) {
    b.work->wait();
    b.work.reset();
  }
  for (auto& s : st.slots) s.param.set_grad(st.view(s).to(s.param.dtype()));  // a copy for bfloat16 parameters
  st.armed = false;
}

int64_t DataParallel::bucket_count() const { return int64_t(state_->buckets.size()); }

}  // namespace uoe::nn
