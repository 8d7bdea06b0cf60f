// trainer_state.json: written with every checkpoint, read and checked field by field when a run resumes.
#include "nn/trainer_state.h"

#include "core/error.h"

namespace uoe::nn {

json::Value to_json(const TrainerState& s) {
  json::Value v = json::Value::object();
  v["step"] = s.step;
  v["tokens_seen"] = s.tokens_seen;
  v["seed"] = s.seed;
  if (!s.init_from.empty()) v["init_from"] = s.init_from;
  v["data_cursor"] = s.data_cursor;
  json::Value rng = json::Value::object();
  rng["seed"] = s.rng_seed;
  rng["offset"] = s.rng_offset;
  v["rng"] = rng;
  v["lr"] = s.lr;
  v["warmup"] = s.warmup;
  v["total_steps"] = s.total_steps;
  return v;
}

namespace {

// Reads one field of `object` with `read` (a json::Value accessor); a missing field or one of another type is one
// error naming the file and the field.
template <typename Read>
auto field(const json::Value& object, const std::string& key, const std::string& name, const std::string& file,
           Read read) {
  UOE_CHECK(object.is_object(), "[checkpoint] ", file, ": expected a JSON object holding '", name, "', got ",
            json::type_name(object.type()));
  UOE_CHECK(object.contains(key), "[checkpoint] ", file, ": the field '", name, "' is missing");
  try {
    return read(object.at(key));
  } catch (const Error& e) {
    fail("[checkpoint] ", file, ": the field '", name, "': ", e.what());
  }
}

int64_t count(const json::Value& v, const std::string& key, const std::string& file) {
  const int64_t n = field(v, key, key, file, [](const json::Value& x) { return x.as_int(); });
  UOE_CHECK(n >= 0, "[checkpoint] ", file, ": '", key, "' is ", n, ", expected a count >= 0 (the file is damaged)");
  return n;
}

uint64_t unsigned_field(const json::Value& v, const std::string& key, const std::string& name,
                        const std::string& file) {
  return field(v, key, name, file, [](const json::Value& x) { return x.as_uint(); });
}

}  // namespace

TrainerState trainer_state_from_json(const json::Value& v, const std::string& file) {
  TrainerState s;
  s.step = count(v, "step", file);
  s.tokens_seen = count(v, "tokens_seen", file);
  s.data_cursor = count(v, "data_cursor", file);
  s.seed = unsigned_field(v, "seed", "seed", file);
  const json::Value& rng = field(v, "rng", "rng", file, [](const json::Value& x) -> const json::Value& { return x; });
  s.rng_seed = unsigned_field(rng, "seed", "rng.seed", file);
  s.rng_offset = unsigned_field(rng, "offset", "rng.offset", file);
  try {  // optional: informational, or absent from a run that was not fine-tuned
    s.init_from = v.get("init_from", std::string());
    s.lr = v.get("lr", 0.0);
    s.warmup = v.get("warmup", int64_t(0));
    s.total_steps = v.get("total_steps", int64_t(0));
  } catch (const Error& e) {
    fail("[checkpoint] ", file, ": ", e.what());
  }
  return s;
}

TrainerState read_trainer_state(const std::string& checkpoint_dir) {
  const std::string file = checkpoint_dir + "/trainer_state.json";
  return trainer_state_from_json(json::read_file(file), file);
}

}  // namespace uoe::nn
