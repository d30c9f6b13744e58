#pragma once
// Scalar functions that pointwise formulas in native_functions.yaml may call. Each is
// defined for every compute dtype its ops allow; they inline into the generated loops.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kael/core/half.h"
#ifndef __CUDACC__
#include "kael/native/vec_math.h"
#endif

// Under nvcc every function here is __host__ __device__, so the formulas compile into CUDA
// kernels too (codegen/templates/pointwise_kernel.cu.j2).
#ifdef __CUDACC__
#define KAEL_HOST_DEVICE __host__ __device__
#else
#define KAEL_HOST_DEVICE
#endif

namespace kael::native::math {

// Note [Wrapping integer arithmetic]
// Pointwise formulas compute on integers as Wrapping<T>: +, -, * and unary - go through the
// unsigned type, so overflow wraps around in two's complement (INT64_MAX + 1 == INT64_MIN,
// abs(INT64_MIN) == INT64_MIN), as NumPy and PyTorch users observe, instead of being undefined
// behaviour. Comparisons are those of T. The compiler emits the same instructions as for T.
// There is no division: integer formulas that divide must say what INT64_MIN / -1 and / 0 give.
template <typename T>
struct Wrapping {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  // Arithmetic in an unsigned type at least as wide as unsigned int, so that narrow types are
  // not promoted to (signed) int before they wrap.
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

  T v{};
  constexpr Wrapping() = default;
  constexpr Wrapping(T x) : v(x) {}  // NOLINT: implicit, so numbers and T mix with it
  constexpr explicit operator T() const { return v; }
  constexpr explicit operator bool() const { return v != 0; }

  friend constexpr Wrapping operator+(Wrapping a, Wrapping b) { return wrap(U(a.v) + U(b.v)); }
  friend constexpr Wrapping operator-(Wrapping a, Wrapping b) { return wrap(U(a.v) - U(b.v)); }
  friend constexpr Wrapping operator*(Wrapping a, Wrapping b) { return wrap(U(a.v) * U(b.v)); }
  friend constexpr Wrapping operator-(Wrapping a) { return wrap(U(0) - U(a.v)); }
  friend constexpr Wrapping operator+(Wrapping a) { return a; }
  friend constexpr bool operator==(const Wrapping& a, const Wrapping& b) { return a.v == b.v; }
  friend constexpr auto operator<=>(const Wrapping& a, const Wrapping& b) { return a.v <=> b.v; }

 private:
  // U -> T keeps the low bits (two's complement; defined since C++20).
  static constexpr Wrapping wrap(U x) { return Wrapping(static_cast<T>(x)); }
};

// Formulas call math::abs qualified, so it is a namespace member (no argument-dependent lookup).
template <typename T>
constexpr Wrapping<T> abs(Wrapping<T> a) {
  if constexpr (std::is_signed_v<T>) {
    return a.v < 0 ? -a : a;
  } else {
    return a;
  }
}

// The type a pointwise formula computes in for elements of type T.
template <typename T>
struct ComputeType {
  using type = T;
};
template <typename T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
struct ComputeType<T> {
  using type = Wrapping<T>;
};
template <typename T>
using compute_t = typename ComputeType<T>::type;

using std::abs;
using std::acos;
using std::atan2;
using std::copysign;
using std::asin;
using std::atan;
using std::cos;
using std::cosh;
using std::exp2;
using std::hypot;
using std::log10;
using std::log2;
using std::sinh;
using std::tan;
using std::sin;
using std::sqrt;

// exp, expm1, log, log1p, tanh, sigmoid and erf of float and double run kael's vectorisable
// versions on the CPU (Note [Vectorised math] in kael/native/vec_math.h has their error bounds
// and special values); other types, and CUDA code, use the standard library's.
#ifdef __CUDACC__
using std::erf;
using std::exp;
using std::expm1;
using std::log;
using std::log1p;
using std::tanh;
#else
template <typename T>
inline constexpr bool has_vmath_v = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <typename T>
[[gnu::always_inline]] inline T erf(T a) {
  if constexpr (has_vmath_v<T>) return vmath::erf(a); else return std::erf(a);
}
template <typename T>
[[gnu::always_inline]] inline T exp(T a) {
  if constexpr (has_vmath_v<T>) return vmath::exp(a); else return std::exp(a);
}
template <typename T>
[[gnu::always_inline]] inline T expm1(T a) {
  if constexpr (has_vmath_v<T>) return vmath::expm1(a); else return std::expm1(a);
}
template <typename T>
[[gnu::always_inline]] inline T log(T a) {
  if constexpr (has_vmath_v<T>) return vmath::log(a); else return std::log(a);
}
template <typename T>
[[gnu::always_inline]] inline T log1p(T a) {
  if constexpr (has_vmath_v<T>) return vmath::log1p(a); else return std::log1p(a);
}
template <typename T>
[[gnu::always_inline]] inline T tanh(T a) {
  if constexpr (has_vmath_v<T>) return vmath::tanh(a); else return std::tanh(a);
}
#endif

template <typename T>
KAEL_HOST_DEVICE inline T rsqrt(T a) {
  return T(1) / std::sqrt(a);
}

template <typename T>
KAEL_HOST_DEVICE inline T sigmoid(T a) {
  return T(1) / (T(1) + exp(-a));
}

template <typename T>
KAEL_HOST_DEVICE inline T relu(T a) {
  return a < T(0) ? T(0) : a;  // NaN stays NaN
}

// NaN-propagating maximum/minimum (PyTorch semantics).
template <typename T>
KAEL_HOST_DEVICE inline T maximum(T a, T b) {
  if constexpr (kael::is_floating_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}

template <typename T>
KAEL_HOST_DEVICE inline T minimum(T a, T b) {
  if constexpr (kael::is_floating_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

// pow: std::pow for floats; exact repeated squaring for integers (wrapping, in unsigned
// arithmetic of at least int's width), where a negative exponent gives 1 for a base of 1, +-1
// for a base of -1 and 0 otherwise.
template <typename T>
KAEL_HOST_DEVICE inline T pow(T a, T b) {
  if constexpr (kael::is_floating_v<T>) {
    return std::pow(a, b);
  } else if constexpr (std::is_same_v<T, bool>) {
    return a || !b;
  } else {
    if constexpr (std::is_signed_v<T>) {
      if (b < 0) {
        if (a == 1) return T(1);
        if (a == -1) return (b & 1) ? T(-1) : T(1);
        return T(0);
      }
    }
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    U base = static_cast<U>(a), r = 1;
    for (U e = static_cast<U>(b); e; e >>= 1) {
      if (e & 1) r *= base;
      base *= base;
    }
    return static_cast<T>(r);
  }
}

template <typename T>
inline Wrapping<T> pow(Wrapping<T> a, Wrapping<T> b) {
  return pow(a.v, b.v);  // the integer pow above wraps through unsigned arithmetic
}

}  // namespace kael::native::math

namespace kael::native::math {

// The sign: -1, 0 or 1 (0 for NaN and for -0.0), as torch.sgn of real tensors; a bool is its own sign.
template <typename T>
KAEL_HOST_DEVICE inline T sgn(T a) {
  if constexpr (std::is_same_v<T, bool>) {
    return a;
  } else {
    return static_cast<T>(static_cast<int>(T(0) < a) - static_cast<int>(a < T(0)));
  }
}

}  // namespace kael::native::math

namespace kael::native::math {

// Rounding to an integral value: the identity on integers, as in PyTorch; round() rounds half
// to even (std::nearbyint in the default rounding mode), as torch.round does.
template <typename T>
KAEL_HOST_DEVICE inline T floor(T a) {
  if constexpr (kael::is_floating_v<T>) return std::floor(a); else return a;
}
template <typename T>
KAEL_HOST_DEVICE inline T ceil(T a) {
  if constexpr (kael::is_floating_v<T>) return std::ceil(a); else return a;
}
template <typename T>
KAEL_HOST_DEVICE inline T trunc(T a) {
  if constexpr (kael::is_floating_v<T>) return std::trunc(a); else return a;
}
template <typename T>
KAEL_HOST_DEVICE inline T round(T a) {
  if constexpr (kael::is_floating_v<T>) return std::nearbyint(a); else return a;
}

// round(decimals=)'s formula, as PyTorch's kernel: scale = 10**decimals rounds a * scale and
// divides back; a negative scale (negative decimals) divides by -scale first and multiplies back.
template <typename T>
KAEL_HOST_DEVICE inline T round_decimals(T a, T scale) {
  return scale > T(0) ? std::nearbyint(a * scale) / scale : std::nearbyint(a / -scale) * -scale;
}

// The fractional part, with the sign of a: a - trunc(a) (inf gives NaN, as in PyTorch).
template <typename T>
KAEL_HOST_DEVICE inline T frac(T a) {
  return a - std::trunc(a);
}

}  // namespace kael::native::math

namespace kael::native::math {

// Division-like ops. Integer divisors of 0 are rejected before the loop (PyTorch raises
// "ZeroDivisionError"; see divisor_check in pointwise_checks.cpp), so the integer versions
// only define what a 0 divisor gives to stay free of undefined behaviour. INT_MIN / -1 wraps.

// fmod: the remainder with the sign of the dividend (C's fmod, truncating division).
// Integer versions work on plain integers, which is what CUDA kernels compute in; the CPU's
// Wrapping<T> versions call them.
template <typename T>
KAEL_HOST_DEVICE inline T int_fmod(T a, T b) {
  if (b == 0) return T(0);
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1)) return T(0);  // INT_MIN % -1 is undefined in C++
  }
  return static_cast<T>(a % b);
}
template <typename T>
KAEL_HOST_DEVICE inline T int_remainder(T a, T b) {
  T r = int_fmod(a, b);
  if constexpr (std::is_signed_v<T>) {
    if (r != 0 && ((b < 0) != (r < 0))) r = static_cast<T>(r + b);  // |r| < |b|: no overflow
  }
  return r;
}
template <typename T>
KAEL_HOST_DEVICE inline T int_floor_divide(T a, T b) {
  if (b == 0) return T(0);
  if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<decltype(a + b)>;
    if (b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));  // wraps for the minimum
    const T q = static_cast<T>(a / b);
    return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
  } else {
    return static_cast<T>(a / b);
  }
}

// Float versions compute in float or double; a half type (the compute type of float16 and
// bfloat16 in CUDA kernels) computes in float and rounds once.
template <typename T>
inline constexpr bool is_native_float_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <typename T>
KAEL_HOST_DEVICE inline T fmod(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return int_fmod(a, b);
  } else if constexpr (is_native_float_v<T>) {
    return std::fmod(a, b);
  } else {
    return static_cast<T>(fmod(static_cast<float>(a), static_cast<float>(b)));
  }
}
template <typename T>
KAEL_HOST_DEVICE inline Wrapping<T> fmod(Wrapping<T> a, Wrapping<T> b) {
  return int_fmod(a.v, b.v);
}

// remainder: the remainder with the sign of the divisor (Python's %, floored division).
template <typename T>
KAEL_HOST_DEVICE inline T remainder(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return int_remainder(a, b);
  } else if constexpr (is_native_float_v<T>) {
    T r = std::fmod(a, b);
    if (r != T(0) && ((b < T(0)) != (r < T(0)))) r += b;
    return r;
  } else {
    return static_cast<T>(remainder(static_cast<float>(a), static_cast<float>(b)));
  }
}
template <typename T>
KAEL_HOST_DEVICE inline Wrapping<T> remainder(Wrapping<T> a, Wrapping<T> b) {
  return int_remainder(a.v, b.v);
}

// floor_divide: floor(a / b). Floats follow PyTorch's div_floor (computed from fmod so that the
// quotient is exact where it can be; a 0 divisor gives a / b).
template <typename T>
KAEL_HOST_DEVICE inline T floor_divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return int_floor_divide(a, b);
  } else if constexpr (is_native_float_v<T>) {
    if (b == T(0)) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    T floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
    return floordiv;
  } else {
    return static_cast<T>(floor_divide(static_cast<float>(a), static_cast<float>(b)));
  }
}
template <typename T>
KAEL_HOST_DEVICE inline Wrapping<T> floor_divide(Wrapping<T> a, Wrapping<T> b) {
  return int_floor_divide(a.v, b.v);
}

// Classification: integers are always finite.
template <typename T>
KAEL_HOST_DEVICE inline bool isnan(T a) {
  if constexpr (kael::is_floating_v<T>) return a != a; else return false;
}
template <typename T>
KAEL_HOST_DEVICE inline bool isinf(T a) {
  if constexpr (kael::is_floating_v<T>) return std::isinf(a); else return false;
}
template <typename T>
KAEL_HOST_DEVICE inline bool isfinite(T a) {
  if constexpr (kael::is_floating_v<T>) return std::isfinite(a); else return true;
}

// The sign bit: of a float through copysign (-0.0 and a NaN with the bit set count, as C's
// signbit), of an integer its sign (bool and unsigned never).
template <typename T>
KAEL_HOST_DEVICE inline bool signbit(T a) {
  if constexpr (std::is_same_v<T, double>) {
    return copysign(1.0, a) < 0.0;
  } else if constexpr (kael::is_floating_v<T>) {
    return copysign(1.0f, static_cast<float>(a)) < 0.0f;
  } else if constexpr (requires { a.v; }) {  // Wrapping<T>, integers' compute type
    using V = decltype(a.v);
    if constexpr (std::is_signed_v<V>) return a.v < V(0); else return false;
  } else if constexpr (std::is_signed_v<T>) {
    return a < T(0);
  } else {
    return false;
  }
}

// The log of a sum of exponentials, as PyTorch's kernels compute it: the larger input plus
// log1p(exp(-|a - b|)), so that nothing overflows; two equal infinities give themselves (their
// difference would be NaN). NaN propagates through the sum.
template <typename T>
KAEL_HOST_DEVICE inline T logaddexp(T a, T b) {
  if (std::isinf(a) && a == b) return a;
  const T m = a < b ? b : a;
  return m + log1p(exp(-abs(a - b)));
}
template <typename T>
KAEL_HOST_DEVICE inline T logaddexp2(T a, T b) {
  if (std::isinf(a) && a == b) return a;
  const T m = a < b ? b : a;
  return m + log1p(exp2(-abs(a - b))) * T(1.4426950408889634);  // 1 / ln 2
}

// x * log(y), 0 where x is 0 unless y is NaN (PyTorch's xlogy).
template <typename T>
KAEL_HOST_DEVICE inline T xlogy(T x, T y) {
  if (y != y) return y;
  if (x == T(0)) return T(0);
  return x * log(y);
}

// sin(pi x) / (pi x), 1 at 0; the product pi x is formed in the compute type, as PyTorch's kernel.
template <typename T>
KAEL_HOST_DEVICE inline T sinc(T a) {
  if (a == T(0)) return T(1);
  const T product = T(3.141592653589793) * a;
  return std::sin(product) / product;
}

// log(x / (1 - x)), x clamped to [eps, 1 - eps] first when eps >= 0 (a negative or NaN eps is
// PyTorch's "no eps"); inf at 1. S is the storage type: PyTorch's kernel computes in it, so for
// float16 and bfloat16 1 - eps, 1 - x and the ratio are rounded to it (called as logit<S>(a, eps)).
template <typename S, typename T>
KAEL_HOST_DEVICE inline T logit(T x, T eps) {
  const auto round = [](T v) { return static_cast<T>(static_cast<S>(v)); };
  if (eps >= T(0)) {
    const T hi = round(T(1) - eps);
    x = x < eps ? eps : (x > hi ? hi : x);
  }
  return x == T(1) ? T(INFINITY) : log(round(x / round(T(1) - x)));
}

// 0 below 0, values at 0, 1 above (NaN gives 0, as PyTorch's kernel).
template <typename T>
KAEL_HOST_DEVICE inline T heaviside(T a, T values) {
  if (a == T(0)) return values;
  return T(0) < a ? T(1) : T(0);
}

// Truth value of an element, as the logical ops see it (NaN is true).
template <typename T>
KAEL_HOST_DEVICE inline bool truth(T a) {
  return a != T(0);
}

// SiLU: x * sigmoid(x), written as x / (1 + exp(-x)) as PyTorch computes it.
template <typename T>
KAEL_HOST_DEVICE inline T silu(T a) {
  return a / (T(1) + exp(-a));
}

// GELU and its derivative, as PyTorch computes them: the exact form x * Phi(x) with
// Phi(x) = (1 + erf(x / sqrt(2))) / 2, and the tanh approximation. erf, exp and tanh are
// kael's vectorisable versions for float and double (Note [Vectorised math]).
template <typename T>
KAEL_HOST_DEVICE inline T gelu(T a) {
#ifndef __CUDACC__
  if constexpr (std::is_same_v<T, float>) {
    return vmath::gelu(a);  // one branch, no cancellation for a < 0 (Note [Vectorised math])
  }
#endif
  return a * T(0.5) * (T(1) + erf(a * T(0.70710678118654752440)));
}
template <typename T>
KAEL_HOST_DEVICE inline T gelu_grad(T a) {
  const T cdf = T(0.5) * (T(1) + erf(a * T(0.70710678118654752440)));
  const T pdf = exp(T(-0.5) * a * a) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
  return cdf + a * pdf;
}
template <typename T>
KAEL_HOST_DEVICE inline T gelu_tanh(T a) {
#ifndef __CUDACC__
  if constexpr (std::is_same_v<T, float>) {
    return vmath::gelu_tanh(a);  // x / (1 + exp(-2 y)), the same function (Note [Vectorised math])
  }
#endif
  const T beta = T(0.79788456080286535588);  // sqrt(2 / pi)
  const T kappa = T(0.044715);
  const T inner = beta * (a + kappa * a * a * a);
  return T(0.5) * a * (T(1) + tanh(inner));
}
template <typename T>
KAEL_HOST_DEVICE inline T gelu_tanh_grad(T a) {
  const T beta = T(0.79788456080286535588);
  const T kappa = T(0.044715);
  const T a2 = a * a;
  const T t = tanh(beta * (a + kappa * a2 * a));
  const T left = T(0.5) * a;
  const T right = T(1) + t;
  return T(0.5) * right + left * (T(1) - t * t) * beta * (T(1) + T(3) * kappa * a2);
}

// Softplus log(1 + exp(beta x)) / beta, linear above the threshold (PyTorch's form).
template <typename T>
KAEL_HOST_DEVICE inline T softplus(T a, T beta, T threshold) {
  return a * beta > threshold ? a : std::log1p(std::exp(a * beta)) / beta;
}

// NaN, +inf and -inf replaced; integers have none of them.
template <typename T>
KAEL_HOST_DEVICE inline T nan_to_num(T a, T nan, T posinf, T neginf) {
  if constexpr (kael::is_floating_v<T>) {
    if (a != a) return nan;
    if (std::isinf(a)) return a > T(0) ? posinf : neginf;
  } else {
    (void)nan;
    (void)posinf;
    (void)neginf;
  }
  return a;
}

}  // namespace kael::native::math
