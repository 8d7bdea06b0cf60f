// routing_gradients: a lesson in how Union-of-Experts routing neurons learn. A small UoE layer (the student)
// is trained to imitate a fixed random UoE layer (the teacher); every few steps the gradient reaching the
// routing neurons W_gate[i][:, :r], W_up[i][:, :r] is split into its two paths and printed:
//   VSE path:   H -> virtual shared expert H Ŵ_o^R -> y        every token, every expert
//   score path: H -> s_i = ‖H_i‖ -> top-K -> weights w -> y    only the experts a token selected
// and the program checks that the two parts add up to the gradient the parameters received.
// Usage: routing_gradients [--quick]   (--quick: 60 steps instead of 600)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "analysis/gradient_paths.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/optim.h"
#include "ops/ops.h"

#include "lesson.h"

using namespace uoe;
using namespace uoe::lesson;

namespace {

// T tokens per batch of width d; n experts of D neurons, K chosen per token, r routing neurons each.
constexpr int64_t T = 64, d = 16, n = 4, K = 2, D = 16, r = 4;

nn::ModelConfig layer_config() {
  nn::ModelConfig c = expert_layer(nn::FfnKind::UoE, d, n, K, D);
  c.ffn.routing_neurons = r;
  return c;
}

double dot(const Tensor& a, const Tensor& b) { return ops::sum(a * b).item<double>(); }

// One number per path over all experts and both matrices: norms, and the cosine between the two paths.
struct Totals {
  double vse, score, cosine;
};
Totals totals(const analysis::RoutingGradientSplit& s) {
  const double vv = dot(s.vse_gate, s.vse_gate) + dot(s.vse_up, s.vse_up);
  const double ss = dot(s.score_gate, s.score_gate) + dot(s.score_up, s.score_up);
  const double vs = dot(s.vse_gate, s.score_gate) + dot(s.vse_up, s.score_up);
  return {std::sqrt(vv), std::sqrt(ss), vv > 0 && ss > 0 ? vs / std::sqrt(vv * ss) : 0.0};
}

// The split is exact: per expert, full = vse + score up to float32 rounding.
void check_parts_add_up(const analysis::PathNorms& p) {
  for (int64_t i = 0; i < n; ++i)
    UOE_CHECK(p.rest[size_t(i)] <= 1e-4 * p.full[size_t(i)] + 1e-9, "expert ", i, ": |full - vse - score| = ",
              p.rest[size_t(i)], " is not small next to |full| = ", p.full[size_t(i)]);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int steps = quick ? 60 : 600, report_every = steps / 10;
  try {
    manual_seed(0);
    // The teacher: a fixed UoE layer with weights ~ N(0, 0.3²), so its experts differ clearly.
    nn::UoeFfn teacher(layer_config(), 0.3);
    {
      NoGradGuard no_grad;
      for (auto& [name, p] : teacher.named_parameters()) p.copy_(randn(p.shape()) * 0.3);
    }
    // The student starts from the library's initialisation and learns with AdamW.
    nn::UoeFfn student(layer_config(), 0.02);
    nn::AdamW optimizer(student.named_parameters(), nn::AdamWOptions{.weight_decay = 0.0});
    // While the probe lives, each forward of the student records the gradient arriving at H through
    // each consumer (hooks on two aliases of H); split() pulls each one back to W_gate^R, W_up^R alone.
    analysis::GradientPathProbe probe(student);

    std::printf("student: UoE layer d=%ld, n=%ld experts of D=%ld neurons, top-%ld, r=%ld routing neurons; "
                "batch T=%ld\n",
                long(d), long(n), long(D), long(K), long(r), long(T));
    std::printf("loss: mean over the steps since the last row; |vse|, |score|: norm of each path's gradient on\n"
                "the routing neurons of this step (all experts, W_gate and W_up)\n\n");
    std::printf("%5s  %9s  %10s  %10s  %11s  %7s\n", "step", "loss", "|vse|", "|score|", "score/vse", "cosine");
    std::vector<double> window_losses;  // mean loss of each report window
    double window_sum = 0;
    analysis::PathNorms last;
    for (int step = 1; step <= steps; ++step) {
      const Tensor x = randn({T, d});  // [T, d]
      Tensor target;                   // [T, d]
      {
        NoGradGuard no_grad;
        target = teacher.forward(x).y;
      }
      student.zero_grad();  // split() reads the full gradient from .grad: zero it before the forward
      const Tensor loss = ops::mean(ops::pow(student.forward(x).y - target, 2.0));
      loss.backward();

      const analysis::RoutingGradientSplit split = probe.split();  // [n, d, r] per part and matrix
      last = analysis::path_norms(split);
      check_parts_add_up(last);
      window_sum += loss.item<double>();
      if (step == 1 || step % report_every == 0) {
        const Totals t = totals(split);
        const double window_loss = step == 1 ? window_sum : window_sum / report_every;
        std::printf("%5d  %9.5f  %10.3e  %10.3e  %11.4f  %+7.3f\n", step, window_loss, t.vse, t.score,
                    t.score / t.vse, t.cosine);
        if (step % report_every == 0) {
          window_losses.push_back(window_loss);
          window_sum = 0;
        }
      }
      optimizer.step(3e-3);
    }

    std::printf("\nlast step, per expert (load = share of the (token, slot) pairs routed to it)\n");
    std::printf("%6s  %6s  %10s  %10s  %7s  %10s\n", "expert", "load", "|vse|", "|score|", "cosine", "|rest|");
    const std::vector<double> load = student.stats.routing().load;
    for (int64_t i = 0; i < n; ++i) {
      const size_t e = size_t(i);
      std::printf("%6ld  %6.3f  %10.3e  %10.3e  %+7.3f  %10.1e\n", long(i), load[e], last.vse[e], last.score[e],
                  last.cosine[e], last.rest[e]);
    }
    std::printf("\ncheck: vse + score = the routing neurons' full gradient at every step (|rest| is rounding)\n");
    std::printf("mean loss of the first and the last %d steps: %.5f -> %.5f\n", report_every, window_losses.front(),
                window_losses.back());
    UOE_CHECK(window_losses.back() < window_losses.front(), "the student's loss did not fall");
    // What to read in the table: the VSE path is dense (every token pushes every expert's routing neurons
    // towards a better shared expert), the score path is sparse (a token only moves the scores of the
    // experts it selected, to change the mixing weights). Their cosine says whether "be a useful shared
    // expert" and "rank the experts well" pull the same routing weights the same way.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "routing_gradients FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
