// libFuzzer entry point for one format, chosen at compile time: UOE_FUZZ_FORMAT names a target of targets.h
// (CMake builds uoe_libfuzzer_<format> for each with UOE_BUILD_LIBFUZZER=ON and clang; see README.md). An
// exception other than uoe::Error leaves the target and aborts: libFuzzer reports it as a crash.
#include "targets.h"

#ifndef UOE_FUZZ_FORMAT
#error "UOE_FUZZ_FORMAT must name a fuzz target, e.g. fuzz_safetensors"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return uoe::fuzz::UOE_FUZZ_FORMAT(data, size);
}
