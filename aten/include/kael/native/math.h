#pragma once
// Scalar functions that pointwise formulas in native_functions.yaml may call. Each is
// defined for every compute dtype its ops allow; they inline into the generated loops.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kael/core/half.h"

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
using std::asin;
using std::atan;
using std::cos;
using std::cosh;
using std::erf;
using std::exp;
using std::exp2;
using std::expm1;
using std::log;
using std::log10;
using std::log1p;
using std::log2;
using std::sinh;
using std::tan;
using std::sin;
using std::sqrt;
using std::tanh;

template <typename T>
KAEL_HOST_DEVICE inline T rsqrt(T a) {
  return T(1) / std::sqrt(a);
}

template <typename T>
KAEL_HOST_DEVICE inline T sigmoid(T a) {
  return T(1) / (T(1) + std::exp(-a));
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

// The fractional part, with the sign of a: a - trunc(a) (inf gives NaN, as in PyTorch).
template <typename T>
KAEL_HOST_DEVICE inline T frac(T a) {
  return a - std::trunc(a);
}

}  // namespace kael::native::math
