// The fuzz targets: each writes the input where a run would find it and reads it with the library's loaders.
#include "targets.h"

#include <map>
#include <stdexcept>

#include "core/error.h"
#include "core/safetensors.h"
#include "corpus.h"
#include "nn/checkpoint.h"
#include "nn/dataset.h"
#include "nn/trainer_state.h"
#include "scratch.h"

namespace uoe::fuzz {
namespace {

// Per format, a valid checkpoint directory in which the target replaces one file per input (the others stay valid,
// so loading gets as far as the fuzzed file). Removed at exit.
class ScratchCheckpoints {
 public:
  const std::string& dir(const std::string& format) {
    auto it = dirs_.find(format);
    if (it == dirs_.end()) {
      const std::string d = root_.path() + "/" + format;
      write_seed_checkpoint(d);
      it = dirs_.emplace(format, d).first;
    }
    return it->second;
  }

 private:
  ScratchDir root_{"targets"};
  std::map<std::string, std::string> dirs_;
};

const std::string& checkpoint_dir(const std::string& format) {
  static ScratchCheckpoints scratch;
  return scratch.dir(format);
}

bool g_expect_accepted = false;  // set by ExpectAccepted

// Runs `read`; a uoe::Error is the clean rejection every bad input must get, anything else propagates.
template <typename F>
void read_or_reject(F&& read) {
  try {
    read();
  } catch (const Error& e) {
    if (g_expect_accepted) throw std::logic_error(std::string("[fuzz] a valid file was rejected: ") + e.what());
  }
}

// Checks an invariant of what was read; its failure, a uoe::Error included, is a finding.
template <typename F>
void expect_invariant(const char* what, F&& check) {
  bool held = false;
  std::string why;
  try {
    held = check();
  } catch (const Error& e) {
    why = std::string(": ") + e.what();
  }
  if (!held) throw std::logic_error(std::string("[fuzz] broken invariant: ") + what + why);
}

// Reads every byte and element of every tensor, as loading a model does (a view past its file's mapping faults).
void use(const std::map<std::string, Tensor>& tensors) {
  volatile unsigned sink = 0;
  for (const auto& [name, t] : tensors) {
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (size_t i = 0; i < size_t(t.numel()) * t.itemsize(); ++i) sink = sink + p[i];
    (void)t.to(DType::Float64);
  }
}

std::map<std::string, Tensor> as_map(const safetensors::File& f) {
  std::map<std::string, Tensor> out;
  for (const auto& n : f.tensors) out[n.name] = n.tensor;
  return out;
}

}  // namespace

ExpectAccepted::ExpectAccepted() { g_expect_accepted = true; }
ExpectAccepted::~ExpectAccepted() { g_expect_accepted = false; }

int fuzz_safetensors(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  read_or_reject([&] { use(as_map(safetensors::deserialize(bytes, "fuzz input"))); });
  // As a checkpoint's model file, read through its file mapping.
  const std::string& dir = checkpoint_dir("safetensors");
  write_bytes(dir + "/model.safetensors", bytes);
  read_or_reject([&] { use(nn::load_checkpoint(dir).model); });
  return 0;
}

int fuzz_optimizer(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir("optimizer");
  write_bytes(dir + "/optimizer.safetensors", data, size);
  read_or_reject([&] { use(nn::load_checkpoint(dir).optimizer); });
  return 0;
}

int fuzz_config(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir("config");
  write_bytes(dir + "/config.json", data, size);
  read_or_reject([&] {
    const nn::ModelConfig c = nn::checkpoint_config(dir);
    // The next checkpoint stores it again: written and read back, it is the same configuration.
    expect_invariant("config.json round trip", [&] {
      const std::string once = nn::to_json(c).dump(2);
      return nn::to_json(nn::model_config_from_json(json::parse(once), "round trip")).dump(2) == once;
    });
  });
  return 0;
}

int fuzz_trainer_state(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir("trainer_state");
  write_bytes(dir + "/trainer_state.json", data, size);
  read_or_reject([&] {
    const json::Value state = nn::load_checkpoint(dir).trainer_state;
    expect_invariant("JSON round trip", [&] { return json::parse(state.dump(2)) == state; });
    // What a resumed run reads of it (nn/trainer_state.h): every field with its type, counts >= 0; written and
    // read back, the same state.
    const nn::TrainerState read = nn::trainer_state_from_json(state, dir + "/trainer_state.json");
    expect_invariant("TrainerState round trip", [&] {
      return nn::to_json(nn::trainer_state_from_json(nn::to_json(read), "round trip")) == nn::to_json(read);
    });
  });
  return 0;
}

int fuzz_tokenizer(const uint8_t* data, size_t size) {
  const std::string& dir = checkpoint_dir("tokenizer");
  write_bytes(dir + "/tokenizer.json", data, size);
  read_or_reject([&] {
    const std::unique_ptr<nn::Tokenizer> tok = nn::load_tokenizer(dir + "/tokenizer.json");
    const std::string probe = "the reader rejects \xff\xfe bytes:  12, 345 \n\tand   merges\xc3\xa9.";
    expect_invariant("decode(encode(text)) == text", [&] { return tok->decode(tok->encode(probe)) == probe; });
    expect_invariant("tokenizer.json round trip", [&] {
      const json::Value once = tok->to_json();
      return nn::tokenizer_from_json(json::parse(once.dump()))->to_json() == once;
    });
  });
  return 0;
}

int fuzz_token_file(const uint8_t* data, size_t size) {
  const std::string path = checkpoint_dir("token_file") + "/tokens.bin";
  write_bytes(path, data, size);
  std::shared_ptr<nn::TokenFile> file;
  read_or_reject([&] { file = std::make_shared<nn::TokenFile>(path, "fuzz.txt"); });
  if (!file) return 0;
  read_or_reject([&] {
    std::vector<int64_t> ids(size_t(file->size()));
    file->read(0, file->size(), ids.data());
  });
  // What training and evaluation cut from it: a random training batch, every validation batch.
  const nn::TokenDataset dataset(file);
  for (const int64_t T : {1, 3}) {
    read_or_reject([&] { dataset.train_batch(1, 0, 2, T); });
    read_or_reject([&] {
      for (int64_t k = 0, n = dataset.val_batch_count(2, T); k < n; ++k) dataset.val_batch(k, 2, T);
    });
  }
  return 0;
}

const std::vector<Target>& all_targets() {
  static const std::vector<Target> targets = {{"safetensors", fuzz_safetensors},
                                              {"optimizer", fuzz_optimizer},
                                              {"config", fuzz_config},
                                              {"trainer_state", fuzz_trainer_state},
                                              {"tokenizer", fuzz_tokenizer},
                                              {"token_file", fuzz_token_file}};
  return targets;
}

const Target& find_target(const std::string& format) {
  std::string names;
  for (const Target& t : all_targets()) {
    if (format == t.format) return t;
    names += std::string(names.empty() ? "" : ", ") + t.format;
  }
  fail("[fuzz] unknown format '", format, "': expected one of ", names);
}

}  // namespace uoe::fuzz
