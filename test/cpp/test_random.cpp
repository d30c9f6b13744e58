// Philox4x32-10 against the Random123 known-answer vectors, and the stream layout of
// Note [Random streams] (kael/runtime/generator.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "kael/runtime/generator.h"
#include "kael/runtime/philox.h"

namespace {

using kael::random::Block;

TEST(Philox, Random123KnownAnswers) {
  // Random123's kat_vectors, the three "philox4x32 10" lines: counter, key, result.
  EXPECT_EQ(kael::random::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(kael::random::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(kael::random::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, BlockIsCounterIndexThenOffsetKeyedBySeed) {
  const kael::PhiloxStream s{0x0000000100000002ull, 0x0000000300000004ull};
  EXPECT_EQ(kael::random::block(s, 0x0000000500000006ull),
            kael::random::philox4x32_10({6, 5, 4, 3}, {2, 1}));
}

TEST(Philox, UniformConversionsStayBelowOne) {
  EXPECT_EQ(kael::random::uniform_float(0), 0.0f);
  EXPECT_LT(kael::random::uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(kael::random::uniform_float(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_LT(kael::random::uniform_double(~std::uint64_t{0}), 1.0);
  EXPECT_EQ(kael::random::uniform_double(~std::uint64_t{0}), 1.0 - 0x1p-53);
  EXPECT_EQ(kael::random::below(~std::uint64_t{0}, 10), 9u);
  EXPECT_EQ(kael::random::below(0, 10), 0u);
  EXPECT_EQ(kael::random::below(12345, 0), 12345u);  // range 0 stands for 2^64
}

TEST(Generator, EachCallTakesTheNextOffset) {
  kael::Generator g(7);
  EXPECT_EQ(g.initial_seed(), 7u);
  const kael::PhiloxStream a = g.next_stream(), b = g.next_stream();
  EXPECT_EQ(a.seed, 7u);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(b.offset, 1u);
  g.manual_seed(7);
  EXPECT_EQ(g.next_stream().offset, 0u);
  g.set_state({9, 42});
  EXPECT_EQ(g.next_stream().offset, 42u);
  EXPECT_EQ(g.initial_seed(), 9u);
  // copies share the state, as Python handles do
  kael::Generator h = g;
  h.next_stream();
  EXPECT_EQ(g.get_state().offset, 44u);
  EXPECT_EQ(kael::Generator().initial_seed(), kael::kDefaultSeed);
}

}  // namespace
