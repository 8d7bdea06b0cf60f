// uoe graph: the autograd graph of one Transformer block as DOT (and SVG when Graphviz is installed), with
// parameters named, tensor shapes on the edges and the Mixture-of-Experts ops highlighted.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "autograd/graph_dump.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe::cli {
namespace {

// The ops that make an FFN a mixture of experts: scoring, routing, the experts and the router losses.
// (Attention is one fused op, so every softmax in a block belongs to the routing.)
const std::set<std::string> kExpertOps = {"group_l2norm",      "topk_route",    "topp_route", "expert_ffn",
                                          "load_balance_loss", "router_z_loss", "softmax",    "log_softmax"};

nn::ModelConfig config_from_flag(const std::string& spec) {
  try {
    nn::ModelConfig c = nn::load_model_config(spec);
    nn::resolve_defaults(c);
    return c;
  } catch (const Error& e) {
    fail("--config '", spec, "': ", e.what());
  }
}

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// graph.dot -> graph.svg; any other name gets .svg appended.
std::string svg_path(const std::string& dot_path) {
  const std::string ext = ".dot";
  const bool has_ext = dot_path.size() > ext.size() && dot_path.compare(dot_path.size() - ext.size(), ext.size(), ext) == 0;
  return (has_ext ? dot_path.substr(0, dot_path.size() - ext.size()) : dot_path) + ".svg";
}

// Where --out puts the DOT file: into a folder that --out names (an existing one, or any path ending in '/') as
// graph.dot, else at --out itself; the folder is created.
std::string dot_path_of(const std::string& out) {
  std::filesystem::path p(out);
  if (std::filesystem::is_directory(p) || out.back() == '/') p /= "graph.dot";
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  return p.string();
}

}  // namespace

int cmd_graph(const Args& a) {
  const nn::ModelConfig config = config_from_flag(a.required("config"));
  const int64_t layer = a.integer("layer"), T = a.integer("seq");
  UOE_CHECK(layer >= 0 && layer < config.n_layers, "--layer ", layer, " is out of range: ", config.name, " has ",
            config.n_layers, " layers (0 to ", config.n_layers - 1, ")");
  UOE_CHECK(T >= 1 && T <= config.context, "--seq ", T, " must lie in [1, context = ", config.context, "]");
  UOE_CHECK(!a.str("out").empty(), "--out must name a .dot file or a folder");
  const std::string out = dot_path_of(a.str("out"));

  manual_seed(0);
  nn::LanguageModel model(config);
  nn::Block& block = *model.blocks[size_t(layer)];
  // One block on a random input x [1, T, d]; loss = mean of its output (+ the FFN's auxiliary loss).
  const Tensor x = randn({1, T, config.d_model});
  const nn::FfnOut block_out = block.forward(x);
  const Tensor loss = block_out.aux.defined() ? ops::mean(block_out.y) + block_out.aux : ops::mean(block_out.y);

  autograd::DotOptions options;
  options.leaf_names = model.named_parameters();
  options.highlight = kExpertOps;
  options.highlight_caption = "Mixture-of-Experts op";
  options.title = config.name + ": block " + std::to_string(layer) + " (" + nn::ffn_kind_name(config.ffn.kind) +
                  " FFN), input [1, " + std::to_string(T) + ", " + std::to_string(config.d_model) +
                  "], loss = mean(output)" + (block_out.aux.defined() ? " + aux loss" : "");
  write_file_atomic(out, autograd::to_dot(loss, options));

  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    std::printf("wrote %s (DOT only: Graphviz 'dot' is not on PATH; render with: dot -Tsvg %s -o %s)\n", out.c_str(),
                out.c_str(), svg_path(out).c_str());
    return 0;
  }
  const std::string svg = svg_path(out);
  const int rc = std::system(("dot -Tsvg " + shell_quoted(out) + " -o " + shell_quoted(svg)).c_str());
  UOE_CHECK(rc == 0, "dot -Tsvg ", out, " -o ", svg, " failed (exit status ", rc, ")");
  std::printf("wrote %s and %s\n", out.c_str(), svg.c_str());
  return 0;
}

}  // namespace uoe::cli
