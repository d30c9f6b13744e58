// kael's float32 GEMM for AVX-512 CPUs.
//
// Note [float32 GEMM]
// C = A B in the blocked form of the BLIS papers (Goto and van de Geijn; Van Zee and van de Geijn):
//   for each block of kNc columns (jc)
//     for each block of kKc of the sum's k (pc)
//       for each block of kMc rows (ic): pack A's rows into panels of kMr rows, k-major
//         for each panel of kNr = 32 columns (jr)
//           for each panel of kMr = 14 rows (ir): the micro-kernel.
// The micro-kernel keeps a 14 x 32 block of C in 28 zmm registers and, for each k, loads one row
// of the B panel (two vectors) and multiplies it by the 14 values of the A panel's column, each
// a broadcast load folded into its FMA: 28 FMAs to 16 loads, the two FMA ports busy every cycle.
// Alone, in L1, it runs at 96% of the core's FMA peak on the development machine
// (docs/performance.md, "float32 GEMM").
//
// B is packed by the micro-kernel itself when B's rows are contiguous (the usual a @ b): the
// first row panel of each column panel (ic == 0, ir == 0) reads B's rows where they lie,
// prefetching 8 rows ahead into L1 and 48 into L2, and stores the 32-column panel it used; the
// other row panels read the packed copy. So reading B from memory overlaps the FMAs instead of
// running before them. When
// the whole of A's rows fit one row block (m <= kMc), the packed panel is not kept past its
// column panel and one 32 KB buffer is reused: a product of a short A by a large B (a linear
// layer on a small batch) then packs into L1 and leaves B itself in L2 for the next call. B
// with other strides is packed apart, 16 x 16 blocks transposed in registers where B's columns
// are contiguous (a transposed weight, linear's x @ w.t()): the whole block before the row
// blocks, or each 32-column panel just before its row panels when A's rows fit one row block.
// A is packed per row block: 16 x 16 transposes where its rows are contiguous, a copy per
// column where its columns are (x.t() @ g, a weight's gradient), the whole row block's stretch of
// each column at once (pack_a_columns).
//
// kMc = 70 (5 panels), kKc = 256, kNc = 1024: the 32 KB B panel stays in L1 while the 70 x 256 A
// block (70 KB) comes from L2; chosen by measuring 1024^3 and (64, 512) x (512, 512), the cases
// of tools/bench/throughput.py, and a few more products with tools/bench/sgemm_probe.cpp, whose
// -D flags change kKc, kMc and kNc (docs/performance.md, "float32 GEMM"); kMr 12 and 14,
// measured with an earlier form of the probe, were within its noise of each other (14 does
// more FMAs per load). Where A's columns are contiguous the row block is kMcColumns = 140 rows.
//
// Determinism: each C element is the sum over ascending kKc blocks of one FMA chain per block
// (started from 0, then added to C), whatever the element's position, the panel it falls in
// (the edge kernels have fewer rows or masked columns, the same chain) or how the work is
// split among threads; so a product gives the same bits at every thread count. The threads
// split C into column ranges (multiples of 32) or, when there are too few columns, row ranges;
// each range runs the whole loop nest above with its own packing buffers.
#include "kael/native/gemm.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <utility>

#include "kael/runtime/threads.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#include <sys/mman.h>

#include "gemm_avx512.h"
#endif

namespace kael::native {

#if defined(__AVX512F__)

namespace {

using i64 = std::int64_t;

// tools/bench/sgemm_probe.cpp compiles this file with other block sizes (KAEL_GEMM_KC, _MC, _NC).
#ifndef KAEL_GEMM_KC
#define KAEL_GEMM_KC kGemmKBlock
#endif
#ifndef KAEL_GEMM_MC
#define KAEL_GEMM_MC 70
#endif
#ifndef KAEL_GEMM_NC
#define KAEL_GEMM_NC 1024
#endif
constexpr int kMr = 14;
constexpr int kNr = 32;
constexpr i64 kKc = KAEL_GEMM_KC;
constexpr i64 kMc = KAEL_GEMM_MC;
constexpr i64 kNc = KAEL_GEMM_NC;
// The row block where A's columns are contiguous (pack_a_columns): 10 panels, each column's
// stretch of 140 values read in one pass; faster than kMc for the GPT's weight gradients (A
// transposed), where rows-contiguous products are slower with 140 (docs/performance.md, "Figures
// behind kernel constants").
constexpr i64 kMcColumns = 140;
static_assert(kNc % kNr == 0 && kKc > 0 && kMc > 0 && kMcColumns > 0);
// Rows ahead of the one in use that the packing micro-kernel prefetches from B: into L1 from
// nearby, and into L2 from farther, so that a B read from L3 or memory arrives in time (a row
// takes 14 cycles of FMAs; docs/performance.md, "float32 GEMM": 32 x 4096 x 4096, a 64 MB B,
// 127 -> 158 GFLOP/s with the far one and the C prefetch).
constexpr i64 kPrefetchRows = 8;
constexpr i64 kFarPrefetchRows = 48;

// Prefetches the two lines of a B panel row kPrefetchRows rows below `row` into L1 and
// kFarPrefetchRows rows below into L2. The addresses are computed as integers: past B's last
// row they point outside the matrix, which a prefetch may (it never faults) but pointer
// arithmetic may not.
inline void prefetch_rows_ahead(const float* row, i64 row_stride) {
  const auto at = [&](i64 rows, i64 col) {
    return reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(row) +
                                         static_cast<std::uintptr_t>((rows * row_stride + col) * i64{sizeof(float)}));
  };
  _mm_prefetch(at(kPrefetchRows, 0), _MM_HINT_T0);
  _mm_prefetch(at(kPrefetchRows, 16), _MM_HINT_T0);
  _mm_prefetch(at(kFarPrefetchRows, 0), _MM_HINT_T1);
  _mm_prefetch(at(kFarPrefetchRows, 16), _MM_HINT_T1);
}

// Micro-kernel: C[0:MR, 0:32] (+)= Ap (kc x MR, k-major) times a 32-column panel of B.
// PackB: the panel is read from B's rows (b_src, row stride ldb, lanes beyond the matrix masked
// off) and stored to bp; otherwise it is read from bp (kc x 32, 64-byte aligned). The columns of C
// beyond the matrix are masked off too (m0: columns 0-15, m1: 16-31).
template <int MR, bool PackB>
void micro_kernel(i64 kc, const float* ap, const float* b_src, i64 ldb, float* bp, float* c, i64 ldc, bool accumulate,
                  __mmask16 m0, __mmask16 m1) {
  // C's tile into L2 while the sum runs: its rows lie a row stride apart, each in another page
  // of a large C, and the loads (or the stores' reads for ownership) at the end would otherwise
  // wait for memory (docs/performance.md, "float32 GEMM": 2048 x 2304 x 768 191 -> 211 GFLOP/s).
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T1);
  }
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
  for (i64 p = 0; p < kc; ++p) {
    __m512 b0, b1;
    if constexpr (PackB) {
      b0 = _mm512_maskz_loadu_ps(m0, b_src);
      b1 = _mm512_maskz_loadu_ps(m1, b_src + 16);
      prefetch_rows_ahead(b_src, ldb);
      b_src += ldb;
      _mm512_store_ps(bp, b0);
      _mm512_store_ps(bp + 16, b1);
    } else {
      b0 = _mm512_load_ps(bp);
      b1 = _mm512_load_ps(bp + 16);
    }
    bp += kNr;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(ap[i]);
      c0[i] = _mm512_fmadd_ps(a, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, b1, c1[i]);
    }
    ap += MR;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      c0[i] = _mm512_add_ps(c0[i], _mm512_maskz_loadu_ps(m0, row));
      c1[i] = _mm512_add_ps(c1[i], _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, c0[i]);
    _mm512_mask_storeu_ps(row + 16, m1, c1[i]);
  }
}

using MicroKernel = void (*)(i64, const float*, const float*, i64, float*, float*, i64, bool, __mmask16, __mmask16);

// Kernels for 1..kMr rows, indexed by rows - 1.
template <bool PackB, int... I>
constexpr std::array<MicroKernel, sizeof...(I)> kernel_table(std::integer_sequence<int, I...>) {
  return {&micro_kernel<I + 1, PackB>...};
}
constexpr auto kPlainKernels = kernel_table<false>(std::make_integer_sequence<int, kMr>{});
constexpr auto kPackingKernels = kernel_table<true>(std::make_integer_sequence<int, kMr>{});

// dst[p * mr + i] = a[i * rs + p * cs] for i < mr (<= kMr), p < kc.
void pack_a(const float* a, i64 rs, i64 cs, int mr, i64 kc, float* dst) {
  i64 p = 0;
  if (rs == 1) {
    // Columns contiguous (a transposed matrix, as in x.t() @ g): each column is a packed row.
    const __mmask16 mask = static_cast<__mmask16>((1u << mr) - 1);
    for (; p < kc; ++p) _mm512_mask_storeu_ps(dst + p * mr, mask, _mm512_maskz_loadu_ps(mask, a + p * cs));
    return;
  }
  if (cs == 1) {
    const __mmask16 mask = static_cast<__mmask16>((1u << mr) - 1);
    for (; p + 16 <= kc; p += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = i < mr ? _mm512_loadu_ps(a + i * rs + p) : _mm512_setzero_ps();
      transpose16(r);
      for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + (p + j) * mr, mask, r[j]);
    }
  }
  for (; p < kc; ++p)
    for (int i = 0; i < mr; ++i) dst[p * mr + i] = a[i * rs + p * cs];
}

// pack_a of a whole row block whose columns are contiguous (A = x.t(), as in a weight's gradient
// x.t() @ g): for each k, the mc values of A's column lie together, one stretch of a row of x, and
// are read in one pass into the mc / kMr panels; the rows of x (a row stride apart, each in
// another page) are prefetched kPackAheadColumns ahead. Packing panel by panel instead read each
// of kc rows kMc / kMr times, a few bytes each time, the lines a page apart evicting one another
// from L1 and L2 (the LM head's weight gradient is faster this way: docs/performance.md, "Figures
// behind kernel constants").
constexpr i64 kPackAheadColumns = 16;

void pack_a_columns(const float* a, i64 cs, i64 mc, i64 kc, float* dst) {
  const i64 lines = (mc * i64{sizeof(float)} + 63) / 64;
  for (i64 p = 0; p < kc; ++p) {
    const float* col = a + p * cs;
    const auto ahead = reinterpret_cast<std::uintptr_t>(col) +
                       static_cast<std::uintptr_t>(kPackAheadColumns * cs * i64{sizeof(float)});
    for (i64 l = 0; l <= lines; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(ahead + static_cast<std::uintptr_t>(l * 64)), _MM_HINT_T0);
    for (i64 ir = 0; ir < mc; ir += kMr) {
      const int mr = static_cast<int>(std::min<i64>(kMr, mc - ir));
      const __mmask16 mask = static_cast<__mmask16>((1u << mr) - 1);
      _mm512_mask_storeu_ps(dst + ir * kc + p * mr, mask, _mm512_maskz_loadu_ps(mask, col + ir));
    }
  }
}

// Packs columns [0, nc) of rows [0, kc) of B into panels of 32 columns (kc x 32 each, zeros
// past nc), for the plain kernels.
void pack_b(const float* b, i64 rs, i64 cs, i64 kc, i64 nc, float* dst) {
  for (i64 j0 = 0; j0 < nc; j0 += kNr) {
    const i64 nr = std::min<i64>(kNr, nc - j0);
    float* d = dst + j0 * kc;
    i64 p = 0;
    if (rs == 1) {
      // Columns contiguous (a transposed matrix): two 16 x 16 transposes per 16 rows.
      for (; p + 16 <= kc; p += 16) {
        for (int half = 0; half < 2; ++half) {
          __m512 r[16];
          for (int j = 0; j < 16; ++j) {
            const i64 col = half * 16 + j;
            r[j] = col < nr ? _mm512_loadu_ps(b + (j0 + col) * cs + p) : _mm512_setzero_ps();
          }
          transpose16(r);
          for (int q = 0; q < 16; ++q) _mm512_store_ps(d + (p + q) * kNr + half * 16, r[q]);
        }
      }
    }
    for (; p < kc; ++p) {
      const float* s = b + p * rs + j0 * cs;
      float* row = d + p * kNr;
      if (cs == 1) {
        for (i64 j = 0; j < nr; ++j) row[j] = s[j];
      } else {
        for (i64 j = 0; j < nr; ++j) row[j] = s[j * cs];
      }
      for (i64 j = nr; j < kNr; ++j) row[j] = 0.0f;
    }
  }
}

// A thread's packing buffers, kept for the thread's life. B's (1 MB) is 2 MiB aligned and asked
// to be one huge page: fewer TLB misses as the column panels go by.
struct Buffers {
  struct Free {
    void operator()(float* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<float, Free> a, b;

  static float* allocate(std::size_t floats, bool huge) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t alignment = huge ? kHuge : 64;
    const std::size_t bytes = (floats * sizeof(float) + alignment - 1) / alignment * alignment;
    void* p = nullptr;
    if (posix_memalign(&p, alignment, bytes) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return static_cast<float*>(p);
  }
  Buffers()
      : a(allocate(static_cast<std::size_t>(kKc * std::max(kMc, kMcColumns)), false)),
        b(allocate(static_cast<std::size_t>(kKc * kNc), true)) {}
};

Buffers& thread_buffers() {
  thread_local Buffers buffers;
  return buffers;
}

__mmask16 lanes(i64 count) {
  if (count >= 16) return 0xffff;
  if (count <= 0) return 0;
  return static_cast<__mmask16>((1u << count) - 1);
}

// The whole loop nest of Note [float32 GEMM] on one thread.
void gemm_serial(i64 m, i64 n, i64 k, const float* a, i64 a_rs, i64 a_cs, const float* b, i64 b_rs, i64 b_cs, float* c,
                 i64 ldc, bool accumulate) {
  Buffers& buf = thread_buffers();
  float* const ap = buf.a.get();
  float* const bp = buf.b.get();
  const bool pack_in_kernel = b_cs == 1;
  const i64 mc_block = a_rs == 1 ? kMcColumns : kMc;
  const bool one_row_block = m <= mc_block;
  for (i64 jc = 0; jc < n; jc += kNc) {
    const i64 nc = std::min(kNc, n - jc);
    for (i64 pc = 0; pc < k; pc += kKc) {
      const i64 kc = std::min(kKc, k - pc);
      const bool acc = accumulate || pc > 0;
      // With one row block, a B panel packed apart is packed just before its row panels use it
      // (into the same L1-sized buffer each time); with several, the block is packed once for all.
      const bool pack_per_panel = !pack_in_kernel && one_row_block;
      if (!pack_in_kernel && !pack_per_panel) pack_b(b + pc * b_rs + jc * b_cs, b_rs, b_cs, kc, nc, bp);
      for (i64 ic = 0; ic < m; ic += mc_block) {
        const i64 mc = std::min(mc_block, m - ic);
        if (a_rs == 1) {
          pack_a_columns(a + ic + pc * a_cs, a_cs, mc, kc, ap);
        } else {
          for (i64 ir = 0; ir < mc; ir += kMr)
            pack_a(a + (ic + ir) * a_rs + pc * a_cs, a_rs, a_cs, static_cast<int>(std::min<i64>(kMr, mc - ir)), kc,
                   ap + ir * kc);
        }
        for (i64 jr = 0; jr < nc; jr += kNr) {
          const i64 nr = std::min<i64>(kNr, nc - jr);
          const __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
          float* const panel = one_row_block ? bp : bp + jr * kc;
          const float* const b_src = b + pc * b_rs + (jc + jr) * b_cs;
          if (pack_per_panel) pack_b(b_src, b_rs, b_cs, kc, nr, panel);
          for (i64 ir = 0; ir < mc; ir += kMr) {
            const i64 mr = std::min<i64>(kMr, mc - ir);
            const bool pack_here = pack_in_kernel && ic == 0 && ir == 0;
            const MicroKernel kernel = pack_here ? kPackingKernels[mr - 1] : kPlainKernels[mr - 1];
            kernel(kc, ap + ir * kc, b_src, b_rs, panel, c + (ic + ir) * ldc + jc + jr, ldc, acc, m0, m1);
          }
        }
      }
    }
  }
}

}  // namespace

bool gemm_f32_available() noexcept { return true; }

void gemm_f32(i64 m, i64 n, i64 k, const float* a, i64 a_rs, i64 a_cs, const float* b, i64 b_rs, i64 b_cs, float* c,
              i64 ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (i64 i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  // A few rows: B streamed once, in place (Note [Small-M products] in cpu/gemm_small_m.cpp),
  // with the same sums.
  if (m <= kSmallM && gemm_small_m(m, n, k, a, a_rs, a_cs, b, ScalarType::Float32, b_rs, b_cs, c, ldc, accumulate))
    return;
  const i64 threads = intra_op_threads();
  if (threads <= 1 || m * n * k < kGemmParallelWork || in_parallel_region()) {
    gemm_serial(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, accumulate);
    return;
  }
  // Column ranges of whole 32-column panels when there are panels enough for every thread;
  // else row ranges of whole 14-row panels. Each range gives the same bits as the whole
  // (Note [float32 GEMM]).
  const i64 col_panels = (n + kNr - 1) / kNr;
  if (col_panels >= threads) {
    const i64 per = (col_panels + threads - 1) / threads;
    parallel_for(0, (col_panels + per - 1) / per, 1, [&](i64 first, i64 last) {
      for (i64 t = first; t < last; ++t) {
        const i64 j0 = t * per * kNr, j1 = std::min(n, (t + 1) * per * kNr);
        gemm_serial(m, j1 - j0, k, a, a_rs, a_cs, b + j0 * b_cs, b_rs, b_cs, c + j0, ldc, accumulate);
      }
    });
  } else {
    const i64 row_panels = (m + kMr - 1) / kMr;
    const i64 per = (row_panels + threads - 1) / threads;
    parallel_for(0, (row_panels + per - 1) / per, 1, [&](i64 first, i64 last) {
      for (i64 t = first; t < last; ++t) {
        const i64 i0 = t * per * kMr, i1 = std::min(m, (t + 1) * per * kMr);
        gemm_serial(i1 - i0, n, k, a + i0 * a_rs, a_rs, a_cs, b, b_rs, b_cs, c + i0 * ldc, ldc, accumulate);
      }
    });
  }
}

#else  // no AVX-512: matmul stays on oneDNN

bool gemm_f32_available() noexcept { return false; }

void gemm_f32(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t, const float*,
              std::int64_t, std::int64_t, float*, std::int64_t, bool) {
  std::abort();
}

#endif

}  // namespace kael::native
