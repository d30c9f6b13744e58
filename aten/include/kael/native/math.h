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

using std::abs;
using std::cos;
using std::exp;
using std::log;
using std::log1p;
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
