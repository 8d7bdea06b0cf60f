// Model configuration: JSON round trip with field-naming errors, derived defaults, presets.
#include "nn/config.h"

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <set>

#include "core/error.h"

namespace uoe::nn {

namespace {

// The JSON names of each enum's values, in the enum's order.
constexpr const char* kKindNames[] = {"dense", "moe", "aoe", "uoe"};
constexpr const char* kScoreNames[] = {"swiglu", "gate_silu", "gate"};
constexpr const char* kWeightsNames[] = {"topk_softmax", "full_softmax"};
constexpr const char* kCombineNames[] = {"vse", "full_expert"};
constexpr const char* kRoutingNames[] = {"topk", "topp"};

template <size_t N>
std::string name_list(const char* const (&names)[N]) {
  std::string list;
  for (const char* name : names) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

}  // namespace

const char* ffn_kind_name(FfnKind k) { return kKindNames[int(k)]; }
const char* switch_name(ScoreSource s) { return kScoreNames[int(s)]; }
const char* switch_name(ops::RouteWeights w) { return kWeightsNames[int(w)]; }
const char* switch_name(Combine c) { return kCombineNames[int(c)]; }
const char* switch_name(Routing r) { return kRoutingNames[int(r)]; }

json::Value to_json(const ModelConfig& c) {
  json::Value f = json::Value::object();
  f["kind"] = ffn_kind_name(c.ffn.kind);
  f["hidden"] = c.ffn.hidden;
  f["n_experts"] = c.ffn.n_experts;
  f["top_k"] = c.ffn.top_k;
  f["expert_width"] = c.ffn.expert_width;
  f["shared_width"] = c.ffn.shared_width;
  f["routing_neurons"] = c.ffn.routing_neurons;
  f["d_low"] = c.ffn.d_low;
  f["score"] = switch_name(c.ffn.score);
  f["weights"] = switch_name(c.ffn.weights);
  f["combine"] = switch_name(c.ffn.combine);
  f["routing"] = switch_name(c.ffn.routing);
  f["top_p"] = c.ffn.top_p;
  f["aux_loss"] = c.ffn.aux_loss;
  f["z_loss"] = c.ffn.z_loss;
  json::Value v = json::Value::object();
  v["name"] = c.name;
  v["vocab_size"] = c.vocab_size;
  v["d_model"] = c.d_model;
  v["n_layers"] = c.n_layers;
  v["n_heads"] = c.n_heads;
  v["n_kv_heads"] = c.n_kv_heads;
  v["context"] = c.context;
  v["rope_base"] = c.rope_base;
  v["norm_eps"] = c.norm_eps;
  v["tied_embeddings"] = c.tied_embeddings;
  v["ffn"] = f;
  return v;
}

namespace {

void check_keys(const json::Value& v, const std::set<std::string>& known, const std::string& where) {
  UOE_CHECK(v.is_object(), "[config] ", where, " must be a JSON object");
  for (const auto& [key, value] : v.items())
    UOE_CHECK(known.count(key), "[config] ", where, ": unknown field '", key, "'");
}

// ffn.`field` of `f` as an enum value (`fallback` when missing): its name must be one of `names` (the enum's order).
template <class E, size_t N>
E parse_choice(const json::Value& f, const char* field, const char* const (&names)[N], E fallback,
               const std::string& source) {
  const std::string value = f.get(field, std::string(names[int(fallback)]));
  for (size_t i = 0; i < N; ++i)
    if (value == names[i]) return E(i);
  fail("[config] ", source, ": ffn.", field, " is '", value, "', expected one of ", name_list(names));
}

}  // namespace

namespace {

// Every field's value as JSON gives it (missing fields keep their defaults).
ModelConfig parse_fields(const json::Value& v, const std::string& source) {
  check_keys(v, {"name", "vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "context", "rope_base",
                 "norm_eps", "tied_embeddings", "ffn"},
             source);
  ModelConfig c;
  c.name = v.get("name", c.name);
  c.vocab_size = v.get("vocab_size", c.vocab_size);
  c.d_model = v.get("d_model", c.d_model);
  c.n_layers = v.get("n_layers", c.n_layers);
  c.n_heads = v.get("n_heads", c.n_heads);
  c.n_kv_heads = v.get("n_kv_heads", c.n_heads);
  c.context = v.get("context", c.context);
  c.rope_base = v.get("rope_base", c.rope_base);
  c.norm_eps = v.get("norm_eps", c.norm_eps);
  c.tied_embeddings = v.get("tied_embeddings", c.tied_embeddings);
  if (v.contains("ffn")) {
    const json::Value& f = v.at("ffn");
    check_keys(f, {"kind", "hidden", "n_experts", "top_k", "expert_width", "shared_width", "routing_neurons", "d_low",
                   "score", "weights", "combine", "routing", "top_p", "aux_loss", "z_loss"},
               source + " ffn");
    FfnConfig& o = c.ffn;
    o.kind = parse_choice(f, "kind", kKindNames, o.kind, source);
    o.hidden = f.get("hidden", o.hidden);
    o.n_experts = f.get("n_experts", o.n_experts);
    o.top_k = f.get("top_k", o.top_k);
    o.expert_width = f.get("expert_width", o.expert_width);
    o.shared_width = f.get("shared_width", o.shared_width);
    o.routing_neurons = f.get("routing_neurons", o.routing_neurons);
    o.d_low = f.get("d_low", o.d_low);
    o.score = parse_choice(f, "score", kScoreNames, o.score, source);
    o.weights = parse_choice(f, "weights", kWeightsNames, o.weights, source);
    o.combine = parse_choice(f, "combine", kCombineNames, o.combine, source);
    o.routing = parse_choice(f, "routing", kRoutingNames, o.routing, source);
    o.top_p = f.get("top_p", o.top_p);
    o.aux_loss = f.get("aux_loss", o.aux_loss);
    o.z_loss = f.get("z_loss", o.z_loss);
  }
  return c;
}

// `field` lies in [lo, hi], else one error naming the source, the field and its bounds.
void check_range(const std::string& source, const char* field, int64_t value, int64_t lo, int64_t hi) {
  UOE_CHECK(value >= lo && value <= hi, "[config] ", source, ": ", field, " is ", value, ", expected ", lo, " to ",
            hi);
}

// A switch that the FFN kind ignores keeps its default (its first value): a choice that would change nothing is
// refused.
template <class E>
void check_switch_used(const std::string& source, const FfnConfig& f, const char* field, E value,
                       std::initializer_list<FfnKind> users) {
  if (value == E(0) || std::find(users.begin(), users.end(), f.kind) != users.end()) return;
  std::string kinds;
  for (FfnKind k : users) kinds += (kinds.empty() ? "" : ", ") + std::string(ffn_kind_name(k));
  fail("[config] ", source, ": ffn.", field, " is '", switch_name(value), "', but ffn.kind ", ffn_kind_name(f.kind),
       " ignores it (only ", kinds, " use it): leave it out or set '", switch_name(E(0)), "'");
}

void check_weight(const std::string& source, const char* field, double value) {
  UOE_CHECK(std::isfinite(value) && value >= 0, "[config] ", source, ": ", field, " is ", value,
            ", expected a finite number >= 0");
}

}  // namespace

void check_model_config(const ModelConfig& c, const std::string& source) {
  // The bounds come before anything is built (a model of 10^9 layers would be allocated layer after layer); they
  // hold every preset (3b: vocab 50304, d 1536, 12 layers, context 2048, 64 experts) with room for research
  // configurations many times larger.
  check_range(source, "vocab_size", c.vocab_size, 1, kMaxVocab);
  check_range(source, "d_model", c.d_model, 2, kMaxWidth);
  check_range(source, "n_layers", c.n_layers, 1, kMaxLayers);
  check_range(source, "context", c.context, 1, kMaxContext);
  check_range(source, "n_heads", c.n_heads, 1, c.d_model / 2);
  UOE_CHECK(c.d_model % c.n_heads == 0 && (c.d_model / c.n_heads) % 2 == 0, "[config] ", source, ": d_model ",
            c.d_model, " must split into n_heads ", c.n_heads, " heads of even width");
  UOE_CHECK(c.n_kv_heads > 0 && c.n_heads % c.n_kv_heads == 0, "[config] ", source, ": n_heads ", c.n_heads,
            " must be a multiple of n_kv_heads ", c.n_kv_heads);
  UOE_CHECK(std::isfinite(c.rope_base) && c.rope_base > 0, "[config] ", source, ": rope_base is ", c.rope_base,
            ", expected a finite number > 0");
  UOE_CHECK(std::isfinite(c.norm_eps) && c.norm_eps > 0, "[config] ", source, ": norm_eps is ", c.norm_eps,
            ", expected a finite number > 0");
  const FfnConfig& f = c.ffn;
  check_switch_used(source, f, "score", f.score, {FfnKind::UoE});
  check_switch_used(source, f, "weights", f.weights, {FfnKind::AoE, FfnKind::UoE});
  check_switch_used(source, f, "combine", f.combine, {FfnKind::UoE});
  check_switch_used(source, f, "routing", f.routing, {FfnKind::UoE});
  const bool dense = f.kind == FfnKind::Dense;
  check_range(source, "ffn.hidden", f.hidden, dense ? 1 : 0, kMaxWidth * 16);
  check_range(source, "ffn.n_experts", f.n_experts, 1, kMaxExperts);
  if (!dense) check_range(source, "ffn.top_k", f.top_k, 1, f.n_experts);
  check_range(source, "ffn.expert_width", f.expert_width, dense ? 0 : 1, kMaxWidth * 16);
  check_range(source, "ffn.shared_width", f.shared_width, 0, kMaxWidth * 16);
  // 0: derived (routing_neurons round(D / n), d_low round(d / 3))
  if (f.kind == FfnKind::UoE)
    check_range(source, "ffn.routing_neurons (0: expert_width / n_experts)", f.routing_neurons, 0,
                f.expert_width - 1);
  check_range(source, "ffn.d_low (0: d_model / 3)", f.d_low, 0, c.d_model);
  UOE_CHECK(f.top_p > 0 && f.top_p <= 1, "[config] ", source, ": ffn.top_p is ", f.top_p, ", expected (0, 1]");
  check_weight(source, "ffn.aux_loss", f.aux_loss);
  check_weight(source, "ffn.z_loss", f.z_loss);
}

ModelConfig model_config_from_json(const json::Value& v, const std::string& source) {
  ModelConfig c;
  try {
    c = parse_fields(v, source);
  } catch (const Error& e) {  // a value of the wrong type: the json error names the key, this the file
    const std::string what = e.what();
    if (what.rfind("[config]", 0) == 0) throw;
    fail("[config] ", source, ": ", what);
  }
  check_model_config(c, source);
  resolve_defaults(c);
  UOE_CHECK(c.ffn.kind != FfnKind::UoE || c.ffn.routing_neurons < c.ffn.expert_width, "[config] ", source,
            ": ffn.routing_neurons ", c.ffn.routing_neurons, " (derived: round(expert_width / n_experts)) must be "
            "smaller than expert_width ", c.ffn.expert_width);
  return c;
}

void resolve_defaults(ModelConfig& c) {
  FfnConfig& f = c.ffn;
  if (f.routing_neurons == 0) f.routing_neurons = std::max<int64_t>(1, std::llround(double(f.expert_width) / double(f.n_experts)));
  if (f.d_low == 0) f.d_low = std::max<int64_t>(1, std::llround(double(c.d_model) / 3.0));
}

namespace {

// A preset family: the Transformer and the expert geometry every kind of the family shares.
struct Family {
  const char* name;
  int64_t vocab, d, layers, heads, context, n, K, D, r;
};

// tiny: a laptop CPU in minutes. small: GPT-2-small scale (~124M active parameters with the 50304 vocabulary).
// 3b: the UoE paper group's 3B-class setup (docs/UOE.md: 12 layers, d 1536, 16 heads, 64 experts of width 768, top-8;
// r = D / n). 1b: the same recipe at d 1024 with 32 experts of width 512, top-4.
constexpr Family kFamilies[] = {
    {"tiny", 256, 256, 4, 4, 256, 8, 2, 512, 64},
    {"small", 50304, 768, 12, 12, 1024, 8, 2, 768, 96},
    {"1b", 50304, 1024, 12, 16, 2048, 32, 4, 512, 16},
    {"3b", 50304, 1536, 12, 16, 2048, 64, 8, 768, 12},
};

std::string preset_list() {
  std::string out;
  for (const Family& f : kFamilies)
    for (const char* kind : {"uoe", "moe", "aoe", "dense"}) out += std::string(out.empty() ? "" : ", ") + f.name + "-" + kind;
  return out;
}

// Dense, MoE and UoE at matched active compute: the MoE's shared expert is the UoE's virtual shared expert (n r),
// the dense FFN is as wide as UoE's active neurons. AoE keeps parameter parity with a MoE of width D; its
// low-rank routing (every token through every expert's d_low projection) makes its active compute differ.
ModelConfig family_member(const Family& fam, FfnKind kind) {
  ModelConfig c;
  c.name = std::string(fam.name) + "-" + ffn_kind_name(kind);
  c.vocab_size = fam.vocab;
  c.d_model = fam.d;
  c.n_layers = fam.layers;
  c.n_heads = fam.heads;
  c.n_kv_heads = fam.heads;
  c.context = fam.context;
  FfnConfig& f = c.ffn;
  f.kind = kind;
  f.n_experts = fam.n;
  f.top_k = fam.K;
  f.expert_width = fam.D;
  f.routing_neurons = fam.r;
  if (kind == FfnKind::MoE) f.shared_width = fam.n * fam.r;
  if (kind == FfnKind::AoE) {
    f.d_low = std::llround(double(fam.d) / 3.0);
    // parameter parity with a MoE of width D: d_wide = (3 d D - d_low d) / (d_low + 2 d)
    f.expert_width = std::llround(double(3 * fam.d * fam.D - f.d_low * fam.d) / double(f.d_low + 2 * fam.d));
  }
  if (kind == FfnKind::Dense) f.hidden = fam.n * fam.r + fam.K * (fam.D - fam.r);  // UoE's active width
  resolve_defaults(c);
  return c;
}

}  // namespace

ModelConfig load_model_config(const std::string& preset_or_path) {
  const std::string& p = preset_or_path;
  if (!std::filesystem::exists(p) && p.find(".json") == std::string::npos) {
    const size_t dash = p.rfind('-');
    for (const Family& fam : kFamilies)
      if (dash != std::string::npos && p.compare(0, dash, fam.name) == 0)
        for (FfnKind kind : {FfnKind::UoE, FfnKind::MoE, FfnKind::AoE, FfnKind::Dense})
          if (p.compare(dash + 1, std::string::npos, ffn_kind_name(kind)) == 0) return family_member(fam, kind);
    fail("[config] unknown preset '", p, "': expected one of ", preset_list(), ", or a JSON file");
  }
  return model_config_from_json(json::read_file(p), p);
}

}  // namespace uoe::nn
