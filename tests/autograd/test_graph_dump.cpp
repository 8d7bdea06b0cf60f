// DOT dump: exact nodes and edges of a small graph, named leaves, highlighted ops, and a whole UoE block
// whose DOT names every parameter with its shape and labels every edge with a shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <cctype>
#include <set>
#include <sstream>

#include "autograd/graph_dump.h"
#include "core/rng.h"
#include "fixtures.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe {
namespace {

// The parts of a dump this test reads: node id -> label and attributes, and every edge.
struct ParsedDot {
  std::map<std::string, std::string> label, attributes;
  std::vector<std::pair<std::string, std::string>> edges;  // (from id, to id)
  std::vector<std::string> edge_labels;
};

// "[]" or "[d0, d1, ...]" with decimal sizes.
bool is_shape(const std::string& s) {
  if (s.size() < 2 || s.front() != '[' || s.back() != ']') return false;
  const std::string inner = s.substr(1, s.size() - 2);
  std::istringstream parts(inner);
  for (std::string part; std::getline(parts, part, ',');) {
    if (!part.empty() && part[0] == ' ') part.erase(0, 1);  // ", " between sizes
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return false;
  }
  return inner.empty() || inner.back() != ',';
}

// "n<digits>" at `pos` (advanced past it), or "" when there is none.
std::string node_id(const std::string& line, size_t& pos) {
  if (pos >= line.size() || line[pos] != 'n') return "";
  size_t end = pos + 1;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  if (end == pos + 1) return "";
  std::string id = line.substr(pos, end - pos);
  pos = end;
  return id;
}

// The value of the first label="..." in `attributes` (escapes kept), or "" without one.
std::string label_of(const std::string& attributes) {
  const size_t start = attributes.find("label=\"");
  if (start == std::string::npos) return "";
  std::string value;
  for (size_t i = start + 7; i < attributes.size() && attributes[i] != '"'; ++i) {
    if (attributes[i] == '\\' && i + 1 < attributes.size()) value += attributes[i++];
    value += attributes[i];
  }
  return value;
}

// Lines "  nA [attributes];" and "  nA -> nB [label="..."];" (std::regex is avoided: g++ 12 warns inside it
// under the sanitizers).
ParsedDot parse(const std::string& dot) {
  ParsedDot p;
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  n", 0) != 0 || line.size() < 4 || line.substr(line.size() - 2) != "];") continue;
    size_t pos = 2;
    const std::string from = node_id(line, pos);
    if (from.empty()) continue;
    if (line.compare(pos, 4, " -> ") == 0) {
      pos += 4;
      const std::string to = node_id(line, pos);
      if (to.empty() || line.compare(pos, 2, " [") != 0) continue;
      p.edges.emplace_back(from, to);
      p.edge_labels.push_back(label_of(line.substr(pos)));
    } else if (line.compare(pos, 2, " [") == 0) {
      const std::string attributes = line.substr(pos + 2, line.size() - pos - 4);
      p.attributes[from] = attributes;
      if (attributes.find("label=\"") != std::string::npos) p.label[from] = label_of(attributes);
    }
  }
  return p;
}

// What a simple check can tell: one digraph, balanced braces, an even number of unescaped quotes
// on every line, and every edge between declared nodes.
void expect_well_formed(const std::string& dot, const ParsedDot& p) {
  EXPECT_EQ(dot.rfind("digraph autograd {\n", 0), 0u);
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_EQ(std::count(dot.begin(), dot.end(), '{'), std::count(dot.begin(), dot.end(), '}'));
  std::istringstream in(dot);
  for (std::string line; std::getline(in, line);) {
    int quotes = 0;
    for (size_t i = 0; i < line.size(); ++i) quotes += line[i] == '"' && (i == 0 || line[i - 1] != '\\');
    EXPECT_EQ(quotes % 2, 0) << line;
  }
  for (const auto& [from, to] : p.edges) {
    EXPECT_TRUE(p.label.count(from)) << from;
    EXPECT_TRUE(p.label.count(to)) << to;
  }
}

Tensor leaf(std::vector<double> v) { return from_vector(v, {int64_t(v.size())}).requires_grad_(); }

TEST(GraphDump, SmallGraphHasExactlyTheExpectedNodesAndEdges) {
  const Tensor a = leaf({1.0, 2.0}), b = leaf({3.0, 4.0});
  const Tensor y = ops::sum(a * b + a);  // sum <- add <- (mul <- (a, b), a)
  autograd::DotOptions options;
  options.leaf_names = {{"a", a}, {"b", b}};
  options.highlight = {"mul"};
  const std::string dot = autograd::to_dot(y, options);
  const ParsedDot p = parse(dot);
  expect_well_formed(dot, p);

  std::map<std::string, std::string> id_of;  // first line of the label -> id
  for (const auto& [id, label] : p.label) id_of[label.substr(0, label.find("\\n"))] = id;
  EXPECT_EQ(p.label.size(), 5u) << dot;
  for (const char* name : {"sum", "add", "mul", "a [2]", "b [2]"}) EXPECT_TRUE(id_of.count(name)) << name << "\n" << dot;
  const std::set<std::pair<std::string, std::string>> expected = {
      {id_of["mul"], id_of["add"]}, {id_of["a [2]"], id_of["add"]}, {id_of["a [2]"], id_of["mul"]},
      {id_of["b [2]"], id_of["mul"]}, {id_of["add"], id_of["sum"]}};
  EXPECT_EQ(std::set(p.edges.begin(), p.edges.end()), expected) << dot;
  EXPECT_EQ(p.edges.size(), expected.size()) << dot;
  EXPECT_NE(p.attributes.at(id_of["mul"]).find("fillcolor"), std::string::npos);
  EXPECT_EQ(p.attributes.at(id_of["add"]).find("fillcolor"), std::string::npos);
  EXPECT_NE(dot.find("cluster_legend"), std::string::npos);
  EXPECT_EQ(autograd::to_dot(y).find("cluster_legend"), std::string::npos);  // no highlight, no legend
}

TEST(GraphDump, UnnamedLeavesAndConstantsKeepTheDefaultLabels) {
  const Tensor a = leaf({1.0, 2.0});
  const ParsedDot p = parse(autograd::to_dot(ops::sum(a * 2.0)));
  size_t leaves = 0;
  for (const auto& [id, label] : p.label) leaves += label.rfind("leaf\\nfloat64[2]", 0) == 0;
  EXPECT_EQ(leaves, 1u);
}

TEST(GraphDump, UoeBlockNamesParametersAndHighlightsExpertOps) {
  manual_seed(0);
  nn::LanguageModel model(test::micro_config(nn::FfnKind::UoE));  // d = 32, 4 experts, D = 32, r = 8
  const Tensor loss = ops::mean(model.blocks[0]->forward(randn({1, 8, 32})).y);
  autograd::DotOptions options;
  options.leaf_names = model.named_parameters();
  options.highlight = {"expert_ffn", "group_l2norm"};
  const std::string dot = autograd::to_dot(loss, options);
  const ParsedDot p = parse(dot);
  expect_well_formed(dot, p);

  std::set<std::string> labels;
  for (const auto& [id, label] : p.label) labels.insert(label);
  for (const char* param : {"blocks.0.ffn.w_gate [4, 32, 32]", "blocks.0.ffn.w_up [4, 32, 32]",
                            "blocks.0.ffn.w_down [4, 32, 32]", "blocks.0.ffn_norm.weight [32]",
                            "blocks.0.attn_norm.weight [32]"})
    EXPECT_TRUE(labels.count(param)) << param << "\n" << dot;
  for (const auto& [id, label] : p.label) {
    EXPECT_NE(label.rfind("leaf", 0), 0u) << "every leaf of a block is a named parameter: " << label;
    EXPECT_EQ(label.rfind("blocks.", 0) == 0, label.find("blocks.0.") == 0) << "only block 0 is in the graph";
    const std::string op = label.substr(0, label.find("\\n"));
    const bool highlighted = p.attributes.at(id).find("fillcolor=\"#f4a582\"") != std::string::npos;
    EXPECT_EQ(highlighted, op == "expert_ffn" || op == "group_l2norm") << label;
  }
  EXPECT_NE(dot.find("expert_ffn\\nfloat32[8, 32]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("group_l2norm\\nfloat32[8, 4]"), std::string::npos) << dot;
  ASSERT_FALSE(p.edges.empty());
  for (const std::string& label : p.edge_labels) EXPECT_TRUE(is_shape(label)) << label;
}

}  // namespace
}  // namespace uoe
