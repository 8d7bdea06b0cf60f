// Model configuration: the Transformer and the four FFN kinds with every UoE switch (docs/UOE.md), JSON round trip, presets.
#pragma once
#include <string>
#include <vector>

#include "core/json.h"
#include "ops/moe.h"

namespace uoe::nn {

enum class FfnKind { Dense, MoE, AoE, UoE };

// The FFN switches of docs/UOE.md. In JSON each value is its name (switch_name); a switch the chosen kind ignores must
// keep its default (first) value.
enum class ScoreSource { SwiGLU, GateSilu, Gate };  // UoE: the L2 norm of H, silu(x Ŵ_g^R) or x Ŵ_g^R ranks experts
enum class Combine { Vse, FullExpert };             // UoE: how selected experts' routing neurons enter the output
enum class Routing { TopK, TopP };                  // UoE: K experts per token, or as many as top_p needs

struct FfnConfig {
  FfnKind kind = FfnKind::UoE;
  int64_t hidden = 1024;          // dense: SwiGLU width
  int64_t n_experts = 8;          // n
  int64_t top_k = 2;              // K
  int64_t expert_width = 512;     // D (the AoE presets use the width of MoE parameter parity, docs/UOE.md's d_wide)
  int64_t shared_width = 0;       // MoE: shared expert width (0 = none)
  int64_t routing_neurons = 0;    // UoE r (0 = round(D / n))
  int64_t d_low = 0;              // AoE rank of the factorised gate (0 = round(d / 3))
  ScoreSource score = ScoreSource::SwiGLU;
  ops::RouteWeights weights = ops::RouteWeights::TopKSoftmax;  // UoE, AoE
  Combine combine = Combine::Vse;
  Routing routing = Routing::TopK;
  double top_p = 0.5;     // UoE routing = topp threshold
  double aux_loss = 0.0;  // load-balance loss weight α
  double z_loss = 0.0;    // MoE router z-loss weight
};

struct ModelConfig {
  std::string name = "custom";
  int64_t vocab_size = 256;
  int64_t d_model = 256;
  int64_t n_layers = 4;
  int64_t n_heads = 4;
  int64_t n_kv_heads = 4;
  int64_t context = 256;
  double rope_base = 10000.0;
  double norm_eps = 1e-5;
  bool tied_embeddings = true;
  FfnConfig ffn;
};

// The bounds of check_model_config: generous for research configurations (GPT-3 175B has d 12288, 96 layers).
inline constexpr int64_t kMaxVocab = int64_t(1) << 24;    // 16,777,216 ids
inline constexpr int64_t kMaxWidth = int64_t(1) << 16;    // d_model; FFN widths up to 16 times this
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxContext = int64_t(1) << 20;  // 1,048,576 tokens
inline constexpr int64_t kMaxExperts = int64_t(1) << 16;

const char* ffn_kind_name(FfnKind k);
// Whether ffn.`field` changes a model of kind `kind` (docs/UOE.md's table: e.g. routing_neurons only UoE's), and
// the list of those that do, comma-separated.
bool ffn_field_used(FfnKind kind, const std::string& field);
std::string ffn_fields_used(FfnKind kind);
// The JSON names: swiglu | gate_silu | gate, topk_softmax | full_softmax, vse | full_expert, topk | topp.
const char* switch_name(ScoreSource s);
const char* switch_name(ops::RouteWeights w);
const char* switch_name(Combine c);
const char* switch_name(Routing r);
json::Value to_json(const ModelConfig& c);
// Missing fields keep their defaults; unknown fields, values of the wrong type and values out of bounds are
// errors naming `source` and the field.
ModelConfig model_config_from_json(const json::Value& v, const std::string& source);
// Every field within its bounds (the kMax* above) and consistent with the others, else one error naming `source`,
// the field and what was expected. Cheap: run before anything is built.
void check_model_config(const ModelConfig& c, const std::string& source);
// A preset (<family>-<kind>: families tiny, small, 1b and 3b, kinds uoe, moe, aoe, dense; see nn/config.cpp) or a JSON file.
ModelConfig load_model_config(const std::string& preset_or_path);
// `c` with "field=value" assignments applied in order (field: a config.json key, ffn.<key> for the FFN's; value: a
// number, true or false, else a name), read by model_config_from_json as a config.json would be: an unknown field
// (the error lists the valid ones), a value of the wrong type or out of bounds, or an ffn field that the resulting
// kind ignores (the error lists those it uses) is one error naming `source`.
ModelConfig with_assignments(const ModelConfig& c, const std::vector<std::string>& assignments,
                             const std::string& source);
// Resolves the 0 = "derived" fields (r, d_low, AoE width) in place.
void resolve_defaults(ModelConfig& c);

}  // namespace uoe::nn
