// UOE_SIMD: compile a function for AVX-512, AVX2+FMA and baseline x86-64, one picked at load time (target_clones;
// GCC on x86-64 Linux; not under AddressSanitizer or ThreadSanitizer, whose start-up runs after the load-time pick).
// A build configured with -DUOE_PIN_ISA=<arch> (e.g. x86-64-v3) compiles that one version instead, so that its tests
// run the code that version runs on a machine that would pick another (the AVX2 path of most laptops, on an AVX-512
// server). Pin a build without sanitizers: with them GCC does not vectorise these loops at all.
#pragma once

#if defined(UOE_PINNED_ISA)
#define UOE_SIMD __attribute__((target(UOE_PINNED_ISA)))
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define UOE_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define UOE_SIMD
#endif

#include <string_view>

namespace uoe {

// The highest x86-64 level (4: x86-64-v4, AVX-512; 3: x86-64-v3, AVX2+FMA; 1: below) that the run-time dispatchers
// of the GEMM and attention kernels may pick: in a build pinned to x86-64-v3 or lower, that level, so that such a
// build runs every kernel as a CPU of that level would; else 4 (no cap).
constexpr int pinned_isa_level() {
#if defined(UOE_PINNED_ISA)
  constexpr std::string_view pin = UOE_PINNED_ISA;
  if (pin.ends_with("x86-64-v3")) return 3;
  if (pin.ends_with("x86-64-v2") || pin.ends_with("x86-64")) return 1;
#endif
  return 4;
}

}  // namespace uoe
