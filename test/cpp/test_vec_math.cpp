// The SIMD forms of kael's vectorised math (exp, log1p, gelu, gelu_tanh, sigmoid, silu) compute the bits of their
// scalar forms, for every float32 (Note [SIMD forms] in kael/native/vec_math.h): the generated kernels of ops marked
// `simd: true` run one form or the other depending on the build, so a difference would make
// results depend on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kael/native/math.h"
#include "kael/native/vec_math.h"

namespace {

namespace vmath = kael::native::vmath;

#if defined(KAEL_VMATH_SIMD)

bool same(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// The scalar form one element at a time, out of line (no vectorisation across elements).
[[gnu::noinline]] float scalar_exp(float x) { return vmath::exp(x); }
[[gnu::noinline]] float scalar_gelu(float x) { return vmath::gelu(x); }
[[gnu::noinline]] float scalar_log1p(float x) { return vmath::log1p(x); }
[[gnu::noinline]] float scalar_sigmoid(float x) { return kael::native::math::sigmoid(x); }
[[gnu::noinline]] float scalar_silu(float x) { return kael::native::math::silu(x); }
[[gnu::noinline]] float scalar_gelu_tanh(float x) { return kael::native::math::gelu_tanh(x); }

// Runs every float32 through the scalar form (in a loop the compiler vectorises, as in the
// kernels, and one element at a time for every 97th, which replaces the loop's result where the
// two differ) and through the SIMD form. NaNs compare by bits too: both forms pass the input's.
template <typename Scalar, typename Loop, typename Simd>
void expect_same_bits_for_every_float(const char* name, Scalar one, Loop loop, Simd simd) {
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<float> x(kChunk), a(kChunk), b(kChunk);
  std::int64_t differences = 0;
  for (std::uint64_t base = 0; base < (std::uint64_t(1) << 32); base += kChunk) {
    for (std::size_t i = 0; i < kChunk; ++i) x[i] = std::bit_cast<float>(static_cast<std::uint32_t>(base + i));
    for (std::size_t i = 0; i < kChunk; ++i) a[i] = loop(x[i]);
    for (std::size_t i = 0; i < kChunk; i += vmath::simd::kLanes)
      _mm512_storeu_ps(b.data() + i, simd(_mm512_loadu_ps(x.data() + i)));
    for (std::size_t i = 0; i < kChunk; i += 97) a[i] = same(one(x[i]), a[i]) ? a[i] : one(x[i]);
    if (std::memcmp(a.data(), b.data(), kChunk * sizeof(float)) == 0) continue;  // (the usual case)
    for (std::size_t i = 0; i < kChunk; ++i) {
      if (!same(a[i], b[i]) && ++differences <= 5)
        ADD_FAILURE() << name << "(" << std::hexfloat << x[i] << "): scalar " << a[i] << ", SIMD " << b[i];
    }
  }
  EXPECT_EQ(differences, 0) << name;
}

TEST(SimdForms, ExpGivesTheScalarBitsForEveryFloat) {
  expect_same_bits_for_every_float(
      "exp", scalar_exp, [](float v) { return vmath::exp(v); }, [](__m512 v) { return vmath::simd::exp(v); });
}

TEST(SimdForms, Log1pGivesTheScalarBitsForEveryFloat) {
  expect_same_bits_for_every_float(
      "log1p", scalar_log1p, [](float v) { return vmath::log1p(v); }, [](__m512 v) { return vmath::simd::log1p(v); });
}

TEST(SimdForms, GeluGivesTheScalarBitsForEveryFloat) {
  expect_same_bits_for_every_float(
      "gelu", scalar_gelu, [](float v) { return vmath::gelu(v); }, [](__m512 v) { return vmath::simd::gelu(v); });
}

TEST(SimdForms, SigmoidGivesTheScalarBitsForEveryFloat) {
  expect_same_bits_for_every_float(
      "sigmoid", scalar_sigmoid, [](float v) { return kael::native::math::sigmoid(v); },
      [](__m512 v) { return vmath::simd::sigmoid(v); });
}

TEST(SimdForms, SiluGivesTheScalarBitsForEveryFloat) {
  expect_same_bits_for_every_float(
      "silu", scalar_silu, [](float v) { return kael::native::math::silu(v); },
      [](__m512 v) { return vmath::simd::silu(v); });
}

TEST(SimdForms, GeluTanhGivesTheScalarBitsForEveryFloat) {
  expect_same_bits_for_every_float(
      "gelu_tanh", scalar_gelu_tanh, [](float v) { return kael::native::math::gelu_tanh(v); },
      [](__m512 v) { return vmath::simd::gelu_tanh(v); });
}

// The piecewise gelu of AVX-512 builds keeps the bounds Note [Vectorised math] gives for it
// (1.59 ulp for x >= -1, 10.54 below, measured on every float32), here on every 31st float32
// above the cut 30.5 / 5.375 against x erfc(-x / sqrt(2)) / 2 in double; below the cut -0.0.
TEST(SimdForms, GeluIsWithinThePiecewiseBounds) {
  const double cut = 30.5 / static_cast<double>(vmath::detail::kGeluPieces);
  double worst_high = 0, worst_low = 0;
  std::int64_t zeros = 0, not_zero = 0;
  float first_not_zero = 0;
  std::vector<float> x(16), y(16);
  for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); u += 31 * 16) {
    for (int l = 0; l < 16; ++l) x[l] = std::bit_cast<float>(static_cast<std::uint32_t>(u + 31 * l));
    _mm512_storeu_ps(y.data(), vmath::simd::gelu(_mm512_loadu_ps(x.data())));
    for (int l = 0; l < 16; ++l) {
      const double xd = x[l];
      if (xd < -cut && xd > -std::numeric_limits<double>::infinity()) {
        if (!(y[l] == 0 && std::signbit(y[l])) && not_zero++ == 0) first_not_zero = x[l];
        ++zeros;
      }
      if (!(xd >= -cut && xd < 1e30)) continue;  // NaN, the x * 0 range, and where erfc's product overflows
      const double ref = xd * 0.5 * std::erfc(-xd / std::sqrt(2.0));
      int e = 0;
      std::frexp(ref, &e);
      const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
      const double err = ref == 0 ? (y[l] == 0 ? 0 : 1e9) : std::fabs(y[l] - ref) / ulp;
      (xd >= -1 ? worst_high : worst_low) = std::max(xd >= -1 ? worst_high : worst_low, err);
    }
  }
  EXPECT_GT(zeros, 1000000);
  EXPECT_EQ(not_zero, 0) << "gelu(" << first_not_zero << ") is not -0.0";
  EXPECT_LE(worst_high, 1.59);
  EXPECT_LE(worst_low, 10.54);
}

#else

TEST(SimdForms, NotInThisBuild) {
  GTEST_SKIP() << "the build does not target AVX-512: the SIMD forms do not exist, every kernel runs the scalar form";
}

#endif

}  // namespace
