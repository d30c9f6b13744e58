// Tests of the IDX reader (see Note [IDX files]): shapes, byte order, and every malformed input
// rejected with ValueError before anything is allocated.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kael/core/error.h"
#include "kael/data/idx.h"

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes header(std::uint8_t code, std::vector<std::uint32_t> dims) {
  Bytes out = {0, 0, code, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(d >> shift));
  return out;
}

kael::Tensor read(const Bytes& b) { return kael::data::read_idx(b.data(), b.size(), "test.idx"); }

TEST(Idx, Uint8ShapeAndValues) {
  Bytes b = header(0x08, {2, 3});
  for (std::uint8_t v = 0; v < 6; ++v) b.push_back(static_cast<std::uint8_t>(v * 40));
  kael::Tensor t = read(b);
  ASSERT_EQ(t.dtype(), kael::ScalarType::UInt8);
  ASSERT_EQ(t.sizes().size(), 2u);
  EXPECT_EQ(t.sizes()[0], 2);
  EXPECT_EQ(t.sizes()[1], 3);
  const auto* data = static_cast<const std::uint8_t*>(t.data_ptr());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(data[i], i * 40);
}

TEST(Idx, Int32IsBigEndian) {
  Bytes b = header(0x0C, {2});
  for (std::uint8_t byte : {0x00, 0x00, 0x01, 0x02, 0xFF, 0xFF, 0xFF, 0xFE}) b.push_back(byte);
  kael::Tensor t = read(b);
  ASSERT_EQ(t.dtype(), kael::ScalarType::Int32);
  const auto* data = static_cast<const std::int32_t*>(t.data_ptr());
  EXPECT_EQ(data[0], 258);
  EXPECT_EQ(data[1], -2);
}

TEST(Idx, MalformedInputRaisesValueError) {
  const Bytes good = [] {
    Bytes b = header(0x08, {4});
    b.insert(b.end(), {1, 2, 3, 4});
    return b;
  }();
  EXPECT_THROW(read(Bytes{0, 0}), kael::ValueError);                              // no magic
  EXPECT_THROW(read(Bytes{1, 0, 8, 1, 0, 0, 0, 0}), kael::ValueError);            // wrong magic
  EXPECT_THROW(read(Bytes{0, 0, 7, 1, 0, 0, 0, 0}), kael::ValueError);            // unknown type
  EXPECT_THROW(read(Bytes(good.begin(), good.begin() + 6)), kael::ValueError);    // short header
  EXPECT_THROW(read(Bytes(good.begin(), good.end() - 1)), kael::ValueError);      // short data
  Bytes longer = good;
  longer.push_back(0);
  EXPECT_THROW(read(longer), kael::ValueError);                                   // trailing bytes
  EXPECT_THROW(read(header(0x0E, {0xFFFFFFFF, 0xFFFFFFFF, 2})), kael::ValueError);  // overflow
  EXPECT_NO_THROW(read(good));
}

}  // namespace
