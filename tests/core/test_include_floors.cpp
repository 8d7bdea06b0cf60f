// The library's floors, checked on the source tree: core <- autograd <- ops (+ ops/cpu and the cuda/ backend) <- nn
// <- analysis. Every layer shares one include root, so the compiler cannot refuse an #include that climbs; this test
// does, naming the file, the line and the floor it climbs to.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// The floor a repository path belongs to ("" for a path outside the library's folders).
std::string floor_of(const std::string& path) {
  if (path.rfind("ops/cpu/", 0) == 0) return "ops/cpu";
  for (const char* f : {"core", "autograd", "ops", "cuda", "nn", "analysis"})
    if (path.rfind(std::string(f) + "/", 0) == 0) return f;
  return "";
}

// What each floor may include. cuda/ is the op layer's GPU backend: it may use device-neutral op headers, never the
// CPU backend; nn/ and analysis/ see ops only through device-neutral headers (no ops/cpu/, no cuda/).
const std::map<std::string, std::set<std::string>>& allowed_floors() {
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"core", {"core"}},
      {"autograd", {"core", "autograd"}},
      {"ops", {"core", "autograd", "ops", "ops/cpu"}},
      {"ops/cpu", {"core", "autograd", "ops", "ops/cpu"}},
      {"cuda", {"core", "autograd", "ops", "cuda"}},
      {"nn", {"core", "autograd", "ops", "nn"}},
      {"analysis", {"core", "autograd", "ops", "nn", "analysis"}},
  };
  return allowed;
}

struct Climb {
  std::string file, included, where;  // where: "file:line (floor -> floor)"
};

// Every quoted #include of the library's sources under `root` that leaves its floor's allowed set.
// The path of a quoted include (`#include "a/b.h"`, spaces allowed around `#`), or "" for any other line. Parsed by
// hand: std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizers.
std::string quoted_include(const std::string& line) {
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string::npos || line[at] != '#') return "";
  at = line.find_first_not_of(" \t", at + 1);
  if (at == std::string::npos || line.compare(at, 7, "include") != 0) return "";
  at = line.find_first_not_of(" \t", at + 7);
  if (at == std::string::npos || line[at] != '"') return "";
  const size_t end = line.find('"', at + 1);
  return end == std::string::npos ? "" : line.substr(at + 1, end - at - 1);
}

std::vector<Climb> find_climbs(const fs::path& root) {
  std::vector<Climb> climbs;
  for (const char* top : {"core", "autograd", "ops", "cuda", "nn", "analysis"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
      const std::string file = fs::relative(entry.path(), root).generic_string();
      const std::string from = floor_of(file);
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        std::string included = quoted_include(line);
        if (included.empty()) continue;
        // A path from the include root, else one relative to the including file (as the compiler looks it up).
        if (!fs::exists(root / included))
          included = fs::relative(entry.path().parent_path() / included, root).lexically_normal().generic_string();
        const std::string to = floor_of(included);
        if (to.empty() || allowed_floors().at(from).count(to)) continue;
        climbs.push_back({file, included, file + ":" + std::to_string(number) + " includes " + included + " (" + from +
                                              " may not include " + to + ")"});
      }
    }
  }
  return climbs;
}

TEST(IncludeFloors, NoIncludeClimbsAFloor) {
  const fs::path root = UOE_SOURCE_DIR;
  ASSERT_TRUE(fs::exists(root / "core" / "tensor.h")) << "source tree not found at " << root;
  for (const Climb& c : find_climbs(root)) ADD_FAILURE() << c.where;
}

// The scanner itself, on a tree built here: a climbing include is found with its line and floors, one relative to
// the including file is resolved, and allowed ones, <system> headers and commented-out includes pass.
TEST(IncludeFloors, ScannerFindsAClimbWithItsLine) {
  const int seed = ::testing::UnitTest::GetInstance()->random_seed();
  const fs::path root = fs::temp_directory_path() / ("uoe_floors_" + std::to_string(seed));
  fs::remove_all(root);
  for (const char* dir : {"core", "autograd", "ops/cpu", "nn"}) fs::create_directories(root / dir);
  std::ofstream(root / "core/a.h") << "#pragma once\n";
  std::ofstream(root / "autograd/b.h") << "#pragma once\n#include \"core/a.h\"\n";
  std::ofstream(root / "core/c.cpp") << "#include \"a.h\"\n#include <vector>\n  #  include \"autograd/b.h\"\n"
                                      << "// #include \"nn/e.h\" (a comment, not an include)\n";
  std::ofstream(root / "nn/d.cpp") << "#include \"ops/cpu/k.h\"\n";
  std::ofstream(root / "ops/cpu/k.h") << "#include \"../../nn/e.h\"\n";
  const std::vector<Climb> climbs = find_climbs(root);
  fs::remove_all(root);
  std::set<std::string> wheres;
  for (const Climb& c : climbs) wheres.insert(c.where);
  EXPECT_EQ(wheres, (std::set<std::string>{
                        "core/c.cpp:3 includes autograd/b.h (core may not include autograd)",
                        "nn/d.cpp:1 includes ops/cpu/k.h (nn may not include ops/cpu)",
                        "ops/cpu/k.h:1 includes nn/e.h (ops/cpu may not include nn)",
                    }));
}

}  // namespace
