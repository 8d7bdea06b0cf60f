// `uoe analyze` end to end on micro checkpoints: the report is well-formed XHTML with every chart,
// stats.json and the CSV files are consistent, MoE leaves out the UoE-only parts, bad input is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/report.h"
#include "core/json.h"
#include "fixtures.h"
#include "nn/tokenizer.h"
#include "nn/trainer.h"
#include "xml_check.h"

namespace uoe::analysis {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Trains a micro model of `kind` for 3 steps into dir/<name>; returns its checkpoint directory.
std::string micro_checkpoint(const std::string& dir, nn::FfnKind kind, const nn::TokenDataset& data) {
  nn::TrainOptions o;
  o.steps = 3;
  o.batch = 4;
  o.seq = 32;
  o.eval_every = 0;
  o.eval_batches = 1;
  o.progress = false;
  o.out_dir = dir + "/" + nn::ffn_kind_name(kind);
  nn::train(test::micro_config(kind), o, data, *nn::make_byte_tokenizer());
  return o.out_dir + "/checkpoint";
}

std::string analyze(const std::string& ckpt, const std::string& data, const std::string& out, int* code) {
  return test::run_command(std::string(UOE_CLI_PATH) + " analyze --ckpt " + ckpt + " --data " + data + " --out " + out +
                               " --tokens 2048 --seq 32 --samples 256 --examples 100 --grad-windows 2",
                           code);
}

TEST(AnalyzeCli, UoeReportHasEveryChartAndConsistentData) {
  const std::string dir = test::temp_dir("analyze_uoe");
  const auto data = test::micro_data(dir);
  const std::string ckpt = micro_checkpoint(dir, nn::FfnKind::UoE, *data);
  int code = 0;
  const std::string out = analyze(ckpt, dir + "/text.txt", dir + "/report", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("analysed 2048 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("window 64/64"), std::string::npos) << "the progress of the forwards reaches its end: " << out;

  const std::string html = read(dir + "/report/report.html");
  const test::XmlCheck doc = test::check_xml(html);
  ASSERT_EQ(doc.error, "") << doc.error;
  // A table of contents links the summary and every layer's figures, and each link has its target.
  ASSERT_EQ(doc.find("nav", "id", "contents").size(), 1u);
  EXPECT_EQ(doc.find("h2", "id", "summary").size(), 1u);
  const std::vector<test::XmlElement> links = doc.find("a");
  EXPECT_EQ(links.size(), 2u + 2u * 11u) << "flags, summary, and per layer: the layer, load, scores, agreement, "
                                            "gradient paths, tokens, routing neurons, neuron gradients, neuron scan, "
                                            "co-selection, top tokens";
  for (const test::XmlElement& link : links) {
    const std::string target = link.attribute("href").substr(1);
    EXPECT_EQ(doc.find("figure", "id", target).size() + doc.find("h2", "id", target).size(), 1u) << target;
  }
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);  // no external resources
  EXPECT_EQ(doc.find("h2", "id", "flags").size(), 1u);
  std::vector<std::string> ids = {"summary-entropy", "summary-agreement", "summary-load-heatmap", "summary-scan"};
  for (const char* layer : {"layer0", "layer1"})
    for (const char* part : {"-load", "-scores", "-margin", "-agreement", "-gradient-paths", "-tokens", "-neurons",
                             "-neuron-gradients", "-scan", "-coselection", "-top-tokens"})
      ids.push_back(std::string(layer) + part);
  for (const std::string& id : ids) EXPECT_EQ(doc.find("figure", "id", id).size(), 1u) << id;
  EXPECT_EQ(doc.find("figure").size(), ids.size());
  EXPECT_EQ(doc.find("svg").size(), ids.size() - 4);  // every figure but the token views and top-token tables is a chart
  EXPECT_GE(doc.find("span").size(), 100u);           // the coloured example tokens

  const json::Value stats = json::parse(read(dir + "/report/stats.json"), "stats.json");
  EXPECT_EQ(stats.at("tokens").as_int(), 2048);
  const std::vector<json::Value>& layers = stats.at("layers").as_array();
  ASSERT_EQ(layers.size(), 2u);
  for (size_t l = 0; l < layers.size(); ++l) {
    double total = 0;
    for (const json::Value& f : layers[l].at("load").as_array()) total += f.as_double();
    EXPECT_NEAR(total, 1.0, 1e-9);
    const double h = layers[l].at("load_entropy").as_double();
    EXPECT_TRUE(h > 0 && h <= 1.0 + 1e-12) << h;
    EXPECT_LT(layers[l].at("gradient_paths").at("split_error").as_double(), 1e-3);
    const double overlap = layers[l].at("score_vs_full_activation").at("topk_overlap").as_double();
    EXPECT_TRUE(overlap >= 0 && overlap <= 1) << overlap;
    EXPECT_DOUBLE_EQ(layers[l].at("score_vs_full_activation").at("random_overlap").as_double(), 0.5);  // K / n
  }
  for (const char* csv : {"layers", "load", "scores", "margins", "agreement", "gradient_paths", "neurons", "neuron_scan",
                          "coselection", "top_tokens", "token_experts"}) {
    const std::string text = read(dir + "/report/" + csv + ".csv");
    EXPECT_GT(std::count(text.begin(), text.end(), '\n'), 2) << csv;
  }
  const std::string load = read(dir + "/report/load.csv");
  EXPECT_EQ(std::count(load.begin(), load.end(), '\n'), 1 + 2 * 4);  // header + layer × expert
}

TEST(AnalyzeCli, MoeReportLeavesOutTheUoeParts) {
  const std::string dir = test::temp_dir("analyze_moe");
  const auto data = test::micro_data(dir);
  const std::string ckpt = micro_checkpoint(dir, nn::FfnKind::MoE, *data);
  int code = 0;
  const std::string out = analyze(ckpt, dir + "/text.txt", dir + "/report", &code);
  ASSERT_EQ(code, 0) << out;
  const test::XmlCheck doc = test::check_xml(read(dir + "/report/report.html"));
  ASSERT_EQ(doc.error, "");
  EXPECT_EQ(doc.find("figure", "id", "layer0-agreement").size(), 1u);
  EXPECT_EQ(doc.find("figure", "id", "layer0-gradient-paths").size(), 0u);
  const json::Value stats = json::parse(read(dir + "/report/stats.json"), "stats.json");
  EXPECT_FALSE(stats.at("layers").as_array()[0].contains("gradient_paths"));
  EXPECT_FALSE(stats.at("layers").as_array()[0].contains("score_vs_rest_activation"));
}

TEST(AnalyzeCli, AoeAndMoeGetTheNeuronScanButNoRoutingNeurons) {
  const std::string dir = test::temp_dir("analyze_scan");
  const auto data = test::micro_data(dir);
  for (const nn::FfnKind kind : {nn::FfnKind::AoE, nn::FfnKind::MoE}) {
    const std::string ckpt = micro_checkpoint(dir, kind, *data), out_dir = dir + "/report_" + nn::ffn_kind_name(kind);
    int code = 0;
    const std::string out = analyze(ckpt, dir + "/text.txt", out_dir, &code);
    ASSERT_EQ(code, 0) << out;
    const test::XmlCheck doc = test::check_xml(read(out_dir + "/report.html"));
    ASSERT_EQ(doc.error, "");
    for (const char* id : {"layer0-scan", "layer1-scan", "summary-scan", "summary-load-heatmap", "layer0-coselection",
                           "layer0-top-tokens"})
      EXPECT_EQ(doc.find("figure", "id", id).size(), 1u) << id;
    EXPECT_EQ(doc.find("figure", "id", "layer0-neurons").size(), 0u);
    EXPECT_FALSE(std::filesystem::exists(out_dir + "/neurons.csv"));
    const std::string scan = read(out_dir + "/neuron_scan.csv");
    EXPECT_EQ(std::count(scan.begin(), scan.end(), '\n'), 1 + 2 * 4) << scan;
    const json::Value stats = json::parse(read(out_dir + "/stats.json"), "stats.json");
    const json::Value& layer = stats.at("layers").as_array()[0];
    EXPECT_EQ(layer.at("neuron_scan").at("r").as_int(), 8);
    EXPECT_FALSE(layer.contains("routing_neurons"));
    // the micro MoE has a shared expert; AoE has none
    EXPECT_EQ(layer.contains("shared_share"), kind == nn::FfnKind::MoE);
  }
}

TEST(AnalyzeCli, CompareWritesOneSideBySideReport) {
  const std::string dir = test::temp_dir("analyze_compare");
  const auto data = test::micro_data(dir);
  const std::string a = micro_checkpoint(dir, nn::FfnKind::UoE, *data), b = micro_checkpoint(dir, nn::FfnKind::MoE, *data);
  int code = 0;
  const std::string out = test::run_command(std::string(UOE_CLI_PATH) + " analyze --ckpt " + a + " --compare " + b +
                                                " --data " + dir + "/text.txt --out " + dir + "/cmp --tokens 1024 --seq 32 "
                                                "--samples 128 --examples 20 --grad-windows 1",
                                            &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("report: " + dir + "/cmp/report.html"), std::string::npos) << out;
  const std::string html = read(dir + "/cmp/report.html");
  const test::XmlCheck doc = test::check_xml(html);
  ASSERT_EQ(doc.error, "") << doc.error;
  for (const char* id : {"compare-entropy", "compare-agreement", "compare-scan", "compare-shared", "compare-load-a",
                         "compare-load-b"})
    EXPECT_EQ(doc.find("figure", "id", id).size(), 1u) << id;
  EXPECT_EQ(doc.find("figure", "id", "compare-gradient-paths").size(), 0u) << "only one side is UoE";
  EXPECT_EQ(doc.find("h2", "id", "flags-a").size() + doc.find("h2", "id", "flags-b").size(), 2u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  for (const char* side : {"a", "b"}) {
    EXPECT_EQ(doc.find("a", "href", std::string(side) + "/report.html").size(), 1u) << side;
    EXPECT_EQ(test::check_xml(read(dir + "/cmp/" + side + "/report.html")).error, "") << side;
    EXPECT_TRUE(std::filesystem::exists(dir + "/cmp/" + side + "/stats.json")) << side;
  }
  // compare.csv: per layer the metrics both sides have, with b − a
  const std::string csv = read(dir + "/cmp/compare.csv");
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "layer,metric,a,b,b_minus_a");
  int load_rows = 0;
  while (std::getline(lines, line))
    if (line.find("\"load entropy\"") != std::string::npos) {
      ++load_rows;
      const auto c1 = line.rfind(','), c2 = line.rfind(',', c1 - 1), c3 = line.rfind(',', c2 - 1);
      const double va = std::stod(line.substr(c3 + 1)), vb = std::stod(line.substr(c2 + 1)), diff = std::stod(line.substr(c1 + 1));
      EXPECT_NEAR(diff, vb - va, 1e-8) << line;
    }
  EXPECT_EQ(load_rows, 2);
}

TEST(AnalyzeCli, RunsOfACompareFolderGetOneCombinedReport) {
  // <dir>/<kind>/checkpoint, as uoe compare lays out its runs; the dense one has no routing and is left out
  const std::string dir = test::temp_dir("analyze_runs");
  const auto data = test::micro_data(dir);
  for (const nn::FfnKind kind : {nn::FfnKind::UoE, nn::FfnKind::MoE, nn::FfnKind::AoE, nn::FfnKind::Dense})
    micro_checkpoint(dir + "/runs", kind, *data);
  int code = 0;
  std::string out = test::run_command(std::string(UOE_CLI_PATH) + " analyze --runs " + dir + "/runs --data " +
                                                dir + "/text.txt --out " + dir + "/all --tokens 512 --seq 32 "
                                                "--samples 64 --examples 10 --grad-windows 1",
                                            &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("dense FFN, no routing to analyse: left out"), std::string::npos) << out;
  const test::XmlCheck doc = test::check_xml(read(dir + "/all/report.html"));
  ASSERT_EQ(doc.error, "") << doc.error;
  for (const char* run : {"aoe", "moe", "uoe"}) {
    EXPECT_EQ(doc.find("figure", "id", std::string("compare-load-") + run).size(), 1u) << run;
    EXPECT_EQ(doc.find("h2", "id", std::string("flags-") + run).size(), 1u) << run;
    EXPECT_TRUE(std::filesystem::exists(dir + "/all/" + run + "/report.html")) << run;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/all/dense"));
  std::istringstream csv(read(dir + "/all/compare.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "layer,metric,aoe,moe,uoe,moe_minus_aoe,uoe_minus_aoe");
  // --runs stands alone, and an empty folder says what it expected
  out = test::run_command(std::string(UOE_CLI_PATH) + " analyze --runs " + dir + "/runs --ckpt x --data " + dir +
                              "/text.txt --out " + dir + "/x",
                          &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("give it without --ckpt and --compare"), std::string::npos) << out;
  std::filesystem::create_directories(dir + "/empty");
  out = test::run_command(std::string(UOE_CLI_PATH) + " analyze --runs " + dir + "/empty --data " + dir +
                              "/text.txt --out " + dir + "/x",
                          &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("holds no run with a routed checkpoint"), std::string::npos) << out;
}

TEST(AnalyzeCli, BadInputGetsOneClearError) {
  const std::string dir = test::temp_dir("analyze_bad");
  const auto data = test::micro_data(dir);
  const std::string dense = micro_checkpoint(dir, nn::FfnKind::Dense, *data);
  int code = 0;
  std::string out = analyze(dense, dir + "/text.txt", dir + "/report", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("dense FFN: there is no routing to analyse"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/report/report.html"));
  out = analyze(dir + "/missing", dir + "/text.txt", dir + "/report", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("no checkpoint"), std::string::npos) << out;
  out = test::run_command(std::string(UOE_CLI_PATH) + " analyze --ckpt " + dense, &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--data"), std::string::npos) << out;
  const std::string moe = micro_checkpoint(dir, nn::FfnKind::MoE, *data);
  out = test::run_command(std::string(UOE_CLI_PATH) + " analyze --ckpt " + moe + " --data " + dir + "/text.txt --out " +
                              dir + "/report --tokens 2048 --seq -5",
                          &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--seq -5 must be >= 1 (or 0: the model context)"), std::string::npos) << out;
  // 10^12 tokens wrapped around the file for days
  out = test::run_command("timeout 60 " + std::string(UOE_CLI_PATH) + " analyze --ckpt " + moe + " --data " + dir +
                              "/text.txt --out " + dir + "/report --tokens 1000000000000 --seq 32",
                          &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--tokens 1000000000000 is more than the " + std::to_string(data->file().size()) +
                     " tokens of '"),
            std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/report/report.html"));
}

TEST(AnalyzeReport, TokenPiecesAndTitleOfAnyBytesGiveWellFormedXhtml) {
  AnalysisResult r;
  r.config.ffn.kind = nn::FfnKind::MoE;
  r.config.ffn.n_experts = 2;
  r.layers.push_back(LayerAccumulator(2, 1).finish(3));
  r.layers[0].example_expert = {0, 1, 0, 1, 0};
  // U+FFFE and U+FFFF (valid UTF-8, not XML characters), a cut character, a control byte, a line break
  r.example_pieces = {"ok", "\xEF\xBF\xBE", "\xEF\xBF\xBF", "\xC3<\x01", "a\nb"};
  const std::string html = report_html(r, "ckpt \xff\xfe");
  const test::XmlCheck doc = test::check_xml(html);
  EXPECT_EQ(doc.error, "") << html;
  EXPECT_NE(html.find("a↵<br/>b"), std::string::npos);
}

}  // namespace
}  // namespace uoe::analysis
