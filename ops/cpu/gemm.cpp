// CPU GEMM: ISA dispatch, portable kernels, the threaded packed (GotoBLAS-style) driver and batching.
#include "ops/kernels/gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <thread>
#include <type_traits>

#include <sys/mman.h>

#include "core/simd.h"
#include "ops/cpu/gemm_isa.h"

namespace uoe::cpu {
namespace detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Portable kernels (any x86-64 / any CPU): plain C++ that the compiler may auto-vectorise.
// ---------------------------------------------------------------------------------------------
template <typename T, int MR, int NR>
void micro_portable(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, int mr, int nr, T alpha, T beta) {
  T acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] += a[i] * b[j];
    a += MR;
    b += NR;
  }
  for (int i = 0; i < mr; ++i) {
    T* cr = c + i * ldc;
    for (int j = 0; j < nr; ++j) {
      const T v = alpha * acc[i][j];
      if (beta == T(0)) cr[j] = v;
      else if (beta == T(1)) cr[j] = v + cr[j];
      else cr[j] = v + beta * cr[j];
    }
  }
}

template <typename T, int MR, typename TS = T>
void pack_a_portable(bool trans, const TS* A, int64_t lda, int64_t mc, int64_t kc, T* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int rows = int(std::min<int64_t>(MR, mc - i0));
    T* d = dst + i0 * kc;
    for (int i = 0; i < MR; ++i) {
      if (i >= rows) {
        for (int64_t k = 0; k < kc; ++k) d[k * MR + i] = T(0);
      } else if (trans) {
        for (int64_t k = 0; k < kc; ++k) d[k * MR + i] = T(A[k * lda + i0 + i]);
      } else {
        const TS* s = A + (i0 + i) * lda;
        for (int64_t k = 0; k < kc; ++k) d[k * MR + i] = T(s[k]);
      }
    }
  }
}

template <typename T, int NR, typename TS = T>
void pack_b_portable(bool trans, const TS* B, int64_t ldb, int64_t kc, int64_t nc, T* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int cols = int(std::min<int64_t>(NR, nc - j0));
    T* d = dst + j0 * kc;
    if (!trans) {
      for (int64_t k = 0; k < kc; ++k)
        for (int j = 0; j < NR; ++j) d[k * NR + j] = j < cols ? T(B[k * ldb + j0 + j]) : T(0);
    } else {
      for (int j = 0; j < NR; ++j) {
        if (j >= cols) {
          for (int64_t k = 0; k < kc; ++k) d[k * NR + j] = T(0);
        } else {
          const TS* s = B + (j0 + j) * ldb;
          for (int64_t k = 0; k < kc; ++k) d[k * NR + j] = T(s[k]);
        }
      }
    }
  }
}

// The portable kernels, on float or double, and on bfloat16 operands widened to float as the packing reads them
// (the float32 path of the bfloat16 GEMM).
template <typename T, typename TS = T>
const GemmKernels<T, T, TS>& kernels_portable() {
  static const GemmKernels<T, T, TS> k{
      4, 8, 256, 128, 1 << 20, &micro_portable<T, 4, 8>, &pack_a_portable<T, 4, TS>, &pack_b_portable<T, 8, TS>};
  return k;
}

// ---------------------------------------------------------------------------------------------
// ISA selection
// ---------------------------------------------------------------------------------------------
bool cpu_has(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("fma");
    case GemmIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default:
      return true;
  }
}

GemmIsa best_isa() {
  if (cpu_has(GemmIsa::Avx512) && pinned_isa_level() >= 4) return GemmIsa::Avx512;
  if (cpu_has(GemmIsa::Avx2) && pinned_isa_level() >= 3) return GemmIsa::Avx2;
  return GemmIsa::Scalar;
}

std::atomic<int> g_forced_isa{int(GemmIsa::Auto)};

const GemmKernels<float>& kernels_f32() {
  switch (gemm_active_isa()) {
    case GemmIsa::Avx512: return gemm_kernels_avx512_f32();
    case GemmIsa::Avx2: return gemm_kernels_avx2_f32();
    default: return kernels_portable<float>();
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Scratch buffers (scratch.h): page aligned (2 MB and THP-advised when large), grown on demand.
// ---------------------------------------------------------------------------------------------
Scratch::~Scratch() { std::free(ptr_); }

void* Scratch::get(size_t bytes) {
  if (bytes > size_) {
    std::free(ptr_);
    const size_t align = bytes >= (size_t(1) << 21) ? (size_t(1) << 21) : 4096;
    size_ = (bytes + align - 1) & ~(align - 1);
    ptr_ = std::aligned_alloc(align, size_);
    if (!ptr_) {
      size_ = 0;
      throw std::bad_alloc();
    }
#ifdef MADV_HUGEPAGE
    if (align > 4096) madvise(ptr_, size_, MADV_HUGEPAGE);  // fewer TLB misses on packed panels
#endif
  }
  return ptr_;
}

namespace {

Scratch& scratch_b() {
  thread_local Scratch s;
  return s;
}
Scratch& scratch_a() {
  thread_local Scratch s;
  return s;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) std::fill(c, c + N, T(0));
    else if (beta != T(1)) for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
}

// Number of threads for one GEMM: never nested, and not more than the work warrants.
int threads_for(int64_t M, int64_t N, int64_t K) {
  if (omp_in_parallel()) return 1;
  const int maxt = omp_get_max_threads();
  if (maxt <= 1) return 1;
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const double per_thread = 4.0e6;  // below this a fork/join costs more than it saves
  return int(std::clamp<double>(flops / per_thread, 1.0, double(maxt)));
}

// Spin briefly, then yield: a waiting thread must not hold a core that the thread it waits for
// (or another process) could use.
template <typename Pred>
void wait_until(Pred ready) {
  for (int spins = 0; !ready(); ++spins) {
    if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

// The packed driver (GotoBLAS/BLIS structure). For each column block of C (as wide as N unless
// the packed copy of B would get too big):
//  - op(B)[:, block] is packed for the whole K into one shared buffer, as KC-deep blocks of
//    NR-wide panels, in groups of panels packed on demand by whichever thread needs them first;
//  - the output is cut into units of MC rows (x a share of the columns when M is small), taken
//    by threads from an atomic counter. A unit walks the KC blocks in order: make sure its B
//    panels are packed, pack its A block (stays in L2), run the micro-kernel over NR panels (jr)
//    and MR panels (ir).
// No barrier inside: a thread slowed down (e.g. by another process) just takes fewer units.
// Work is split over output tiles only, each C element is the same micro-kernel FMA chain per KC
// block, and KC blocks are applied in ascending order by a single thread, so the result is
// bit-identical whatever the thread count or the order in which units are taken.
// `done`, when given, hears of each unit's block of C once its last K block is applied. With a bfloat16 `out`
// (beta 0, ks.micro_bf16_out), the last K block rounds into out instead, and C holds the earlier blocks' sums.
template <typename TP, typename TC, typename TS>
void gemm_packed(const GemmKernels<TP, TC, TS>& ks, bool ta, bool tb, int64_t M, int64_t N, int64_t K, TC alpha,
                 const TS* A, int64_t lda, const TS* B, int64_t ldb, TC beta, TC* C, int64_t ldc,
                 const TileDone& done = nullptr, BFloat16* out = nullptr, int64_t ldo = 0) {
  const int64_t MR = ks.mr, NR = ks.nr;
  // K blocks: as few as ks.kc allows, evenly sized (a function of K alone, never of the threads), each
  // packed kp = kc rounded up to the granule deep.
  const int64_t granule = std::max<int64_t>(8, ks.k_granule);
  const int64_t KC = ceil_div(ceil_div(K, ceil_div(K, ks.kc)), granule) * granule;
  const int64_t kblocks = ceil_div(K, KC);
  auto padded = [&](int64_t kc) { return ceil_div(kc, ks.k_granule) * ks.k_granule; };
  const int64_t NC = std::min(ceil_div(N, NR), std::max<int64_t>(1, ks.b_elems / (K * NR))) * NR;
  constexpr int64_t kGroup = 8;  // B panels packed together

  const int64_t mtiles = ceil_div(M, MR);
  const int nt = int(std::min<int64_t>(threads_for(M, N, K), mtiles * ceil_div(NC, NR)));
  // Units: row blocks of at most ks.mc rows (MR tiles spread evenly), their count a multiple of
  // the threads and at least kUnitsPerThread per thread when M allows, so that the dynamic
  // scheduling evens out the load. Row blocks share the packed B, while a column split makes
  // each share pack its rows of A again, which measured slower: the columns are split only
  // when there are too few row tiles.
  constexpr int64_t kUnitsPerThread = 3;
  const int64_t want = nt > 1 ? kUnitsPerThread * nt : 1;
  const int64_t mblocks = std::min(mtiles, ceil_div(std::max(ceil_div(M, ks.mc), want), nt) * nt);
  const int64_t nsplit = std::max<int64_t>(1, std::min(ceil_div(NC, NR), ceil_div(want, mblocks)));
  const int64_t MC = ceil_div(mtiles, mblocks) * MR;
  const int64_t units = mblocks * nsplit;

  TP* Bp = static_cast<TP*>(scratch_b().get(size_t(padded(K) * NC) * sizeof(TP)));
  const int64_t groups_max = ceil_div(ceil_div(NC, NR), kGroup);
  std::unique_ptr<std::atomic<int>[]> state(new std::atomic<int>[size_t(kblocks * groups_max)]);

  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    const int64_t np = ceil_div(nc, NR);
    const int64_t ngroups = ceil_div(np, kGroup);
    for (int64_t i = 0; i < kblocks * ngroups; ++i) state[size_t(i)].store(0, std::memory_order_relaxed);
    std::atomic<int64_t> next_unit{0};
    std::atomic<int> finished{0};

    // Packs group g of K block pb: panels [g*kGroup, ...) into Bp + pb*KC*np*NR + p*NR*kc.
    auto pack_group = [&](int64_t pb, int64_t g) {
      const int64_t pc = pb * KC, kc = std::min(KC, K - pc);
      for (int64_t p = g * kGroup; p < std::min(np, (g + 1) * kGroup); ++p) {
        const int64_t j = jc + p * NR;
        const TS* bsrc = tb ? B + j * ldb + pc : B + pc * ldb + j;
        ks.pack_b(tb, bsrc, ldb, kc, std::min(NR, nc - p * NR), Bp + pb * KC * np * NR + p * NR * padded(kc));
      }
    };
    // Makes groups [g0, g1) of K block pb ready: pack the unclaimed ones, then wait for the rest.
    auto ensure_b = [&](int64_t pb, int64_t g0, int64_t g1) {
      bool pending = false;
      for (int64_t g = g0; g < g1; ++g) {
        std::atomic<int>& st = state[size_t(pb * ngroups + g)];
        int expected = 0;
        if (st.load(std::memory_order_acquire) == 0 &&
            st.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
          pack_group(pb, g);
          st.store(2, std::memory_order_release);
        } else if (st.load(std::memory_order_acquire) != 2) {
          pending = true;
        }
      }
      if (pending)
        for (int64_t g = g0; g < g1; ++g) {
          std::atomic<int>& st = state[size_t(pb * ngroups + g)];
          wait_until([&] { return st.load(std::memory_order_acquire) == 2; });
        }
    };

#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      TP* Ap = static_cast<TP*>(scratch_a().get(size_t(padded(std::min(K, KC)) * MC) * sizeof(TP)));
      for (int64_t u; (u = next_unit.fetch_add(1, std::memory_order_relaxed)) < units;) {
        const int64_t mb = u / nsplit, ns = u % nsplit;
        const int64_t i0 = mtiles * mb / mblocks * MR, i1 = std::min(M, mtiles * (mb + 1) / mblocks * MR);
        const int64_t p0 = np * ns / nsplit, p1 = np * (ns + 1) / nsplit;
        const int64_t mc = i1 - i0;
        if (mc <= 0 || p1 <= p0) continue;
        for (int64_t pb = 0; pb < kblocks; ++pb) {
          const int64_t pc = pb * KC, kc = std::min(KC, K - pc), kp = padded(kc);
          const TC beta_eff = pb == 0 ? beta : TC(1);
          ensure_b(pb, p0 / kGroup, ceil_div(p1, kGroup));
          // A as it is where the kernels can read it so (rows of pairs: not transposed, an even depth), else packed
          const bool in_place = ks.micro_unpacked_a && !ta && kc == kp;
          if (!in_place) ks.pack_a(ta, ta ? A + pc * lda + i0 : A + i0 * lda + pc, lda, mc, kc, Ap);
          const TP* bblk = Bp + pb * KC * np * NR;
          const bool to_out = out && pb == kblocks - 1;
          for (int64_t p = p0; p < p1; ++p) {
            const int nr = int(std::min(NR, nc - p * NR));
            const TP* bp = bblk + p * NR * kp;
            TC* cp = C + i0 * ldc + jc + p * NR;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int mr = int(std::min(MR, mc - ir));
              const TS* a_in_place = A + (i0 + ir) * lda + pc;
              if (to_out) {
                const TP* a_tile = Ap + ir * kp;  // A as micro_bf16_out reads it: packed (lda 0) or in place
                int64_t a_ld = 0;
                if constexpr (std::is_same_v<TP, TS>)
                  if (in_place) a_tile = a_in_place, a_ld = lda;
                ks.micro_bf16_out(kp, a_tile, a_ld, bp, pb > 0 ? cp + ir * ldc : nullptr, ldc,
                                  out + (i0 + ir) * ldo + jc + p * NR, ldo, mr, nr, alpha);
                continue;
              }
              if (in_place)
                ks.micro_unpacked_a(kc, a_in_place, lda, bp, cp + ir * ldc, ldc, mr, nr, alpha, beta_eff);
              else
                ks.micro(kp, Ap + ir * kp, bp, cp + ir * ldc, ldc, mr, nr, alpha, beta_eff);
            }
          }
        }
        if (done) done(i0, i1, jc + p0 * NR, jc + std::min(nc, p1 * NR));
      }
      // Meet here with a yielding wait, so that the runtime's closing barrier (which spins)
      // finds everyone already there: a thread spinning in it could otherwise keep a
      // time-shared core from the thread it waits for.
      const int team = omp_get_num_threads();
      if (team > 1) {
        finished.fetch_add(1, std::memory_order_acq_rel);
        wait_until([&] { return finished.load(std::memory_order_acquire) == team; });
      }
    }
  }
}

template <typename T>
const GemmKernels<T>& kernels_for();
template <>
const GemmKernels<float>& kernels_for<float>() {
  return kernels_f32();
}
template <>
const GemmKernels<double>& kernels_for<double>() {
  return kernels_portable<double>();
}

}  // namespace

template <typename TP>
void gemm_packed_bf16(const GemmKernels<TP, float, BFloat16>& ks, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      float alpha, const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, float beta,
                      float* C, int64_t ldc, const TileDone& done) {
  gemm_packed(ks, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, done);
}
template void gemm_packed_bf16(const GemmKernels<BFloat16, float, BFloat16>&, bool, bool, int64_t, int64_t, int64_t,
                               float, const BFloat16*, int64_t, const BFloat16*, int64_t, float, float*, int64_t,
                               const TileDone&);
template void gemm_packed_bf16(const GemmKernels<float, float, BFloat16>&, bool, bool, int64_t, int64_t, int64_t,
                               float, const BFloat16*, int64_t, const BFloat16*, int64_t, float, float*, int64_t,
                               const TileDone&);

template <typename TP>
void gemm_packed_bf16_out(const GemmKernels<TP, float, BFloat16>& ks, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          float alpha, const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, float* partial,
                          int64_t ldp, BFloat16* C, int64_t ldc) {
  gemm_packed(ks, ta, tb, M, N, K, alpha, A, lda, B, ldb, 0.0f, partial, ldp, nullptr, C, ldc);
}
template void gemm_packed_bf16_out(const GemmKernels<BFloat16, float, BFloat16>&, bool, bool, int64_t, int64_t,
                                   int64_t, float, const BFloat16*, int64_t, const BFloat16*, int64_t, float*, int64_t,
                                   BFloat16*, int64_t);
template void gemm_packed_bf16_out(const GemmKernels<float, float, BFloat16>&, bool, bool, int64_t, int64_t, int64_t,
                                   float, const BFloat16*, int64_t, const BFloat16*, int64_t, float*, int64_t,
                                   BFloat16*, int64_t);

const GemmKernels<float, float, BFloat16>& gemm_kernels_widened() {
  switch (gemm_active_isa()) {
    case GemmIsa::Avx512: return gemm_kernels_avx512_widened();
    case GemmIsa::Avx2: return gemm_kernels_avx2_widened();
    default: return kernels_portable<float, BFloat16>();
  }
}

bool gemm_isa_supported(GemmIsa isa) { return cpu_has(isa); }

bool gemm_force_isa(GemmIsa isa) {
  if (!cpu_has(isa)) return false;
  g_forced_isa.store(int(isa), std::memory_order_relaxed);
  return true;
}

GemmIsa gemm_active_isa() {
  static const GemmIsa best = best_isa();
  const int f = g_forced_isa.load(std::memory_order_relaxed);
  return f == int(GemmIsa::Auto) ? best : GemmIsa(f);
}

}  // namespace detail

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const char*) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) {
    detail::scale_c(M, N, beta, C, ldc);
    return;
  }
  detail::gemm_packed(detail::kernels_for<T>(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                  const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta,
                  T* C, int64_t ldc, int64_t stride_c, const char*) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  detail::for_each_gemm(batch, M, N, K, stride_c == 0, [&](int64_t b) {
    gemm<T>(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta, C + b * stride_c,
            ldc);
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                          int64_t, float, float*, int64_t, const char*);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t, const char*);
template void gemm_batched<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                  int64_t, const float*, int64_t, int64_t, float, float*, int64_t, int64_t,
                                  const char*);
template void gemm_batched<double>(int64_t, bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                   int64_t, int64_t, const double*, int64_t, int64_t, double, double*, int64_t,
                                   int64_t, const char*);

}  // namespace uoe::cpu
