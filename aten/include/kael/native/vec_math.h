#pragma once
// Note [Vectorised math]
// kael's own float/double exp, expm1, log, log1p, tanh, sigmoid and erf, and float gelu (exact
// and tanh-approximated), for CPU kernels.
// Each is straight-line code: range reduction, a polynomial, integer operations on the bit
// pattern and selects for the special values. No branches, tables or calls, so that GCC
// vectorises a loop that calls one (the contiguous loops of kael/native/loops.h; formulas
// in native_functions.yaml reach them through kael/native/math.h, so a formula such as
// `0.5 * a * (1 + erf(a * 0.7071067811865476))` vectorises too). The loops use 16 float or 8
// double lanes with AVX-512, 8 or 4 with AVX2 + FMA (the build picks the widest the build
// machine has, see CMakeLists.txt); a baseline build (-DKAEL_CPU_ARCH=) runs the same code
// with a multiply and an add in place of each FMA (SSE2 vectors): the same special values,
// errors a little larger than the FMA build's that test_vec_math.py measures.
//
// Polynomial coefficients are least-squares fits on Chebyshev nodes (close to minimax),
// computed with tools/fit_math_poly.py, which also prints each fit's error.
//
// Accuracy: bounds on the error in units in the last place of the correctly rounded result,
// checked by test/python/ops/test_vec_math.py (float32: every 251st bit pattern and the overflow
// and underflow boundaries against float64; float64: random bit patterns and ranges against
// long double or mpmath). The largest errors measured are in brackets (float32 log1p and erf:
// every float32).
//
//   function   float32   float64   method
//   exp        1.5 ulp   1.5 ulp   x = k ln2 + r, |r| <= ln2/2; exp(r) = 1 + r + r^2 P(r)  [1.05, 1.04]
//   expm1      2 ulp     2.5 ulp   as exp; 2^k (expm1(r) + 1) - 1 in one fused step        [1.52, 2.15]
//   log        1.5 ulp   1.5 ulp   x = 2^e m, m in [sqrt(1/2), sqrt(2)); s = f / (2 + f)    [0.91, 1.10]
//   log1p      2 ulp     2 ulp     log(1 + x) + the rounding error of 1 + x over (1 + x)    [1.36, 1.48]
//   tanh       3 ulp     3 ulp     e = expm1(2|x|); e / (e + 2), with x's sign              [2.42, 2.49]
//   sigmoid    2.5 ulp   2.5 ulp   1 / (1 + exp(-x)), PyTorch's formula (see below)          [2.26, 2.23]
//   erf        1.5 ulp   1.5 ulp   |x| < 1: x + x P(x^2); else float: 1 - 2^W(|x|),        [1.23, 1.15]
//                                  double: 1 - t exp(-x^2 + Q(t)), t = 1 / (1 + |x|/2)
//
// float32 gelu(x) = x Phi(x) (approximate='none'): x - |x| E for x > 0 and x E for x < 0, E =
// Phi(-|x|); 4.5 ulp for x >= -1 and 50 ulp for -4 sqrt(2) <= x < -1, where the
// formula x (1 + erf(x / sqrt(2))) / 2, which float64 keeps, loses all digits as x falls (1 + erf
// cancels); below -4 sqrt(2), where |gelu(x)| < 2^-24, it returns x * 0 as that formula does in
// float32 (-0.0, NaN at -inf). Where the build targets AVX-512, E is piecewise (every float32:
// [1.59, 10.54], the largest errors in the last pieces, -5.67 < x < -4.5; x * 0 from -5.674
// instead of -4 sqrt(2)); elsewhere E = 2^V with V one polynomial ([3.98, 48.4]); see gelu below.
//
// These kernels are bound by their instructions and their dependency chains rather than by
// memory (a 16M-element call at 1 thread): log1p takes log's reduction without its subnormal
// step and replaces the division by u with 4 t^2 (1 + z), t = 1 / (2 + f) being log's own
// division; float erf and gelu (without AVX-512) fold -x^2 and log2(e) into W and V and use
// exp2_moderate, one polynomial in base 2 with no ln2 reduction; gelu evaluates V by Estrin's
// scheme.
//
// sigmoid's bound holds where exp(-x) is finite; below (x < -88.72 in float32, -709.78 in
// float64) it returns 0, as PyTorch's formula does, where the exact value is below 2^-127.
// Subnormal results are rounded once (the scale 2^k is applied in two exact steps). Special
// values follow PyTorch (and C): NaN in -> NaN out; exp(-inf) = 0, exp(inf) = inf;
// expm1(-inf) = -1; log(0) = log(-0) = -inf, log(x < 0) = NaN, log(inf) = inf; log1p(-1) =
// -inf; tanh(+-inf) = +-1; sigmoid(-inf) = 0, sigmoid(inf) = 1; erf(+-inf) = +-1; odd
// functions and expm1/log1p keep the sign of -0.0.

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__) && !defined(__CUDACC__)
#include <immintrin.h>
// The SIMD forms below exist (Note [SIMD forms]).
#define KAEL_VMATH_SIMD 1
#endif

#define KAEL_VMATH_INLINE [[gnu::always_inline]] inline

namespace kael::native::vmath {

namespace detail {

template <typename T>
struct Traits;
template <>
struct Traits<float> {
  using U = std::uint32_t;
  static constexpr int kMantissa = 23;
  static constexpr U kSign = 0x80000000u;
};
template <>
struct Traits<double> {
  using U = std::uint64_t;
  static constexpr int kMantissa = 52;
  static constexpr U kSign = 0x8000000000000000ull;
};
template <typename T>
using bits_t = typename Traits<T>::U;

template <typename T>
KAEL_VMATH_INLINE bits_t<T> bits(T x) {
  return std::bit_cast<bits_t<T>>(x);
}
template <typename T>
KAEL_VMATH_INLINE T from_bits(bits_t<T> u) {
  return std::bit_cast<T>(u);
}

// a * b + c: one rounding where the build targets FMA, else two.
template <typename T>
KAEL_VMATH_INLINE T fmadd(T a, T b, T c) {
#if defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {
    return __builtin_fmaf(a, b, c);
  } else {
    return __builtin_fma(a, b, c);
  }
#else
  return a * b + c;
#endif
}

// c0 + x (c1 + x (c2 + ...)), Horner's scheme.
template <typename T, typename... C>
KAEL_VMATH_INLINE T poly(T x, T c0, C... cs) {
  if constexpr (sizeof...(cs) == 0) {
    return c0;
  } else {
    return fmadd(poly<T>(x, static_cast<T>(cs)...), x, c0);
  }
}

template <typename T>
KAEL_VMATH_INLINE T abs(T x) {
  return from_bits<T>(bits(x) & ~Traits<T>::kSign);
}
// |magnitude| with the sign bit of sign.
template <typename T>
KAEL_VMATH_INLINE T copysign(T magnitude, T sign) {
  return from_bits<T>((bits(magnitude) & ~Traits<T>::kSign) | (bits(sign) & Traits<T>::kSign));
}
// c ? a : b on the bits, so that no floating-point operation is moved into a branch: with
// GCC's default -ftrapping-math, a branch arm that computes (2 * a, say) blocks if-conversion,
// and with it vectorisation. Conditions combine with & and |, never && and ||, for the same reason.
template <typename T>
KAEL_VMATH_INLINE T select(bool c, T a, T b) {
  const bits_t<T> mask = bits_t<T>(0) - bits_t<T>(c);
  return from_bits<T>((bits(a) & mask) | (bits(b) & ~mask));
}

// Clamps to [lo, hi]; NaN passes through.
template <typename T>
KAEL_VMATH_INLINE T clamp(T x, T lo, T hi) {
  x = select(x < lo, lo, x);
  return select(x > hi, hi, x);
}

// 2^k for an integer k in the normal exponent range, given as bits of k + bias in the low bits.
template <typename T>
KAEL_VMATH_INLINE T pow2_biased(bits_t<T> biased) {
  return from_bits<T>(biased << Traits<T>::kMantissa);
}

// Constants per type.
template <typename T>
struct C;
template <>
struct C<float> {
  static constexpr float kLog2e = 0x1.715476p+0f;
  static constexpr float kLn2Hi = 0x1.62e4p-1f;  // 16 bits: k * kLn2Hi is exact for |k| < 256
  static constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
  static constexpr float kShift = 0x1.8p23f;  // x + kShift rounds x to an integer in the low bits
  static constexpr std::uint32_t kBias = 127;
  static constexpr std::uint32_t kHalfOffset = 256;  // k + kHalfOffset >= 0 for every k reached
  static constexpr float kExpLo = -104.0f, kExpHi = 89.0f;  // exp: 0 below, inf above
  static constexpr float kExpm1Lo = -30.0f;                 // expm1: -1 below
  static constexpr float kMaxScaleExp = 127.0f;             // largest finite power of two
  static constexpr float kTanhHi = 9.5f;                    // tanh: +-1 beyond
  static constexpr float kErfHi = 4.0f;                     // erf: +-1 beyond
  static constexpr float kMinNormal = 0x1p-126f;
  static constexpr float kSubnormalScale = 0x1p23f;
  static constexpr std::uint32_t kSqrtHalfBits = 0x3f3504f3u;  // sqrt(1/2)
  static constexpr std::uint32_t kMantissaMask = 0x007fffffu;

  // exp(r) = 1 + r + r^2 P(r) on |r| <= ln2/2 (relative error of P 1.3e-7).
  KAEL_VMATH_INLINE static float exp_p(float r) {
    return poly(r, 0x1p-1f, 0x1.5554dcp-3f, 0x1.5555eap-5f, 0x1.120bfcp-7f, 0x1.6c380ep-10f);
  }
  // log(1 + f) = 2 atanh(s) = 2s + s z P(z), z = s^2 <= 0.0295 (relative error of P 2.8e-7).
  KAEL_VMATH_INLINE static float log_p(float z) {
    return poly(z, 0x1.55555cp-1f, 0x1.997c1cp-2f, 0x1.2eea38p-2f);
  }
  // erf(x) = x + x P(x^2) on |x| <= 1 (relative error of x (1 + P) 1.3e-9).
  KAEL_VMATH_INLINE static float erf_small(float z) {
    return poly(z, 0x1.06eba8p-3f, -0x1.81273ep-2f, 0x1.ce2cf0p-4f, -0x1.b7f88cp-6f, 0x1.5401dcp-8f,
                -0x1.a3dc18p-11f, 0x1.49234ep-14f);
  }
  // erfc(x) = 2^W(x - kErfMid) for 1 <= x <= 4, W ~ log2(erfc): the -x^2 log2(e) of erfc's
  // exponent is in W's coefficients (absolute error of erfc 1.6e-8).
  static constexpr float kErfMid = 1.0f;
  KAEL_VMATH_INLINE static float erfc_w(float u) {
    return poly(u, -0x1.558eaep+1f, -0x1.e752bep+1f, -0x1.376d9cp+0f, -0x1.e4f564p-5f, 0x1.ab3020p-7f,
                -0x1.b4c462p-10f);
  }
  // Phi(-a) = 2^V(a) for 0 <= a <= kGeluHi = 4 sqrt(2), V ~ log2(Phi(-a)) (absolute error of V
  // 3.7e-8, the relative error of Phi(-a) that gives).
  static constexpr float kGeluHi = 0x1.6a09e6p+2f;
  KAEL_VMATH_INLINE static float gelu_v(float a) {
    // Estrin's scheme: a dependency chain of 5 operations instead of Horner's 11.
    const float a2 = a * a, a4 = a2 * a2;
    const float q0 = fmadd(a2, fmadd(a, -0x1.adc158p-5f, -0x1.d63b70p-2f), fmadd(a, -0x1.26aedep+0f, -0x1.fffffep-1f));
    const float q1 = fmadd(a2, fmadd(a, 0x1.7457f2p-14f, -0x1.3b5bc4p-12f), fmadd(a, 0x1.d7cdf6p-17f, 0x1.c7d84ap-8f));
    const float q2 = fmadd(a2, fmadd(a, 0x1.584654p-29f, -0x1.909220p-24f), fmadd(a, 0x1.9e6e3ap-20f, -0x1.f1cda0p-17f));
    return fmadd(a4, fmadd(a4, q2, q1), q0);
  }
};
template <>
struct C<double> {
  static constexpr double kLog2e = 0x1.71547652b82fep+0;
  static constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;  // 42 bits: k * kLn2Hi exact for |k| < 2048
  static constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
  static constexpr double kShift = 0x1.8p52;
  static constexpr std::uint64_t kBias = 1023;
  static constexpr std::uint64_t kHalfOffset = 2048;
  static constexpr double kExpLo = -746.0, kExpHi = 710.0;
  static constexpr double kExpm1Lo = -40.0;
  static constexpr double kMaxScaleExp = 1023.0;
  static constexpr double kTanhHi = 19.5;
  static constexpr double kErfHi = 6.0;
  static constexpr double kMinNormal = 0x1p-1022;
  static constexpr double kSubnormalScale = 0x1p52;
  static constexpr std::uint64_t kSqrtHalfBits = 0x3fe6a09e667f3bcdull;
  static constexpr std::uint64_t kMantissaMask = 0x000fffffffffffffull;

  // As for float; relative errors of the fits 2.1e-16, 4.7e-16, 7.4e-18 and 9.2e-18.
  KAEL_VMATH_INLINE static double exp_p(double r) {
    return poly(r, 0x1.0000000000001p-1, 0x1.555555555554cp-3, 0x1.5555555553d26p-5, 0x1.1111111114e46p-7,
                0x1.6c16c178a5cedp-10, 0x1.a01a0187c90e5p-13, 0x1.a019b8a299d59p-16, 0x1.71de660a5ceeep-19,
                0x1.289209219cde8p-22, 0x1.ae95f07cd4474p-26);
  }
  KAEL_VMATH_INLINE static double log_p(double z) {
    return poly(z, 0x1.5555555555558p-1, 0x1.9999999995223p-2, 0x1.2492492e06d9ap-2, 0x1.c71c62c99a4d9p-3,
                0x1.7462bcb252c7ap-3, 0x1.39fd5334035b2p-3, 0x1.2b656199a1f3cp-3);
  }
  KAEL_VMATH_INLINE static double erf_small(double z) {
    return poly(z, 0x1.06eba8214db68p-3, -0x1.812746b0379bcp-2, 0x1.ce2f21a040cb5p-4, -0x1.b82ce311f9202p-6,
                0x1.565bccf8fd727p-8, -0x1.c02db03742681p-11, 0x1.f9a2ba119ff7cp-14, -0x1.f4ca44b024ea2p-17,
                0x1.b97f80a4e12a4p-20, -0x1.5c053af87571ep-23, 0x1.d70e34cc01c0bp-27, -0x1.ab8923d8184f4p-31);
  }
  // For 1 <= x <= 6.
  static constexpr double kErfT = 0x1.d555555555555p-2;
  KAEL_VMATH_INLINE static double erfc_q(double u) {
    return poly(u, -0x1.7479de6b5c2b3p-1, 0x1.53ddac9466f7dp+0, 0x1.e01a34695cef3p-3, -0x1.6063604612445p-2,
                -0x1.b477024453025p-3, 0x1.f2e0c23fcfc6cp-3, 0x1.91ce3e683a771p-3, -0x1.102742ddc23fep-2,
                -0x1.5b6abf6ee0867p-3, 0x1.632ee51babcf0p-2, 0x1.8243d50885824p-4, -0x1.d21f4eda758c5p-2,
                0x1.37c405fa688b2p-4, 0x1.0b8c4df182971p-1, -0x1.69d5d5ee8738ap-2, -0x1.a6874bc3cfb51p-2,
                0x1.176558a9ce998p-1);
  }
};

// Range reduction x = k ln2 + r, |r| <= ln2/2 (a little more without FMA). Returns r and t,
// whose bits hold k + the bits of kShift (k = bits(t) - bits(kShift)).
template <typename T>
struct Reduced {
  T r, t;
};
template <typename T>
KAEL_VMATH_INLINE Reduced<T> reduce_ln2(T x) {
  using K = C<T>;
  const T t = fmadd(x, K::kLog2e, K::kShift);
  const T k = t - K::kShift;
  T r = fmadd(k, -K::kLn2Hi, x);  // exact
  r = fmadd(k, -K::kLn2Lo, r);
  return {r, t};
}

// expm1(r) = r + r^2 P(r) for the reduced argument.
template <typename T>
KAEL_VMATH_INLINE T expm1_reduced(T r) {
  return fmadd(r * r, C<T>::exp_p(r), r);
}

// The exponent e of u = 2^e m, m in [sqrt(1/2), sqrt(2)), as a T, from ub = bits(u) - bits of
// sqrt(1/2) (u normal): the (signed) exponent field of ub. float converts the arithmetic shift;
// double goes through the bits of a double with e + 2^11 in its low bits (no int64 -> double
// conversion below AVX-512).
template <typename T>
KAEL_VMATH_INLINE T exponent_of_offset_bits(bits_t<T> ub) {
  using U = bits_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(static_cast<std::int32_t>(ub) >> Traits<float>::kMantissa);
  } else {
    constexpr int kExpBits = sizeof(T) * 8 - Traits<T>::kMantissa;  // 12: sign + exponent field
    const U e_off = (ub + (U(1) << (sizeof(T) * 8 - 1))) >> Traits<T>::kMantissa;  // e + 2^11
    constexpr T kTwoPowMantissa = T(U(1) << Traits<T>::kMantissa);          // its mantissa field is 0
    return from_bits<T>(bits(kTwoPowMantissa) | e_off) - (kTwoPowMantissa + T(U(1) << (kExpBits - 1)));
  }
}

// 2^w for float w in [-64, 32] (no clamp; NaN gives NaN): 2^w = 2^k 2^f with k = round(w),
// f = w - k in [-1/2, 1/2] exact, 2^f = 1 + f P(f) (relative error of the fit 1.1e-8). The
// exponent bias goes in with the rounding shift (its low bits are the bias), so 2^k is one
// shift. Used where w is already in base 2 (float erf and gelu fold log2(e) into their
// polynomials).
KAEL_VMATH_INLINE float exp2_moderate(float w) {
  constexpr float kShiftBias = C<float>::kShift + static_cast<float>(C<float>::kBias);
  const float t = w + kShiftBias;
  const float f = w - (t - kShiftBias);
  const float p = fmadd(f, poly(f, 0x1.62e430p-1f, 0x1.ebfbdep-3f, 0x1.c6af6ep-5f, 0x1.3b2bd8p-7f,
                                0x1.5f078cp-10f, 0x1.42dca0p-13f),
                        1.0f);
  return p * pow2_biased<float>(bits(t));  // the shift keeps the low bits: k + bias
}

// expm1 for x in [kExpm1Lo, 2 kTanhHi]: no overflow, no -0.0 (tanh's use).
template <typename T>
KAEL_VMATH_INLINE T expm1_moderate(T x) {
  using K = C<T>;
  const Reduced<T> red = reduce_ln2(x);
  const T q = expm1_reduced(red.r);
  const bits_t<T> k_biased = bits(red.t) - bits(K::kShift) + K::kBias;
  const T s = pow2_biased<T>(k_biased);
  return fmadd(s, q, s - T(1));  // 2^k (q + 1) - 1
}

}  // namespace detail

template <typename T>
KAEL_VMATH_INLINE T exp(T x) {
  using namespace detail;
  using K = C<T>;
  using U = bits_t<T>;
  x = clamp(x, K::kExpLo, K::kExpHi);  // the result is 0 or inf beyond, as the scaling gives
  const Reduced<T> red = reduce_ln2(x);
  const T p = fmadd(red.r * red.r, K::exp_p(red.r), red.r) + T(1);
  // 2^k in two exact steps, so that subnormal results are rounded once: k1 = floor(k / 2).
  const U k_off = bits(red.t) - bits(K::kShift) + K::kHalfOffset;  // k + offset >= 0
  const U k1_biased = (k_off >> 1) - K::kHalfOffset / 2 + K::kBias;
  const U k2_biased = k_off - (k_off >> 1) - K::kHalfOffset / 2 + K::kBias;
  return p * pow2_biased<T>(k1_biased) * pow2_biased<T>(k2_biased);
}

template <typename T>
KAEL_VMATH_INLINE T expm1(T x) {
  using namespace detail;
  using K = C<T>;
  const T xc = clamp(x, K::kExpm1Lo, K::kExpHi);
  const Reduced<T> red = reduce_ln2(xc);
  const T q = expm1_reduced(red.r);
  // 2^k with k at most kMaxScaleExp; one more doubling for the largest k (the result is then
  // exp(x) as a float, overflowing to inf where it should).
  const bool capped = red.t > K::kShift + K::kMaxScaleExp;
  const T t_capped = select(capped, K::kShift + K::kMaxScaleExp, red.t);
  const T s = pow2_biased<T>(bits(t_capped) - bits(K::kShift) + K::kBias);
  const T y = fmadd(s, q, s - T(1)) * select(capped, T(2), T(1));
  return select(x == T(0), x, y);  // keeps -0.0
}

template <typename T>
KAEL_VMATH_INLINE T log(T x) {
  using namespace detail;
  using K = C<T>;
  using U = bits_t<T>;
  // Subnormals are scaled into the normal range first.
  const bool subnormal = x < K::kMinNormal;
  const T xs = select(subnormal, x * K::kSubnormalScale, x);
  // x = 2^e m with m in [sqrt(1/2), sqrt(2)): offset the bits so the exponent field rounds there.
  const U u = bits(xs) - K::kSqrtHalfBits;
  const T m = from_bits<T>((u & K::kMantissaMask) + K::kSqrtHalfBits);
  // e = the (signed) exponent field of u, through the bits of a double/float with e in its
  // low bits: e + 2^(p-1) sits in [0, 2^p) for p the exponent field width + 1.
  constexpr int kExpBits = sizeof(T) * 8 - Traits<T>::kMantissa;  // 9 or 12: sign + exponent field
  const U e_off = (u + (U(1) << (sizeof(T) * 8 - 1))) >> Traits<T>::kMantissa;  // e + 2^(kExpBits - 1)
  const T e_scale_fix = select(subnormal, T(-Traits<T>::kMantissa), T(0));
  constexpr T kTwoPowMantissa = T(U(1) << Traits<T>::kMantissa);  // its mantissa field is 0
  const T e = (from_bits<T>(bits(kTwoPowMantissa) | e_off) - kTwoPowMantissa) - T(U(1) << (kExpBits - 1)) +
              e_scale_fix;
  const T f = m - T(1);
  const T s = f / (T(2) + f);
  const T z = s * s;
  // log(1 + f) = 2s + s z P(z) = f - s (f - z P(z)), since 2s = f - s f.
  const T lg = fmadd(-s, fmadd(-z, K::log_p(z), f), f);
  const T y = fmadd(e, K::kLn2Hi, fmadd(e, K::kLn2Lo, lg));
  constexpr T inf = std::numeric_limits<T>::infinity();
  const T special = select(x == T(0), -inf, select(x == inf, inf, std::numeric_limits<T>::quiet_NaN()));
  return select((x > T(0)) & (x < inf), y, special);
}

template <typename T>
KAEL_VMATH_INLINE T log1p(T x) {
  using namespace detail;
  using K = C<T>;
  using U = bits_t<T>;
  // log(u) for u = 1 + x as in log() (u is never subnormal: u >= 2^-24 or u = 0), plus the
  // part of x that 1 + x rounded away, c = x - (u - 1) (exact), times log's slope 1 / u:
  // log1p(x) = log(u) + c / u + O((c / u)^2).
  const T u = T(1) + x;
  const U ub = bits(u) - K::kSqrtHalfBits;
  const T m = from_bits<T>((ub & K::kMantissaMask) + K::kSqrtHalfBits);  // u = 2^e m
  const T e = exponent_of_offset_bits<T>(ub);
  const T f = m - T(1);
  const T t = T(1) / (T(2) + f);
  const T s = f * t;
  const T z = s * s;
  const T lg = fmadd(-s, fmadd(-z, K::log_p(z), f), f);
  // c / u = c 2^-e / m without a second division: 1 / m = 4 t^2 / (1 - z) = 4 t^2 (1 + z + z^2 ...)
  // (z <= 0.0295, and c / u is at most 2^-24 of the result, so 1 + z is enough). 4 * 2^-e is
  // built from the exponent bits of ub (e in [-24, 128] wherever the result is used).
  const T scale = from_bits<T>(bits(T(4)) - (ub & ~K::kMantissaMask));
  const T ct = (x - (u - T(1))) * scale * t;
  const T ct2 = ct * t;
  const T y = fmadd(e, K::kLn2Hi, fmadd(e, K::kLn2Lo, lg)) + fmadd(ct2, z, ct2);
  // log1p has x's sign wherever it is defined: the sign bit of x restores -0.0 (the sum gives
  // +0.0) and leaves every other result as it is.
  const T r = from_bits<T>(bits(y) | (bits(x) & Traits<T>::kSign));
  // u = +inf: inf; u = 0 (x = -1): -inf; u < 0 (-inf included): the default NaN of x86, whose
  // sign bit is set (what the SIMD form's vfixupimmps gives: Note [SIMD forms]); NaN stays NaN.
  constexpr T inf = std::numeric_limits<T>::infinity();
  return select(u < inf, select(u > T(0), r, select(u == T(0), -inf, -std::numeric_limits<T>::quiet_NaN())), u);
}

template <typename T>
KAEL_VMATH_INLINE T tanh(T x) {
  using namespace detail;
  using K = C<T>;
  T a = abs(x);
  a = select(a > K::kTanhHi, K::kTanhHi, a);  // tanh is +-1 in T beyond; NaN passes
  const T e = expm1_moderate(T(2) * a);
  return copysign(e / (e + T(2)), x);
}

template <typename T>
KAEL_VMATH_INLINE T sigmoid(T x) {
  return T(1) / (T(1) + exp(-x));
}

template <typename T>
KAEL_VMATH_INLINE T erf(T x) {
  using namespace detail;
  using K = C<T>;
  const T ax = abs(x);
  const T small = fmadd(x, K::erf_small(x * x), x);  // odd; keeps -0.0
  const T a = select(ax > K::kErfHi, K::kErfHi, ax);  // erf is +-1 in T beyond; NaN passes
  // Below 1 this branch is selected away (its exponent stays finite there).
  T erfc;
  if constexpr (std::is_same_v<T, float>) {
    erfc = exp2_moderate(K::erfc_w(a - K::kErfMid));
  } else {
    const T t = T(1) / fmadd(a, T(0.5), T(1));
    erfc = t * exp(fmadd(-a, a, K::erfc_q(t - K::kErfT)));
  }
  // 1 - erfc >= 0: x's sign bit goes in with an or (small has x's sign already).
  const T y = select(ax < T(1), small, T(1) - erfc);
  return from_bits<T>(bits(y) | (bits(x) & Traits<T>::kSign));
}

// gelu(x) = x Phi(x) = x (1 + erf(x / sqrt(2))) / 2 for float, in one branch and without the
// cancellation of 1 + erf for x < 0: with E = Phi(-|x|) = 2^V(|x|), x (1 - E) for x > 0 (E <= 1/2)
// and x E for x < 0. Beyond |x| = 4 sqrt(2) E is taken as 0: x for x > 0 (1 - E rounds to 1
// there) and x * 0 for x < 0 (-0.0, and NaN at -inf, as PyTorch's formula gives; the exact
// value is below 2^-24 in magnitude). kael/native/math.h's gelu calls it for float.
//
// Where the SIMD forms exist (Note [SIMD forms]) E itself is piecewise, with no exponential:
// 31 pieces of a degree-5 polynomial in u = |x| c - j, j = round(|x| c), c = kGeluPieces, and a
// piece 31 of zeros, so E is 0 from |x| = 30.5 / c (5.674, just beyond 4 sqrt(2)) with no test;
// the coefficients of each lane's piece are picked by one two-register permute per coefficient
// (here: an index into the table). The result is x E + max(-0.0, x) with x replaced by
// -min(|x|, kGeluCut) where x > 0 (the same values: x - |x| E there, x E below; +inf stays
// finite in the product). Six coefficients rather than seven: on AMD Zen 4 the permutes, not
// the FMAs, bound the loop (each costs about two FMAs' time beside them), and the seventh cost
// 15% of the rate for an error 40 times smaller in the last pieces (Note [Vectorised math]).
// Elsewhere E = 2^V with V one degree-11 polynomial (a gather per coefficient would cost more
// than it saves).
#if defined(KAEL_VMATH_SIMD)
namespace detail {
inline constexpr float kGeluPieces = 0x1.58p+2f;  // 5.375: 30.5 / c = 5.674 > 4 sqrt(2)
inline constexpr float kGeluCut = 0x1.7p+2f;      // 5.75: |x| clamped there lies in piece 31 (E = 0)
// kGeluPiece[i][j]: the coefficient of u^i of piece j (tools/fit_math_poly.py; largest relative
// error of the fits of E 6.2e-7, in piece 30, before rounding to float; 1e-8 below |x| = 3.5).
alignas(64) inline constexpr float kGeluPiece[6][32] = {
    {0x1.000000p-1f, 0x1.b46edcp-2f, 0x1.6b6e00p-2f, 0x1.274ba8p-2f, 0x1.d3b9ecp-3f, 0x1.68b468p-3f, 0x1.0ea55ep-3f, 0x1.8add68p-4f, 0x1.17dd6cp-4f, 0x1.8138dap-5f, 0x1.014f48p-5f, 0x1.4d76ccp-6f, 0x1.a31250p-7f, 0x1.fe87e2p-8f, 0x1.2d5c38p-8f, 0x1.58af0ep-9f, 0x1.7dd91ep-10f, 0x1.99a36cp-11f, 0x1.a977a6p-12f, 0x1.abc57ep-13f, 0x1.a043a8p-14f, 0x1.87fdecp-15f, 0x1.652ca4p-16f, 0x1.3ade40p-17f, 0x1.0c8532p-18f, 0x1.bb02bep-20f, 0x1.617638p-21f, 0x1.10bedcp-22f, 0x1.970f5ep-24f, 0x1.25bc3cp-25f, 0x1.99e7f4p-27f, 0x0.0p+0f},
    {-0x1.300338p-4f, -0x1.2acbe0p-4f, -0x1.1badc2p-4f, -0x1.0429c8p-4f, -0x1.ccf596p-5f, -0x1.8a7902p-5f, -0x1.461752p-5f, -0x1.04647ep-5f, -0x1.91b682p-6f, -0x1.2b52cap-6f, -0x1.aee304p-7f, -0x1.2b9656p-7f, -0x1.926be2p-8f, -0x1.0514eep-8f, -0x1.473e0cp-9f, -0x1.8c36e0p-10f, -0x1.cf6714p-11f, -0x1.05c5d4p-11f, -0x1.1daf74p-12f, -0x1.2d2cdap-13f, -0x1.32b3f8p-14f, -0x1.2db4d4p-15f, -0x1.1eb1a6p-16f, -0x1.072902p-17f, -0x1.d2ae2ap-19f, -0x1.8fb872p-20f, -0x1.4ab86ap-21f, -0x1.085264p-22f, -0x1.982250p-24f, -0x1.306036p-25f, -0x1.b68bc0p-27f, 0x0.0p+0f},
    {-0x1.8eeb66p-32f, 0x1.4af43ap-10f, 0x1.3a359ap-9f, 0x1.b03e9ep-9f, 0x1.fe91e0p-9f, 0x1.111470p-8f, 0x1.0ee3dap-8f, 0x1.f8bb06p-9f, 0x1.bcf29ap-9f, 0x1.74fb16p-9f, 0x1.2a49e0p-9f, 0x1.c8447ap-10f, 0x1.4e4cb4p-10f, 0x1.d5eb5ep-11f, 0x1.3d2792p-11f, 0x1.9b6dc4p-12f, 0x1.00a362p-12f, 0x1.341140p-13f, 0x1.63fc42p-14f, 0x1.8c22a8p-15f, 0x1.a8a30ep-16f, 0x1.b69a86p-17f, 0x1.b49fdep-18f, 0x1.a2ffc4p-19f, 0x1.83abdap-20f, 0x1.59e190p-21f, 0x1.299eacp-22f, 0x1.ee070cp-24f, 0x1.8b8828p-25f, 0x1.31826cp-26f, 0x1.c75a62p-28f, 0x0.0p+0f},
    {0x1.c0faaep-12f, 0x1.a9ff7cp-12f, 0x1.68f0dcp-12f, 0x1.088676p-12f, 0x1.2fbe8cp-13f, 0x1.39ce8ap-15f, -0x1.da082ap-15f, -0x1.0babc8p-13f, -0x1.687b1ap-13f, -0x1.8ea832p-13f, -0x1.87905cp-13f, -0x1.60a58ap-13f, -0x1.27fd00p-13f, -0x1.d3792ep-14f, -0x1.5d6cdap-14f, -0x1.f07e4ep-15f, -0x1.503d8ap-15f, -0x1.b3145ap-16f, -0x1.0d5beap-16f, -0x1.3f9182p-17f, -0x1.6ba722p-18f, -0x1.8d410ap-19f, -0x1.a0e136p-20f, -0x1.a4806ap-21f, -0x1.97e642p-22f, -0x1.7cabcap-23f, -0x1.55e9aap-24f, -0x1.27a7d2p-25f, -0x1.ec6482p-27f, -0x1.8af1f4p-28f, -0x1.31333ap-29f, 0x0.0p+0f},
    {-0x1.524206p-27f, -0x1.699222p-17f, -0x1.4b4830p-16f, -0x1.ac39a2p-16f, -0x1.cc5404p-16f, -0x1.add4dcp-16f, -0x1.5e7bb4p-16f, -0x1.e5d5f6p-17f, -0x1.0226ecp-17f, -0x1.b57950p-20f, 0x1.938e6ap-19f, 0x1.8ef88ap-18f, 0x1.e8c524p-18f, 0x1.edb72cp-18f, 0x1.bac5aep-18f, 0x1.6b9500p-18f, 0x1.15c60ap-18f, 0x1.8ea534p-19f, 0x1.0e5310p-19f, 0x1.5bea84p-20f, 0x1.aa3aa6p-21f, 0x1.f22beep-22f, 0x1.163c8ap-22f, 0x1.29729cp-23f, 0x1.30aa86p-24f, 0x1.2b434cp-25f, 0x1.1a1dbap-26f, 0x1.fecf12p-28f, 0x1.bc58c0p-29f, 0x1.73948ep-30f, 0x1.2ad51ap-31f, 0x0.0p+0f},
    {-0x1.289f84p-19f, -0x1.106c92p-19f, -0x1.94e412p-20f, -0x1.9fd17ep-21f, 0x1.97b572p-27f, 0x1.750f7cp-21f, 0x1.37b96ap-20f, 0x1.6db5d8p-20f, 0x1.60f9ecp-20f, 0x1.22fb22p-20f, 0x1.963710p-21f, 0x1.bf0202p-22f, 0x1.0bf3a4p-23f, -0x1.6dd4bap-24f, -0x1.bdade2p-23f, -0x1.11dc82p-22f, -0x1.0bfa1ap-22f, -0x1.cb4b72p-23f, -0x1.65b75cp-23f, -0x1.01f312p-23f, -0x1.5c2b0cp-24f, -0x1.bada80p-25f, -0x1.0aa954p-25f, -0x1.31152cp-26f, -0x1.4c6dfep-27f, -0x1.59a9bap-28f, -0x1.5783e2p-29f, -0x1.46ad60p-30f, -0x1.299680p-31f, -0x1.03e624p-32f, -0x1.b38a7ap-34f, 0x0.0p+0f},
};
}  // namespace detail

// In the order of the SIMD form's instructions: each select is the vmaxps/vminps it stands for
// (the second operand where either is NaN or both are zeros).
KAEL_VMATH_INLINE float gelu(float x) {
  using namespace detail;
  using K = C<float>;
  const float nax = from_bits<float>(bits(x) | Traits<float>::kSign);  // -|x|
  const float na = select(nax > -kGeluCut, nax, -kGeluCut);           // NaN: -kGeluCut, so E = 0
  const float a = -na;
  const float t = fmadd(a, kGeluPieces, K::kShift);         // bits: j in the low 5
  const float u = fmadd(a, kGeluPieces, -(t - K::kShift));  // in [-1/2, 1/2]
  const std::uint32_t j = bits(t) & 31u;
  const auto& c = kGeluPiece;
  float e = fmadd(c[5][j], u, c[4][j]);
  e = fmadd(e, u, c[3][j]);
  e = fmadd(e, u, c[2][j]);
  e = fmadd(e, u, c[1][j]);
  e = fmadd(e, u, c[0][j]);
  const float xn = select(na < x, na, x);        // -min(|x|, kGeluCut) for x > 0, else x (NaN: x)
  const float xp = select(-0.0f > x, -0.0f, x);  // x for x > 0 (and +-0, NaN), else -0.0
  return fmadd(xn, e, xp);                       // NaN: x's, from both operands
}
#else
KAEL_VMATH_INLINE float gelu(float x) {
  using namespace detail;
  using K = C<float>;
  const float ax = abs(x);
  const bool beyond = ax > K::kGeluHi;
  const float a = select(beyond, K::kGeluHi, ax);  // NaN passes
  const float e = select(beyond, 0.0f, exp2_moderate(K::gelu_v(a)));
  return select(x > 0.0f, fmadd(-a, e, x), x * e);  // x - |x| E (|x| clamped: +inf stays inf), x E
}
#endif

// gelu with the tanh approximation (approximate='tanh') for float: PyTorch's 0.5 x (1 + tanh(y)),
// y = sqrt(2 / pi) (x + 0.044715 x^3), is the same function as x / (1 + exp(-2 y)) (1 + tanh(y) =
// 2 / (1 + exp(-2 y))), computed so: one exp and a division where the tanh takes an expm1 and a
// division, and no cancellation of 1 + tanh(y) for x < 0 (PyTorch's float32 result is 30% off
// at x = -5 and -0.0 from x = -5.06 on; this one keeps the value down to 3e-38, x = -10.06, and
// gives -0.0 below, where exp(-2 y) overflows). -2 y = x (c1 + c3 x^2), c1 = -2 sqrt(2 / pi)
// and c3 = c1 0.044715 rounded to float. The error grows with |2 y| as the function's condition
// does (a relative error e of 2 y moves the result by e |2 y|): at most 3 + 2.5 |2 y| ulp
// (test_vec_math.py; the largest measured over every 251st float32 and a dense sweep of [-12, 12]:
// 2.49 ulp for x >= -1, 192 ulp at x = -9.54, |2 y| = 77.2). Special values as PyTorch's formula gives them: +-0 keep their sign,
// +inf -> +inf, -inf -> NaN, NaN -> NaN; where x^3 overflows, x for x > 0 and -0.0 for x < 0.
namespace detail {
inline constexpr float kGeluTanhC1 = static_cast<float>(-2.0 * 0.79788456080286535588);
inline constexpr float kGeluTanhC3 = static_cast<float>(-2.0 * 0.79788456080286535588 * 0.044715);
}  // namespace detail

KAEL_VMATH_INLINE float gelu_tanh(float x) {
  const float n = x * detail::fmadd(x * x, detail::kGeluTanhC3, detail::kGeluTanhC1);  // -2 y
  return x / (1.0f + exp(n));
}


#if defined(KAEL_VMATH_SIMD)
// Note [SIMD forms]
// exp, log1p, gelu, gelu_tanh, sigmoid and silu for float have a second form over 16 lanes in AVX-512 registers,
// which the generated kernels of ops marked `simd: true` in native_functions.yaml run
// (PointwiseInner in kael/native/loops.h; codegen/README.md). Each computes the same bits as its
// scalar form (above; sigmoid's and silu's are in kael/native/math.h, and call exp), operation
// for operation (a test runs every float32 through both); what the compiler cannot produce from
// the scalar form is the instruction choice:
//   - 2^k x by one vscalefps, where the scalar form multiplies by 2^k1 and 2^k2 built in the
//     exponent bits (the same result: the first product is exact, the second rounds once);
//   - clamps by vminps/vmaxps where the scalar form selects through masks on the bits;
//   - gelu's per-lane coefficients by vpermt2ps from two registers, where the scalar form
//     indexes a table (a gather, once vectorised);
//   - log1p's special values by one vfixupimmps on the class of 1 + x, where the scalar form
//     compares and selects three times (its only difference from the scalar form).
// Measured on AMD Zen 4 (1 thread, 8K floats in cache, tools/bench/vec_math_probe.cpp): exp's
// scalar form runs at 3.2 G elements/s, its SIMD form at 5.4 (from memory as fast as a streaming
// copy); gelu's SIMD form at about 3.9 (3.4 with pieces of degree 6), where the one-polynomial
// form (V of degree 11, then 2^V) ran at 2.2 and a first SIMD form with V in 16 pieces and 2^V
// at 2.7; the piecewise scalar form (a gather per coefficient) runs at 0.5. With the SIMD forms
// every float loop of these ops runs them (strided and float16/bfloat16 ones too), so the scalar
// forms serve builds without AVX-512 (with the one-polynomial gelu) and as the reference the SIMD
// forms match.
namespace simd {

using F32 = __m512;
inline constexpr int kLanes = 16;

namespace detail {
KAEL_VMATH_INLINE F32 set(float v) { return _mm512_set1_ps(v); }
KAEL_VMATH_INLINE F32 fmadd(F32 a, F32 b, F32 c) { return _mm512_fmadd_ps(a, b, c); }
// (the masked forms: GCC 12's plain _mm512_min_ps, max_ps and scalef_ps start from an undefined
// register and warn)
KAEL_VMATH_INLINE F32 min(F32 a, F32 b) { return _mm512_mask_min_ps(a, static_cast<__mmask16>(0xffff), a, b); }  // b if NaN
KAEL_VMATH_INLINE F32 max(F32 a, F32 b) { return _mm512_mask_max_ps(a, static_cast<__mmask16>(0xffff), a, b); }  // b if NaN
// x 2^k for k an integer-valued float (the floor of k: exact here).
KAEL_VMATH_INLINE F32 scalef(F32 x, F32 k) { return _mm512_mask_scalef_ps(x, static_cast<__mmask16>(0xffff), x, k); }
// table32[index & 31] per lane: two registers, one permute.
KAEL_VMATH_INLINE F32 lookup(const float* table32, __m512i index) {
  return _mm512_permutex2var_ps(_mm512_load_ps(table32), index, _mm512_load_ps(table32 + 16));
}
}  // namespace detail

KAEL_VMATH_INLINE F32 exp(F32 x) {
  using namespace detail;
  using K = vmath::detail::C<float>;
  x = min(set(K::kExpHi), max(set(K::kExpLo), x));
  const F32 t = fmadd(x, set(K::kLog2e), set(K::kShift));
  const F32 k = t - set(K::kShift);
  F32 r = fmadd(k, set(-K::kLn2Hi), x);
  r = fmadd(k, set(-K::kLn2Lo), r);
  F32 q = fmadd(set(0x1.6c380ep-10f), r, set(0x1.120bfcp-7f));  // K::exp_p
  q = fmadd(q, r, set(0x1.5555eap-5f));
  q = fmadd(q, r, set(0x1.5554dcp-3f));
  q = fmadd(q, r, set(0x1p-1f));
  const F32 p = fmadd(r * r, q, r) + set(1.0f);
  return scalef(p, k);
}

// log1p as the scalar form computes it, with the special values of u = 1 + x (0, +inf, negative,
// NaN) sorted out by one vfixupimmps where the scalar form takes three compares and selects (1
// thread, 16K floats in cache: 2.6 -> 3.1 G elements/s on the Intel Xeon of docs/performance.md).
KAEL_VMATH_INLINE F32 log1p(F32 x) {
  using namespace detail;
  using K = vmath::detail::C<float>;
  // (bits in unsigned lanes, which wrap; signed lanes only for the arithmetic shift)
  using U = std::uint32_t __attribute__((vector_size(64)));
  using I = std::int32_t __attribute__((vector_size(64)));
  const F32 one = set(1.0f);
  const F32 u = one + x;
  const U ub = reinterpret_cast<U>(u) - K::kSqrtHalfBits;
  const F32 m = reinterpret_cast<F32>((ub & K::kMantissaMask) + K::kSqrtHalfBits);  // u = 2^e m
  const F32 e = __builtin_convertvector(reinterpret_cast<I>(ub) >> 23, F32);  // exponent_of_offset_bits
  const F32 f = m - one;
  const F32 t = one / (set(2.0f) + f);
  const F32 s = f * t;
  const F32 z = s * s;
  const F32 log_p = fmadd(fmadd(set(0x1.2eea38p-2f), z, set(0x1.997c1cp-2f)), z, set(0x1.55555cp-1f));  // K::log_p
  const F32 lg = fmadd(-s, fmadd(-z, log_p, f), f);
  const F32 scale = reinterpret_cast<F32>(std::bit_cast<std::uint32_t>(4.0f) - (ub & ~K::kMantissaMask));
  const F32 ct = (x - (u - one)) * scale * t;
  const F32 ct2 = ct * t;
  const F32 y = fmadd(e, set(K::kLn2Hi), fmadd(e, set(K::kLn2Lo), lg)) + fmadd(ct2, z, ct2);
  const F32 r = reinterpret_cast<F32>(reinterpret_cast<U>(y) | (reinterpret_cast<U>(x) & vmath::detail::Traits<float>::kSign));
  // By the class of u, 4 bits each from the lowest: quiet NaN and signalling NaN -> u (1), 0 ->
  // -inf (4), 1 -> r (0), -inf -> the default NaN (3), +inf -> +inf (5), negative -> the default
  // NaN (3), positive -> r (0).
  constexpr std::int32_t kClasses = 0x03530411;
  return _mm512_fixupimm_ps(r, u, _mm512_set1_epi32(kClasses), 0);
}

// sigmoid and silu as kael/native/math.h writes them for float (PyTorch's formulas), with exp's
// SIMD form: 1 / (1 + exp(-x)) and x / (1 + exp(-x)).
KAEL_VMATH_INLINE F32 sigmoid(F32 x) { return detail::set(1.0f) / (detail::set(1.0f) + exp(-x)); }
KAEL_VMATH_INLINE F32 silu(F32 x) { return x / (detail::set(1.0f) + exp(-x)); }
KAEL_VMATH_INLINE F32 gelu_tanh(F32 x) {
  using namespace detail;
  const F32 n = x * fmadd(x * x, set(vmath::detail::kGeluTanhC3), set(vmath::detail::kGeluTanhC1));
  return x / (set(1.0f) + exp(n));
}

KAEL_VMATH_INLINE F32 gelu(F32 x) {
  using namespace detail;
  using K = vmath::detail::C<float>;
  const F32 nax = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
  const F32 na = max(nax, set(-vmath::detail::kGeluCut));
  const F32 t = _mm512_fnmadd_ps(na, set(vmath::detail::kGeluPieces), set(K::kShift));  // a c + kShift
  const F32 u = _mm512_fnmadd_ps(na, set(vmath::detail::kGeluPieces), set(K::kShift) - t);
  const __m512i j = _mm512_castps_si512(t);  // the permutes read the low 5 bits
  const auto& c = vmath::detail::kGeluPiece;
  F32 e = fmadd(lookup(c[5], j), u, lookup(c[4], j));
  e = fmadd(e, u, lookup(c[3], j));
  e = fmadd(e, u, lookup(c[2], j));
  e = fmadd(e, u, lookup(c[1], j));
  e = fmadd(e, u, lookup(c[0], j));
  const F32 xn = min(na, x);
  const F32 xp = max(set(-0.0f), x);
  return fmadd(xn, e, xp);
}

}  // namespace simd
#endif  // KAEL_VMATH_SIMD

}  // namespace kael::native::vmath

#undef KAEL_VMATH_INLINE
