// Neuron-level analysis of an expert layer: routing-neuron statistics (UoE), the neuron scan (every expert kind)
// and the shared part's share of the layer output.
#include "analysis/neuron_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "analysis/expert_activations.h"
#include "analysis/statistics.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/ops.h"

namespace uoe::analysis {
namespace {

const TensorOptions kInt64 = TensorOptions{}.with_dtype(DType::Int64);

std::vector<double> host(const Tensor& t) { return t.to(DType::Float64).to_vector<double>(); }

// 1 where token t selected expert e: [S·n]
std::vector<uint8_t> selection(const LayerSample& s, int64_t n) {
  const int64_t S = s.tokens(), K = S > 0 ? int64_t(s.indices.size()) / S : 0;
  std::vector<uint8_t> sel(size_t(S * n), 0);
  for (int64_t t = 0; t < S; ++t)
    for (int64_t k = 0; k < K; ++k)
      if (const int64_t e = s.indices[size_t(t * K + k)]; e >= 0) sel[size_t(t * n + e)] = 1;
  return sel;
}

// Column c of a row-major [rows, cols] matrix, on the rows `rows`; |values| with `absolute`.
template <typename V>
std::vector<double> column(const std::vector<V>& m, int64_t cols, int64_t c, const std::vector<int64_t>& rows,
                           bool absolute = false) {
  std::vector<double> out;
  out.reserve(rows.size());
  for (int64_t t : rows) {
    const double v = double(m[size_t(t * cols + c)]);
    out.push_back(absolute ? std::abs(v) : v);
  }
  return out;
}

std::vector<int64_t> range(int64_t first, int64_t end, int64_t step) {
  std::vector<int64_t> v;
  for (int64_t i = first; i < end; i += step) v.push_back(i);
  return v;
}

RoutingNeuronStats routing_neuron_stats(const nn::UoeFfn& f, const LayerSample& s, const std::vector<uint8_t>& sel) {
  NoGradGuard no_grad;
  const int64_t n = f.cfg.n_experts, r = f.cfg.routing_neurons, S = s.tokens();
  const nn::RoutingActivations a = nn::routing_activations(s.input, f.w.gate, f.w.up, r, f.cfg.score);
  const std::vector<double> g = host(a.g), h = host(a.h);  // [S, n·r]
  const std::vector<int64_t> all = range(0, S, 1);
  RoutingNeuronStats st;
  for (int64_t e = 0; e < n; ++e) {
    const std::vector<double> selected = column(sel, n, e, all);
    for (int64_t j = 0; j < r; ++j) {
      const std::vector<double> gate = column(g, n * r, e * r + j, all), act = column(h, n * r, e * r + j, all, true);
      st.rate.push_back(double(std::count_if(gate.begin(), gate.end(), [](double v) { return v > 0; })) / double(S));
      st.mean_abs.push_back(std::accumulate(act.begin(), act.end(), 0.0) / double(S));
      st.corr.push_back(pearson(act, selected));
    }
  }
  return st;
}

// The r neurons of |act| ([S, D]) most correlated with `selected` on the rows `pick`, best first (NaN last, ties:
// lower index first).
std::vector<int64_t> best_neurons(const std::vector<double>& act, int64_t D, const std::vector<double>& selected,
                                  const std::vector<int64_t>& pick, int64_t r) {
  std::vector<double> corr;
  for (int64_t j = 0; j < D; ++j) {
    const double c = pearson(column(act, D, j, pick), selected);
    corr.push_back(std::isfinite(c) ? c : -std::numeric_limits<double>::infinity());
  }
  std::vector<int64_t> order = range(0, D, 1);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return corr[size_t(a)] > corr[size_t(b)]; });
  return {order.begin(), order.begin() + r};
}

// Per row of `rows`: the norm of act[row, neurons] ([S, D] row-major).
std::vector<double> norms(const std::vector<double>& act, int64_t D, const std::vector<int64_t>& neurons,
                          const std::vector<int64_t>& rows) {
  std::vector<double> out;
  for (int64_t t : rows) {
    double sum = 0;
    for (int64_t j : neurons) sum += act[size_t(t * D + j)] * act[size_t(t * D + j)];
    out.push_back(std::sqrt(sum));
  }
  return out;
}

// Mean over the tokens of `test` of the overlap between their selected experts and the top ones by `by` ([tokens][n]).
double mean_overlap(const std::vector<std::vector<double>>& by, const LayerSample& s, const std::vector<int64_t>& test,
                    int64_t n, double* random) {
  const int64_t K = int64_t(s.indices.size()) / s.tokens();
  double sum = 0, chance = 0, counted = 0;
  for (size_t i = 0; i < test.size(); ++i) {
    std::vector<int64_t> sel;
    for (int64_t k = 0; k < K; ++k)
      if (const int64_t e = s.indices[size_t(test[i] * K + k)]; e >= 0) sel.push_back(e);
    if (sel.empty()) continue;
    sum += selection_overlap(by[i], sel);
    chance += double(sel.size()) / double(n);
    counted += 1;
  }
  if (random) *random = counted > 0 ? chance / counted : 0.0;
  return counted > 0 ? sum / counted : 0.0;
}

NeuronScan neuron_scan(const nn::Ffn& ffn, const LayerSample& s, int64_t n, int64_t r, const std::vector<uint8_t>& sel) {
  const int64_t S = s.tokens();
  const std::vector<int64_t> pick = range(0, S, 2), test = range(1, S, 2);
  NeuronScan scan;
  scan.r = r;
  scan.pick_tokens = int64_t(pick.size());
  scan.test_tokens = int64_t(test.size());
  std::vector<std::vector<double>> by_best(test.size(), std::vector<double>(size_t(n))), by_first = by_best;
  for (int64_t e = 0; e < n; ++e) {
    const Tensor h = expert_activations(ffn, s.input, e);  // [S, D]
    const int64_t D = h.size(1);
    std::vector<double> act = host(h);
    for (double& v : act) v = std::abs(v);
    const std::vector<int64_t> first = range(0, std::min(r, D), 1), all = range(0, D, 1);
    const std::vector<int64_t> best = best_neurons(act, D, column(sel, n, e, pick), pick, std::min(r, D));
    const std::vector<uint8_t> outcome = [&] {
      std::vector<uint8_t> o;
      for (int64_t t : test) o.push_back(sel[size_t(t * n + e)]);
      return o;
    }();
    const std::vector<double> best_norm = norms(act, D, best, test), first_norm = norms(act, D, first, test);
    scan.auc_best.push_back(auc(best_norm, outcome));
    scan.auc_first.push_back(auc(first_norm, outcome));
    scan.auc_all.push_back(auc(norms(act, D, all, test), outcome));
    scan.auc_score.push_back(auc(column(s.scores, n, e, test), outcome));
    scan.best.push_back(best);
    for (size_t i = 0; i < test.size(); ++i) {
      by_best[i][size_t(e)] = best_norm[i];
      by_first[i][size_t(e)] = first_norm[i];
    }
  }
  scan.overlap_best = mean_overlap(by_best, s, test, n, &scan.random_overlap);
  scan.overlap_first = mean_overlap(by_first, s, test, n, nullptr);
  return scan;
}

// Mean over tokens of ‖shared‖ / (‖shared‖ + ‖routed‖) for outputs [S, d].
double share_of(const Tensor& shared, const Tensor& routed) {
  const std::vector<double> a = host(ops::sqrt(ops::sum(shared * shared, {1})));
  const std::vector<double> b = host(ops::sqrt(ops::sum(routed * routed, {1})));
  double sum = 0;
  for (size_t t = 0; t < a.size(); ++t) sum += a[t] + b[t] > 0 ? a[t] / (a[t] + b[t]) : 0.0;
  return a.empty() ? 0.0 : sum / double(a.size());
}

// UoE: the virtual shared expert (the unselected experts' routing parts with combine = full_expert) against the
// selected experts' part; MoE: the shared expert against the routed experts. False for AoE or no shared expert.
bool shared_share(const nn::Ffn& ffn, const LayerSample& s, const std::vector<uint8_t>& sel, double* share) {
  NoGradGuard no_grad;
  const int64_t S = s.tokens(), K = int64_t(s.indices.size()) / S;
  const Tensor idx = from_vector(s.indices, {S, K}, kInt64);
  if (const auto* u = dynamic_cast<const nn::UoeFfn*>(&ffn)) {
    const int64_t n = u->cfg.n_experts, r = u->cfg.routing_neurons, D = u->cfg.expert_width, d = s.input.size(1);
    const bool vse = u->cfg.combine == nn::Combine::Vse;
    Tensor h = nn::routing_activations(s.input, u->w.gate, u->w.up, r, u->cfg.score).h;  // [S, n·r]
    if (!vse) {  // only the unselected experts' routing parts form the shared part
      std::vector<double> keep(size_t(S * n * r));
      for (size_t i = 0; i < keep.size(); ++i) keep[i] = sel[i / size_t(r)] ? 0.0 : 1.0;
      h = h * from_vector(keep, {S, n * r}, TensorOptions{}.with_dtype(h.dtype()));
    }
    const Tensor y_shared = ops::matmul(h, u->w.down.narrow(1, 0, r).reshape({n * r, d}).to(h.dtype()));
    const Tensor y_routed = ops::expert_ffn(s.input, idx, s.weights.to(s.input.dtype()), u->w.gate, u->w.up, u->w.down,
                                            vse ? r : 0, D);
    *share = share_of(y_shared, y_routed);
    return true;
  }
  if (const auto* m = dynamic_cast<const nn::MoeFfn*>(&ffn); m && m->shared) {
    const Tensor y_routed = ops::expert_ffn(s.input, idx, s.weights.to(s.input.dtype()), m->w.gate, m->w.up, m->w.down,
                                            0, m->cfg.expert_width);
    *share = share_of(m->shared->forward(s.input), y_routed);
    return true;
  }
  return false;
}

}  // namespace

NeuronAnalysis analyze_neurons(const nn::Ffn& ffn, const LayerSample& s) {
  UOE_CHECK(s.tokens() >= 2, "[analyze_neurons] the sample has ", s.tokens(), " tokens: the neuron scan needs two");
  const int64_t n = int64_t(s.scores.size()) / s.tokens();
  const std::vector<uint8_t> sel = selection(s, n);
  NeuronAnalysis out;
  const auto* uoe = dynamic_cast<const nn::UoeFfn*>(&ffn);
  const nn::FfnConfig* cfg = uoe ? &uoe->cfg : nullptr;
  if (const auto* m = dynamic_cast<const nn::MoeFfn*>(&ffn)) cfg = &m->cfg;
  if (const auto* a = dynamic_cast<const nn::AoeFfn*>(&ffn)) cfg = &a->cfg;
  UOE_CHECK(cfg, "[analyze_neurons] the layer has no experts (dense FFN)");
  // the scan's r: the routing neurons of UoE, the same default round(D / n) for the other kinds
  const int64_t r = cfg->routing_neurons > 0 ? cfg->routing_neurons
                                             : std::max<int64_t>(1, std::llround(double(cfg->expert_width) / double(n)));
  if (uoe) {
    out.has_routing_neurons = true;
    out.routing = routing_neuron_stats(*uoe, s, sel);
  }
  out.scan = neuron_scan(ffn, s, n, r, sel);
  out.has_shared = shared_share(ffn, s, sel, &out.shared_share);
  return out;
}

}  // namespace uoe::analysis
