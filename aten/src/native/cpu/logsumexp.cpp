// logsumexp over dims on the CPU, each row read from memory once (Note [logsumexp in one pass]),
// and the row kernel of the fused cross-entropy (nn::logsumexp_row).
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kael/core/convert.h"
#include "kael/native/declarations.h"
#include "kael/native/vec_math.h"
#include "nn_kernels.h"
#include "reduce_engine.h"
#include "reduce_ops.h"

namespace kael::native {

namespace {

// Note [logsumexp in one pass]
// PyTorch computes log(sum(exp(x - m))) + m with m = max(x) (m taken as 0 when infinite) in four
// passes over memory (amax, subtract, exp, sum). Here each row is read from memory once, in
// blocks of kLseBlock elements, into a state (m, s) that stands for sum(exp(x)) = s * exp(m):
// m a reference max (at least the max of the terms so far, up to kLseMargin below it while a
// block is summed), s in double. float32 (float16 and bfloat16 converted to it a block at a time)
// runs in the widest vectors the build targets (16 lanes with AVX-512, 8 with AVX2 + FMA), with
// per-lane maxima and sums and one horizontal step per block:
//   - one pass: a block's max and its sum of exp(x - m) are computed together against the
//     state's m (seeded with the max of the row's first 4 vectors), the terms as exp(x - M L)
//     for a reference M L within half a table step of m (LseRef: no subtraction per element)
//     and the sum then scaled by exp(M L - m); when the block's max bm is finite and at most
//     kLseMargin above m, the sum is kept and, if bm > m, rescaled to bm;
//     loads are prefetched ahead where the CPU gains from it (Note [Prefetching pointwise
//     loops]), since each starts a long chain of work;
//   - else (the first block of a short row, a block of -inf, an infinite max, a steep rise) two
//     passes, the second from L1: the block's max, which raises m (rescaling s by
//     exp(m_old - m_new) once), then the sum of exp(x - m) with every term at most 1.
// float64 (and float32 in a build without AVX2) takes the two passes in loops of independent
// lanes with vmath::exp. Special values as in PyTorch: NaN anywhere makes the result NaN, else
// +inf makes it +inf; a row of -inf (or an empty one) gives -inf. The max skips NaN and the sum
// propagates it, so a NaN in a block with a finite max shows as a NaN block sum; only blocks whose
// max is infinite (and blocks after a +inf) are scanned for NaN separately.
//
// The float32 terms use lse_exp: 2^(j / 16) from a table and a degree-3 polynomial with AVX-512,
// else a degree-5 polynomial (relative error per term at most 2.0e-7 for d >= -8, where the terms
// that make a sum lie, and 4e-7 down to -87, measured over every float32 d for both forms; so the
// sum's relative error and the result's absolute error stay below 2e-7 plus the rounding of the
// additions); differences x - M L (or x - m) below -87 count as -87, a term of at most 2^-125
// where the true one is smaller, and every row's sum holds a term of at least 1 (its largest
// element's) once rescaled, so those terms change a result by less than n 2^-124 relative.
// Chunks of a long row (Note [Reduction rows]) are cut by the shape alone, so results are the
// same bits on any number of threads.
constexpr std::int64_t kLseBlock = 4096;

template <typename C>
struct LseState {
  C m;       // max so far (-inf: no term yet; NaN or +inf: the result)
  double s;  // sum of exp(x - m)
};

template <typename C>
void lse_merge(LseState<C>& a, const LseState<C>& b) {
  if (is_nan(a.m) || is_nan(b.m)) {
    a = {std::numeric_limits<C>::quiet_NaN(), 1.0};
  } else if (a.m == std::numeric_limits<C>::infinity() || b.m == std::numeric_limits<C>::infinity()) {
    a = {std::numeric_limits<C>::infinity(), 1.0};
  } else if (b.m > a.m) {
    a = {b.m, a.s * std::exp(static_cast<double>(a.m) - static_cast<double>(b.m)) + b.s};
  } else if (b.m != -std::numeric_limits<C>::infinity()) {
    a.s += b.s * std::exp(static_cast<double>(b.m) - static_cast<double>(a.m));
  }
}

// The state of a block whose max bm is infinite, or that follows a +inf: NaN if the block holds
// one, else +inf where bm or the state is +inf; a block of -inf adds nothing.
template <typename C>
void lse_infinite_block(const C* x, std::int64_t n, C bm, LseState<C>& st) {
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) nan |= x[i] != x[i];
  if (nan) {
    st = {std::numeric_limits<C>::quiet_NaN(), 1.0};
  } else if (bm == std::numeric_limits<C>::infinity() || st.m == std::numeric_limits<C>::infinity()) {
    st = {std::numeric_limits<C>::infinity(), 1.0};
  }
}

// Raises the state's max to bm (finite) if it is larger, rescaling the sum.
template <typename C>
void lse_raise(LseState<C>& st, C bm) {
  if (bm > st.m) {
    st.s *= std::exp(static_cast<double>(st.m) - static_cast<double>(bm));  // 0 when st.m is -inf
    st.m = bm;
  }
}

// Adds a block of n values of C to the state: any C, in loops of independent lanes that the
// compiler vectorises.
template <typename C>
void lse_block(const C* x, std::int64_t n, LseState<C>& st) {
  constexpr C kInf = std::numeric_limits<C>::infinity();
  if (is_nan(st.m)) return;  // the result is NaN already
  C lanes[kLanes];
  for (C& l : lanes) l = -kInf;
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];  // skips NaN
  C bm = -kInf;
  for (; i < n; ++i) bm = x[i] > bm ? x[i] : bm;
  for (const C& l : lanes) bm = l > bm ? l : bm;
  if (!(bm > -kInf && bm < kInf) || st.m == kInf) {
    lse_infinite_block(x, n, bm, st);
    return;
  }
  lse_raise(st, bm);
  const C m = st.m;
  C sums[kLanes] = {};
  i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) sums[j] += vmath::exp(x[i + j] - m);
  double total = 0;
  for (; i < n; ++i) total += static_cast<double>(vmath::exp(x[i] - m));
  for (const C& l : sums) total += static_cast<double>(l);
  if (total != total) {
    st = {std::numeric_limits<C>::quiet_NaN(), 1.0};  // a NaN in the block
  } else {
    st.s += total;
  }
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define KAEL_LSE_SIMD 1
// float32 vectors of the widest kind the build targets.
struct LseVec {
#if defined(__AVX512F__)
  using V = __m512;
  static constexpr int kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set(float v) { return _mm512_set1_ps(v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
#else
  using V = __m256;
  static constexpr int kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set(float v) { return _mm256_set1_ps(v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
#endif
  // (in the compiler's vector extensions: GCC 12's _mm512_max_ps and _mm512_slli_epi32 warn)
  using I = std::uint32_t __attribute__((vector_size(sizeof(V))));  // unsigned: shifts wrap by design
  static V max(V a, V b) { return a > b ? a : b; }  // b when either is NaN
  static V shift_exponent(V t) { return reinterpret_cast<V>(reinterpret_cast<I>(t) << 23); }
};

// The terms of a block sum (Note [logsumexp in one pass]) as lse_exp(v, ref) = exp(v - ref.m), with
// ref.m = M L: L the float32 ln2 of the reduction, M a whole number of the table's steps. v log2e
// is rounded to a step relative to M in t = v log2e + (kLseShift - M), so no term needs the
// subtraction v - m: on AMD Zen 4 one 512-bit operation fewer of 13 per 16 floats, 7.0-7.2 ->
// 7.9-8.1 G elements/s in L1 (tools/bench/lse_probe.cpp). r = v - (t - (kLseShift - M)) L is
// the reduced argument relative to M L, rounded once (more exact than reducing v - m, itself a
// rounded difference). A difference v - M L below -87 is taken as -87 (the clamp ref.lo keeps the
// scale a normal float), NaN gives NaN. For |m| <= kLseDirect, M L lies within half a step of the
// state's max m, kLseShift - M is exact, and the rounding of v log2e moves r by at most 1e-4 L;
// beyond it (and in the two-pass sums) the terms are exp((v - m) - 0 L), with M = 0.
struct LseRef {
  LseVec::V lo;  // M L - 87
  LseVec::V c;   // kLseShift - M
  double m;      // M L
};
constexpr float kLseLn2 = 0x1.62e430p-1f;  // L
constexpr float kLseDirect = 4096.0f;

#if defined(__AVX512F__)
// With AVX-512, in sixteenths of ln2: d = v - M L = (k / 16) ln2 + r, k = 16 q + j, |r| <= ln2 /
// 32 (one constant for ln2: the error (k / 16) 2e-9 of r is below 3e-8 for the terms that matter,
// those of k / 16 >= -12); exp(d) = 2^q 2^(j / 16) e^r with 2^(j / 16) from a 16-entry table by one
// permute and e^r = 1 + r + r^2 / 2 + r^3 / 6 (error 9e-9). On AMD Zen 4 the loop is bound by its
// FMA pipe; this takes 6 operations there where a degree-5 polynomial over |r| <= ln2 / 2 and a
// vscalefps took 8 (7.0 -> 7.5 G elements/s on data in cache, one block at a time), with the same
// accuracy (above).
//   t = v log2e + 1.5 2^19 - M rounds d log2e to sixteenths: t's bits are those of 1.5 2^19 plus
//   k, so t's low 4 bits are j, and t's bits shifted left by 19 are q << 23 plus j << 19. The table
//   holds the bits of 2^(j / 16) less j << 19: adding the two gives the bits of 2^(q + j / 16),
//   a normal float for every q >= -126 (d >= -87 gives q >= -126).
alignas(64) inline constexpr std::array<std::uint32_t, 16> kLseExp2Sixteenths = [] {
  // the bits of 2^(j / 16) rounded to float (tools/fit_math_poly.py prints them)
  constexpr std::uint32_t kBits[16] = {0x3f800000, 0x3f85aac3, 0x3f8b95c2, 0x3f91c3d3, 0x3f9837f0, 0x3f9ef532,
                                       0x3fa5fed7, 0x3fad583f, 0x3fb504f3, 0x3fbd08a4, 0x3fc5672a, 0x3fce248c,
                                       0x3fd744fd, 0x3fe0ccdf, 0x3feac0c7, 0x3ff5257d};
  std::array<std::uint32_t, 16> t{};
  for (std::uint32_t j = 0; j < 16; ++j) t[j] = kBits[j] - (j << 19);
  return t;
}();

constexpr float kLseShift = 0x1.8p19f;  // t = v log2e + kLseShift - M rounds to a sixteenth
constexpr double kLseStep = 16.0;        // M counts sixteenths of ln2

inline LseVec::V lse_exp(LseVec::V v, const LseRef& ref) {
  using V = LseVec;
  // One vmaxps (NaN in v stays: the second operand is returned when either is NaN); written
  // with a mask as GCC 12's _mm512_max_ps warns. V::max's select compiles to a compare and a
  // masked move here (1 thread, AMD Zen 4: 22 -> 24 GB/s at 16M floats, throughput.py).
  v = _mm512_mask_max_ps(ref.lo, static_cast<__mmask16>(0xffff), ref.lo, v);
  const V::V t = V::fma(v, V::set(0x1.715476p+0f), ref.c);
  const V::V k16 = V::sub(t, ref.c);  // (M + k) / 16
  const V::V r = V::fma(k16, V::set(-kLseLn2), v);
  V::V p = V::fma(V::set(0x1.555556p-3f), r, V::set(0.5f));
  p = V::fma(p, r, V::set(1.0f));
  p = V::fma(p, r, V::set(1.0f));
  // (the permute in its masked form, the shift and add in the compiler's vector extensions: GCC
  // 12's _mm512_permutexvar_epi32 and _mm512_slli_epi32 warn where inlined; unsigned lanes, as
  // the sum wraps modulo 2^32 by design)
  const __m512i table = _mm512_load_si512(kLseExp2Sixteenths.data());
  const __m512i ti = _mm512_castps_si512(t);
  const V::I scale = reinterpret_cast<V::I>(_mm512_mask_permutexvar_epi32(table, static_cast<__mmask16>(0xffff), ti, table)) +
                     (reinterpret_cast<V::I>(ti) << 19);
  return V::mul(reinterpret_cast<V::V>(scale), p);
}
#else
// d = v - M L = k ln2 + r with one constant for ln2 (the error k 2e-9 of r is below 3e-8 for the
// terms that matter, those of k >= -12), e^r by a degree-5 polynomial (relative error 1.7e-7),
// scaled by 2^k through the bits of t.
constexpr float kLseShift = 0x1.8p23f + 127.0f;  // t = v log2e + kLseShift - M rounds to an integer
constexpr double kLseStep = 1.0;                  // M counts ln2s

inline LseVec::V lse_exp(LseVec::V v, const LseRef& ref) {
  using V = LseVec;
  v = V::max(ref.lo, v);  // NaN stays NaN
  const V::V t = V::fma(v, V::set(0x1.715476p+0f), ref.c);  // bits: 0x1.8p23's + 127 + k
  const V::V k = V::sub(t, ref.c);                          // M + k
  const V::V r = V::fma(k, V::set(-kLseLn2), v);
  V::V p = V::fma(V::set(0x1.0eab2cp-7f), r, V::set(0x1.5745bap-5f));
  p = V::fma(p, r, V::set(0x1.555d3ap-3f));
  p = V::fma(p, r, V::set(0x1.fffda8p-2f));
  p = V::fma(p, r, V::set(0x1.fffff0p-1f));
  p = V::fma(p, r, V::set(1.0f));
  return V::mul(p, V::shift_exponent(t));  // 2^k: (127 + k) in the exponent field
}
#endif

// The reference for a state's max m: M = m log2e rounded to the table's step (|m| <= kLseDirect).
inline LseRef lse_ref(double M) {
  const double mref = M * static_cast<double>(kLseLn2);
  return {LseVec::set(static_cast<float>(mref - 87.0)), LseVec::set(static_cast<float>(kLseShift - M)), mref};
}
inline LseRef lse_ref_near(float m) {
  return lse_ref(std::nearbyint(static_cast<double>(m) * std::numbers::log2e * kLseStep) / kLseStep);
}

// exp(d) for differences d = x - m (M = 0).
inline LseVec::V lse_exp(LseVec::V d) { return lse_exp(d, lse_ref(0.0)); }

// exp(y) for |y| <= ln2 / 2 (the step between a reference M L and m) in double: Taylor to y^10,
// relative error below 3e-13.
inline double lse_exp_small(double y) {
  double p = 1.0 / 3628800.0;
  for (const double c : {1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0,
                         1.0 / 6.0, 0.5, 1.0, 1.0})
    p = p * y + c;
  return p;
}

// How far a block's max may exceed the reference max of its one-pass sum (e^8 times 4096 terms
// stays far from float's range, and d log2e <= 12 keeps lse_exp's reduction exact enough).
constexpr float kLseMargin = 8.0f;
constexpr std::int64_t kLsePrefetch = 2048;  // elements (8 KB: the streaming rate of 16M floats at 1 thread reaches the rate in cache)

// The largest of v's lanes.
inline float lse_hmax(LseVec::V v) {
  alignas(64) float lanes[LseVec::kWidth];
  LseVec::store(lanes, v);
  float m = lanes[0];
  for (const float l : lanes) m = l > m ? l : m;
  return m;
}

inline double lse_hsum(LseVec::V v) {
  alignas(64) float lanes[LseVec::kWidth];
  LseVec::store(lanes, v);
  double s = 0;
  for (const float l : lanes) s += static_cast<double>(l);
  return s;
}

// One pass over a block (Note [logsumexp in one pass]): its max, and its sum of exp(x - m) relative
// to the state's max m, taken with the terms' reference at M L (kDirect) or at m.
template <bool kDirect>
inline void lse_one_pass_f32(const float* x, std::int64_t n, float m, float& block_max, double& block_sum) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const LseRef ref = kDirect ? lse_ref_near(m) : lse_ref(0.0);
  const V::V mv = V::set(m);
  const auto term = [&](V::V v) { return kDirect ? lse_exp(v, ref) : lse_exp(V::sub(v, mv), ref); };
  V::V m0 = V::set(-kInf), m1 = m0, m2 = m0, m3 = m0;
  V::V a0 = V::set(0.0f), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  const bool prefetch = prefetch_streams();
  for (; i + 4 * W <= n; i += 4 * W) {
    // the loads start long chains of work: fetch ahead (past the block too: the next row's) on
    // CPUs that gain from it (Note [Prefetching pointwise loops]; prefetch_ahead_of: the address
    // may lie past the end of the input)
    for (int l = 0; prefetch && l < 4 * W; l += 16) prefetch_ahead_of(x + i + l, 4 * kLsePrefetch);
    const V::V v0 = V::load(x + i), v1 = V::load(x + i + W), v2 = V::load(x + i + 2 * W), v3 = V::load(x + i + 3 * W);
    m0 = V::max(v0, m0);  // max(x, m) is m when x is NaN: NaN is skipped
    m1 = V::max(v1, m1);
    m2 = V::max(v2, m2);
    m3 = V::max(v3, m3);
    a0 = V::add(a0, term(v0));
    a1 = V::add(a1, term(v1));
    a2 = V::add(a2, term(v2));
    a3 = V::add(a3, term(v3));
  }
  for (; i + W <= n; i += W) {
    const V::V v = V::load(x + i);
    m0 = V::max(v, m0);
    a0 = V::add(a0, term(v));
  }
  float bm = lse_hmax(V::max(V::max(m0, m1), V::max(m2, m3)));
  double total = lse_hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
  if (kDirect) total *= lse_exp_small(ref.m - static_cast<double>(m));  // relative to m
  for (; i < n; ++i) {
    bm = x[i] > bm ? x[i] : bm;
    total += static_cast<double>(vmath::exp(x[i] - m));
  }
  block_max = bm;
  block_sum = total;
}

// Whether a block of n float32 is summed in one pass against the state st (Note [logsumexp in one
// pass]): its max m is finite (not NaN) and the block holds a vector.
inline bool lse_one_pass_applies(const LseState<float>& st, std::int64_t n) {
  return st.m > -std::numeric_limits<float>::infinity() && st.m < std::numeric_limits<float>::infinity() &&
         n >= LseVec::kWidth;
}

// Takes a one-pass block's max bm and sum (relative to st.m) into st when bm is finite and at most
// kLseMargin above st.m; false when the block needs the two passes instead (a block of -inf and
// NaN, an infinite max, or a large rise).
inline bool lse_keep(LseState<float>& st, float bm, double total) {
  const float m = st.m;
  if (!(bm > -std::numeric_limits<float>::infinity() && bm - m <= kLseMargin)) return false;
  if (total != total) {
    st = {std::numeric_limits<float>::quiet_NaN(), 1.0};  // a NaN in the block
  } else if (bm > m) {
    // exp(m - bm), m - bm in [-kLseMargin, 0), with the terms' own exp (cheaper than a call)
    alignas(64) float scale[LseVec::kWidth];
    LseVec::store(scale, lse_exp(LseVec::set(m - bm)));
    st = {bm, (st.s + total) * static_cast<double>(scale[0])};
  } else {
    st.s += total;
  }
  return true;
}

// The two passes over a block, the second from L1: its max, which raises the state's max, then
// its sum of exp(x - m) with every term at most 1.
inline void lse_two_pass_f32(const float* x, std::int64_t n, LseState<float>& st) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (is_nan(st.m)) return;  // the result is NaN already
  float bm = -kInf;
  std::int64_t i = 0;
  if (n >= W) {
    V::V m0 = V::set(-kInf), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 4 * W <= n; i += 4 * W) {
      m0 = V::max(V::load(x + i), m0);
      m1 = V::max(V::load(x + i + W), m1);
      m2 = V::max(V::load(x + i + 2 * W), m2);
      m3 = V::max(V::load(x + i + 3 * W), m3);
    }
    for (; i + W <= n; i += W) m0 = V::max(V::load(x + i), m0);
    bm = lse_hmax(V::max(V::max(m0, m1), V::max(m2, m3)));
  }
  for (; i < n; ++i) bm = x[i] > bm ? x[i] : bm;
  if (!(bm > -kInf && bm < kInf) || st.m == kInf) {
    lse_infinite_block(x, n, bm, st);
    return;
  }
  lse_raise(st, bm);
  const float m = st.m;
  double total = 0;
  i = 0;
  if (n >= W) {
    const V::V mv = V::set(m);
    V::V a0 = V::set(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 = V::add(a0, lse_exp(V::sub(V::load(x + i), mv)));
      a1 = V::add(a1, lse_exp(V::sub(V::load(x + i + W), mv)));
      a2 = V::add(a2, lse_exp(V::sub(V::load(x + i + 2 * W), mv)));
      a3 = V::add(a3, lse_exp(V::sub(V::load(x + i + 3 * W), mv)));
    }
    for (; i + W <= n; i += W) a0 = V::add(a0, lse_exp(V::sub(V::load(x + i), mv)));
    total = lse_hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
  }
  for (; i < n; ++i) total += static_cast<double>(vmath::exp(x[i] - m));
  if (total != total) {
    st = {std::numeric_limits<float>::quiet_NaN(), 1.0};  // a NaN in the block
  } else {
    st.s += total;
  }
}

// lse_block for float32 in vectors (Note [logsumexp in one pass]).
inline void lse_block_f32(const float* x, std::int64_t n, LseState<float>& st) {
  if (lse_one_pass_applies(st, n)) {
    float bm;
    double total;
    if (std::fabs(st.m) <= kLseDirect) {
      lse_one_pass_f32<true>(x, n, st.m, bm, total);
    } else {
      lse_one_pass_f32<false>(x, n, st.m, bm, total);
    }
    if (lse_keep(st, bm, total)) return;
  }
  lse_two_pass_f32(x, n, st);
}

// Note [logsumexp in four streams]
// A contiguous float32 run of kLseStreamsFrom elements or more is summed in four equal parts
// (whole vectors; the last elements, fewer than 4 vectors, join the fourth part), each into a
// state of its own (seeded from its own first vectors), the states merged in order at the end.
// Each part goes in blocks of kLseBlock as a whole row does (Note [logsumexp in one pass]); the
// one pass over block b of the four parts runs in one of two orders that give the same bits
// (each part's accumulators add the same terms in the same order either way):
//   - side by side, four streams at once, each prefetching the line kLseStreamPrefetchBytes ahead
//     of each it reads, where prefetch_reads() (the Intel cores whose sums read four streams:
//     Note [Sums in four streams] in reduce.cpp);
//   - one part after another, one stream, elsewhere (AMD Zen 4 reads several streams slower than
//     one: docs/decisions.md, "Reading several streams at once").
// The parts are cut by n alone, so the result is the same bits on any machine and thread count.
// A long row is reduced in chunks of LogSumExpOp::kLongRowChunk (64K elements: parts of 64 KB)
// rather than the engine's 16K. Measured 2026-12-03 on an Intel Xeon with AVX512-FP16, 1 thread,
// 16M float32 in chunks as the engine cuts them (tools/bench/lse_streams_probe.cpp, medians of
// 11, GB/s, after a streaming copy of 128 MB): one stream 15.1, four streams in 16K chunks 22.0
// unprefetched and 24.8 prefetched, in 64K chunks 21.6 and 28.2 (kael's sum 28.6). In
// throughput.py, logsumexp(a, 0) of 16M float32 went from 14.8 to 27.8 GB/s at 1 thread (57% to
// 96% of the copy), 50.3 at 2 threads (94%).
constexpr std::int64_t kLseStreamsFrom = 4 * kLseBlock;
constexpr std::int64_t kLseStreamPrefetchBytes = 4096;

// The one pass over K blocks of n elements side by side (K = 1: one block), block s against the
// max m[s] of its state: its max and its sum of exp(x - m[s]), as lse_one_pass_f32 but with one
// vector of each stream a step and one accumulator of each kind per stream.
template <int K, bool kDirect>
inline void lse_one_pass_streams_f32(const float* const* x, std::int64_t n, const float* m, float* block_max,
                                     double* block_sum, bool prefetch) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  LseRef ref[K];
  V::V mv[K], mx[K], acc[K];
#pragma GCC unroll 4
  for (int s = 0; s < K; ++s) {
    ref[s] = kDirect ? lse_ref_near(m[s]) : lse_ref(0.0);
    mv[s] = V::set(m[s]);
    mx[s] = V::set(-kInf);
    acc[s] = V::set(0.0f);
  }
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
#pragma GCC unroll 4
    for (int s = 0; s < K; ++s) {
      // (prefetch_ahead_of: the address may lie past the end of the input)
      if (prefetch) prefetch_ahead_of(x[s] + i, kLseStreamPrefetchBytes);
      const V::V v = V::load(x[s] + i);
      mx[s] = V::max(v, mx[s]);  // skips NaN
      acc[s] = V::add(acc[s], kDirect ? lse_exp(v, ref[s]) : lse_exp(V::sub(v, mv[s]), ref[s]));
    }
  }
  for (int s = 0; s < K; ++s) {
    float bm = lse_hmax(mx[s]);
    double total = lse_hsum(acc[s]);
    if (kDirect) total *= lse_exp_small(ref[s].m - static_cast<double>(m[s]));  // relative to m
    for (std::int64_t j = i; j < n; ++j) {
      bm = x[s][j] > bm ? x[s][j] : bm;
      total += static_cast<double>(vmath::exp(x[s][j] - m[s]));
    }
    block_max[s] = bm;
    block_sum[s] = total;
  }
}

// Block b of each of four parts (x[s], n elements each) into its state st[s] (Note [logsumexp in
// four streams]).
inline void lse_four_blocks_f32(const float* const* x, std::int64_t n, LseState<float>* st, bool side_by_side) {
  bool one_pass[4], direct[4];
  float m[4], bm[4];
  double total[4];
  bool all = side_by_side;
  for (int s = 0; s < 4; ++s) {
    one_pass[s] = lse_one_pass_applies(st[s], n);
    direct[s] = one_pass[s] && std::fabs(st[s].m) <= kLseDirect;
    m[s] = st[s].m;
    all = all && direct[s];
  }
  if (all) {
    lse_one_pass_streams_f32<4, true>(x, n, m, bm, total, true);
  } else {
    for (int s = 0; s < 4; ++s) {
      if (direct[s]) {
        lse_one_pass_streams_f32<1, true>(x + s, n, m + s, bm + s, total + s, false);
      } else if (one_pass[s]) {
        lse_one_pass_streams_f32<1, false>(x + s, n, m + s, bm + s, total + s, false);
      }
    }
  }
  for (int s = 0; s < 4; ++s)
    if (!(one_pass[s] && lse_keep(st[s], bm[s], total[s]))) lse_two_pass_f32(x[s], n, st[s]);
}

// Seeds an empty state's max with the max of x's first 4 vectors (when finite), so that the
// first block of a row is summed in one pass too.
inline void lse_seed_f32(const float* x, std::int64_t n, LseState<float>& st) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  if (n < 4 * W) return;  // short rows: two passes, the second from L1
  const float m = lse_hmax(V::max(V::max(V::load(x), V::load(x + W)), V::max(V::load(x + 2 * W), V::load(x + 3 * W))));
  if (m > -std::numeric_limits<float>::infinity() && m < std::numeric_limits<float>::infinity()) st.m = m;
}

// The state of a contiguous run of n >= kLseStreamsFrom float32 (Note [logsumexp in four streams]).
inline LseState<float> lse_four_parts_f32(const float* x, std::int64_t n) {
  constexpr int W = LseVec::kWidth;
  const std::int64_t part = n / (4 * W) * W;
  const float* const first[4] = {x, x + part, x + 2 * part, x + 3 * part};
  LseState<float> st[4];
  for (int s = 0; s < 4; ++s) {
    st[s] = {-std::numeric_limits<float>::infinity(), 0.0};
    lse_seed_f32(first[s], part, st[s]);
  }
  const bool side_by_side = prefetch_reads();
  for (std::int64_t b = 0; b < part; b += kLseBlock) {
    const float* const blocks[4] = {first[0] + b, first[1] + b, first[2] + b, first[3] + b};
    lse_four_blocks_f32(blocks, std::min(kLseBlock, part - b), st, side_by_side);
  }
  if (4 * part < n) lse_block_f32(x + 4 * part, n - 4 * part, st[3]);
  for (int s = 1; s < 4; ++s) lse_merge(st[0], st[s]);
  return st[0];
}
#endif

template <typename T>
struct LogSumExpOp {
  using C = opmath_t<T>;  // float for float16/bfloat16
  static constexpr std::int64_t kLongRowChunk = 4 * kRowChunk;  // Note [logsumexp in four streams]
  T* out;
  LseState<C> identity() const { return {-std::numeric_limits<C>::infinity(), 0.0}; }
  LseState<C> run(const T* x, std::int64_t n, std::int64_t) const {
    LseState<C> st = identity();
    if constexpr (std::is_same_v<T, C>) {
#ifdef KAEL_LSE_SIMD
      if constexpr (std::is_same_v<C, float>) {
        if (n >= kLseStreamsFrom) return lse_four_parts_f32(x, n);
        lse_seed_f32(x, n, st);
        for (std::int64_t b = 0; b < n; b += kLseBlock) lse_block_f32(x + b, std::min(kLseBlock, n - b), st);
        return st;
      }
#endif
      for (std::int64_t b = 0; b < n; b += kLseBlock) lse_block<C>(x + b, std::min(kLseBlock, n - b), st);
    } else {
      C buf[kLseBlock];
      for (std::int64_t b = 0; b < n; b += kLseBlock) {
        const std::int64_t len = std::min(kLseBlock, n - b);
        for (std::int64_t i = 0; i < len; ++i) buf[i] = static_cast<C>(x[b + i]);
#ifdef KAEL_LSE_SIMD
        if (b == 0) lse_seed_f32(buf, len, st);
        lse_block_f32(buf, len, st);
#else
        lse_block<C>(buf, len, st);
#endif
      }
    }
    return st;
  }
  void merge(LseState<C>& a, const LseState<C>& b) const { lse_merge(a, b); }
  void write(std::int64_t o, const LseState<C>& a) const {
    if (is_nan(a.m) || a.m == std::numeric_limits<C>::infinity() || a.m == -std::numeric_limits<C>::infinity()) {
      out[o] = convert<T>(a.m);
    } else {
      out[o] = convert<T>(static_cast<double>(a.m) + std::log(a.s));
    }
  }
};

}  // namespace

namespace nn {
RowLogSumExp logsumexp_row(const float* x, std::int64_t n) {
  const LseState<float> st = LogSumExpOp<float>{nullptr}.run(x, n, 0);
  if (is_nan(st.m) || st.m == std::numeric_limits<float>::infinity() || st.m == -std::numeric_limits<float>::infinity())
    return {st.m, 0.0};
  return {st.m, std::log(st.s)};
}
}  // namespace nn

Tensor logsumexp_cpu(const Tensor& self, IntArrayRef dim, bool keepdim) {
  // Integral and bool inputs compute in the default floating dtype, as in PyTorch.
  const ScalarType t = is_floating(self.dtype()) ? self.dtype() : default_dtype();
  ReduceSetup s = setup_reduction(self, reduce_dims("logsumexp", self, dim, keepdim), t, t);
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_floating(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_rows<T>(x, p, LogSumExpOp<T>{s.out.data<T>()});
    });
  });
  return s.out;
}

}  // namespace kael::native
