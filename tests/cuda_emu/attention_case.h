// The attention problems of the emulated attention tests (tests/cuda_emu/test_attention_*_emulated.cpp): the CPU
// kernel tests' problems and float64 reference (tests/ops/cpu/attention_reference.h), with inputs rounded to bfloat16
// so that every storage type holds them exactly, and the backward's row sums D from a kernel's output.
#pragma once
#include <cstdint>
#include <vector>

#include "tests/cuda_emu/emu_check.h"
#include "tests/ops/cpu/attention_reference.h"

namespace uoe::cuda_emu {

inline cpu::Problem attention_problem(int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t Dh, bool causal,
                                      cpu::Layout layout) {
  cpu::Problem p = cpu::make_problem(B, H, Hkv, T, Dh, causal, layout, unsigned(T * 131 + Dh * 7 + H));
  for (std::vector<double>* x : {&p.q, &p.k, &p.v, &p.dout}) round_to_bf16(*x);
  return p;
}

// D = rowsum(dout ⊙ out) [B, H, T] from a kernel's out (stored as S), as the library's launchers compute it.
template <class C, class S>
std::vector<C> attention_dsum(const cpu::Problem& p, const S* out) {
  const auto& s = p.s;
  std::vector<C> D(size_t(s.B * s.H * s.T));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t t = 0; t < s.T; ++t) {
        C acc = 0;
        for (int64_t d = 0; d < s.Dh; ++d) {
          const int64_t i = cpu::at(p.qs, b, h, t, d);
          acc += C(p.dout[size_t(i)] * to_double(out[i]));
        }
        D[size_t((b * s.H + h) * s.T + t)] = acc;
      }
  return D;
}

}  // namespace uoe::cuda_emu
