// uoe graph: writes the DOT (and SVG when Graphviz is installed) of the chosen block; bad flags fail clearly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/json.h"
#include "fixtures.h"

namespace uoe {
namespace {

using test::run_command;

class GraphCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_dir("graph_cli");
    std::ofstream(dir + "/micro.json") << nn::to_json(test::micro_config(nn::FfnKind::UoE)).dump(2);
  }
  std::string graph(const std::string& flags, int* code) const {
    return run_command(std::string(UOE_CLI_PATH) + " graph " + flags, code);
  }
  std::string dir;
};

TEST_F(GraphCli, WritesTheChosenBlockAsDotAndSvg) {
  int code = 0;
  const std::string out = graph("--config " + dir + "/micro.json --layer 1 --out " + dir + "/block.dot", &code);
  ASSERT_EQ(code, 0) << out;
  const std::string dot = read_file_bytes(dir + "/block.dot");
  EXPECT_NE(dot.find("blocks.1.ffn.w_gate [4, 32, 32]"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("blocks.0."), std::string::npos) << "only layer 1 is drawn";
  EXPECT_NE(dot.find("expert_ffn"), std::string::npos);
  EXPECT_NE(dot.find("cluster_legend"), std::string::npos);
  if (std::system("command -v dot > /dev/null 2>&1") == 0) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/block.svg")) << out;
  } else {
    EXPECT_NE(out.find("DOT only"), std::string::npos) << out;
  }
}

TEST_F(GraphCli, OutputGoesUnderTheOutFolderWhichIsCreated) {
  int code = 0;
  std::string out = graph("--config " + dir + "/micro.json --out " + dir + "/new/deeper/block.dot", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/new/deeper/block.dot")) << out;
  out = graph("--config " + dir + "/micro.json --out " + dir + "/folder/", &code);  // a folder: graph.dot in it
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/folder/graph.dot")) << out;
  out = graph("--config " + dir + "/micro.json --out " + dir + "/new", &code);  // an existing folder
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/new/graph.dot")) << out;
}

TEST_F(GraphCli, BadLayerOrPresetNamesTheFlag) {
  int code = 0;
  std::string out = graph("--config " + dir + "/micro.json --layer 2 --out " + dir + "/g.dot", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--layer 2 is out of range"), std::string::npos) << out;
  EXPECT_NE(out.find("2 layers (0 to 1)"), std::string::npos) << out;
  out = graph("--config tiny-nope --out " + dir + "/g.dot", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--config 'tiny-nope'"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown preset"), std::string::npos) << out;
  out = graph("--config tiny-uoe --layer x --out " + dir + "/g.dot", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--layer expects an integer"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/g.dot"));
}

}  // namespace
}  // namespace uoe
