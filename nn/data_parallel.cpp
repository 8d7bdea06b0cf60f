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
    int64_t flag = 0;    // its element of the bucket's flags
    bool filled = false;
    bool had_gradient = false;  // on this rank, in this step
  };
  struct Bucket {
    // [Σ numel + slots]: its parameters' gradients in slot order, then one flag per slot: > 0 after the all-reduce
    // iff some rank had a gradient for it (a parameter that none had keeps no gradient, as in one process, so
    // that the optimiser skips it instead of decaying it with a zero gradient)
    Tensor flat;
    Tensor flags;                // the flags' part of flat
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
    s.filled = s.had_gradient = true;
    if (--buckets[s.bucket].pending == 0) start_ready();
    poll();
  }

  // Starts, in order, every bucket whose gradients are all in.
  void start_ready() {
    while (next < buckets.size() && buckets[next].pending == 0) start(next++);
  }

  void start(size_t b) {
    Bucket& bucket = buckets[b];
    bucket.flags.fill_(1.0);
    for (size_t i : bucket.slots)  // no gradient in this backward: what earlier micro-batches accumulated, or 0
      if (!slots[i].filled) {
        const Tensor old = slots[i].param.grad();
        slots[i].had_gradient = old.defined();
        if (old.defined()) {
          view(slots[i]).copy_(old);
        } else {
          view(slots[i]).zero_();
          bucket.flags.narrow(0, slots[i].flag, 1).zero_();
        }
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
    st.slots.push_back({it->first, p, st.buckets.size() - 1, elems, int64_t(st.buckets.back().slots.size()) - 1});
    elems += p.numel();
  }
  for (auto& b : st.buckets) {
    const State::Slot& last = st.slots[b.slots.back()];
    const int64_t elements = last.offset + last.param.numel();
    b.flat = zeros({elements + int64_t(b.slots.size())},
                   TensorOptions{}.with_dtype(reduction_dtype(last.param.dtype())).with_device(last.param.device()));
    b.flags = b.flat.narrow(0, elements, int64_t(b.slots.size()));
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
  for (auto& s : st.slots) s.filled = s.had_gradient = false;
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
  // Whether some rank had each gradient this rank lacked (read only then: no host synchronisation otherwise).
  std::vector<std::vector<double>> flags(st.buckets.size());
  for (auto& s : st.slots) {
    if (!s.had_gradient && flags[s.bucket].empty()) flags[s.bucket] = st.buckets[s.bucket].flags.to_vector<double>();
    const bool some_rank_had_it = s.had_gradient || flags[s.bucket][size_t(s.flag)] > 0;
    s.param.set_grad(some_rank_had_it ? st.view(s).to(s.param.dtype()) : Tensor());  // a copy for bf16 parameters
  }
  st.armed = false;
}

int64_t DataParallel::bucket_count() const { return int64_t(state_->buckets.size()); }

}  // namespace uoe::nn
