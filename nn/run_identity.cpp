// Run identity: building it, the rules for what may differ on resume, the cross-rank comparison, and adopting a
// checkpoint's settings.
#include "nn/run_identity.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/file_digest.h"
#include "core/option_names.h"
#include "core/string_collectives.h"
#include "nn/checkpoint.h"

namespace uoe::nn {
namespace {

// What a resumed run may do with a field of the identity.
enum class Change {
  Never,    // the model, its tokenizer and data, the optimiser and the data stream: another run altogether
  Allowed,  // named in TrainOptions::allow_change: the run continues, no longer bit-exact with the one recorded
  Layout,   // ranks, ZeRO-1, expert parallelism, device: the same steps, to float rounding
};

struct Rule {
  const char* field;
  Change change;
  const char* effect;  // of an allowed change, on the steps from the resumed one on
};

constexpr const char* kOtherLr = "the learning rate from here on differs from the recorded run's";
constexpr const char* kOtherBatches = "the batches from here on differ from those the recorded run would draw";
constexpr const char* kOtherUpdates = "the updates from here on differ from the recorded run's";
constexpr const char* kOtherRounding = "the steps from here on round differently from the recorded run's";

const Rule kRules[] = {
    {"model", Change::Never, ""},
    {"tokenizer", Change::Never, ""},
    {"data", Change::Never, ""},
    {"optimizer", Change::Never, ""},
    {"seed", Change::Never, ""},
    {"steps", Change::Allowed,
     "the cosine schedule now spans the new number of steps, so the learning rate from here on differs from the "
     "recorded run's, and from that of a run started with that number"},
    {"batch", Change::Allowed, kOtherBatches},
    {"seq", Change::Allowed, kOtherBatches},
    {"grad-accum", Change::Allowed, kOtherBatches},
    {"lr", Change::Allowed, kOtherLr},
    {"min-lr", Change::Allowed, kOtherLr},
    {"warmup", Change::Allowed, kOtherLr},
    {"weight-decay", Change::Allowed, kOtherUpdates},
    {"clip", Change::Allowed, kOtherUpdates},
    {"beta1", Change::Allowed, kOtherUpdates},
    {"beta2", Change::Allowed, kOtherUpdates},
    {"momentum", Change::Allowed, kOtherUpdates},
    {"dtype", Change::Allowed, kOtherRounding},
    {"param-dtype", Change::Allowed, kOtherRounding},
    {"ranks", Change::Layout, ""},
    {"zero1", Change::Layout, ""},
    {"expert-parallel", Change::Layout, ""},
    {"device", Change::Layout, ""},
};

const Rule& rule_of(const std::string& field) {
  for (const Rule& r : kRules)
    if (field == r.field) return r;
  fail("[run identity] no rule for the field '", field, "'");  // a field added to run_identity() without one
}

std::string allowed_list() {
  std::string s;
  for (const Rule& r : kRules)
    if (r.change == Change::Allowed) s += (s.empty() ? "" : ", ") + std::string(r.field);
  return s;
}

void check_allowed(const std::string& field) {
  const bool ok = std::any_of(std::begin(kRules), std::end(kRules),
                              [&](const Rule& r) { return field == r.field && r.change == Change::Allowed; });
  UOE_CHECK(ok, option_name("TrainOptions::allow_change"), " ", field, ": not a setting that may change on resume "
            "(those are ", allowed_list(), "; the model, tokenizer, data, optimizer and seed never do, the ranks' "
            "layout always may)");
}

// The TrainOptions field a key of the identity records ("grad-accum": TrainOptions::grad_accum); the ranks are the
// communicator's size, no option.
std::string option_of(const std::string& key) {
  if (key == "ranks") return key;
  if (key == "dtype") return "TrainOptions::compute_dtype";
  std::string field = key;
  std::replace(field.begin(), field.end(), '-', '_');
  return "TrainOptions::" + field;
}

// A field as the caller knows it: an option (option_name(), e.g. "TrainOptions::lr") or a dotted path into the
// model, tokenizer or data.
std::string shown(const std::string& path) {
  return path.find('.') == std::string::npos && path != "model" && path != "tokenizer" && path != "data"
             ? option_name(option_of(path))
             : path;
}

struct Difference {
  std::string top;   // the identity's key
  std::string path;  // as shown()
  std::string here, there;
};

// The fields (dotted paths) in which `a` and `b` differ; keys in one object only count when `strict`.
void differences(const json::Value& a, const json::Value& b, const std::string& path, bool strict,
                 std::vector<Difference>& out) {
  auto key_path = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  auto add = [&](const std::string& at, const std::string& x, const std::string& y) {
    out.push_back({at.substr(0, at.find('.')), shown(at), x, y});
  };
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, v] : a.items())
      if (b.contains(key)) differences(v, b.at(key), key_path(key), strict, out);
      else if (strict) add(key_path(key), v.dump(), "absent");
    for (const auto& [key, v] : b.items())
      if (strict && !a.contains(key)) add(key_path(key), "absent", v.dump());
    return;
  }
  if (a.dump() != b.dump()) add(path, a.dump(), b.dump());
}

std::string listed(const std::vector<Difference>& diffs, const char* here, const std::string& there) {
  std::string s;
  for (const Difference& d : diffs)
    s += (s.empty() ? "" : ", ") + d.path + " (" + d.here + " " + here + ", " + d.there + " " + there + ")";
  return s;
}

json::Value model_identity(const ModelConfig& config) {
  json::Value m = json::Value::object();
  const json::Value all = to_json(config);
  for (const auto& [key, v] : all.items())
    if (key != "name") m[key] = v;  // a copy of a config file under another name is the same model
  return m;
}

json::Value tokenizer_identity(const json::Value& tokenizer_json, int64_t vocab) {
  json::Value t = json::Value::object();
  t["vocab"] = vocab;
  t["hash"] = hex64(hash_bytes(tokenizer_json.dump()));
  return t;
}

const char* dtype_setting(const std::optional<DType>& t) { return t ? dtype_name(*t) : "the parameters'"; }

}  // namespace

json::Value run_identity(const ModelConfig& config, const TrainOptions& o, const Tokenizer& tokenizer,
                         const TokenDataset& data, int ranks) {
  json::Value id = json::Value::object();
  id["model"] = model_identity(config);
  id["tokenizer"] = tokenizer_identity(tokenizer.to_json(), tokenizer.vocab_size());
  const FileDigest digest = digest_file(o.data_file.empty() ? data.file().path() : o.data_file);
  json::Value d = json::Value::object();
  d["bytes"] = digest.bytes;
  d["hash"] = hex64(digest.hash);
  if (digest.sampled) d["sampled"] = true;  // the hash covers evenly spaced blocks of a large file
  id["data"] = d;
  id["optimizer"] = o.optimizer;
  id["seed"] = o.seed;
  id["steps"] = o.steps;
  id["batch"] = o.batch;
  id["seq"] = o.seq;
  id["grad-accum"] = o.grad_accum;
  id["lr"] = o.lr;
  id["min-lr"] = resolved_min_lr(o);
  id["warmup"] = resolved_warmup(o);
  id["weight-decay"] = o.weight_decay;
  id["clip"] = o.clip;
  id["beta1"] = o.beta1;
  id["beta2"] = o.beta2;
  id["momentum"] = o.momentum;
  id["dtype"] = dtype_setting(o.compute_dtype);
  id["param-dtype"] = dtype_name(o.param_dtype);
  id["ranks"] = ranks;
  id["zero1"] = o.zero1 && ranks > 1;  // ZeRO-1 over one rank shards nothing
  id["expert-parallel"] = o.expert_parallel;
  id["device"] = o.device.is_cuda() ? "cuda" : "cpu";
  for (const auto& [key, v] : id.items()) rule_of(key);  // every field has its rule
  return id;
}

json::Value recorded_identity(const std::string& dir, bool* complete) {
  const json::Value state = json::read_file(dir + "/trainer_state.json");
  if (complete) *complete = state.contains("run");
  if (state.contains("run")) return state.at("run");
  json::Value id = json::Value::object();
  id["model"] = model_identity(checkpoint_config(dir));
  const json::Value tokenizer = json::read_file(dir + "/tokenizer.json");
  id["tokenizer"] = tokenizer_identity(tokenizer, load_tokenizer(dir + "/tokenizer.json")->vocab_size());
  id["seed"] = state.at("seed");
  id["steps"] = state.at("total_steps");
  id["warmup"] = state.at("warmup");
  return id;
}

void check_same_run_on_every_rank(const json::Value& identity, int64_t start, const std::string& init_from,
                                  Communicator& comm) {
  if (comm.size() == 1) return;
  json::Value mine = identity;
  mine["start"] = start;  // ranks that resume at different steps (or one resumes, another starts afresh)
  mine["init-from"] = init_from;
  const std::vector<std::string> all = all_gather_strings(comm, mine.dump());
  const json::Value lead = json::parse(all[0], "rank 0's run identity");
  std::string report;
  for (size_t r = 1; r < all.size(); ++r) {
    std::vector<Difference> diffs;
    differences(json::parse(all[r], "rank " + std::to_string(r) + "'s run identity"), lead, "", true, diffs);
    if (!diffs.empty())
      report += (report.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " differs in " +
                listed(diffs, "there", "on rank 0");
  }
  if (report.empty()) return;
  throw CollectiveError("[train] the " + std::to_string(comm.size()) + " ranks were not started with the same run: " +
                        report + ". Start every rank with the same options, model configuration, data and "
                        "tokenizer (under mpirun: one command line for all of them); nothing was trained");
}

std::vector<std::string> check_resumed_run(const json::Value& now, const std::string& ckpt_dir,
                                           const std::vector<std::string>& allowed) {
  for (const std::string& f : allowed) check_allowed(f);
  bool complete = true;
  const json::Value recorded = recorded_identity(ckpt_dir, &complete);
  std::vector<Difference> diffs, never, refused;
  differences(now, recorded, "", false, diffs);
  std::vector<std::string> notes;
  if (!complete)
    notes.push_back("the checkpoint in " + ckpt_dir + " predates run identities: only its model, tokenizer, " +
                    option_name("TrainOptions::seed") + ", " + option_name("TrainOptions::steps") + " and " +
                    option_name("TrainOptions::warmup") + " are checked; its next save records them all");
  for (const Difference& d : diffs) {
    const Rule& rule = rule_of(d.top);
    const bool is_allowed = std::find(allowed.begin(), allowed.end(), d.top) != allowed.end();
    if (rule.change == Change::Never) never.push_back(d);
    else if (rule.change == Change::Allowed && !is_allowed) refused.push_back(d);
    else if (rule.change == Change::Allowed)
      notes.push_back(d.path + " " + d.here + " (the run had " + d.there + "; " +
                      option_name("TrainOptions::allow_change") + " " + d.top + "): " + rule.effect +
                      ", so the run is not bit-exact with the uninterrupted one");
    else
      notes.push_back(d.path + " " + d.here + " (the run had " + d.there + "): the same steps as before, to float "
                      "rounding rather than bit for bit");
  }
  if (never.empty() && refused.empty()) return notes;
  std::string msg = "[train] " + option_name("TrainOptions::resume") + ": this run is not the one recorded in " +
                    ckpt_dir + ": ";
  std::vector<Difference> all = never;
  all.insert(all.end(), refused.begin(), refused.end());
  msg += listed(all, "here", "in the checkpoint") + ".";
  if (!never.empty())
    msg += " Its model, tokenizer, data, optimizer and seed cannot change: resume with the run's own model "
           "configuration, " + option_name("TrainOptions::seed") + " and " + option_name("TrainOptions::optimizer") +
           ", on the " + option_name("TrainOptions::data_file") + " it was trained on, or start a new run from its "
           "weights with " + option_name("TrainOptions::init_from") + " " + ckpt_dir + ".";
  if (!refused.empty()) {
    std::string fields;
    for (const Difference& d : refused)
      if (fields.find(d.top) == std::string::npos) fields += (fields.empty() ? "" : ",") + d.top;
    msg += " Leave those settings at the run's values to resume bit-exactly, or pass " +
           option_name("TrainOptions::allow_change") + " " + fields +
           " to change them (the run is then not bit-exact with the uninterrupted one).";
  }
  throw CollectiveError(msg);  // every rank reads the same checkpoint and, past the check above, has this identity
}

void adopt_recorded_settings(TrainOptions& o, const json::Value& recorded,
                             const std::function<bool(const std::string&)>& given) {
  auto take = [&](const char* flag, auto&& set) {
    if (!given(flag) && recorded.contains(flag)) set(recorded.at(flag));
  };
  take("steps", [&](const json::Value& v) { o.steps = v.as_int(); });
  take("batch", [&](const json::Value& v) { o.batch = v.as_int(); });
  take("seq", [&](const json::Value& v) { o.seq = v.as_int(); });
  take("grad-accum", [&](const json::Value& v) { o.grad_accum = v.as_int(); });
  take("lr", [&](const json::Value& v) { o.lr = v.as_double(); });
  take("min-lr", [&](const json::Value& v) { o.min_lr = v.as_double(); });
  take("warmup", [&](const json::Value& v) { o.warmup = v.as_int(); });
  take("weight-decay", [&](const json::Value& v) { o.weight_decay = v.as_double(); });
  take("clip", [&](const json::Value& v) { o.clip = v.as_double(); });
  take("optimizer", [&](const json::Value& v) { o.optimizer = v.as_string(); });
  take("seed", [&](const json::Value& v) { o.seed = v.as_uint(); });
  take("param-dtype", [&](const json::Value& v) { o.param_dtype = dtype_from_name(v.as_string()); });
  take("dtype", [&](const json::Value& v) {
    o.compute_dtype = v.as_string() == dtype_setting(std::nullopt) ? std::nullopt
                                                                    : std::optional(dtype_from_name(v.as_string()));
  });
}

std::vector<std::string> parse_allowed_changes(const std::string& list) {
  std::vector<std::string> fields;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) {
      fields.push_back(list.substr(at, comma - at));
      check_allowed(fields.back());
    }
    at = comma + 1;
  }
  return fields;
}

}  // namespace uoe::nn
