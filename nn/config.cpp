// Model configuration: JSON round trip with field-naming errors, derived defaults, presets.
#include "nn/config.h"

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <vector>

#include "core/error.h"

namespace uoe::nn {

namespace {

// The JSON names of each enum's values, in the enum's order.
constexpr const char* kKindNames[] = {"dense", "moe", "aoe", "uoe"};
constexpr const char* kScoreNames[] = {"swiglu", "gate_silu", "gate"};
constexpr const char* kWeightsNames[] = {"topk_softmax", "full_softmax"};
constexpr const char* kCombineNames[] = {"vse", "full_expert"};
constexpr const char* kRoutingNames[] = {"topk", "topp"};

// The fields of config.json, and of its "ffn" object with the kinds that use each (docs/UOE.md's table): a field
// the kind ignores keeps its default.
constexpr const char* kModelFields[] = {"name",    "vocab_size", "d_model",  "n_layers",        "n_heads", "n_kv_heads",
                                        "context", "rope_base",  "norm_eps", "tied_embeddings", "ffn"};
constexpr unsigned kDense = 1u << int(FfnKind::Dense), kMoE = 1u << int(FfnKind::MoE),
                   kAoE = 1u << int(FfnKind::AoE), kUoE = 1u << int(FfnKind::UoE);
struct FfnField {
  const char* name;
  unsigned kinds;  // bit 1 << FfnKind of each kind that uses it
};
constexpr FfnField kFfnFields[] = {
    {"kind", kDense | kMoE | kAoE | kUoE}, {"hidden", kDense},         {"n_experts", kMoE | kAoE | kUoE},
    {"top_k", kMoE | kAoE | kUoE},         {"expert_width", kMoE | kAoE | kUoE}, {"shared_width", kMoE | kAoE},
    {"routing_neurons", kUoE},             {"d_low", kAoE},            {"score", kUoE},
    {"weights", kAoE | kUoE},              {"combine", kUoE},          {"routing", kMoE | kAoE | kUoE},
    {"top_p", kMoE | kAoE | kUoE},         {"aux_loss", kMoE | kAoE | kUoE}, {"z_loss", kMoE},
};

const FfnField* find_ffn_field(const std::string& name) {
  for (const FfnField& f : kFfnFields)
    if (name == f.name) return &f;
  return nullptr;
}

template <size_t N>
std::string name_list(const char* const (&names)[N]) {
  std::string list;
  for (const char* name : names) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

}  // namespace

bool ffn_field_used(FfnKind kind, const std::string& field) {
  const FfnField* f = find_ffn_field(field);
  return f && (f->kinds & (1u << int(kind)));
}

std::string ffn_fields_used(FfnKind kind) {
  std::string list;
  for (const FfnField& f : kFfnFields)
    if (f.kinds & (1u << int(kind))) list += (list.empty() ? "" : ", ") + std::string(f.name);
  return list;
}

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

// Every key of `v` is one of `known` (`prefix` + the key names it in the error).
template <class Names, class NameOf>
void check_keys(const json::Value& v, const Names& known, NameOf name_of, const std::string& where,
                const std::string& prefix) {
  UOE_CHECK(v.is_object(), "[config] ", where, " must be a JSON object");
  for (const auto& [key, value] : v.items()) {
    std::string list;
    bool found = false;
    for (const auto& k : known) {
      found = found || key == name_of(k);
      list += (list.empty() ? "" : ", ") + std::string(name_of(k));
    }
    UOE_CHECK(found, "[config] ", where, ": unknown field '", prefix, key, "', expected one of ", list);
  }
}

const char* plain_name(const char* name) { return name; }
const char* ffn_field_name(const FfnField& f) { return f.name; }

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
  check_keys(v, kModelFields, plain_name, source, "");
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
    check_keys(f, kFfnFields, ffn_field_name, source, "ffn.");
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

// The kinds that use ffn.`field`, by name.
std::string kinds_using(const char* field) {
  std::string kinds;
  for (FfnKind k : {FfnKind::Dense, FfnKind::MoE, FfnKind::AoE, FfnKind::UoE})
    if (ffn_field_used(k, field)) kinds += (kinds.empty() ? "" : ", ") + std::string(ffn_kind_name(k));
  return kinds;
}

// A switch that the FFN kind ignores keeps its default (its first value): a choice that would change nothing is
// refused.
template <class E>
void check_switch_used(const std::string& source, const FfnConfig& f, const char* field, E value) {
  if (value == E(0) || ffn_field_used(f.kind, field)) return;
  fail("[config] ", source, ": ffn.", field, " is '", switch_name(value), "', but ffn.kind ", ffn_kind_name(f.kind),
       " ignores it (only ", kinds_using(field), " use it): leave it out or set '", switch_name(E(0)), "'");
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
  check_switch_used(source, f, "score", f.score);
  check_switch_used(source, f, "weights", f.weights);
  check_switch_used(source, f, "combine", f.combine);
  check_switch_used(source, f, "routing", f.routing);
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

// The JSON value of an assignment's text: a number, true or false as JSON reads them, anything else a string.
json::Value assigned_value(const std::string& text) {
  try {
    json::Value v = json::parse(text, "value");
    if (v.is_number() || v.type() == json::Value::Type::Bool) return v;
  } catch (const Error&) {
  }
  return json::Value(text);
}

}  // namespace

ModelConfig with_assignments(const ModelConfig& c, const std::vector<std::string>& assignments,
                             const std::string& source) {
  json::Value v = to_json(c);
  std::vector<std::string> ffn_fields;  // the ffn fields assigned, checked against the final kind
  for (const std::string& a : assignments) {
    const size_t eq = a.find('=');
    UOE_CHECK(eq != std::string::npos && eq > 0, "[config] ", source, ": '", a, "' is not field=value (e.g. "
              "ffn.routing_neurons=32)");
    const std::string field = a.substr(0, eq);
    const json::Value value = assigned_value(a.substr(eq + 1));
    if (field.rfind("ffn.", 0) == 0) {
      const std::string name = field.substr(4);
      json::Value ffn = json::Value::object();
      ffn[name] = value;
      check_keys(ffn, kFfnFields, ffn_field_name, source, "ffn.");
      v["ffn"][name] = value;
      ffn_fields.push_back(name);
    } else {
      UOE_CHECK(field != "ffn", "[config] ", source, ": set the FFN's fields one by one (ffn.<field>=value)");
      json::Value top = json::Value::object();
      top[field] = value;
      check_keys(top, kModelFields, plain_name, source, "");
      v[field] = value;
    }
  }
  const ModelConfig out = model_config_from_json(v, source);
  for (const std::string& name : ffn_fields)
    UOE_CHECK(ffn_field_used(out.ffn.kind, name), "[config] ", source, ": ffn.", name, " is ignored by ffn.kind ",
              ffn_kind_name(out.ffn.kind), " (only ", kinds_using(name.c_str()), " use it); ffn.kind ",
              ffn_kind_name(out.ffn.kind), " uses ", ffn_fields_used(out.ffn.kind));
  return out;
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

// Every kind of a family matches UoE's active FFN FLOPs per token (uoe info prints the ratios; every preset is
// within 0.2% of UoE's model FLOPs; tests/nn/test_config_counts.cpp checks 1%). UoE's active FFN weights per
// layer are 3 d (n r + K (D - r)): the virtual shared expert (n r neurons) and the K selected experts' other D - r.
// - dense: width n r + K (D - r), exactly UoE's active neurons.
// - MoE: K experts of width D and a shared expert of width (n - K) r: 3 d (K D + (n - K) r), UoE's count; the
//   router's d n weights are the difference (+0.14% of the model's FLOPs at tiny, +0.05% small, +0.19% 3b).
//   (Before: shared width n r, K r neurons more, +7% model FLOPs at tiny.)
// - AoE: parameter parity with a MoE of width D, d_wide = (3 d D - d_low d) / (d_low + 2 d), makes its active
//   weights d n d_low + K d_wide (d_low + 2 d) = 3 d K D + d d_low (n - K), UoE's when d_low = 3 r: the low-rank
//   gate of every expert is as wide as UoE's routing neurons' three projections. (Before: d_low = d / 3, which
//   projects every token for all n experts: -11.5% at tiny, -1.3% at small, +46% at 1b, +81% at 3b.)
// Old checkpoints keep their own widths: config.json carries every field.
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
  if (kind == FfnKind::MoE) f.shared_width = (fam.n - fam.K) * fam.r;
  if (kind == FfnKind::AoE) {
    f.d_low = 3 * fam.r;
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
