// Checkpoint history: hard-linked atomic copies of the latest checkpoint, pruned oldest first.
#include "nn/checkpoint_history.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"

namespace uoe::nn {
namespace fs = std::filesystem;
namespace {

// What a removed history directory is renamed to first, so that a crash while removing it leaves no part of a
// checkpoint under a checkpoint's name.
constexpr std::string_view kPrunedSuffix = ".pruned";

fs::path checkpoint_path(const std::string& checkpoint_dir) {
  fs::path p(checkpoint_dir);
  if (!p.has_filename()) p = p.parent_path();  // a trailing slash
  return p;
}

fs::path parent_of(const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); }

// The step of the history directory called `name` ("<base>-<digits>"), or -1 when it is not one.
int64_t history_step(const std::string& name, const std::string& base) {
  const std::string prefix = base + "-";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.compare(0, prefix.size(), prefix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) return -1;
  return std::stoll(digits);
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  UOE_CHECK(!ec, "[checkpoint] cannot remove '", p.string(), "': ", ec.message());
}

// Renamed aside, then removed.
void remove_history_dir(const std::string& dir) {
  const fs::path aside = dir + std::string(kPrunedSuffix);
  remove_tree(aside);
  std::error_code ec;
  fs::rename(dir, aside, ec);
  UOE_CHECK(!ec, "[checkpoint] cannot remove the old checkpoint '", dir, "': ", ec.message());
  remove_tree(aside);
}

// Leftovers of removals that a crash interrupted: "<base>-<digits>.pruned".
void remove_interrupted_removals(const fs::path& checkpoint) {
  const std::string base = checkpoint.filename().string();
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(parent_of(checkpoint), ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(kPrunedSuffix) && history_step(name.substr(0, name.size() - kPrunedSuffix.size()), base) >= 0)
      remove_tree(e.path());
  }
}

// Every regular file of `from` into `to`: a hard link, or a copy where the file system has none.
void link_files(const fs::path& from, const fs::path& to) {
  for (const fs::directory_entry& e : fs::directory_iterator(from)) {
    UOE_CHECK(e.is_regular_file(), "[checkpoint] '", e.path().string(), "' is not a regular file: a checkpoint "
              "holds files only");
    std::error_code ec;
    fs::create_hard_link(e.path(), to / e.path().filename(), ec);
    if (ec) fs::copy_file(e.path(), to / e.path().filename());
  }
}

}  // namespace

std::string history_dir(const std::string& checkpoint_dir, int64_t step) {
  return checkpoint_path(checkpoint_dir).string() + "-" + std::to_string(step);
}

std::vector<int64_t> checkpoint_history(const std::string& checkpoint_dir) {
  const fs::path checkpoint = checkpoint_path(checkpoint_dir);
  const std::string base = checkpoint.filename().string();
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(parent_of(checkpoint), ec))
    if (const int64_t step = history_step(e.path().filename().string(), base); step >= 0 && e.is_directory())
      steps.push_back(step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

void keep_checkpoint_history(const std::string& checkpoint_dir, int64_t step, int64_t keep) {
  if (keep <= 0) return;
  const fs::path checkpoint = checkpoint_path(checkpoint_dir);
  write_directory_atomic(history_dir(checkpoint_dir, step),
                         [&](const std::string& tmp) { link_files(checkpoint, tmp); });
  remove_interrupted_removals(checkpoint);
  const std::vector<int64_t> steps = checkpoint_history(checkpoint_dir);
  for (size_t i = 0; i + size_t(keep) < steps.size(); ++i) remove_history_dir(history_dir(checkpoint_dir, steps[i]));
}

std::vector<int64_t> drop_checkpoint_history_after(const std::string& checkpoint_dir, int64_t step) {
  std::vector<int64_t> dropped;
  for (const int64_t s : checkpoint_history(checkpoint_dir))
    if (s > step) {
      remove_history_dir(history_dir(checkpoint_dir, s));
      dropped.push_back(s);
    }
  return dropped;
}

}  // namespace uoe::nn
