// logsumexp's one-pass loop on one core (Note [logsumexp in one pass] in
// aten/src/native/cpu/logsumexp.cpp), AVX-512: the block max and sum of its terms over 16M
// float32 from memory and over 4096 float32 in L1, with the terms as
//   - "subtract": exp(x - m) (the loop before the terms took a reference),
//   - "reference": exp(x - M L) as logsumexp.cpp computes them now (LseRef),
// three forms without the block max, which a kernel would instead bound by the block's sum (a
// term, and so the block's max, is at most the sum):
//   - "clamp, no block max": the terms of now;
//   - "no clamp, no block max": also without the clamp to M L - 87 (wrong for such elements: the
//     floor of what dropping both operations is worth);
//   - "running min only": a running min in place of the clamp, which a kernel would test
//     against M L - 87 after the block, taking a careful pass when it fails (rows with -inf);
// and, in L1 only, two forms with one FMA fewer (a degree-2 polynomial) that logsumexp.cpp does
// not take:
//   - "32-entry table, degree 2": steps of ln2 / 32, so |r| <= ln2 / 64, the table's 32 entries
//     by one two-register permute (vpermt2d); its terms' relative error reaches 2.4e-7 with a
//     fitted polynomial, past the documented 2e-7 (kael's form: 1.6e-7, both in the float32
//     emulation of tools/bench/lse_term_error.py, 6M d in [-8, 0]);
//   - "16-entry table, degree 2": the table of now with 1 + r + r^2 / 2, an error of 1.8e-6 per
//     term, measured only as what one FMA fewer would be worth;
// next to the rates that bound it: a plain sum (what one core reads) and a copy with streaming
// stores (throughput.py's reference, counted as 8 B per element). The kernels alternate, 21
// rounds; each figure is the median, with the quartiles.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 tools/bench/lse_probe.cpp
//       -o /tmp/lse_probe && /tmp/lse_probe    (one line)

#if !defined(__AVX512F__)
#error "lse_probe measures the AVX-512 loop: build with -march=x86-64-v4"
#endif

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

// GCC 12's AVX-512 intrinsics read an undefined vector for their unused mask operand and warn
// about it where inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// The bits of 2^(j / N) less j << (23 - log2 N) (logsumexp.cpp's kLseExp2Sixteenths for N = 16).
template <std::uint32_t N, int kShiftBits>
std::array<std::uint32_t, N> exp2_table() {
  std::array<std::uint32_t, N> t{};
  for (std::uint32_t j = 0; j < N; ++j) {
    const float f = static_cast<float>(std::exp2(j / static_cast<double>(N)));
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    t[j] = bits - (j << kShiftBits);
  }
  return t;
}
alignas(64) const std::array<std::uint32_t, 16> kTable = exp2_table<16, 19>();
alignas(64) const std::array<std::uint32_t, 32> kTable32 = exp2_table<32, 18>();

constexpr float kShift = 0x1.8p19f;    // rounds to sixteenths
constexpr float kShift32 = 0x1.8p18f;  // rounds to 32nds

// The lanes' sum and max, through memory (GCC 12's _mm512_reduce_* warn).
float lanes_sum(__m512 v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  float s = 0;
  for (const float f : l) s += f;
  return s;
}
float lanes_max(__m512 v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  return *std::max_element(l, l + 16);
}
constexpr float kLn2 = 0x1.62e430p-1f;

// max(a, b) with the mask form (GCC 12's _mm512_max_ps warns); b when either is NaN.
inline __m512 vmax(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, static_cast<__mmask16>(0xffff), a, b); }

// The term without the clamp of v to M L - 87 (right only where no element lies that far below).
inline __m512 term_noclamp(__m512 v, __m512 c, __m512i table) {
  const __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(0x1.715476p+0f), c);
  const __m512 k16 = _mm512_sub_ps(t, c);
  const __m512 r = _mm512_fmadd_ps(k16, _mm512_set1_ps(-kLn2), v);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555556p-3f), r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ti = _mm512_castps_si512(t);
  using I = std::int32_t __attribute__((vector_size(64)));  // (GCC 12's _mm512_slli_epi32 warns)
  const __m512i scale = _mm512_add_epi32(_mm512_permutexvar_epi32(ti, table), reinterpret_cast<__m512i>(reinterpret_cast<I>(ti) << 19));
  return _mm512_mul_ps(_mm512_castsi512_ps(scale), p);
}

// exp(v - M L) with c = kShift - M and lo = M L - 87 (M = 0: exp(v)), as logsumexp.cpp's lse_exp.
inline __m512 term(__m512 v, __m512 lo, __m512 c, __m512i table) {
  return term_noclamp(_mm512_mask_max_ps(lo, static_cast<__mmask16>(0xffff), lo, v), c, table);
}

// The forms with a degree-2 polynomial (M = 0): 32 entries (vpermt2d) or 16 (vpermd).
template <int kEntries>
inline __m512 term_degree2(__m512 v, __m512 lo, __m512i t0, __m512i t1) {
  constexpr float kC = kEntries == 32 ? kShift32 : kShift;
  v = _mm512_mask_max_ps(lo, static_cast<__mmask16>(0xffff), lo, v);
  const __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(0x1.715476p+0f), _mm512_set1_ps(kC));
  const __m512 k = _mm512_sub_ps(t, _mm512_set1_ps(kC));
  const __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-kLn2), v);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0.5f), r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ti = _mm512_castps_si512(t);
  using I = std::int32_t __attribute__((vector_size(64)));
  const __m512i table = kEntries == 32 ? _mm512_mask_permutex2var_epi32(t0, static_cast<__mmask16>(0xffff), ti, t1)
                                       : _mm512_mask_permutexvar_epi32(t0, static_cast<__mmask16>(0xffff), ti, t0);
  const __m512i scale = reinterpret_cast<__m512i>(reinterpret_cast<I>(table) + (reinterpret_cast<I>(ti) << (kEntries == 32 ? 18 : 19)));
  return _mm512_mul_ps(_mm512_castsi512_ps(scale), p);
}

// The block's max and the sum of term(v) over it, 4 vectors a step, 4 accumulators of each.
template <typename Term>
inline float max_and_sum(const float* x, std::int64_t n, Term term) {
  __m512 mx[4], acc[4];
  for (int j = 0; j < 4; ++j) mx[j] = _mm512_set1_ps(-INFINITY), acc[j] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * j);
      mx[j] = vmax(mx[j], v);
      acc[j] = _mm512_add_ps(acc[j], term(v));
    }
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
  const __m512 b = vmax(vmax(mx[0], mx[1]), vmax(mx[2], mx[3]));
  return lanes_sum(s) + 1e-30f * lanes_max(b);
}

template <int kEntries>
[[gnu::noinline]] float one_pass_degree2(const float* x, std::int64_t n) {
  const __m512i t0 = _mm512_load_si512(kEntries == 32 ? kTable32.data() : kTable.data());
  const __m512i t1 = _mm512_load_si512(kTable32.data() + 16);
  const __m512 lo = _mm512_set1_ps(-87.0f);
  return max_and_sum(x, n, [&](__m512 v) { return term_degree2<kEntries>(v, lo, t0, t1); });
}

// The one-pass loop with the terms as exp(x - m) or exp(x - M L) (kReference).
template <bool kReference>
[[gnu::noinline]] float one_pass(const float* x, std::int64_t n, float m) {
  const __m512i table = _mm512_load_si512(kTable.data());
  const double M = std::nearbyint(m * std::log2(std::exp(1.0)) * 16.0) / 16.0;
  const __m512 lo = _mm512_set1_ps(kReference ? static_cast<float>(M * kLn2 - 87.0) : -87.0f);
  const __m512 c = _mm512_set1_ps(kReference ? static_cast<float>(kShift - M) : kShift);
  const __m512 mv = _mm512_set1_ps(m);
  return max_and_sum(x, n, [&](__m512 v) { return term(kReference ? v : _mm512_sub_ps(v, mv), lo, c, table); });
}

// The loop without the block max (kMode 0: terms with the clamp; 1: without it, which is only
// right where no element lies 87 below M L; 2: without it, with a running min of the block in
// its place, which a kernel would test against M L - 87 to take a careful pass instead).
template <int kMode>
[[gnu::noinline]] float variant(const float* x, std::int64_t n, float m) {
  const __m512i table = _mm512_load_si512(kTable.data());
  const double M = std::nearbyint(m * std::log2(std::exp(1.0)) * 16.0) / 16.0;
  const __m512 lo = _mm512_set1_ps(static_cast<float>(M * kLn2 - 87.0));
  const __m512 c = _mm512_set1_ps(static_cast<float>(kShift - M));
  __m512 mn[4], acc[4];
  for (int j = 0; j < 4; ++j) mn[j] = _mm512_set1_ps(INFINITY), acc[j] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * j);
      if (kMode == 2) mn[j] = _mm512_mask_min_ps(mn[j], static_cast<__mmask16>(0xffff), mn[j], v);
      acc[j] = _mm512_add_ps(acc[j], kMode == 0 ? term(v, lo, c, table) : term_noclamp(v, c, table));
    }
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
  return lanes_sum(s) + (kMode == 2 ? 1e-30f * lanes_max(mn[0]) : 0.0f);
}

[[gnu::noinline]] float sum(const float* x, std::int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (std::int64_t i = 0; i + 64 <= n; i += 64)
    for (int j = 0; j < 4; ++j) acc[j] = _mm512_add_ps(acc[j], _mm512_loadu_ps(x + i + 16 * j));
  return lanes_sum(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

[[gnu::noinline]] float copy(float* __restrict out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i + 16 <= n; i += 16) _mm512_stream_ps(out + i, _mm512_loadu_ps(x + i));
  _mm_sfence();
  return out[0];
}

float* huge_buffer(std::int64_t n) {
  auto* p = static_cast<float*>(std::aligned_alloc(std::size_t{2} << 20, static_cast<std::size_t>(n) * 4));
  if (p == nullptr) std::abort();
  madvise(p, static_cast<std::size_t>(n) * 4, MADV_HUGEPAGE);  // as kael's allocator does
  return p;
}

volatile float sink;

}  // namespace

int main() {
  constexpr std::int64_t kBig = std::int64_t{16} << 20, kSmall = 4096;
  constexpr int kRounds = 21, kSmallReps = 4000;
  float* x = huge_buffer(kBig);
  float* y = huge_buffer(kBig);
  for (std::int64_t i = 0; i < kBig; ++i) x[i] = 3.0f * std::sin(0.001f * static_cast<float>(i)), y[i] = 0.0f;
  const float m = 3.0f;
  struct Kernel {
    std::string name;
    std::function<float(std::int64_t)> run;
    double bytes;  // per element
    bool small;    // also measured in L1
    bool big = true;  // measured from memory
  };
  const std::vector<Kernel> kernels = {
      {"copy (streaming stores)", [&](std::int64_t n) { return copy(y, x, n); }, 8, false},
      {"sum", [&](std::int64_t n) { return sum(x, n); }, 4, false},
      {"one pass, subtract", [&](std::int64_t n) { return one_pass<false>(x, n, m); }, 4, true},
      {"one pass, reference", [&](std::int64_t n) { return one_pass<true>(x, n, m); }, 4, true},
      {"clamp, no block max", [&](std::int64_t n) { return variant<0>(x, n, m); }, 4, true},
      {"no clamp, no block max", [&](std::int64_t n) { return variant<1>(x, n, m); }, 4, true},
      {"running min only", [&](std::int64_t n) { return variant<2>(x, n, m); }, 4, true},
      {"32-entry table, degree 2", [&](std::int64_t n) { return one_pass_degree2<32>(x, n); }, 4, true, false},
      {"16-entry table, degree 2", [&](std::int64_t n) { return one_pass_degree2<16>(x, n); }, 4, true, false},
  };
  std::vector<std::vector<double>> big(kernels.size()), small(kernels.size());
  for (int r = 0; r < kRounds; ++r) {
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      auto t0 = std::chrono::steady_clock::now();
      if (kernels[k].big) {
        sink = kernels[k].run(kBig);
        big[k].push_back(static_cast<double>(kBig) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      if (!kernels[k].small) continue;
      t0 = std::chrono::steady_clock::now();
      for (int q = 0; q < kSmallReps; ++q) sink = kernels[k].run(kSmall);
      small[k].push_back(kSmall * double{kSmallReps} / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::printf("%-26s %-28s %s\n", "kernel", "16M floats from memory", "4096 floats in L1");
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    std::sort(big[k].begin(), big[k].end());
    std::sort(small[k].begin(), small[k].end());
    const double b = kernels[k].bytes / 1e9;
    if (kernels[k].big)
      std::printf("%-26s %5.1f GB/s (%4.1f-%4.1f)      ", kernels[k].name.c_str(), big[k][kRounds / 2] * b,
                  big[k][kRounds / 4] * b, big[k][3 * kRounds / 4] * b);
    else
      std::printf("%-26s %-28s ", kernels[k].name.c_str(), "(L1 only)");
    if (kernels[k].small) std::printf("%.2f G elements/s (%.2f-%.2f)", small[k][kRounds / 2] / 1e9, small[k][kRounds / 4] / 1e9, small[k][3 * kRounds / 4] / 1e9);
    std::printf("\n");
  }
}
