// The gradient paths into UoE's routing neurons (docs/UOE.md). The routing activations H of a layer feed
//   the virtual shared expert  y_vse = H Ŵ_o^R                     (dL/dH through the layer output), and
//   the routing scores         s_i = ‖H_i‖ → top-K → weights w_i   (dL/dH through the weights, plus any
//                                                                    auxiliary loss on the scores).
// A probe records both incoming gradients with hooks on the two consumers of H, then pulls each back to
// the routing-neuron weights W_gate[i][:, :r], W_up[i][:, :r] alone. The parts add up to the full gradient;
// with combine = full_expert the selected experts' own computation is a further path (full − vse − score).
// The scores' part holds the layer's own auxiliary loss (load balance, top-p's entropy), which own_aux_gradient
// measures alone: the third path, shown apart from the routing weights'.
#pragma once
#include <memory>
#include <vector>

#include "nn/ffn.h"
#include "nn/transformer.h"

namespace uoe::analysis {

struct RoutingGradientSplit {
  Tensor vse_gate, vse_up;      // [n, d, r] through the virtual shared expert
  Tensor score_gate, score_up;  // [n, d, r] through the routing scores (routing weights and the own aux loss)
  Tensor aux_gate, aux_up;      // [n, d, r] the part of score_* from the layer's own auxiliary loss (undefined: none)
  Tensor full_gate, full_up;    // [n, d, r] what the parameters received (their .grad)
};

// While alive, every forward of `layer` records the gradients of its two paths (and the layer keeps its trace).
class GradientPathProbe {
 public:
  explicit GradientPathProbe(nn::UoeFfn& layer);
  ~GradientPathProbe();
  GradientPathProbe(const GradientPathProbe&) = delete;
  GradientPathProbe& operator=(const GradientPathProbe&) = delete;

  // The split of the last backward through the layer's last forward. The parameters' gradients must
  // have been zeroed before that forward (full_* is read from them).
  RoutingGradientSplit split() const;

 private:
  struct Recorded {
    Tensor d_h, d_source;  // [T, n·r] gradient reaching H via the VSE, and the score source via the scores
  };
  nn::UoeFfn& layer_;
  std::shared_ptr<Recorded> recorded_;
  bool was_recording_;
};

// Per expert (or per routing neuron, index e·r + j): Frobenius norm of each part over both matrices, the routing
// weights' part (score − aux), the rest (full − vse − score, the selected-expert path of combine = full_expert, else
// rounding), and the cosine between vse and score.
struct PathNorms {
  std::vector<double> vse, score, weights, aux, full, rest, cosine;
};
PathNorms path_norms(const RoutingGradientSplit& s, bool per_neuron = false);

// The gradient of `layer`'s own auxiliary loss alone into its routing neurons W_gate[:, :, :r], W_up[:, :, :r]:
// the layer runs again (with gradients) on the input of its last traced forward and only that loss goes backward.
// Undefined tensors when the layer has none. The layer's parameter gradients are cleared (zero_grad) after.
std::pair<Tensor, Tensor> own_aux_gradient(nn::UoeFfn& layer);

// One batch through `model` (gradients zeroed first, forward, backward): the split of every UoE layer,
// in layer order, with its own auxiliary loss's part. The gradients are cleared after (zero_grad).
std::vector<RoutingGradientSplit> routing_gradient_paths(nn::LanguageModel& model, const Tensor& ids,
                                                         const Tensor& targets);

}  // namespace uoe::analysis
