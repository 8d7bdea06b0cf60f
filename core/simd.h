// UOE_SIMD: compile a function for AVX-512, AVX2+FMA and baseline x86-64, one picked at load time (target_clones;
// GCC on x86-64 Linux; not under AddressSanitizer, whose start-up runs after the load-time pick). A build configured
// with -DUOE_PIN_ISA=<arch> (e.g. x86-64-v3) compiles that one version instead, so that its tests run the code that
// version runs on a machine that would pick another: scripts/test.sh's sanitizer pass pins AVX2 (the path of most
// laptops) where the machine has it, while the plain pass runs the machine's own pick (AVX-512 on most servers).
#pragma once

#if defined(UOE_PINNED_ISA)
#define UOE_SIMD __attribute__((target(UOE_PINNED_ISA)))
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_ADDRESS__)
#define UOE_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define UOE_SIMD
#endif
