// Tests of the strided loop engine (see Note [Loop geometry]): dim coalescing, broadcast
// strides, memory-order reordering and the loop driver.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "kael/native/loops.h"
#include "kael/ops.h"

namespace {

using kael::native::make_geometry;
using kael::native::OperandView;
using kael::Tensor;
using I64 = std::vector<std::int64_t>;

I64 vec(kael::IntArrayRef r) { return I64(r.begin(), r.end()); }

// Shapes and strides must outlive the views (OperandView holds spans).
struct Layout {
  I64 sizes, strides;
  OperandView view(char* data, int itemsize) const { return {data, sizes, strides, itemsize}; }
};

char* fake(std::uintptr_t a) { return reinterpret_cast<char*>(a); }

TEST(Geometry, ContiguousOperandsCoalesceToOneDim) {
  const Layout l{{2, 3, 4}, {12, 4, 1}};
  const std::array<OperandView, 2> ops{l.view(fake(0x1000), 4), l.view(fake(0x2000), 4)};
  const auto g = make_geometry<2>(l.sizes, ops);
  EXPECT_EQ(g.ndim(), 1);
  EXPECT_EQ(vec(g.shape), (I64{24}));
  EXPECT_EQ(vec(g.strides[0]), (I64{4}));  // bytes
  EXPECT_EQ(vec(g.strides[1]), (I64{4}));
  EXPECT_EQ(g.numel, 24);
  EXPECT_EQ(g.data[0], fake(0x1000));
  EXPECT_EQ(g.data[1], fake(0x2000));
}

TEST(Geometry, MixedItemsizesStillCoalesce) {
  const Layout l{{5, 6}, {6, 1}};
  const std::array<OperandView, 3> ops{l.view(fake(64), 1), l.view(fake(128), 8), l.view(fake(256), 4)};
  const auto g = make_geometry<3>(l.sizes, ops);
  EXPECT_EQ(vec(g.shape), (I64{30}));
  EXPECT_EQ(vec(g.strides[0]), (I64{1}));
  EXPECT_EQ(vec(g.strides[1]), (I64{8}));
  EXPECT_EQ(vec(g.strides[2]), (I64{4}));
}

TEST(Geometry, BroadcastDimGetsStrideZero) {
  const Layout out{{2, 3}, {3, 1}};
  const Layout row{{3}, {1}};  // broadcast along dim 0
  const std::array<OperandView, 2> ops{out.view(fake(0x100), 4), row.view(fake(0x200), 4)};
  const auto g = make_geometry<2>(out.sizes, ops);
  ASSERT_EQ(g.ndim(), 2);
  EXPECT_EQ(vec(g.shape), (I64{3, 2}));  // fastest dim first
  EXPECT_EQ(vec(g.strides[0]), (I64{4, 12}));
  EXPECT_EQ(vec(g.strides[1]), (I64{4, 0}));
  EXPECT_EQ(g.numel, 6);
}

TEST(Geometry, SizeOneInputDimIsBroadcast) {
  const Layout out{{2, 3}, {3, 1}};
  const Layout col{{2, 1}, {1, 1}};  // broadcast along dim 1
  const std::array<OperandView, 2> ops{out.view(fake(0x100), 8), col.view(fake(0x200), 8)};
  const auto g = make_geometry<2>(out.sizes, ops);
  ASSERT_EQ(g.ndim(), 2);
  EXPECT_EQ(vec(g.shape), (I64{3, 2}));
  EXPECT_EQ(vec(g.strides[0]), (I64{8, 24}));
  EXPECT_EQ(vec(g.strides[1]), (I64{0, 8}));
}

TEST(Geometry, ScalarOperandBroadcastsEverywhereAndStillCoalesces) {
  const Layout out{{4, 5}, {5, 1}};
  const Layout scalar{{}, {}};
  const std::array<OperandView, 2> ops{out.view(fake(0x100), 4), scalar.view(fake(0x200), 4)};
  const auto g = make_geometry<2>(out.sizes, ops);
  EXPECT_EQ(vec(g.shape), (I64{20}));
  EXPECT_EQ(vec(g.strides[0]), (I64{4}));
  EXPECT_EQ(vec(g.strides[1]), (I64{0}));
}

TEST(Geometry, SizeOneDimsAreDropped) {
  const Layout l{{1, 3, 1, 2}, {6, 2, 2, 1}};
  const std::array<OperandView, 1> ops{l.view(fake(0x100), 4)};
  const auto g = make_geometry<1>(l.sizes, ops);
  EXPECT_EQ(vec(g.shape), (I64{6}));
  EXPECT_EQ(vec(g.strides[0]), (I64{4}));
  EXPECT_EQ(g.numel, 6);
}

TEST(Geometry, ZeroDimAndEmpty) {
  const Layout s{{}, {}};
  const std::array<OperandView, 1> ops{s.view(fake(0x100), 4)};
  const auto g = make_geometry<1>(s.sizes, ops);
  EXPECT_EQ(vec(g.shape), (I64{1}));
  EXPECT_EQ(vec(g.strides[0]), (I64{0}));
  EXPECT_EQ(g.numel, 1);

  const Layout e{{3, 0, 2}, {2, 2, 1}};
  const std::array<OperandView, 1> eops{e.view(fake(0x100), 4)};
  const auto ge = make_geometry<1>(e.sizes, eops);
  EXPECT_EQ(ge.numel, 0);
  EXPECT_EQ(ge.shape[0], 0);
}

TEST(Geometry, TransposedOperandIsWalkedInMemoryOrder) {
  // A transposed [2, 3] tensor: sizes [3, 2], element strides [1, 3].
  const Layout t{{3, 2}, {1, 3}};
  const std::array<OperandView, 1> ops{t.view(fake(0x100), 4)};
  const auto g = make_geometry<1>(t.sizes, ops);
  EXPECT_EQ(vec(g.shape), (I64{6}));  // reordered, then contiguous in memory
  EXPECT_EQ(vec(g.strides[0]), (I64{4}));

  const auto natural = make_geometry<1>(t.sizes, ops, /*reorder=*/false);
  EXPECT_EQ(vec(natural.shape), (I64{2, 3}));
  EXPECT_EQ(vec(natural.strides[0]), (I64{12, 4}));
}

TEST(Geometry, OutputOrderDecidesFirst) {
  const Layout out{{3, 2}, {2, 1}};
  const Layout in{{3, 2}, {1, 3}};  // transposed input
  const std::array<OperandView, 2> ops{out.view(fake(0x100), 4), in.view(fake(0x200), 4)};
  const auto g = make_geometry<2>(out.sizes, ops);
  ASSERT_EQ(g.ndim(), 2);
  EXPECT_EQ(vec(g.shape), (I64{2, 3}));
  EXPECT_EQ(vec(g.strides[0]), (I64{4, 8}));
  EXPECT_EQ(vec(g.strides[1]), (I64{12, 4}));
  EXPECT_EQ(g.numel, 6);
}

TEST(Geometry, PartialCoalescing) {
  // A [4, 3, 5] slice of a [4, 3, 8] tensor: the two outer dims merge, the inner one cannot.
  const Layout l{{4, 3, 5}, {24, 8, 1}};
  const std::array<OperandView, 1> ops{l.view(fake(0x100), 4)};
  const auto g = make_geometry<1>(l.sizes, ops);
  EXPECT_EQ(vec(g.shape), (I64{5, 12}));
  EXPECT_EQ(vec(g.strides[0]), (I64{4, 32}));
}

TEST(OutputStrides, FollowInputLayout) {
  const Layout c{{2, 3}, {3, 1}};
  const OperandView cv = c.view(fake(0x100), 4);
  EXPECT_EQ(vec(kael::native::output_strides_like(c.sizes, &cv, 1)), (I64{3, 1}));
  const Layout t{{3, 2}, {1, 3}};
  const OperandView tv = t.view(fake(0x100), 4);
  EXPECT_EQ(vec(kael::native::output_strides_like(t.sizes, &tv, 1)), (I64{1, 3}));
}

TEST(RunLoop, VisitsEveryElementOnce) {
  for (bool parallel : {false, true}) {
    for (const I64& shape : {I64{7}, I64{3, 5}, I64{200, 300}, I64{1, 100000}}) {
      std::int64_t n = 1;
      for (std::int64_t s : shape) n *= s;
      std::vector<std::int64_t> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n), -1);
      for (std::int64_t i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = i;
      const Layout l{shape, vec(kael::contiguous_strides(shape))};
      const std::array<OperandView, 2> ops{l.view(reinterpret_cast<char*>(out.data()), 8),
                                           l.view(reinterpret_cast<char*>(in.data()), 8)};
      const auto g = make_geometry<2>(shape, ops);
      kael::native::run_loop<2>(
          g,
          [](char* const* p, const std::int64_t* s, std::int64_t m) {
            for (std::int64_t i = 0; i < m; ++i)
              *reinterpret_cast<std::int64_t*>(p[0] + i * s[0]) =
                  *reinterpret_cast<const std::int64_t*>(p[1] + i * s[1]) + 1;
          },
          parallel);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], i + 1) << i;
    }
  }
}

TEST(RunLoop, StridedAndBroadcastThroughPointwiseOps) {
  // End to end: a transposed operand plus a broadcast row.
  const Tensor a = kael::transpose(kael::reshape(kael::arange(6), I64{2, 3}), 0, 1);  // [3, 2]
  const Tensor row = kael::arange(2);
  const Tensor r = kael::add(a, row);
  ASSERT_EQ(vec(r.sizes()), (I64{3, 2}));
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) {
      const std::int64_t got = r.data<std::int64_t>()[i * r.stride(0) + j * r.stride(1)];
      EXPECT_EQ(got, (3 * j + i) + j) << i << "," << j;
    }
}

}  // namespace
