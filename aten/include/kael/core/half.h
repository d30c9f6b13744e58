#pragma once
// The 16-bit floating-point storage types float16 (IEEE binary16) and bfloat16, and the
// traits kernels use to treat them as floating point.
//
// Note [Half types]
// Both are storage types: 16 bits in memory, converted to float to compute and rounded once
// when stored. Conversion from float rounds to nearest, ties to even; conversion to float is
// exact. The conversions are bit-level integer code (no floating-point tricks, so they do not
// depend on the FPU's rounding mode or denormal flags) and give PyTorch's results on the CPU
// bit for bit, NaNs included: a float16 NaN keeps the sign and the top payload bits and is
// made quiet (F16C's rule); a bfloat16 NaN made from a float is 0xFFFF (what PyTorch's
// vectorised conversion stores), one made from a double 0x7FC0 (its scalar conversion).
// Numbers of other types convert through float, as c10's do (double -> float -> half).

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kael {

namespace detail {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> binary16, round to nearest even.
inline std::uint16_t fp16_from_float(float f) {
  const std::uint32_t w = float_bits(f);
  const std::uint32_t sign = (w >> 16) & 0x8000u;
  const std::uint32_t a = w & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
  if (a >= 0x38800000u) {  // a normal half, or overflow to inf (f's exponent >= -14)
    const std::uint32_t m = a - 0x38000000u;  // rebias the exponent from 127 to 15
    const std::uint32_t r = (m + 0xFFFu + ((m >> 13) & 1u)) >> 13;
    return static_cast<std::uint16_t>(sign | (r >= 0x7C00u ? 0x7C00u : r));
  }
  if (a <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // at most 2^-25: rounds to zero
  // A subnormal half: units of 2^-24.
  const std::uint32_t e = a >> 23;
  const std::uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14..24
  std::uint32_t r = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
}

// binary16 -> float, exact (a signalling NaN becomes quiet, as the hardware conversion does).
inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return float_from_bits(sign | 0x7F800000u | (mant ? 0x400000u | (mant << 13) : 0u));
  if (exp != 0) return float_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return float_from_bits(sign);
  // Subnormal: normalise.
  std::uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return float_from_bits(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

// float -> bfloat16, round to nearest even.
inline std::uint16_t bf16_from_float(float f) {
  const std::uint32_t w = float_bits(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return 0xFFFFu;
  return static_cast<std::uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
}

inline float bf16_to_float(std::uint16_t b) { return float_from_bits(static_cast<std::uint32_t>(b) << 16); }

}  // namespace detail

struct Half {
  std::uint16_t x = 0;

  Half() = default;
  explicit Half(float f) : x(detail::fp16_from_float(f)) {}
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, float>, int> = 0>
  explicit Half(T v) : Half(static_cast<float>(v)) {}
  static Half from_bits(std::uint16_t bits) {
    Half h;
    h.x = bits;
    return h;
  }
  operator float() const { return detail::fp16_to_float(x); }  // NOLINT: implicit, as c10::Half
};

struct BFloat16 {
  std::uint16_t x = 0;

  BFloat16() = default;
  explicit BFloat16(float f) : x(detail::bf16_from_float(f)) {}
  explicit BFloat16(double d) : x(d != d ? std::uint16_t{0x7FC0u} : detail::bf16_from_float(static_cast<float>(d))) {}
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_floating_point_v<T>, int> = 0>
  explicit BFloat16(T v) : BFloat16(static_cast<float>(v)) {}
  static BFloat16 from_bits(std::uint16_t bits) {
    BFloat16 b;
    b.x = bits;
    return b;
  }
  operator float() const { return detail::bf16_to_float(x); }  // NOLINT: implicit, as c10::BFloat16
};

// kael's floating-point trait: true for float, double and the half types.
template <typename T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || std::is_same_v<T, Half> ||
                                      std::is_same_v<T, BFloat16>;

template <typename T>
inline constexpr bool is_reduced_floating_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The type a kernel computes in for storage type T: float for the half types, T otherwise.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<Half> {
  using type = float;
};
template <>
struct OpMath<BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

}  // namespace kael
