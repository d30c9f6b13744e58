// Tests of kael::convert and kael::overflows (Note [Conversions between dtypes]) for element
// types the Python tests cannot reach yet; expected values are PyTorch's on x86-64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kael/core/convert.h"
#include "kael/core/scalar.h"
#include "kael/native/math.h"
#include "test_util.h"

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Overflows, IntegersIntoUnsignedMayWrapDownToMinusMax) {
  // torch.full((1,), v, dtype=torch.uint8): -1 -> 255, -255 -> 1, -256 and 256 raise
  EXPECT_FALSE(kael::overflows<std::uint8_t>(std::int64_t{-1}));
  EXPECT_FALSE(kael::overflows<std::uint8_t>(std::int64_t{-255}));
  EXPECT_TRUE(kael::overflows<std::uint8_t>(std::int64_t{-256}));
  EXPECT_TRUE(kael::overflows<std::uint8_t>(std::int64_t{256}));
  EXPECT_FALSE(kael::overflows<std::uint8_t>(std::int64_t{255}));
  EXPECT_EQ(kael::convert<std::uint8_t>(std::int64_t{-200}), 56);
}

TEST(Overflows, FloatsAreComparedWithTheRangeAsFloats) {
  EXPECT_TRUE(kael::overflows<std::uint8_t>(-1.5));
  EXPECT_TRUE(kael::overflows<std::uint8_t>(255.9));
  EXPECT_FALSE(kael::overflows<std::uint8_t>(2.5));
  EXPECT_TRUE(kael::overflows<std::int32_t>(2147483647.5));
  EXPECT_TRUE(kael::overflows<std::int32_t>(-2147483648.9));
  EXPECT_FALSE(kael::overflows<std::int64_t>(9223372036854775808.0));  // 2^63 == (double)INT64_MAX
  EXPECT_TRUE(kael::overflows<std::int64_t>(kNaN));
  EXPECT_TRUE(kael::overflows<std::int64_t>(kInf));
  EXPECT_FALSE(kael::overflows<float>(kNaN));
  EXPECT_FALSE(kael::overflows<float>(-kInf));
  EXPECT_TRUE(kael::overflows<float>(3.5e38));
  EXPECT_FALSE(kael::overflows<double>(1e300));
  EXPECT_FALSE(kael::overflows<bool>(kNaN));
  EXPECT_TRUE(kael::overflows<std::int32_t>(std::int64_t{1} << 40));
  EXPECT_FALSE(kael::overflows<float>(std::numeric_limits<std::int64_t>::max()));
}

TEST(Overflows, CheckedScalarConversionNamesOpValueAndDtype) {
  const std::string msg = kael::testing::error_of([] { (void)kael::Scalar(kNaN).checked_to<std::int64_t>("full"); });
  EXPECT_NE(msg.find("full: value nan cannot be converted to type int64 without overflow"), std::string::npos) << msg;
  EXPECT_EQ(kael::Scalar(2.7).checked_to<std::int64_t>("fill_"), 2);
  EXPECT_EQ(kael::Scalar(9223372036854775808.0).checked_to<std::int64_t>("fill_"),
            std::numeric_limits<std::int64_t>::min());
  EXPECT_TRUE(kael::Scalar(kNaN).checked_to<bool>("fill_"));
}

}  // namespace

namespace {

// Constant evaluation rejects undefined behaviour, so these compile only if the conversions and
// the wrapping arithmetic are defined for the values that used to overflow.
using kael::native::math::Wrapping;
using W = Wrapping<std::int64_t>;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

static_assert(static_cast<std::int64_t>(W(kMax) + 1) == kMin);
static_assert(static_cast<std::int64_t>(W(kMin) - 1) == kMax);
static_assert(static_cast<std::int64_t>(W(std::int64_t{1} << 62) * 4) == 0);
static_assert(static_cast<std::int64_t>(W(3037000500) * W(3037000500)) == -9223372036709301616);
static_assert(static_cast<std::int64_t>(-W(kMin)) == kMin);
static_assert(static_cast<std::int64_t>(abs(W(kMin))) == kMin);
static_assert(static_cast<std::int64_t>(abs(W(-5))) == 5);
static_assert(W(kMin) < W(kMax) && W(-1) < 0 && W(3) == 3);
static_assert(static_cast<std::int32_t>(Wrapping<std::int32_t>(2147483647) + 1) == -2147483647 - 1);
static_assert(static_cast<std::uint8_t>(Wrapping<std::uint8_t>(200) + Wrapping<std::uint8_t>(100)) == 44);
static_assert(static_cast<std::uint16_t>(Wrapping<std::uint16_t>(65535) * Wrapping<std::uint16_t>(65535)) == 1);

static_assert(kael::convert<std::int64_t>(kNaN) == kMin);
static_assert(kael::convert<std::int64_t>(kInf) == kMin);
static_assert(kael::convert<std::int64_t>(-kInf) == kMin);
static_assert(kael::convert<std::int64_t>(1e30) == kMin);
static_assert(kael::convert<std::int64_t>(9223372036854775808.0) == kMin);
static_assert(kael::convert<std::int64_t>(-9223372036854775808.0) == kMin);
static_assert(kael::convert<std::int64_t>(-2.9) == -2);
static_assert(kael::convert<std::int64_t>(static_cast<float>(kNaN)) == kMin);
static_assert(kael::convert<std::int32_t>(2147483648.0) == -2147483647 - 1);
static_assert(kael::convert<std::int32_t>(-2147483648.9) == -2147483647 - 1);
static_assert(kael::convert<std::int32_t>(-2147483649.0) == -2147483647 - 1);
static_assert(kael::convert<std::int32_t>(2147483647.9) == 2147483647);
static_assert(kael::convert<std::int16_t>(65543.0) == 7);
static_assert(kael::convert<std::int8_t>(300.5) == 44);
static_assert(kael::convert<std::int8_t>(-2147483649.0) == 0);
static_assert(kael::convert<std::uint8_t>(-1.5) == 255);
static_assert(kael::convert<std::uint8_t>(-2147483649.0) == 255);
static_assert(kael::convert<std::uint8_t>(kNaN) == 0);
static_assert(kael::convert<bool>(kNaN) && !kael::convert<bool>(-0.0) && kael::convert<bool>(std::int64_t{2}));
static_assert(kael::convert<std::int8_t>(std::int64_t{300}) == 44);
static_assert(kael::convert<float>(std::int64_t{kMax}) == 9223372036854775808.0f);

TEST(Convert, MatchesPyTorchOnX86AtRunTime) {
  // the same conversions through values the compiler cannot see
  volatile double values[] = {kNaN, kInf, -kInf, 1e30, -1e30, 9223372036854775808.0, -2.5, 300.5};
  const std::int64_t expected[] = {kMin, kMin, kMin, kMin, kMin, kMin, -2, 300};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(kael::convert<std::int64_t>(static_cast<double>(values[i])), expected[i]) << i;
}

}  // namespace
