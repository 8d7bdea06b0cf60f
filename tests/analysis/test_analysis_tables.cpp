// The CSV tables of an analysis recomputed on a micro model: the forward is run again with its routing traced and
// the load, co-selection, top-token counts and routing-neuron activation rates are counted by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "analysis/report.h"
#include "fixtures.h"
#include "nn/tokenizer.h"

namespace uoe::analysis {
namespace {

// Rows of a CSV text as fields (quoted fields may hold commas and doubled quotes), header first.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field), field.clear();
    } else if (c == '\n') {
      row.push_back(field), field.clear();
      rows.push_back(row), row.clear();
    } else {
      field += c;
    }
  }
  return rows;
}

const std::string& table(const std::vector<std::pair<std::string, std::string>>& tables, const std::string& name) {
  for (const auto& [n, text] : tables)
    if (n == name) return text;
  ADD_FAILURE() << "no table " << name;
  static const std::string none;
  return none;
}

TEST(AnalysisTables, CsvValuesRecountedOnAMicroModel) {
  const std::string dir = test::temp_dir("analysis_tables");
  const auto data = test::micro_data(dir);
  nn::LanguageModel model(test::micro_config(nn::FfnKind::UoE));
  const auto tokenizer = nn::make_byte_tokenizer();
  AnalysisOptions o;
  o.tokens = 128;  // one forward of 4 windows of 32, every token sampled
  o.seq = 32;
  o.batch = 4;
  o.activation_tokens = 128;
  o.gradient_windows = 1;
  o.example_tokens = 16;
  o.bins = 5;
  const AnalysisResult r = analyze(model, data->file(), data->val_begin(), *tokenizer, o);
  const auto tables = csv_tables(r);
  std::vector<std::string> names;
  for (const auto& t : tables) names.push_back(t.first);
  EXPECT_EQ(names, (std::vector<std::string>{"layers", "flags", "load", "scores", "margins", "agreement",
                                             "gradient_paths", "neurons", "neuron_scan", "coselection", "top_tokens",
                                             "token_experts"}));

  // The same forward again, traced.
  std::vector<int64_t> ids(128);
  data->file().read(data->val_begin(), 128, ids.data());
  for (auto& b : model.blocks) b->ffn->record = true;
  model.forward(from_vector(ids, {4, 32}, TensorOptions{}.with_dtype(DType::Int64)));
  const int64_t n = 4, K = 2, r8 = 8, d = 32, D = 32, T = 128;
  std::map<std::string, double> load, cosel, top, rate;  // "layer,expert[,...]" -> value
  for (int64_t l = 0; l < 2; ++l) {
    const auto& ffn = dynamic_cast<const nn::UoeFfn&>(*model.blocks[size_t(l)]->ffn);
    const std::vector<int64_t> idx = ffn.trace.route.indices.to_vector<int64_t>();
    const std::vector<float> x = ffn.trace.input.to_vector<float>(), wg = ffn.w.gate.to_vector<float>();
    const std::string L = std::to_string(l) + ",";
    for (int64_t t = 0; t < T; ++t)
      for (int64_t a = 0; a < K; ++a) {
        const std::string e = std::to_string(idx[size_t(t * K + a)]);
        load[L + e] += 1.0 / double(T * K);
        top[L + e + "," + std::to_string(ids[size_t(t)])] += 1;
        for (int64_t b = 0; b < K; ++b) cosel[L + e + "," + std::to_string(idx[size_t(t * K + b)])] += 1.0 / double(T);
      }
    for (int64_t e = 0; e < n; ++e)
      for (int64_t j = 0; j < r8; ++j) {
        int64_t open = 0;
        for (int64_t t = 0; t < T; ++t) {
          double g = 0;
          for (int64_t k = 0; k < d; ++k) g += double(x[size_t(t * d + k)]) * double(wg[size_t((e * d + k) * D + j)]);
          open += g > 0;
        }
        rate[L + std::to_string(e) + "," + std::to_string(j)] = double(open) / double(T);
      }
  }
  auto check = [&](const std::string& name, const std::vector<std::string>& header, size_t keys, size_t column,
                   const std::map<std::string, double>& expected, double tol, size_t key_from = 0) {
    const auto rows = parse_csv(table(tables, name));
    ASSERT_FALSE(rows.empty()) << name;
    EXPECT_EQ(rows[0], header) << name;
    size_t seen = 0;
    for (size_t i = 1; i < rows.size(); ++i) {
      std::string key;
      for (size_t k = key_from; k < key_from + keys; ++k) key += (k > key_from ? "," : "") + rows[i][k];
      const auto it = expected.find(key);
      const double value = std::stod(rows[i][column]);
      if (it == expected.end()) {
        EXPECT_EQ(value, 0.0) << name << " " << key;
        continue;
      }
      EXPECT_NEAR(value, it->second, tol) << name << " " << key;
      ++seen;
    }
    EXPECT_EQ(seen, expected.size()) << name;
  };
  check("load", {"layer", "expert", "load"}, 2, 2, load, 1e-5);
  check("coselection", {"layer", "expert_a", "expert_b", "fraction_of_tokens"}, 3, 3, cosel, 1e-5);
  check("neurons", {"layer", "expert", "neuron", "activation_rate", "mean_abs_activation", "correlation_with_selection",
                    "grad_vse", "grad_routing_weights", "grad_aux_loss", "grad_full"},
        3, 3, rate, 1e-5);
  // top tokens: each listed (layer, expert, token) with its count; the table lists the top 8, so only those rows
  const auto rows = parse_csv(table(tables, "top_tokens"));
  EXPECT_EQ(rows[0], (std::vector<std::string>{"layer", "expert", "rank", "token_id", "text", "count", "share"}));
  EXPECT_EQ(rows.size(), 1u + 2u * 4u * 8u);
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(std::stod(rows[i][5]), top[rows[i][0] + "," + rows[i][1] + "," + rows[i][3]]) << i;
    EXPECT_EQ(rows[i][4], tokenizer->decode({int32_t(std::stoi(rows[i][3]))})) << i;
  }
  const auto scan = parse_csv(table(tables, "neuron_scan"));
  EXPECT_EQ(scan[0], (std::vector<std::string>{"layer", "expert", "load", "auc_best_r", "auc_first_r", "auc_all_neurons",
                                               "auc_routing_score", "best_neurons"}));
  ASSERT_EQ(scan.size(), 1u + 2u * 4u);
  for (size_t i = 1; i < scan.size(); ++i) {
    std::istringstream best(scan[i][7]);
    int64_t j = 0, count = 0;
    while (best >> j) {
      EXPECT_TRUE(j >= 0 && j < D) << j;
      ++count;
    }
    EXPECT_EQ(count, r8);
    EXPECT_EQ(scan[i][4], scan[i][6]) << "UoE: the routing neurons' norm is the routing score";
  }
  const auto layers = parse_csv(table(tables, "layers"));
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0][12], "shared_share");
  for (size_t l = 1; l < 3; ++l) {
    const double share = std::stod(layers[l][12]);
    EXPECT_TRUE(share > 0 && share < 1) << share;
  }
}

}  // namespace
}  // namespace uoe::analysis
