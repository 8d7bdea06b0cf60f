// Routing analysis: per-layer accumulators over traced forwards, and the driver over a token file.
#include "analysis/routing_analysis.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "analysis/statistics.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/option_names.h"
#include "ops/ops.h"

namespace uoe::analysis {
namespace {

// Normalised entropy of non-negative weights (normalised to sum 1 first), divided by log(base).
double normalised_entropy(const std::vector<double>& w, double base) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  if (total <= 0 || base <= 1) return 0.0;
  double h = 0;
  for (double x : w)
    if (x > 0) h -= (x / total) * std::log(x / total);
  return h / std::log(base);
}

Histogram histogram(const std::vector<const std::vector<double>*>& data, double lo, double hi, int64_t bins) {
  if (!(hi > lo)) hi = lo + 1;
  Histogram h;
  for (int64_t b = 0; b <= bins; ++b) h.edges.push_back(lo + (hi - lo) * double(b) / double(bins));
  h.counts.assign(size_t(bins), 0.0);
  for (const auto* v : data)
    for (double x : *v) h.counts[size_t(std::clamp<int64_t>(int64_t((x - lo) / (hi - lo) * double(bins)), 0, bins - 1))] += 1;
  return h;
}

std::vector<double> row(const std::vector<double>& m, int64_t t, int64_t n) {
  return {m.begin() + t * n, m.begin() + (t + 1) * n};
}

// The selected experts (valid slots) of token t.
std::vector<int64_t> selected(const std::vector<int64_t>& idx, int64_t t, int64_t K) {
  std::vector<int64_t> s;
  for (int64_t k = 0; k < K; ++k)
    if (idx[size_t(t * K + k)] >= 0) s.push_back(idx[size_t(t * K + k)]);
  return s;
}

constexpr size_t kScatterPoints = 4096;
constexpr size_t kTopTokens = 8;  // tokens listed per expert

}  // namespace

LayerAccumulator::LayerAccumulator(int64_t n_experts, int64_t slots)
    : n_(n_experts),
      slots_(slots),
      count_(size_t(n_experts), 0.0),
      scores_(size_t(n_experts)),
      coselected_(size_t(n_experts * n_experts), 0.0) {
  full_.score.resize(size_t(n_));
  full_.norm.resize(size_t(n_));
  rest_.score.resize(size_t(n_));
  rest_.norm.resize(size_t(n_));
}

void LayerAccumulator::add_routing(const nn::RoutingTrace& trace, const std::vector<int64_t>& ids) {
  const int64_t T = trace.scores.size(0), K = trace.route.indices.size(1);
  UOE_CHECK(ids.empty() || int64_t(ids.size()) == T, "[analysis] ", ids.size(), " token ids for a trace of ", T, " tokens");
  UOE_CHECK(trace.scores.size(1) == n_ && K == slots_, "[analysis] trace of shape scores ", shape_str(trace.scores.shape()),
            ", indices ", shape_str(trace.route.indices.shape()), " does not match n = ", n_, ", K = ", slots_);
  const std::vector<double> s = trace.scores.to(DType::Float64).to_vector<double>();
  const std::vector<double> w = trace.route.weights.to(DType::Float64).to_vector<double>();
  const std::vector<int64_t> idx = trace.route.indices.to_vector<int64_t>();
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> sel = selected(idx, t, K);
    std::vector<double> weights;
    for (int64_t k = 0; k < K; ++k)
      if (idx[size_t(t * K + k)] >= 0) weights.push_back(w[size_t(t * K + k)]);
    for (int64_t e : sel) {
      count_[size_t(e)] += 1;
      for (int64_t f : sel) coselected_[size_t(e * n_ + f)] += 1;
    }
    if (!ids.empty()) {
      std::vector<int64_t>& c = token_experts_[ids[size_t(t)]];
      c.resize(size_t(n_ + 1), 0);
      for (int64_t e : sel) c[size_t(e)] += 1;
      c[size_t(n_)] += 1;
    }
    routed_ += double(sel.size());
    selected_sum_ += double(sel.size());
    confidence_sum_ += normalised_entropy(weights, double(K));
    std::vector<double> sorted = row(s, t, n_);
    for (int64_t i = 0; i < n_; ++i) scores_[size_t(i)].push_back(sorted[size_t(i)]);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const size_t k = sel.size();
    if (k >= 1 && k < size_t(n_)) margins_.push_back(sorted[k - 1] - sorted[k]);
  }
  tokens_ += T;
}

void LayerAccumulator::add_agreement(AgreementSums& a, const std::vector<double>& s, const std::vector<double>& ref,
                                     const std::vector<int64_t>& sel) {
  const double rho = spearman(s, ref);
  if (std::isfinite(rho)) {
    a.spearman += rho;
    a.ranked += 1;
  }
  if (!sel.empty()) {
    const double o = selection_overlap(ref, sel);
    a.overlap += o;
    a.overlap_squares += o * o;
    a.random_overlap += double(sel.size()) / double(n_);
    a.tokens += 1;
  }
  for (int64_t i = 0; i < n_; ++i) {
    a.score[size_t(i)].push_back(s[size_t(i)]);
    a.norm[size_t(i)].push_back(ref[size_t(i)]);
  }
}

void LayerAccumulator::add_activations(const nn::Ffn& ffn, const nn::RoutingTrace& trace, const std::vector<int64_t>& rows) {
  if (rows.empty()) return;
  NoGradGuard no_grad;
  const Tensor index = from_vector(rows, {int64_t(rows.size())}, TensorOptions{}.with_dtype(DType::Int64));
  const Tensor x = ops::index_select(trace.input, 0, index);                                  // [S, d]
  const std::vector<double> s = ops::index_select(trace.scores, 0, index).to(DType::Float64).to_vector<double>();
  const std::vector<int64_t> idx = ops::index_select(trace.route.indices, 0, index).to_vector<int64_t>();
  sample_inputs_.push_back(x);
  sample_weights_.push_back(ops::index_select(trace.route.weights, 0, index));
  sample_scores_.insert(sample_scores_.end(), s.begin(), s.end());
  sample_indices_.insert(sample_indices_.end(), idx.begin(), idx.end());
  const auto* uoe = dynamic_cast<const nn::UoeFfn*>(&ffn);
  const std::vector<double> full = expert_activation_norms(ffn, x, 0, -1).to(DType::Float64).to_vector<double>();  // [S, n]
  std::vector<double> rest;
  if (uoe) rest = expert_activation_norms(ffn, x, uoe->cfg.routing_neurons, -1).to(DType::Float64).to_vector<double>();
  has_rest_ = uoe != nullptr;
  const int64_t K = trace.route.indices.size(1);
  for (int64_t t = 0; t < int64_t(rows.size()); ++t) {
    const std::vector<double> st = row(s, t, n_);
    const std::vector<int64_t> sel = selected(idx, t, K);
    add_agreement(full_, st, row(full, t, n_), sel);
    if (uoe) add_agreement(rest_, st, row(rest, t, n_), sel);
    for (int64_t i = 0; i < n_ && sample_score_.size() < kScatterPoints; ++i) {
      sample_score_.push_back(st[size_t(i)]);
      sample_norm_.push_back(full[size_t(t * n_ + i)]);
      sample_expert_.push_back(i);
    }
  }
}

Agreement LayerAccumulator::summarise(const AgreementSums& a) {
  Agreement g;
  g.spearman = a.ranked > 0 ? a.spearman / double(a.ranked) : 0.0;
  g.overlap = a.tokens > 0 ? a.overlap / double(a.tokens) : 0.0;
  g.random_overlap = a.tokens > 0 ? a.random_overlap / double(a.tokens) : 0.0;
  g.tokens = a.tokens;
  if (a.tokens > 1) {
    const double m = double(a.tokens), var = (a.overlap_squares - a.overlap * a.overlap / m) / (m - 1);
    g.overlap_se = std::sqrt(std::max(0.0, var) / m);
  }
  for (size_t i = 0; i < a.score.size(); ++i) {
    const double rho = a.score[i].size() > 1 ? spearman(a.score[i], a.norm[i]) : std::nan("");
    g.spearman_expert.push_back(std::isfinite(rho) ? rho : 0.0);
  }
  return g;
}

LayerAnalysis LayerAccumulator::finish(int64_t bins) const {
  LayerAnalysis l;
  l.n_experts = n_;
  l.slots = slots_;
  for (double c : count_) l.load.push_back(routed_ > 0 ? c / routed_ : 0.0);
  l.load_entropy = normalised_entropy(count_, double(n_));
  l.confidence_entropy = tokens_ > 0 ? confidence_sum_ / double(tokens_) : 0.0;
  l.experts_per_token = tokens_ > 0 ? selected_sum_ / double(tokens_) : 0.0;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& v : scores_)
    for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  for (const auto& v : scores_) l.scores.push_back(histogram({&v}, std::isfinite(lo) ? lo : 0.0, std::isfinite(hi) ? hi : 1.0, bins));
  std::vector<double> m = margins_;
  std::sort(m.begin(), m.end());
  l.margin = histogram({&m}, 0.0, m.empty() ? 1.0 : m.back(), bins);
  l.margin_mean = m.empty() ? 0.0 : std::accumulate(m.begin(), m.end(), 0.0) / double(m.size());
  l.margin_median = m.empty() ? 0.0 : m.size() % 2 ? m[m.size() / 2] : 0.5 * (m[m.size() / 2 - 1] + m[m.size() / 2]);
  l.full = summarise(full_);
  l.has_rest = has_rest_;
  if (has_rest_) l.rest = summarise(rest_);
  l.sample_score = sample_score_;
  l.sample_norm = sample_norm_;
  l.sample_expert = sample_expert_;
  for (double c : coselected_) l.coselection.push_back(tokens_ > 0 ? c / double(tokens_) : 0.0);
  if (!token_experts_.empty()) l.top_tokens = top_tokens(token_experts_, n_, kTopTokens);
  return l;
}

LayerSample LayerAccumulator::sample() const {
  LayerSample s;
  if (sample_inputs_.empty()) return s;
  s.input = ops::cat(sample_inputs_, 0);
  s.weights = ops::cat(sample_weights_, 0);
  s.scores = sample_scores_;
  s.indices = sample_indices_;
  return s;
}

std::vector<std::vector<TopToken>> top_tokens(const std::map<int64_t, std::vector<int64_t>>& counts, int64_t n,
                                              size_t count) {
  std::vector<std::vector<TopToken>> top(static_cast<size_t>(n));
  for (const auto& [id, c] : counts)
    for (int64_t e = 0; e < n; ++e)
      if (c[size_t(e)] > 0) top[size_t(e)].push_back({id, "", c[size_t(e)], double(c[size_t(e)]) / double(c[size_t(n)])});
  for (auto& list : top) {
    // count × share, then the count, then the lower id: a total order
    std::sort(list.begin(), list.end(), [](const TopToken& a, const TopToken& b) {
      const double ka = double(a.count) * a.share, kb = double(b.count) * b.share;
      return ka != kb ? ka > kb : a.count != b.count ? a.count > b.count : a.id < b.id;
    });
    if (list.size() > count) list.resize(count);
  }
  return top;
}

namespace {

// Reads `count` ids from position `start` on, wrapping around the end of the file.
std::vector<int64_t> read_wrapped(const nn::TokenFile& file, int64_t start, int64_t count) {
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t done = 0; done < count;) {
    const int64_t pos = (start + done) % file.size(), n = std::min(count - done, file.size() - pos);
    file.read(pos, n, out.data() + done);
    done += n;
  }
  return out;
}

// Windows [start + w·seq, start + w·seq + seq + shift) for w in [first, first + rows): [rows, seq] int64
Tensor windows(const nn::TokenFile& file, int64_t start, int64_t first, int64_t rows, int64_t seq, int64_t shift) {
  std::vector<int64_t> ids;
  for (int64_t w = first; w < first + rows; ++w) {
    const std::vector<int64_t> win = read_wrapped(file, start + w * seq + shift, seq);
    ids.insert(ids.end(), win.begin(), win.end());
  }
  return from_vector(ids, {rows, seq}, TensorOptions{}.with_dtype(DType::Int64));
}

}  // namespace

AnalysisResult analyze(nn::LanguageModel& model, const nn::TokenFile& data, int64_t val_begin,
                       const nn::Tokenizer& tokenizer, const AnalysisOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const nn::ModelConfig& c = model.config;
  UOE_CHECK(c.ffn.kind != nn::FfnKind::Dense, "[analyze] the model has a dense FFN: there is no routing to analyse");
  const std::string seq_name = option_name("AnalysisOptions::seq");
  const std::string tokens_name = option_name("AnalysisOptions::tokens");
  UOE_CHECK(o.seq >= 0, "[analyze] ", seq_name, " ", o.seq, " must be >= 1 (or 0: the model context)");
  const int64_t seq = o.seq > 0 ? o.seq : c.context;
  UOE_CHECK(seq <= c.context, "[analyze] ", seq_name, " ", seq, " exceeds the model context ", c.context);
  UOE_CHECK(o.tokens >= seq, "[analyze] ", tokens_name, " ", o.tokens, " is less than one window of ", seq_name, " ",
            seq);
  UOE_CHECK(o.batch > 0 && o.gradient_windows > 0 && o.activation_tokens > 0, "[analyze] ",
            option_name("AnalysisOptions::batch"), ", ", option_name("AnalysisOptions::gradient_windows"), " and ",
            option_name("AnalysisOptions::activation_tokens"), " must be >= 1, got ", o.batch, ", ",
            o.gradient_windows, " and ", o.activation_tokens);
  UOE_CHECK(data.size() > seq, "[analyze] ", data.name(), " has ", data.size(), " tokens: fewer than one window of ", seq + 1);
  // More would analyse the same tokens again (the windows wrap around the file), for as long as it is told to.
  UOE_CHECK(o.tokens <= data.size(), "[analyze] ", tokens_name, " ", o.tokens, " is more than the ", data.size(),
            " tokens of ", data.name());
  UOE_CHECK(data.vocab_size() <= c.vocab_size, "[analyze] ", data.path(), " has vocabulary ", data.vocab_size(),
            " but the model's is ", c.vocab_size);
  const int64_t n = c.ffn.n_experts, K = c.ffn.routing == nn::Routing::TopP ? n : c.ffn.top_k;
  const int64_t n_windows = o.tokens / seq, total = n_windows * seq;
  const int64_t stride = std::max<int64_t>(1, total / std::max<int64_t>(1, o.activation_tokens));

  std::vector<LayerAccumulator> acc(size_t(c.n_layers), LayerAccumulator(n, K));
  AnalysisResult result;
  result.config = c;
  result.tokens = total;
  std::vector<std::vector<int64_t>> example(size_t(c.n_layers));
  const bool was_training = model.is_training();
  model.eval();
  for (auto& b : model.blocks) b->ffn->record = true;
  {
    NoGradGuard no_grad;
    for (int64_t w0 = 0; w0 < n_windows; w0 += o.batch) {
      const int64_t rows = std::min(o.batch, n_windows - w0), first_token = w0 * seq;
      const Tensor batch = windows(data, val_begin, w0, rows, seq, 0);  // [rows, seq]
      const std::vector<int64_t> ids = batch.to_vector<int64_t>();
      model.forward(batch);
      std::vector<int64_t> sampled;  // rows of this batch's [rows·seq] tokens picked for the activation study
      for (int64_t t = (stride - first_token % stride) % stride; t < rows * seq; t += stride)
        if ((first_token + t) / stride < o.activation_tokens) sampled.push_back(t);
      for (size_t l = 0; l < model.blocks.size(); ++l) {
        const nn::Ffn& ffn = *model.blocks[l]->ffn;
        acc[l].add_routing(ffn.trace, ids);
        acc[l].add_activations(ffn, ffn.trace, sampled);
        const std::vector<int64_t> top = ffn.trace.route.indices.select(1, 0).to_vector<int64_t>();
        for (int64_t t = 0; t < rows * seq && int64_t(example[l].size()) < o.example_tokens; ++t) example[l].push_back(top[size_t(t)]);
      }
      if (o.on_batch) o.on_batch(w0 + rows, n_windows);
    }
  }
  for (auto& b : model.blocks) b->ffn->record = false;
  for (size_t l = 0; l < acc.size(); ++l) {
    LayerAnalysis la = acc[l].finish(o.bins);
    la.example_expert = example[l];
    for (auto& list : la.top_tokens)
      for (TopToken& t : list) t.text = tokenizer.decode({int32_t(t.id)});
    const LayerSample sample = acc[l].sample();
    la.has_neurons = sample.tokens() >= 2;  // the scan picks neurons on one half and tests them on the other
    if (la.has_neurons) la.neurons = analyze_neurons(*model.blocks[l]->ffn, sample);
    result.layers.push_back(std::move(la));
  }
  const std::vector<int64_t> shown = read_wrapped(data, val_begin, std::min(o.example_tokens, total));
  for (int64_t id : shown) result.example_pieces.push_back(tokenizer.decode({int32_t(id)}));

  if (c.ffn.kind == nn::FfnKind::UoE) {
    const int64_t rows = std::min(o.gradient_windows, n_windows);
    const Tensor ids = windows(data, val_begin, 0, rows, seq, 0), targets = windows(data, val_begin, 0, rows, seq, 1);
    const std::vector<RoutingGradientSplit> splits = routing_gradient_paths(model, ids, targets);
    for (size_t l = 0; l < splits.size(); ++l) {
      LayerAnalysis& la = result.layers[l];
      la.has_gradient_paths = true;
      la.gradient = path_norms(splits[l]);
      la.neuron_gradient = path_norms(splits[l], true);
      for (int64_t i = 0; i < n && c.ffn.combine == nn::Combine::Vse; ++i)
        if (la.gradient.full[size_t(i)] > 0)
          la.gradient_split_error = std::max(la.gradient_split_error, la.gradient.rest[size_t(i)] / la.gradient.full[size_t(i)]);
    }
    result.gradient_tokens = rows * seq;
    model.zero_grad();
  }
  model.train(was_training);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace uoe::analysis
