// AMX GEMM building blocks: a 32x32 micro-kernel on four 16x16 float accumulator tiles (TDPBF16PS), row-major A
// panels 32 rows high, and the Linux permission request for the tile data state.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "ops/cpu/gemm_avx512_blocks.h"
#include "ops/cpu/gemm_isa.h"

#define UOE_AMX __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma,amx-tile,amx-bf16")))

namespace uoe::cpu::detail {
namespace {

constexpr int MR = 32;
constexpr int NR = 32;
constexpr int kTileK = 32;  // k per tile row: 16 pairs, 64 bytes

// LDTILECFG's 64-byte operand (palette 1): tiles 0-3 C, 4-5 A (16 rows each), 6-7 B (16 pairs each); every tile
// 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);

// The tile configuration is per thread: loaded before the first tile instruction a thread runs.
UOE_AMX void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  static const TileConfig config;
  _tile_loadconfig(&config);
  configured = true;
}

// Loads (or zeroes) the four accumulator tiles from a 32x32 float block with row stride ld.
UOE_AMX void load_accumulators(const float* t, int64_t ld) {
  _tile_loadd(0, t, ld * 4);
  _tile_loadd(1, t + 16, ld * 4);
  _tile_loadd(2, t + 16 * ld, ld * 4);
  _tile_loadd(3, t + 16 * ld + 16, ld * 4);
}
UOE_AMX void zero_accumulators() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
UOE_AMX void store_accumulators(float* t, int64_t ld) {
  _tile_stored(0, t, ld * 4);
  _tile_stored(1, t + 16, ld * 4);
  _tile_stored(2, t + 16 * ld, ld * 4);
  _tile_stored(3, t + 16 * ld + 16, ld * 4);
}

// Copies rows x cols of a float block (row stride ls) to one with row stride ld.
UOE_AMX void copy_block(const float* s, int64_t ls, int rows, int cols, float* d, int64_t ld) {
  const __mmask16 m0 = avx512::mask_first(cols), m1 = avx512::mask_first(cols - 16);
  for (int i = 0; i < rows; ++i) {
    _mm512_mask_storeu_ps(d + i * ld, m0, _mm512_maskz_loadu_ps(m0, s + i * ls));
    _mm512_mask_storeu_ps(d + i * ld + 16, m1, _mm512_maskz_loadu_ps(m1, s + i * ls + 16));
  }
}

// C[0:mr, 0:nr] = alpha * A * B + beta * C over kp (a multiple of 32) k. A: 32 rows, row i at a + i*kp. B: VNNI
// pairs, pair row p at b + p*2*NR. Each 32-k step adds one TDPBF16PS per accumulator tile, in ascending k.
// alpha 1 and beta 0 or 1 (every block of a plain product): the tiles start from zero or from C and are stored back
// into C, straight from and to C for a whole 32x32 tile, through a padded copy for an edge tile (the same sums
// either way). Else the sum from zero is scaled into C row by row.
UOE_AMX void micro(int64_t kp, const BFloat16* a, const BFloat16* b, float* c, int64_t ldc, int mr, int nr,
                   float alpha, float beta) {
  configure_tiles();
  const bool onto_c = alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  const bool whole = onto_c && mr == MR && nr == NR;
  alignas(64) float block[MR * NR];  // [32][32]: an edge tile of C, or the scaled path's sum
  float* t = whole ? c : block;
  const int64_t ldt = whole ? ldc : NR;
  if (onto_c && beta == 1.0f) {
    if (!whole) {
      std::memset(block, 0, sizeof(block));
      copy_block(c, ldc, mr, nr, block, NR);
    }
    load_accumulators(t, ldt);
  } else {
    zero_accumulators();
  }
  const int64_t a_stride = kp * 2, b_stride = NR * 4;  // bytes
  for (int64_t k = 0; k < kp; k += kTileK) {
    _tile_loadd(4, a + k, a_stride);
    _tile_loadd(5, a + 16 * kp + k, a_stride);
    _tile_loadd(6, b + k * NR, b_stride);
    _tile_loadd(7, b + k * NR + 32, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  store_accumulators(t, ldt);
  if (whole) return;
  if (onto_c) return copy_block(block, NR, mr, nr, c, ldc);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  const int beta_kind = beta == 0.0f ? 0 : beta == 1.0f ? 1 : 2;
  const __mmask16 m0 = avx512::mask_first(nr), m1 = avx512::mask_first(nr - 16);
  for (int i = 0; i < mr; ++i)
    avx512::store_row(c + i * ldc, _mm512_load_ps(block + i * NR), _mm512_load_ps(block + i * NR + 16), m0, m1, va,
                      vb, beta_kind);
}

// Row-major panels of 32 rows, kp = kc rounded up to 32 deep, rows past mc and k past kc zero. Stored [K, M]
// (trans), 32 rows at a time are first packed as VNNI pairs (pair p of row i at 32-bit lane p*32 + i, as B is),
// then transposed 16x16 lanes at a time into rows.
UOE_AMX void pack_a(bool trans, const BFloat16* A, int64_t lda, int64_t mc, int64_t kc, BFloat16* dst) {
  const int64_t kp = (kc + kTileK - 1) / kTileK * kTileK;
  if (!trans) {
    for (int64_t i = 0; i < (mc + MR - 1) / MR * MR; ++i) {
      BFloat16* d = dst + i * kp;
      const int64_t valid = i < mc ? kc : 0;
      if (valid > 0) std::memcpy(static_cast<void*>(d), A + i * lda, size_t(valid) * sizeof(BFloat16));
      std::memset(static_cast<void*>(d + valid), 0, size_t(kp - valid) * sizeof(BFloat16));
    }
    return;
  }
  thread_local Scratch scratch;
  auto* pairs = static_cast<float*>(scratch.get(size_t(MR * kp) * sizeof(BFloat16)));  // [kp/2][32] lanes
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    pack_b_vnni32(false, A + i0, lda, kc, kp, std::min<int64_t>(MR, mc - i0), reinterpret_cast<BFloat16*>(pairs));
    auto* rows = reinterpret_cast<float*>(dst + i0 * kp);  // row i's pairs at lane i * kp/2
    for (int64_t p0 = 0; p0 < kp / 2; p0 += 16)
      for (int j0 = 0; j0 < MR; j0 += 16) {
        __m512 r[16];
        for (int q = 0; q < 16; ++q) r[q] = _mm512_load_ps(pairs + (p0 + q) * MR + j0);
        avx512::transpose16(r);
        for (int j = 0; j < 16; ++j) _mm512_storeu_ps(rows + (j0 + j) * (kp / 2) + p0, r[j]);
      }
  }
}

void pack_b(bool trans, const BFloat16* B, int64_t ldb, int64_t kc, int64_t nc, BFloat16* dst) {
  pack_b_vnni32(trans, B, ldb, kc, (kc + kTileK - 1) / kTileK * kTileK, nc, dst);
}

}  // namespace

bool amx_permitted() {
  static const bool permitted = [] {
    constexpr long kArchReqXcompPerm = 0x1023;  // arch_prctl option (asm/prctl.h)
    constexpr long kXfeatureXtiledata = 18;     // XSAVE feature number of the AMX tile data
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return permitted;
}

const GemmKernels<BFloat16, float>& gemm_kernels_amx_bf16() {
  static const GemmKernels<BFloat16, float> k{MR, NR, 512, 320, 1 << 22, &micro, &pack_a, &pack_b, kTileK};
  return k;
}

}  // namespace uoe::cpu::detail
