// How fast does the contiguous-rows small-M product (Note [Small-M products] in
// aten/src/native/cpu/gemm_small_m.cpp) stream B from memory, with the two ways of prefetching
// the rows read next: the same columns of the next 8 rows into L1 (the form before 2026-12-07)
// and the next group's row stretches into L2 in memory order (the kernel's form since)? One
// thread, a GPT-2 small decode's 48 layer matrices (12 x (768x2304, 768x768, 768x3072,
// 3072x768): 340 MB in float32), B in 2 MB pages where the kernel gives them (as kael's
// allocator), blocks of 256 rows as the kernel cuts them. Each line prints GB/s of B read,
// best and median of the runs, two rounds: batch 1 and 8, the whole width and two shares of the
// columns (as two threads cut it), float32 and bfloat16.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 tools/bench/small_m_probe.cpp
//       -o /tmp/small_m_probe && /tmp/small_m_probe 9                                  (one line)
//
// (needs AVX-512; the kernels here are copies of the two forms, not the library's code.)

#include <immintrin.h>
#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
using i64 = std::int64_t;
constexpr i64 kKc = 256;
static inline __mmask16 lanes(i64 c) { return c >= 16 ? 0xffff : c <= 0 ? 0 : (__mmask16)((1u << c) - 1); }
template <typename T> static inline const char* ahead(const T* p, i64 e) { return (const char*)((std::uintptr_t)p + (std::uintptr_t)(e * (i64)sizeof(T))); }
struct F32 { using T = float; static __m512 load(const T* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); } };
struct BF16 { using T = std::uint16_t;
  static __m512 widen(__m256i v) { return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, v), 16)); }
  static __m512 load(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); } };

// FORM 0: the same columns of the next R rows into L1, once per 64 bytes (the form before);
// FORM 1: the next group's stretches into L2, in memory order, as many lines a step as it reads.
template <typename L, int M, int FORM, int R = 8>
void nn_block(i64 p0, i64 p1, const float* a, const typename L::T* b, i64 ldb, i64 j0, i64 j1, float* out, i64 ldo) {
  using T = typename L::T;
  const i64 width = j1 - j0, vectors = (width + 15) / 16;
  const __mmask16 tail = lanes(width - (vectors - 1) * 16);
  for (int i = 0; i < M; ++i) std::fill(out + i * ldo, out + i * ldo + width, 0.0f);
  const i64 stretch = width * (i64)sizeof(T);
  i64 p = p0;
  for (; p + R <= p1; p += R) {
    float av[M * R];
    for (int i = 0; i < M; ++i) for (int r = 0; r < R; ++r) av[i * R + r] = a[i * 4096 + p + r];
    const T* row = b + p * ldb + j0;
    const char* pf = ahead(row, R * ldb);  // the next group's first stretch
    int pf_row = 0; i64 pf_off = 0;
    for (i64 v = 0; v < vectors; ++v) {
      const __mmask16 mask = v == vectors - 1 ? tail : (__mmask16)0xffff;
      __m512 bv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) bv[r] = L::load(row + r * ldb + 16 * v, mask);
      if constexpr (FORM == 0) {
        if (sizeof(T) == 4 || (v & 1) == 0)
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) _mm_prefetch(ahead(row, (r + R) * ldb + 16 * v), _MM_HINT_T0);
      } else {
        constexpr int lines = R * (int)sizeof(T) / 4;
#pragma GCC unroll 16
        for (int q = 0; q < lines; ++q) {
          if (pf_row < R) {
            _mm_prefetch(pf + pf_row * ldb * (i64)sizeof(T) + pf_off, _MM_HINT_T1);
            pf_off += 64;
            if (pf_off >= stretch) { pf_off = 0; ++pf_row; }
          }
        }
      }
      __m512 acc[M];
      for (int i = 0; i < M; ++i) acc[i] = _mm512_maskz_loadu_ps(mask, out + i * ldo + 16 * v);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(av[i * R + r]), bv[r], acc[i]);
      for (int i = 0; i < M; ++i) _mm512_mask_storeu_ps(out + i * ldo + 16 * v, mask, acc[i]);
    }
  }
}
template <typename T> struct Mat { i64 k, n; T* data; };
template <typename L, int M, int FORM>
double run(std::vector<Mat<typename L::T>>& mats, const float* x, float* scratch, float* c, int shares) {
  auto t0 = std::chrono::steady_clock::now();
  for (auto& m : mats) {
    for (i64 blk = 0; blk * kKc < m.k; ++blk) {
      i64 share = ((m.n + 15) / 16 + shares - 1) / shares * 16;
      for (int s = 0; s < shares; ++s) {
        i64 j0 = s * share, j1 = std::min(m.n, j0 + share);
        nn_block<L, M, FORM>(blk * kKc, std::min(m.k, (blk + 1) * kKc), x, m.data, m.n, j0, j1, scratch + j0, m.n);
      }
      for (i64 j = 0; j < M * m.n; ++j) c[j] += scratch[j];
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
template <typename L>
void suite(const char* name, int reps) {
  using T = typename L::T;
  std::vector<Mat<T>> mats; double bytes = 0;
  for (int l = 0; l < 12; ++l)
    for (auto [k, n] : {std::pair<i64, i64>{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}}) {
      size_t sz = ((k * n * sizeof(T) + (1 << 21) - 1) >> 21) << 21;
      T* d = static_cast<T*>(std::aligned_alloc(1 << 21, sz));
      madvise(d, sz, MADV_HUGEPAGE);
      for (i64 i = 0; i < k * n; ++i) d[i] = static_cast<T>((i * 7919) % 1000);  // (bfloat16: small values as bits)
      mats.push_back({k, n, d}); bytes += k * n * (double)sizeof(T);
    }
  std::vector<float> x(8 * 4096, 0.5f), scratch(8 * 4096), c(8 * 4096);
  auto report = [&](const char* what, auto fn) {
    std::vector<double> t; for (int r = 0; r < reps; ++r) t.push_back(fn());
    std::sort(t.begin(), t.end());
    std::printf("%-6s %-28s best %6.1f GB/s median %6.1f\n", name, what, bytes / t[0] / 1e9, bytes / t[reps / 2] / 1e9);
  };
  for (int round = 0; round < 2; ++round) {
    report("b1 L1, strided", [&] { return run<L, 1, 0>(mats, x.data(), scratch.data(), c.data(), 1); });
    report("b1 L2, in order", [&] { return run<L, 1, 1>(mats, x.data(), scratch.data(), c.data(), 1); });
    report("b1 L1, strided, 2 shares", [&] { return run<L, 1, 0>(mats, x.data(), scratch.data(), c.data(), 2); });
    report("b1 L2, in order, 2 shares", [&] { return run<L, 1, 1>(mats, x.data(), scratch.data(), c.data(), 2); });
    report("b8 L1, strided", [&] { return run<L, 8, 0>(mats, x.data(), scratch.data(), c.data(), 1); });
    report("b8 L2, in order", [&] { return run<L, 8, 1>(mats, x.data(), scratch.data(), c.data(), 1); });
  }
}
int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  suite<F32>("f32", reps);
  suite<BF16>("bf16", reps);
}
