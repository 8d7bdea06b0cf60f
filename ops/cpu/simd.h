// UOE_SIMD: compile a loop for AVX-512, AVX2+FMA and baseline x86-64, picked at run time.
#pragma once

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define UOE_SIMD __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define UOE_SIMD
#endif
