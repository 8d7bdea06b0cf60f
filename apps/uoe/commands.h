// The subcommands of the uoe program and the helpers they share.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flags.h"
#include "core/device.h"
#include "core/dtype.h"
#include "nn/accounting.h"
#include "nn/dataset.h"
#include "nn/progress.h"
#include "nn/tokenizer.h"
#include "nn/transformer.h"

namespace uoe::cli {

int cmd_train(const Args& a);
int cmd_eval(const Args& a);
int cmd_sample(const Args& a);
int cmd_info(const Args& a);
int cmd_compare(const Args& a);
int cmd_plot(const Args& a);
int cmd_prepare(const Args& a);
int cmd_graph(const Args& a);
int cmd_analyze(const Args& a);

// A command of the program: its name, what it does, an example, its flags (command_table.cpp) and its code.
struct Command {
  std::string name, summary, example;
  std::vector<Flag> flags;
  int (*run)(const Args&);
};
const std::vector<Command>& commands();

// The flag that sets a library option, for the library's messages (core/option_names.h): "TrainOptions::batch" is
// --batch, "TrainOptions::memory_check = false" is --skip-memory-check, "TrainOptions::out_dir emptied" is
// uoe train --overwrite; nullopt for an option no flag sets.
std::optional<std::string> flag_of_option(const std::string& field);

// Whether `data_path` is a prepared token file (starts with the token file magic).
bool is_token_file(const std::string& data_path);
// Token ids for `data_path`: a prepared token file is used as is (its vocabulary must fit `tok`'s, else one
// error ending in `mismatch_advice`, what to do about it with this command); a text file is tokenised into
// `cache_path` with `tok` first.
std::shared_ptr<nn::TokenFile> open_tokens(const std::string& data_path, const nn::Tokenizer& tok,
                                          const std::string& cache_path, const std::string& mismatch_advice);
// The same for a read-only use (eval, analyze): text is tokenised into a temporary file that is removed as soon
// as it is mapped, so nothing is left behind, whatever happens next.
std::shared_ptr<nn::TokenFile> open_tokens_once(const std::string& data_path, const nn::Tokenizer& tok,
                                               const std::string& mismatch_advice);
// The advice of open_tokens for a command whose tokenizer is the checkpoint's in ckpt_dir.
std::string checkpoint_tokens_advice(const std::string& ckpt_dir);
// The vocab size of a "bpe:<vocab>" spec; anything else after "bpe:" is one error naming --tokenizer.
int64_t bpe_vocab_size(const std::string& spec);
// "byte", "bpe:<vocab>" (trained on the text at data_path) or a saved tokenizer .json file.
std::unique_ptr<nn::Tokenizer> make_tokenizer(const std::string& spec, const std::string& data_path);
void set_threads(int64_t threads);
// A precision flag (--dtype, --param-dtype): "f32" (the default) or "bf16"; anything else is one error naming the
// flag, with `meaning` saying what it sets.
DType precision_flag(const Args& a, const std::string& flag, const std::string& meaning);
// --device: cpu (the default), cuda or cuda:N; a GPU that is not visible is one error naming the flag.
Device device_flag(const Args& a);

// A progress bar on stderr (plain rate-limited lines when stderr is not a terminal) for a task counted in units
// (eval's batches, analyze's windows, compare's runs); the bar's line ends when the object goes.
class TaskProgress {
 public:
  explicit TaskProgress(std::string what);
  ~TaskProgress() { end_line(); }
  void update(int64_t done, int64_t total, const std::string& detail = "");
  void end_line() { bar_.finish(); }  // before other output: the bar's line ends, the next update starts anew
  double elapsed_s() const;

 private:
  std::string what_;
  nn::Progress bar_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// Before eval, sample or analyze loads the model of config.json `c`: its inference memory estimate at `o` (or
// `at_least` bytes, the peak of another phase of the command) against what the process may use on `device`
// (nn/preflight.h); refused unless --skip-memory-check.
void check_inference_memory(const Args& a, const std::string& command, const nn::ModelConfig& c,
                            nn::InferenceOptions o, Device device, double at_least = 0);

// A checkpoint's model with its weights loaded (the optimiser state is not read) and its tokenizer: what eval,
// sample and analyze start from. The model is on `device` and computes in `compute` (--device, --dtype).
struct TrainedModel {
  std::unique_ptr<nn::LanguageModel> model;
  std::unique_ptr<nn::Tokenizer> tokenizer;
};
TrainedModel load_trained_model(const std::string& ckpt_dir, Device device = Device::cpu(),
                                DType compute = DType::Float32);

}  // namespace uoe::cli
