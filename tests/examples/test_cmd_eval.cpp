// uoe eval: the loss in nats per token and bits per byte, with a progress line per batch; --json prints the same
// numbers at full precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "core/json.h"
#include "fixtures.h"
#include "nn/tokenizer.h"

namespace uoe {
namespace {

TEST(EvalCli, JsonHasTheNumbersAtFullPrecision) {
  const std::string dir = test::temp_dir("eval_cli");
  const auto data = test::micro_data(dir);
  nn::TrainOptions o = test::micro_train_options(dir + "/run", 2);
  nn::train(test::micro_config(nn::FfnKind::MoE), o, *data, *nn::make_byte_tokenizer());
  const std::string eval = std::string(UOE_CLI_PATH) + " eval --ckpt " + dir + "/run/checkpoint --data " + dir +
                           "/text.txt --batch 2 --max-batches 3";
  int code = 0;
  const std::string text = test::run_command(eval, &code);
  ASSERT_EQ(code, 0) << text;
  EXPECT_NE(text.find("batch 3/3"), std::string::npos) << "the progress reaches the last batch: " << text;
  double nats = 0, bits = 0;
  const size_t at = text.find("val loss ");
  ASSERT_NE(at, std::string::npos) << text;
  ASSERT_EQ(std::sscanf(text.c_str() + at, "val loss %lf nats/token, %lf bits/byte", &nats, &bits), 2) << text;

  const std::string out = test::run_command("(" + eval + " --json 2>/dev/null)", &code);  // stdout alone: the JSON
  ASSERT_EQ(code, 0) << out;
  const json::Value v = json::parse(out, "uoe eval --json");
  const double json_nats = v.at("val_loss_nats_per_token").as_double();
  const double json_bits = v.at("bits_per_byte").as_double();
  EXPECT_NEAR(json_nats, nats, 5e-5);  // the text rounds to 4 decimals
  EXPECT_NEAR(json_bits, bits, 5e-5);
  EXPECT_NE(json_nats, nats) << "more digits than the text's 4 decimals";
  EXPECT_NE(json_bits, bits) << "more digits than the text's 4 decimals";
  EXPECT_EQ(v.at("tokens").as_int(), 3 * 2 * 32) << "3 batches of 2 windows of the model's 32-token context";
}

}  // namespace
}  // namespace uoe
