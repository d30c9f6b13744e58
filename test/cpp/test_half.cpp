// Tests of kael's float16 and bfloat16 types (see Note [Half types]): the bit-level conversions
// against the IEEE definitions, and the traits kernels use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kael/core/half.h"
#include "kael/core/scalar.h"
#include "kael/core/scalar_type.h"
#include "kael/native/math.h"

namespace {

using kael::BFloat16;
using kael::Half;

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The value of a binary16 pattern by its definition (sign, exponent, significand).
double fp16_value(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

TEST(Half, EveryPatternConvertsToFloatExactly) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Half::from_bits(static_cast<std::uint16_t>(h));
    const double expected = fp16_value(static_cast<std::uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
      ASSERT_EQ((bits(f) >> 13) & 0x3FF, (h & 0x3FF) | 0x200) << std::hex << h;  // payload kept, made quiet
    } else {
      ASSERT_EQ(static_cast<double>(f), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    }
    // float -> half gives the pattern back (NaNs come back quiet)
    const std::uint16_t back = Half(f).x;
    ASSERT_EQ(back, std::isnan(expected) ? (h | 0x200) : h) << std::hex << h;
  }
}

// Round to nearest, ties to even, by exhaustive comparison with the neighbours in double.
TEST(Half, FloatToHalfRoundsToNearestEven) {
  std::uint32_t state = 12345;
  for (int i = 0; i < 2000000; ++i) {
    state = state * 1664525u + 1013904223u;
    const std::uint32_t u = (i & 1) ? state : ((state & 0x8FFFFFFFu) | 0x30000000u);  // favour the half range
    const float f = from_bits(u);
    if (std::isnan(f)) continue;
    const std::uint16_t h = Half(f).x;
    const double got = fp16_value(h), x = f;
    if (std::isinf(got)) {
      ASSERT_GE(std::fabs(x), 65520.0) << f;
      continue;
    }
    // No representable half is closer; on a tie the even one is chosen.
    const std::uint16_t mag = h & 0x7FFF;
    for (int d : {-1, 1}) {
      if ((d < 0 && mag == 0) || (d > 0 && mag >= 0x7BFF)) continue;
      const std::uint16_t n = static_cast<std::uint16_t>((h & 0x8000) | (mag + d));
      const double other = fp16_value(n);
      ASSERT_LE(std::fabs(got - x), std::fabs(other - x)) << f;
      if (std::fabs(got - x) == std::fabs(other - x)) {
        ASSERT_EQ(h & 1, 0) << f;
      }
    }
  }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(Half(65504.0f).x, 0x7BFF);
  EXPECT_EQ(Half(65519.99f).x, 0x7BFF);
  EXPECT_EQ(Half(65520.0f).x, 0x7C00);  // the tie rounds to even: infinity
  EXPECT_EQ(Half(1e10f).x, 0x7C00);
  EXPECT_EQ(Half(-1e10f).x, 0xFC00);
  EXPECT_EQ(Half(std::numeric_limits<float>::infinity()).x, 0x7C00);
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)).x, 0x0001);         // smallest subnormal
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)).x, 0x0000);         // tie to even: zero
  EXPECT_EQ(Half(std::ldexp(1.5f, -25)).x, 0x0001);
  EXPECT_EQ(Half(std::ldexp(3.0f, -25)).x, 0x0002);         // 1.5 units: tie to even 2
  EXPECT_EQ(Half(-0.0f).x, 0x8000);
  EXPECT_EQ(Half(from_bits(0x7FC00000u)).x, 0x7E00);
  EXPECT_EQ(Half(from_bits(0xFFC12345u)).x, 0xFE09);        // PyTorch keeps the top payload bits
  EXPECT_EQ(Half(from_bits(0x7F800001u)).x, 0x7E00);        // a signalling NaN becomes quiet
  EXPECT_EQ(Half(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)).x, 0x3C00);  // double -> float -> half
  EXPECT_EQ(Half(std::int64_t{2049}).x, Half(2048.0f).x);
  EXPECT_EQ(Half(true).x, 0x3C00);
}

TEST(BFloat16, ConversionsAndRounding) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float f = BFloat16::from_bits(static_cast<std::uint16_t>(b));
    ASSERT_EQ(bits(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(BFloat16(f).x, b);
    }
  }
  EXPECT_EQ(BFloat16(from_bits(0x3F808000u)).x, 0x3F80);  // tie, even below
  EXPECT_EQ(BFloat16(from_bits(0x3F818000u)).x, 0x3F82);  // tie, even above
  EXPECT_EQ(BFloat16(from_bits(0x3F808001u)).x, 0x3F81);
  EXPECT_EQ(BFloat16(from_bits(0x7F7FFFFFu)).x, 0x7F80);  // largest float rounds to infinity
  EXPECT_EQ(BFloat16(std::nanf("")).x, 0xFFFF);            // PyTorch's vectorised float conversion
  EXPECT_EQ(BFloat16(std::nan("")).x, 0x7FC0);             // its scalar double conversion
  EXPECT_EQ(BFloat16(4950.0f).x, BFloat16(4960.0f).x);
}

TEST(HalfTraits, FloatingAndOpMath) {
  static_assert(kael::is_floating_v<Half> && kael::is_floating_v<BFloat16> && kael::is_floating_v<double>);
  static_assert(!kael::is_floating_v<std::int32_t> && !kael::is_floating_v<bool>);
  static_assert(std::is_same_v<kael::opmath_t<Half>, float> && std::is_same_v<kael::opmath_t<BFloat16>, float>);
  static_assert(std::is_same_v<kael::opmath_t<std::int8_t>, std::int8_t>);
  EXPECT_EQ(kael::ScalarTypeOf<Half>::value, kael::ScalarType::Float16);
  EXPECT_EQ(kael::ScalarTypeOf<BFloat16>::value, kael::ScalarType::BFloat16);
  EXPECT_EQ(kael::itemsize(kael::ScalarType::Float16), 2);
  EXPECT_EQ(kael::itemsize(kael::ScalarType::BFloat16), 2);
  EXPECT_EQ(kael::Scalar(0.1).to<Half>().x, Half(0.1f).x);
}

TEST(HalfTraits, MathTemplatesTreatHalfAsFloating) {
  namespace m = kael::native::math;
  const Half nan = Half::from_bits(0x7E00), one(1.0f), two(2.0f);
  EXPECT_TRUE(std::isnan(static_cast<float>(m::maximum(nan, one))));
  EXPECT_TRUE(std::isnan(static_cast<float>(m::minimum(one, nan))));
  EXPECT_EQ(static_cast<float>(m::maximum(one, two)), 2.0f);
  // integer pow in every width wraps without overflow in int arithmetic
  EXPECT_EQ(m::pow<std::int16_t>(300, 3), static_cast<std::int16_t>(27000000 & 0xFFFF));
  EXPECT_EQ(m::pow<std::uint8_t>(3, 5), 243);
  EXPECT_EQ(m::pow<std::uint8_t>(250, 2), static_cast<std::uint8_t>(62500 & 0xFF));
  EXPECT_EQ(m::pow<std::int8_t>(-2, 7), -128);
  EXPECT_EQ(m::pow<std::int32_t>(-1, -3), -1);
  EXPECT_EQ(m::pow<std::int32_t>(2, -3), 0);
}

}  // namespace
