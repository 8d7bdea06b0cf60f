// option_name: the library's field names unless a program installs its own names for them.
#include "core/option_names.h"

#include <gtest/gtest.h>

namespace uoe {
namespace {

TEST(OptionNames, TheProgramsNameElseTheLibrarys) {
  EXPECT_EQ(option_name("TrainOptions::batch"), "TrainOptions::batch");
  set_option_namer([](const std::string& field) -> std::optional<std::string> {
    if (field == "TrainOptions::batch") return "--batch";
    if (field == "TrainOptions::memory_check = false") return "--skip-memory-check";
    return std::nullopt;
  });
  EXPECT_EQ(option_name("TrainOptions::batch"), "--batch");
  EXPECT_EQ(option_name("TrainOptions::memory_check = false"), "--skip-memory-check");
  EXPECT_EQ(option_name("TrainOptions::beta1"), "TrainOptions::beta1");  // no flag sets it
  set_option_namer(nullptr);
  EXPECT_EQ(option_name("TrainOptions::batch"), "TrainOptions::batch");
}

}  // namespace
}  // namespace uoe
