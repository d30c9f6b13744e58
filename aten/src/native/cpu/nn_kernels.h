#pragma once
// Pieces the neural-network kernels share (nn_ops.cpp, nn_backward.cpp, attention.cpp): argument
// checks and compute-dtype copies, splitting a range of independent tasks among the intra-op
// threads, and an exp the compiler vectorises.

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>

#include "kael/core/error.h"
#include "kael/core/scalar_type.h"
#include "kael/core/tensor.h"
#include "kael/native/loops.h"
#include "kael/native/pointwise.h"
#include "kael/native/vec_math.h"
#include "kael/runtime/threads.h"

namespace kael::native::nn {

// The lanes of the kernels' hand-unrolled loops (independent accumulators the compiler vectorises).
inline constexpr int kLanes = 16;

inline void check_floating(const char* op, ScalarType t) {
  KAEL_CHECK_IMPLEMENTED(is_floating(t),
                         op << ": not implemented for dtype " << t << " (\"" << op << "\" not implemented for '"
                            << torch_type_name(t) << "')");
}
inline void check_floating(const char* op, const Tensor& t) { check_floating(op, t.dtype()); }

inline void check_cpu(const char* op, const Tensor& t) { check_same_device(op, kCPU, t.device()); }

// The dtype a kernel computes in: float32 for the half types, else the dtype itself.
inline ScalarType compute_dtype(ScalarType t) { return is_reduced_floating(t) ? ScalarType::Float32 : t; }

// t as a contiguous tensor of dtype `dtype` (t itself when it already is one).
inline Tensor contiguous_as(const Tensor& t, ScalarType dtype) {
  if (t.dtype() != dtype) return to_dtype_cpu(t, dtype);  // new and contiguous
  return t.is_contiguous() ? t : snapshot_cpu(t);
}

// Writes the compute-dtype result `acc` into `out` (same shape) when they are different tensors.
inline void store(const Tensor& out, const Tensor& acc) {
  if (!out.is_same(acc)) copy_cpu(out, acc);
}

// Runs f(begin, end) over [0, n) split into contiguous ranges on kael's thread pool. `cost` is
// the work of one task in elements: below kParallelGrain in all the call stays on the calling
// thread. An exception thrown by f on any thread is rethrown here, on the caller's (the pool's
// rule, Note [Thread pool]).
template <typename F>
void parallel_for(std::int64_t n, std::int64_t cost, F&& f) {
  if (n <= 0) return;
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(cost, 1));
  kael::parallel_for(0, n, grain, [&f](std::int64_t begin, std::int64_t end) { f(begin, end); });
}

// log(sum(exp(x[0..n)))) of a contiguous float32 row, read once, as logsumexp computes it (Note
// [logsumexp in one pass], logsumexp.cpp), in two parts: the row's max and log(sum(exp(x -
// max))), so that a caller can subtract an element from the max first (exact for the largest
// elements) and keep the log of the sum, which max + log(sum) loses to rounding for a large max.
// max is NaN if the row holds one, else +inf if it holds +inf, -inf for a row of -inf or an empty
// one (log_sum 0 then).
struct RowLogSumExp {
  float max;
  double log_sum;
};
RowLogSumExp logsumexp_row(const float* x, std::int64_t n);

// exp(x) for float in straight-line code the compiler turns into vector instructions inside a
// loop (libm's expf is a call per element). Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a
// degree-7 polynomial for e^r, 2^n put into the exponent bits. Within 2 ulp of the correctly
// rounded result for x in [-86.6, 88.7] (checked against float64 by test_nn_ops.py); below that
// it returns 0 (the true result is below 2.4e-38), above it inf;
// NaN gives NaN. No float -> int conversion, so no undefined behaviour on any input.
inline float exp_vec(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::min(std::max(x, -86.6f), 88.72283f);
  const float shifted = xc * kLog2e + kShift;
  const float n = shifted - kShift;
  const std::uint32_t ni = std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kShift);
  float r = xc - n * kC1;
  r = r - n * kC2;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n in [-125, 128]: 2^n = 2 * 2^(n-1), both factors normal floats.
  const float two_n1 = std::bit_cast<float>((ni + 126u) << 23);
  const float y = p * two_n1 * 2.0f;
  const float lo = x < -86.6f ? 0.0f : y;
  return x > 88.72283f ? std::numeric_limits<float>::infinity() : lo;
}

inline double exp_vec(double x) { return std::exp(x); }

#if defined(__AVX2__) && defined(__FMA__)
#define KAEL_NN_AVX2 1
// exp_vec on 8 floats at once (the compiler does not vectorise exp_vec's selects itself while
// floating-point compares may trap, GCC's default): the same polynomial with fused
// multiply-adds, so results may differ from exp_vec's by an ulp; the same bounds hold.
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-86.6f), hi = _mm256_set1_ps(88.72283f);
  const __m256 shift = _mm256_set1_ps(12582912.0f);
  // max_ps/min_ps return their second operand when either is NaN: NaN goes through as NaN.
  const __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 shifted = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), shift);
  const __m256 n = _mm256_sub_ps(shifted, shift);
  const __m256i ni = _mm256_sub_epi32(_mm256_castps_si256(shifted), _mm256_castps_si256(shift));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256 two_n1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(126)), 23));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, two_n1), _mm256_set1_ps(2.0f));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}
#endif

#if defined(KAEL_VMATH_SIMD)
#define KAEL_NN_AVX512 1
// Where the build targets AVX-512 the float loops below run over 16 lanes, their exps by
// vmath::simd::exp (1.5 ulp, Note [Vectorised math]; the scalar exp_vec above allows 2), four
// vectors per turn with a separate maximum or sum for each (so that no addition waits on the
// one before), and the last partial vector under a mask: a row of any length is read once per
// pass in 512-bit loads. Measured against the AVX2 loops (kept for AVX2 builds) on AMD Zen 4,
// 1 thread, `tools/bench/nn_ops.py --quick`, three alternating runs per build (ms): softmax of
// (4096, 1024) float32 2.27, 2.24, 2.92 -> 1.86, 1.82, 3.08; log_softmax 5.88, 5.44, 4.03 ->
// 1.79, 1.97, 1.76; cross-entropy losses of (1024, 50257) 37.6, 41.0, 33.6 -> 20.0, 17.9, 19.9;
// attention (8 heads, 1024 tokens, 64 dims) within noise.
namespace simd16 {
using V = __m512;
inline __mmask16 tail_mask(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }  // 0 < n < 16
inline V max(V a, V b) { return vmath::simd::detail::max(a, b); }  // b where either is NaN
inline float hmax(V v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float m = lanes[0];
  for (const float l : lanes) m = l > m ? l : m;
  return m;
}
inline float hsum(V v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (const float l : lanes) s += l;
  return s;
}
}  // namespace simd16
#endif

// The largest of x[0..n) (-inf for n = 0); NaNs are skipped.
inline float max_of(const float* x, std::int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  std::int64_t i = 0;
#if defined(KAEL_NN_AVX512)
  using namespace simd16;
  V a0 = _mm512_set1_ps(m), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 64 <= n; i += 64) {
    a0 = max(_mm512_loadu_ps(x + i), a0);  // a NaN element leaves the maximum as it was
    a1 = max(_mm512_loadu_ps(x + i + 16), a1);
    a2 = max(_mm512_loadu_ps(x + i + 32), a2);
    a3 = max(_mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = max(_mm512_loadu_ps(x + i), a0);
  if (i < n) a1 = max(_mm512_mask_loadu_ps(_mm512_set1_ps(m), tail_mask(n - i), x + i), a1);
  return hmax(max(max(a0, a1), max(a2, a3)));
#else
#ifdef KAEL_NN_AVX2
  __m256 a0 = _mm256_set1_ps(m), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_max_ps(_mm256_loadu_ps(x + i), a0);
    a1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_max_ps(_mm256_loadu_ps(x + i), a0);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
  for (float v : lanes) m = v > m ? v : m;
#endif
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
#endif
}

inline double max_of(const double* x, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// e[i] = exp(x[i] - m) for i < n (e may be x) and their sum; e may be null (sum only).
inline float sum_exp(const float* x, float m, float* e, std::int64_t n) {
  std::int64_t i = 0;
#if defined(KAEL_NN_AVX512)
  using namespace simd16;
  const V mv = _mm512_set1_ps(m);
  const auto term = [&](std::int64_t at) { return vmath::simd::exp(_mm512_loadu_ps(x + at) - mv); };
  V a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  if (e != nullptr) {
    for (; i + 64 <= n; i += 64) {
      const V v0 = term(i), v1 = term(i + 16), v2 = term(i + 32), v3 = term(i + 48);
      _mm512_storeu_ps(e + i, v0);
      _mm512_storeu_ps(e + i + 16, v1);
      _mm512_storeu_ps(e + i + 32, v2);
      _mm512_storeu_ps(e + i + 48, v3);
      a0 = a0 + v0;
      a1 = a1 + v1;
      a2 = a2 + v2;
      a3 = a3 + v3;
    }
    for (; i + 16 <= n; i += 16) {
      const V v = term(i);
      _mm512_storeu_ps(e + i, v);
      a0 = a0 + v;
    }
  } else {
    for (; i + 64 <= n; i += 64) {
      a0 = a0 + term(i);
      a1 = a1 + term(i + 16);
      a2 = a2 + term(i + 32);
      a3 = a3 + term(i + 48);
    }
    for (; i + 16 <= n; i += 16) a0 = a0 + term(i);
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    const V v = _mm512_maskz_mov_ps(k, vmath::simd::exp(_mm512_maskz_loadu_ps(k, x + i) - mv));
    if (e != nullptr) _mm512_mask_storeu_ps(e + i, k, v);
    a1 = a1 + v;
  }
  return hsum((a0 + a1) + (a2 + a3));
#else
  float s = 0;
#ifdef KAEL_NN_AVX2
  const __m256 mv = _mm256_set1_ps(m);
  __m256 a0 = _mm256_setzero_ps();
  if (e != nullptr) {
    for (; i + 8 <= n; i += 8) {
      const __m256 v = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
      _mm256_storeu_ps(e + i, v);
      a0 = _mm256_add_ps(a0, v);
    }
  } else {
    for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a0);
  for (float v : lanes) s += v;
#endif
  for (; i < n; ++i) {
    const float v = exp_vec(x[i] - m);
    if (e != nullptr) e[i] = v;
    s += v;
  }
  return s;
#endif
}

inline double sum_exp(const double* x, double m, double* e, std::int64_t n) {
  double s = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = std::exp(x[i] - m);
    if (e != nullptr) e[i] = v;
    s += v;
  }
  return s;
}

// e[i] = exp(x[i] - m[i]) for i < n.
inline void exp_diff(const float* x, const float* m, float* e, std::int64_t n) {
  std::int64_t i = 0;
#if defined(KAEL_NN_AVX512)
  using namespace simd16;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(e + i, vmath::simd::exp(_mm512_loadu_ps(x + i) - _mm512_loadu_ps(m + i)));
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(e + i, k, vmath::simd::exp(_mm512_maskz_loadu_ps(k, x + i) - _mm512_maskz_loadu_ps(k, m + i)));
  }
#else
#ifdef KAEL_NN_AVX2
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(e + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i))));
#endif
  for (; i < n; ++i) e[i] = exp_vec(x[i] - m[i]);
#endif
}

inline void exp_diff(const double* x, const double* m, double* e, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) e[i] = std::exp(x[i] - m[i]);
}

}  // namespace kael::native::nn
