// Products of a few rows by a large matrix: a layer applied to the tokens of a decoding step.
//
// Note [Small-M products]
// With m <= kSmallM rows of A, C = A B reads each element of B for m multiply-adds: the product
// is bound by the speed B streams from memory, not by the FMAs, and the GEMM of gemm.cpp (which
// packs B into panels for 14-row micro-kernels) spends most of its time on the packing. Here B
// is read once, in place, straight into the FMAs, with float32 accumulators for all m rows:
//   - B with contiguous rows (b_cs == 1, Conv1D's (in, out) weight): one block of kGemmKBlock
//     rows at a time, read row after row, 8 rows together, each row from left to right (8
//     sequential streams the hardware prefetchers follow); the block's m x n chains live in
//     memory (L1 or L2), each load and store of them carrying 8 FMAs, and are then added to C.
//     (A first form kept m x 16W tiles of C in registers and walked a block's rows per tile:
//     every row touched in 512-byte pieces a page apart, 8.4 GB/s on a 9.4 MB matrix in L3
//     against 18 for this one on the machine of docs/performance.md, "GPT decoding".)
//     While a group of R rows is read, the next group's stretches are prefetched into L2, in
//     memory order (row after row, each from left to right, one 64-byte line at a time, as many
//     lines per step as the step reads): the hardware prefetchers alone, or prefetches of the
//     same columns R rows ahead into L1, left a decode's 48 layer products well below the
//     streaming-read bandwidth (docs/performance.md, "GPT decoding").
//   - B with contiguous columns (b_rs == 1, the transpose of a row-major (n, k) matrix: Linear's
//     w.t(), the LM head's wte.t()): 16 columns of C at a time, whose 16 rows of the (n, k)
//     matrix are one contiguous stretch of memory; each 16 x 16 block is loaded, transposed in
//     registers and fed to the FMAs as 16 rows of B.
// Threads: contiguous columns split into pieces of whole 16-column tiles; contiguous rows into
// pieces of (block, share of the columns), each writing its block's chains apart, added to C in
// block order afterwards. Pieces are several per thread, so one thread slowed by other work on
// its CPU hands its last pieces to the others (Note [Pieces and stealing]), and each is a long
// in-order read.
// Each C element is summed as gemm_f32 sums it (Note [float32 GEMM]): one FMA chain from 0 per
// block of kGemmKBlock values of k, in ascending order, each block's chain then added to C (the
// first one stored, unless accumulating). So a row's results are bit-identical whatever m, the
// thread count, or whether the row went through gemm_f32 or this kernel: a decoder's sequence
// gets the same logits alone or batched with others, at prefill or one token at a time.
// bfloat16 and float16 B are widened to float32 as they are loaded (a shift, vcvtph2ps); the
// sums are float32 as for a float32 B. (A bfloat16 B with contiguous columns is transposed as
// dwords of two values, 32 values of k at a time, and widened after: see nt_tile.)
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kael/native/gemm.h"
#include "kael/runtime/threads.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

#include "gemm_avx512.h"
#endif

namespace kael::native {

#if defined(__AVX512F__) && defined(__AVX512BW__)

namespace {

using i64 = std::int64_t;
constexpr i64 kKc = kGemmKBlock;

// B's element types, widened to float32 16 at a time.
struct F32 {
  using T = float;
  static __m512 load(const T* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const T* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static float scalar(T v) { return v; }
};
struct BF16 {
  using T = std::uint16_t;
  // (The zero-masking forms with every lane kept: see transpose16 in gemm_avx512.h.)
  static __m512 widen(__m256i v) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, v), 16));
  }
  static __m512 load(const T* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
  static float scalar(T v) {
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};
struct F16 {
  using T = std::uint16_t;
  static __m512 widen(__m256i v) { return _mm512_maskz_cvtph_ps(0xffff, v); }
  static __m512 load(const T* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
  static float scalar(T v) { return _cvtsh_ss(v); }
};

__mmask16 lanes(i64 count) {
  if (count >= 16) return 0xffff;
  if (count <= 0) return 0;
  return static_cast<__mmask16>((1u << count) - 1);
}

// An address `elements` past p, computed as an integer: a prefetch may point past the matrix,
// pointer arithmetic may not.
template <typename T>
const char* ahead(const T* p, i64 elements) {
  return reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) +
                                       static_cast<std::uintptr_t>(elements * i64{sizeof(T)}));
}

// Adds the block's chains to C (or stores them: the first block when not accumulating).
inline void finish(float* c, __m512 v, __mmask16 mask, bool acc) {
  if (acc) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, c));
  _mm512_mask_storeu_ps(c, mask, v);
}

// Prefetches, into L2 and in memory order, the lines of `rows` stretches of `stretch` bytes each,
// `ld` bytes apart from `base` on: a few lines per call, as many as the caller's step reads, so
// that the next rows arrive while the current ones are read (Note [Small-M products]). The
// addresses are integers: past the matrix they are only prefetched, never read.
struct NextRows {
  std::uintptr_t base;
  i64 ld, stretch;
  int rows;
  int row = 0;
  i64 offset = 0;
  template <int Lines>
  void issue() {
#pragma GCC unroll 16
    for (int q = 0; q < Lines; ++q) {
      if (row < rows) {
        _mm_prefetch(reinterpret_cast<const char*>(base + static_cast<std::uintptr_t>(row * ld + offset)), _MM_HINT_T1);
        offset += 64;
        if (offset >= stretch) {
          offset = 0;
          ++row;
        }
      }
    }
  }
};

// Rows of B taken together by the contiguous-rows kernel: each update of the sums in memory does
// R FMAs (A's values are broadcast from memory into them), so the sums' loads and stores stay
// a fraction of B's even when they fall out of L1.
constexpr int kRowsTogether = 8;

// Contiguous rows: the chains of one block of B's rows [p0, p1) for columns [j0, j1), from 0,
// into out (M rows, row stride ldo). The block's rows are read one after the other, R at a time,
// each row's stretch [j0, j1) from left to right: R sequential streams, which the hardware
// prefetchers follow. The chains live in `out` (in L1 or L2), each updated by R FMAs per load
// and store.
template <typename L, int M>
void nn_block(i64 p0, i64 p1, const float* a, i64 a_rs, i64 a_cs, const typename L::T* b, i64 ldb, i64 j0, i64 j1,
              float* out, i64 ldo) {
  constexpr int R = kRowsTogether;
  const i64 width = j1 - j0, vectors = (width + 15) / 16;
  const __mmask16 tail = lanes(width - (vectors - 1) * 16);
  const auto mask_of = [&](i64 v) { return v == vectors - 1 ? tail : static_cast<__mmask16>(0xffff); };
  for (int i = 0; i < M; ++i) std::fill(out + i * ldo, out + i * ldo + width, 0.0f);
  constexpr i64 kSize = sizeof(typename L::T);
  i64 p = p0;
  for (; p + R <= p1; p += R) {
    // A's values of these rows, packed: av[i * R + r] = A[i, p + r]
    float av[M * R];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) av[i * R + r] = a[i * a_rs + (p + r) * a_cs];
    const typename L::T* row = b + p * ldb + j0;
    // The next group's stretches, into L2, in memory order, as many lines a step as it reads.
    NextRows next{reinterpret_cast<std::uintptr_t>(ahead(row, R * ldb)), ldb * kSize, width * kSize, R};
    for (i64 v = 0; v < vectors; ++v) {
      const __mmask16 mask = mask_of(v);
      __m512 bv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) bv[r] = L::load(row + r * ldb + 16 * v, mask);
      next.issue<R * kSize / 4>();
      // The M chains advance together, row by row, so that independent FMAs lie next to each
      // other (each chain's own are R deep).
      __m512 acc[M];
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) acc[i] = _mm512_maskz_loadu_ps(mask, out + i * ldo + 16 * v);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(av[i * R + r]), bv[r], acc[i]);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) _mm512_mask_storeu_ps(out + i * ldo + 16 * v, mask, acc[i]);
    }
  }
  for (; p < p1; ++p) {
    const typename L::T* row = b + p * ldb + j0;
    for (i64 v = 0; v < vectors; ++v) {
      const __mmask16 mask = mask_of(v);
      const __m512 bv = L::load(row + 16 * v, mask);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) {
        float* t = out + i * ldo + 16 * v;
        _mm512_mask_storeu_ps(t, mask, _mm512_fmadd_ps(_mm512_set1_ps(a[i * a_rs + p * a_cs]), bv,
                                                       _mm512_maskz_loadu_ps(mask, t)));
      }
    }
  }
}

// C[0:m, 0:n] (+)= `chains` (m x n, row stride n): the first block's chains stored (or added,
// when accumulating), each later block's added, in ascending order (Note [float32 GEMM]).
void add_block(i64 m, i64 n, const float* chains, float* c, i64 ldc, bool acc) {
  for (i64 i = 0; i < m; ++i) {
    const float* s = chains + i * n;
    float* d = c + i * ldc;
    for (i64 j = 0; j < n; j += 16) {
      const __mmask16 mask = lanes(n - j);
      finish(d + j, _mm512_maskz_loadu_ps(mask, s + j), mask, acc);
    }
  }
}

// Contiguous columns: C[0:M, 0:rows] (+)= A[0:M, :] B[:, 0:rows], B[p, q] = bt[q * ldbt + p]
// (rows <= 16 of them); `next` is the next 16 columns' first row (nullptr: none).
template <typename L, int M>
void nt_tile(i64 k, const float* ap, const typename L::T* bt, i64 ldbt, int rows, const typename L::T* next, float* c,
             i64 ldc, bool accumulate) {
  const __mmask16 mask = lanes(rows);
  constexpr i64 kSize = sizeof(typename L::T);
  // The next 16 columns' rows of bt, into L2, in memory order, as many lines a step as it reads.
  NextRows ahead_rows{reinterpret_cast<std::uintptr_t>(next), ldbt * kSize, k * kSize, next != nullptr ? 16 : 0};
  for (i64 pc = 0; pc < k; pc += kKc) {
    const i64 end = std::min(k, pc + kKc);
    __m512 sum[M];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) sum[i] = _mm512_setzero_ps();
    i64 p = pc;
    if constexpr (std::is_same_v<L, BF16>) {
      // 32 values of k at a time: each row's are 16 dwords of two bfloat16s (values p + 2t and
      // p + 2t + 1), transposed as floats would be; a dword then widens to both values without a
      // shuffle (a shift, an and): 2.5 times fewer shuffles than widening 16 at a time. The LM
      // head (1 row, 50257 x 768, out of cache, 1 thread) goes from 10.8 to 11.8 GB/s (float32:
      // 14).
      const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
      for (; p + 32 <= end; p += 32) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int q = 0; q < 16; ++q) {
          r[q] = q < rows ? _mm512_castsi512_ps(_mm512_loadu_si512(bt + q * ldbt + p)) : _mm512_setzero_ps();
        }
        ahead_rows.issue<16>();
        transpose16(r);  // r[t]: the dwords (p + 2t, p + 2t + 1) of the 16 rows
#pragma GCC unroll 16
        for (int t = 0; t < 16; ++t) {
          const __m512i v = _mm512_castps_si512(r[t]);
          const __m512 lo = _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, v, 16));
          const __m512 hi = _mm512_castsi512_ps(_mm512_maskz_and_epi32(0xffff, v, high));
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i) sum[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[(p + 2 * t) * M + i]), lo, sum[i]);
#pragma GCC unroll 8
          for (int i = 0; i < M; ++i)
            sum[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[(p + 2 * t + 1) * M + i]), hi, sum[i]);
        }
      }
    }
    for (; p + 16 <= end; p += 16) {
      __m512 r[16];
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) {
        r[q] = q < rows ? L::load(bt + q * ldbt + p) : _mm512_setzero_ps();
      }
      ahead_rows.issue<16 * kSize / 4>();
      transpose16(r);  // r[q]: row p + q of B, 16 columns
#pragma GCC unroll 16
      for (int q = 0; q < 16; ++q) {
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) sum[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[(p + q) * M + i]), r[q], sum[i]);
      }
    }
    for (; p < end; ++p) {
      alignas(64) float col[16] = {};
      for (int q = 0; q < rows; ++q) col[q] = L::scalar(bt[q * ldbt + p]);
      const __m512 r = _mm512_load_ps(col);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) sum[i] = _mm512_fmadd_ps(_mm512_set1_ps(ap[p * M + i]), r, sum[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) finish(c + i * ldc, sum[i], mask, accumulate || pc > 0);
  }
}

// Contiguous columns, columns [j0, j1) of C.
template <typename L, int M>
void nt_columns(i64 k, const float* a, i64 a_rs, i64 a_cs, const typename L::T* bt, i64 ldbt, float* c, i64 ldc,
                bool accumulate, i64 j0, i64 j1) {
  // A packed k-major (ap[p * M + i] = A[i, p]): the broadcasts address it by constant offsets.
  thread_local std::vector<float> packed;
  packed.resize(static_cast<std::size_t>(k * M));
  float* const ap = packed.data();
  for (i64 p = 0; p < k; ++p)
    for (int i = 0; i < M; ++i) ap[p * M + i] = a[i * a_rs + p * a_cs];
  for (i64 j = j0; j < j1; j += 16) {
    const int rows = static_cast<int>(std::min<i64>(16, j1 - j));
    const typename L::T* next = j + 16 < j1 ? bt + (j + 16) * ldbt : nullptr;
    nt_tile<L, M>(k, ap, bt + j * ldbt, ldbt, rows, next, c + j, ldc, accumulate);
  }
}

// The product's operands, for M rows.
struct Product {
  i64 n, k;
  const float* a;
  i64 a_rs, a_cs;
  const void* b;
  i64 b_rs, b_cs;
  float* c;
  i64 ldc;
  bool accumulate;
};
// Contiguous rows: the chains of B's rows [p0, p1) and columns [j0, j1) into out (row stride ldo).
using Block = void (*)(const Product&, i64 p0, i64 p1, i64 j0, i64 j1, float* out, i64 ldo);
// Contiguous columns: C's columns [j0, j1), the whole sum.
using Columns = void (*)(const Product&, i64 j0, i64 j1);

template <typename L, int M>
void block(const Product& p, i64 p0, i64 p1, i64 j0, i64 j1, float* out, i64 ldo) {
  nn_block<L, M>(p0, p1, p.a, p.a_rs, p.a_cs, static_cast<const typename L::T*>(p.b), p.b_rs, j0, j1, out, ldo);
}

template <typename L, int M>
void columns(const Product& p, i64 j0, i64 j1) {
  nt_columns<L, M>(p.k, p.a, p.a_rs, p.a_cs, static_cast<const typename L::T*>(p.b), p.b_cs, p.c, p.ldc,
                   p.accumulate, j0, j1);
}

struct Kernels {
  Block block;
  Columns columns;
};
template <typename L, int... I>
constexpr std::array<Kernels, sizeof...(I)> kernel_table(std::integer_sequence<int, I...>) {
  return {Kernels{&block<L, I + 1>, &columns<L, I + 1>}...};
}
constexpr auto kF32 = kernel_table<F32>(std::make_integer_sequence<int, kSmallM>{});
constexpr auto kBF16 = kernel_table<BF16>(std::make_integer_sequence<int, kSmallM>{});
constexpr auto kF16 = kernel_table<F16>(std::make_integer_sequence<int, kSmallM>{});

// The most floats of block chains the threaded contiguous-rows product keeps (16 MB).
constexpr i64 kScratchFloats = i64{1} << 22;

// B bytes below which the product runs on the calling thread.
constexpr i64 kParallelBytes = i64{1} << 18;

}  // namespace

bool gemm_small_m(i64 m, i64 n, i64 k, const float* a, i64 a_rs, i64 a_cs, const void* b, ScalarType b_type,
                  i64 b_rs, i64 b_cs, float* c, i64 ldc, bool accumulate) {
  if (m < 1 || m > kSmallM || (b_cs != 1 && b_rs != 1)) return false;
  const std::array<Kernels, kSmallM>* table = nullptr;
  switch (b_type) {
    case ScalarType::Float32: table = &kF32; break;
    case ScalarType::BFloat16: table = &kBF16; break;
    case ScalarType::Float16: table = &kF16; break;
    default: return false;
  }
  if (n <= 0) return true;
  if (k <= 0) {
    if (!accumulate)
      for (i64 i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return true;
  }
  const Product product{n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, accumulate};
  const Kernels& kernels = (*table)[static_cast<std::size_t>(m - 1)];
  const i64 threads = intra_op_threads();
  const bool parallel = threads > 1 && n * k * itemsize(b_type) >= kParallelBytes && !in_parallel_region();
  const i64 vectors = (n + 15) / 16;
  if (b_cs != 1) {
    // Contiguous columns: pieces of whole 16-column tiles, each a contiguous stretch of the
    // (n, k) matrix; several per thread, so that a thread slowed by other work on its CPU hands
    // its last pieces to the others (Note [Pieces and stealing] in kael/runtime/threads.h).
    if (!parallel) {
      kernels.columns(product, 0, n);
    } else {
      parallel_for(0, vectors, std::max<i64>(1, vectors / (threads * 4)),
                   [&](i64 v0, i64 v1) { kernels.columns(product, v0 * 16, std::min(n, v1 * 16)); });
    }
    return true;
  }
  // Contiguous rows: one block of kGemmKBlock rows at a time, its chains added to C in order.
  const i64 blocks = (k + kKc - 1) / kKc;
  thread_local std::vector<float> scratch;
  if (!parallel) {
    scratch.resize(static_cast<std::size_t>(m * n));
    for (i64 blk = 0; blk < blocks; ++blk) {
      kernels.block(product, blk * kKc, std::min(k, (blk + 1) * kKc), 0, n, scratch.data(), n);
      add_block(m, n, scratch.data(), c, ldc, accumulate || blk > 0);
    }
    return true;
  }
  // Pieces of one block's rows by a share of the columns (the fewest shares that make two
  // pieces per thread): each a stretch of whole rows, read in order, as long as can be; a
  // thread slowed by other work hands its last pieces to the others. Each writes its own
  // block's chains; they are added to C afterwards, in the blocks' order, so the sums are
  // those of the serial loop.
  // The blocks go in groups whose chains take at most kScratchFloats.
  const i64 group = std::clamp<i64>(kScratchFloats / (m * n), 1, blocks);
  scratch.resize(static_cast<std::size_t>(group * m * n));
  float* const chains = scratch.data();
  for (i64 g0 = 0; g0 < blocks; g0 += group) {
    const i64 g1 = std::min(blocks, g0 + group);
    const i64 shares = std::min(vectors, std::max<i64>(1, (2 * threads + (g1 - g0) - 1) / (g1 - g0)));
    const i64 share = (vectors + shares - 1) / shares * 16;
    parallel_for(0, (g1 - g0) * shares, 1, [&](i64 u0, i64 u1) {
      for (i64 u = u0; u < u1; ++u) {
        const i64 blk = g0 + u / shares, j0 = (u % shares) * share, j1 = std::min(n, j0 + share);
        if (j0 < j1)
          kernels.block(product, blk * kKc, std::min(k, (blk + 1) * kKc), j0, j1, chains + (blk - g0) * m * n + j0, n);
      }
    });
    for (i64 blk = g0; blk < g1; ++blk) add_block(m, n, chains + (blk - g0) * m * n, c, ldc, accumulate || blk > 0);
  }
  return true;
}

#else  // no AVX-512: the callers multiply otherwise

bool gemm_small_m(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, std::int64_t, const void*,
                  ScalarType, std::int64_t, std::int64_t, float*, std::int64_t, bool) {
  return false;
}

#endif

}  // namespace kael::native
