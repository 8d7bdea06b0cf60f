// How a message names a setting that the library's caller chose. The library speaks of its own fields
// ("TrainOptions::batch", "AnalysisOptions::tokens"); a program that sets them under other names (the uoe program:
// its flags, "--batch") installs a namer once at start-up, and every message the library composes afterwards,
// thrown or printed, on any rank, names the setting as that program's user knows it.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace uoe {

// The program's name for a library field, or nullopt when it has none (the field's own name is used then). A key
// may also be a field with a value or a state ("TrainOptions::memory_check = false", "TrainOptions::out_dir
// emptied") when the program spells that setting as one thing of its own ("--skip-memory-check",
// "uoe train --overwrite").
using OptionNamer = std::function<std::optional<std::string>(const std::string& field)>;

// Installs `namer` for the whole process (before any thread starts; an empty one restores the library's names).
void set_option_namer(OptionNamer namer);

// `field` as messages show it: the installed namer's name for it, else `field` itself.
std::string option_name(const std::string& field);

}  // namespace uoe
