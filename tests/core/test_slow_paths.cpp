// The slow-path registry (core/slow_paths.h): counts by name with the first use's description, and a report of
// what was taken since it was made that warns once per kind.
#include <gtest/gtest.h>

#include <string>

#include "core/slow_paths.h"

namespace uoe {
namespace {

uint64_t count_of(const std::string& name) {
  for (const slow_paths::Entry& e : slow_paths::snapshot())
    if (e.name == name) return e.count;
  return 0;
}

TEST(SlowPaths, CountsByNameKeepingTheFirstDescription) {
  const std::string name = "test.registry_counts";
  const uint64_t before = count_of(name);
  slow_paths::count(name, "first reason");
  slow_paths::count(name, "second reason");
  EXPECT_EQ(count_of(name), before + 2);
  for (const slow_paths::Entry& e : slow_paths::snapshot()) {
    if (e.name == name) {
      EXPECT_EQ(e.what, "first reason");
    }
  }
}

TEST(SlowPaths, ReportCountsWhatCameAfterItAndWarnsOncePerKind) {
  const std::string a = "test.report_a", b = "test.report_b";
  slow_paths::count(a, "a's reason");  // before the report: not its
  slow_paths::Report report;
  EXPECT_EQ(report.counts().size(), 0u);
  EXPECT_TRUE(report.new_warnings("[x]").empty());

  slow_paths::count(a, "a's reason");
  slow_paths::count(a, "a's reason");
  const json::Value counts = report.counts();
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.at(a).as_int(), 2);
  EXPECT_EQ(report.new_warnings("[x]"), std::vector<std::string>{"[x] warning: slow path " + a + ": a's reason"});
  slow_paths::count(a, "a's reason");
  EXPECT_TRUE(report.new_warnings("[x]").empty());  // warned already

  slow_paths::count(b, "b's reason");
  EXPECT_EQ(report.counts().at(a).as_int(), 3);
  EXPECT_EQ(report.counts().at(b).as_int(), 1);
  EXPECT_EQ(report.new_warnings("[x]"), std::vector<std::string>{"[x] warning: slow path " + b + ": b's reason"});
}

}  // namespace
}  // namespace uoe
