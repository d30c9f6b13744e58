// Tests of kael::convert and kael::overflows (Note [Conversions between dtypes]) for element
// types the Python tests cannot reach yet; expected values are PyTorch's on x86-64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kael/core/convert.h"
#include "kael/core/scalar.h"
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
