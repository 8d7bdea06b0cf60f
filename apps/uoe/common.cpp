// Helpers shared by the subcommands: tokenizers from a spec, token files from text, thread count, precision flags.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/threads.h"
#include "cuda/cuda_api.h"
#include "nn/checkpoint.h"
#include "nn/preflight.h"

namespace uoe::cli {

bool is_token_file(const std::string& data_path) {
  const std::string magic = read_file_bytes(data_path, sizeof nn::kTokenFileMagic);  // a regular file's
  return magic == std::string(nn::kTokenFileMagic, sizeof nn::kTokenFileMagic);
}

std::shared_ptr<nn::TokenFile> open_tokens(const std::string& data_path, const nn::Tokenizer& tok,
                                          const std::string& cache_path, const std::string& mismatch_advice) {
  if (is_token_file(data_path)) {
    auto tokens = std::make_shared<nn::TokenFile>(data_path);
    UOE_CHECK(tokens->vocab_size() <= tok.vocab_size(), "--data ", data_path, " holds ids of a vocabulary of ",
              tokens->vocab_size(), " but the tokenizer has ", tok.vocab_size(), " ids: ", mismatch_advice);
    return tokens;
  }
  nn::prepare_tokens(data_path, tok, cache_path);
  return std::make_shared<nn::TokenFile>(cache_path, data_path);
}

std::shared_ptr<nn::TokenFile> open_tokens_once(const std::string& data_path, const nn::Tokenizer& tok,
                                               const std::string& mismatch_advice) {
  if (is_token_file(data_path)) return open_tokens(data_path, tok, "", mismatch_advice);
  const std::string cache =
      (std::filesystem::temp_directory_path() / ("uoe-tokens-" + std::to_string(::getpid()) + ".bin")).string();
  struct Remove {
    const std::string& path;
    ~Remove() { ::unlink(path.c_str()); }  // the mapping keeps the ids readable
  } remove{cache};
  return open_tokens(data_path, tok, cache, mismatch_advice);
}

std::string checkpoint_tokens_advice(const std::string& ckpt_dir) {
  return "pass the text, or tokens prepared with the checkpoint's tokenizer (uoe prepare --tokenizer " + ckpt_dir +
         "/tokenizer.json)";
}

int64_t bpe_vocab_size(const std::string& spec) {
  const std::string digits = spec.substr(4);
  UOE_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos,
            "--tokenizer '", spec, "': expected bpe:<vocab size>, e.g. bpe:1024");
  try {
    return std::stoll(digits);
  } catch (const std::out_of_range&) {
    fail("--tokenizer '", spec, "': the vocab size is too large (at most ", INT32_MAX, ")");
  }
}

std::unique_ptr<nn::Tokenizer> make_tokenizer(const std::string& spec, const std::string& data_path) {
  if (spec == "byte") return nn::make_byte_tokenizer();
  if (spec.rfind("bpe:", 0) == 0) {
    const int64_t vocab = bpe_vocab_size(spec);
    UOE_CHECK(!is_token_file(data_path), "--tokenizer ", spec, " learns its merges from a text, but --data ", data_path,
              " is a prepared token file: pass the tokenizer .json it was prepared with (uoe prepare --tokenizer-out)");
    return nn::train_bpe(read_file_bytes(data_path), vocab);
  }
  if (spec.size() > 5 && spec.substr(spec.size() - 5) == ".json") return nn::load_tokenizer(spec);
  fail("--tokenizer '", spec, "' is not 'byte', 'bpe:<vocab size>' or a tokenizer .json file");
}

TaskProgress::TaskProgress(std::string what) : what_(std::move(what)), bar_(stderr, ::isatty(STDERR_FILENO) == 1) {}

void TaskProgress::update(int64_t done, int64_t total, const std::string& detail) {
  bar_.task(what_, done, total, elapsed_s(), detail);
}

double TaskProgress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void set_threads(int64_t threads) {
  UOE_CHECK(threads >= 0, "--threads must be >= 0 (0: OMP_NUM_THREADS or the idle cores), got ", threads);
  set_cpu_threads(int(threads));
}

DType precision_flag(const Args& a, const std::string& flag, const std::string& meaning) {
  const std::string value = a.str(flag);
  UOE_CHECK(value == "f32" || value == "bf16", "--", flag, " '", value, "': expected f32 or bf16 (", meaning, ")");
  return value == "bf16" ? DType::BFloat16 : DType::Float32;
}

Device device_flag(const Args& a) {
  const Device d = Device::parse(a.str("device"));
  UOE_CHECK(d.is_cpu() || (cuda::is_available() && d.index < cuda::device_count()), "--device ", d.str(),
            ": no such CUDA device is visible (a CPU-only build, no GPU, or fewer GPUs); use --device cpu");
  return d;
}

void check_inference_memory(const Args& a, const std::string& command, const nn::ModelConfig& c,
                            nn::InferenceOptions o, Device device, double at_least) {
  if (a.flag("skip-memory-check")) return;
  nn::check_memory(command, device, "InferenceOptions::batch", o.batch, [&](int64_t batch) {
    o.batch = batch;
    return std::max(nn::estimate_inference_memory(c, o), at_least);
  }, 1, "Pass --skip-memory-check to start anyway");
}

TrainedModel load_trained_model(const std::string& ckpt_dir, Device device, DType compute) {
  TrainedModel t;
  {
    nn::Checkpoint c = nn::load_checkpoint(ckpt_dir, nn::OptimizerState::Skip);
    UOE_CHECK(c.tokenizer->vocab_size() <= c.config.vocab_size, "checkpoint ", ckpt_dir, ": tokenizer.json has ",
              c.tokenizer->vocab_size(), " ids but the model (config.json) embeds only vocab_size ",
              c.config.vocab_size, ": the two files do not belong together");
    t = {std::make_unique<nn::LanguageModel>(c.config), std::move(c.tokenizer)};
    t.model->load_state_dict(c.model, true, ckpt_dir + "/model.safetensors");
  }  // c.model's copy of the weights is freed here
  t.model->to(device);
  if (compute != DType::Float32) t.model->compute_dtype = compute;
  return t;
}

}  // namespace uoe::cli
