#pragma once
// Conversions between element types without undefined behaviour.
//
// Note [Conversions between dtypes]
// convert<To>(from) is the one conversion every copy, cast and scalar argument uses. C++ leaves
// a float -> integer conversion undefined when the truncated value does not fit (NaN, inf,
// 1e30); PyTorch's results there are what x86-64's truncating instructions give, and kael gives
// the same by defined means:
// - float -> int64 / int32: the truncated value when it fits, otherwise the minimum of the type
//   (x86's "integer indefinite" value): NaN, inf, -inf and 1e30 all give INT64_MIN;
// - float -> int8 / int16: through int32, then the low bits (65543.0 -> int16 7, 300.5 ->
//   int8 44);
// - float -> unsigned: through int64, then the low bits (-1.5 -> uint8 255, NaN -> 0);
// - anything -> bool: nonzero is true (NaN is true);
// - integer -> narrower integer: the low bits (two's complement, defined since C++20);
// - integer -> float, float -> float: rounding; a double beyond float's range gives inf
//   (IEEE 754 arithmetic, which GCC and Clang guarantee on every target kael builds for).
// float16/bfloat16 (kael::Half, kael::BFloat16) convert through float (Note [Half types]).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "kael/core/half.h"

namespace kael {

namespace detail {

// x86-64's truncating float -> signed integer conversion (cvttss2si / cvttsd2si).
template <typename I, typename F>
constexpr I truncate_like_x86(F f) {
  static_assert(std::is_signed_v<I> && (sizeof(I) == 4 || sizeof(I) == 8));
  constexpr int bits = std::numeric_limits<I>::digits;  // 31 or 63
  constexpr F hi = static_cast<F>(std::uint64_t{1} << bits);  // 2^bits, exact in every float type
  constexpr F lo = -hi;
  // f fits when trunc(f) is in [lo, hi): f in (lo - 1, hi). lo - 1 is exact only when F has more
  // digits than I; otherwise no F lies strictly between lo - 1 and lo.
  bool fits;
  if constexpr (std::numeric_limits<F>::digits > bits) {
    fits = f > lo - F(1) && f < hi;
  } else {
    fits = f >= lo && f < hi;
  }
  return fits ? static_cast<I>(f) : std::numeric_limits<I>::min();  // NaN fails both tests
}

}  // namespace detail

template <typename To, typename From>
constexpr To convert(From from) {
  if constexpr (std::is_same_v<To, From>) {
    return from;
  } else if constexpr (!std::is_arithmetic_v<From>) {
    return convert<To>(static_cast<float>(from));
  } else if constexpr (!std::is_arithmetic_v<To>) {
    return static_cast<To>(from);  // their constructors round through float (Note [Half types])
  } else if constexpr (std::is_same_v<To, bool>) {
    return from != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if constexpr (std::is_unsigned_v<To>) {
      return static_cast<To>(detail::truncate_like_x86<std::int64_t>(from));
    } else if constexpr (sizeof(To) == 8) {
      return detail::truncate_like_x86<std::int64_t>(from);
    } else {
      return static_cast<To>(detail::truncate_like_x86<std::int32_t>(from));
    }
  } else {
    return static_cast<To>(from);
  }
}

// PyTorch's overflow test for a checked conversion of a number of type From to To (c10's
// `overflows`): integers must lie within To's range (a negative integer may wrap into an
// unsigned type down to -max); floats must lie within [lowest, max] compared as floats (so
// 2^63 passes for int64 and converts as above), NaN only where To has NaN, and inf only where
// To has inf. Conversions to bool never overflow.
template <typename To, typename From>
constexpr bool overflows(From from) {
  using L = std::numeric_limits<To>;
  if constexpr (std::is_same_v<To, bool> || std::is_same_v<From, bool>) {
    return false;
  } else if constexpr (!std::is_arithmetic_v<To>) {
    // float16 / bfloat16: finite values beyond the format's largest (c10's numeric_limits)
    constexpr double max = std::is_same_v<To, Half> ? 65504.0 : 3.3895313892515355e38;
    const double v = static_cast<double>(from);
    return v == v && v - v == 0 && (v < -max || v > max);
  } else if constexpr (std::is_integral_v<From>) {
    if constexpr (std::is_floating_point_v<To>) {
      return false;
    } else if constexpr (std::is_unsigned_v<To> && std::is_signed_v<From>) {
      const auto magnitude = from < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(from) : std::uint64_t{0};
      return (from > 0 && static_cast<std::uint64_t>(from) > L::max()) || magnitude > L::max();
    } else {
      return std::cmp_less(from, L::lowest()) || std::cmp_greater(from, L::max());
    }
  } else {
    if (from != from) return !L::has_quiet_NaN;
    if (L::has_infinity && (from == std::numeric_limits<From>::infinity() ||
                            from == -std::numeric_limits<From>::infinity()))
      return false;
    return from < static_cast<From>(L::lowest()) || from > static_cast<From>(L::max());
  }
}

// Note [Bool bytes]
// A bool element is one byte, true when it is not 0; C++ loading any byte but 0 and 1 as bool is
// undefined (GCC takes the byte as the value: a sum counted 255 for one element, `x == True` was
// false; UBSan reports it). Memory kael writes always holds 0 or 1. Bool data that enters by a
// copy is normalised there (kael.tensor of a NumPy array, safetensors, fresh memory of empty()).
// Memory shared without a copy cannot be (from_numpy of a uint8 array viewed as bool, DLPack,
// frombuffer, Tensor.view(kael.bool) of another dtype): the owner's bytes are not kael's. So
// every kernel reads a bool input as a byte and takes `byte != 0`, as PyTorch's loads do
// (c10::load): the pointwise loop (BoolLoads in kael/native/pointwise.h), copies from bool
// (copy.cpp's ConvertBool), Tensor::item, and every hand-written CPU kernel through its generated
// entry (kael/native/bool_input.h: such a kernel gets a normalised copy of a bool argument only
// when one of its bytes is neither 0 nor 1). test_bool_bytes_sweep.py calls every registry entry
// with such bytes against torch.
// A bool element read as its byte (an argument the kernel also writes, which BoolInput does not
// copy: index_put_'s accumulation reads self).
inline bool load_bool(const bool* p) { return *reinterpret_cast<const unsigned char*>(p) != 0; }

inline void normalize_bool_bytes(void* data, std::size_t n) {
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) p[i] = p[i] != 0 ? 1 : 0;
}

}  // namespace kael
