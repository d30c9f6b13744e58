// Tests of the strided loop engine (see Note [Loop geometry]): dim coalescing, broadcast
// strides, memory-order reordering and the loop driver.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kael/core/half.h"
#include "kael/native/loops.h"
#include "kael/native/vec_math.h"
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

// The contiguous pointwise loop in whatever form this process runs it: plain, software
// prefetching (Note [Prefetching pointwise loops]) and streaming stores (Note [Streaming stores]),
// which KAEL_PREFETCH_STREAMS and KAEL_STREAMING_STORES select; CMakeLists.txt registers this
// suite once per combination. Outputs start off 64-byte lines, have 1- to 8-byte elements and
// lengths around the forms' edges, in heap blocks of their exact size (so that the sanitizer
// build reports a write past either end).
template <typename Out, typename T, int K, typename F>
void expect_contiguous_loop_matches(std::int64_t n, int out_offset, int in_offset, F f) {
  std::vector<T> a(static_cast<std::size_t>(n + in_offset)), b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<T>((i * 7) % 23);
    b[i] = static_cast<T>((i * 5) % 11 + 1);
  }
  const std::unique_ptr<Out[]> out_block(new Out[static_cast<std::size_t>(n + out_offset)]);  // (no vector<bool>)
  Out* out = out_block.get() + out_offset;
  std::array<char*, 3> ptrs{reinterpret_cast<char*>(out), reinterpret_cast<char*>(a.data() + in_offset),
                            reinterpret_cast<char*>(b.data() + in_offset)};
  const std::array<std::int64_t, 3> strides{sizeof(Out), sizeof(T), sizeof(T)};
  kael::native::PointwiseInner<Out, T, K, F>{f}(ptrs.data(), strides.data(), n);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i + in_offset);
    Out want;
    if constexpr (K == 1) {
      want = static_cast<Out>(f(a[k]));
    } else {
      want = static_cast<Out>(f(a[k], b[k]));
    }
    ASSERT_EQ(out[i], want) << "n " << n << ", element " << i << ", offsets " << out_offset << " " << in_offset;
  }
}

// A formula with a SIMD form, as a kernel of an op marked `simd: true` passes (Note [SIMD forms]).
struct ExpFormula {
  float operator()(float x) const { return kael::native::vmath::exp(x); }
#if defined(KAEL_VMATH_SIMD)
  static __m512 simd(__m512 x) { return kael::native::vmath::simd::exp(x); }
#endif
};
#if defined(KAEL_VMATH_SIMD)
static_assert(kael::native::SimdFormula<ExpFormula, float, float, 1>);
static_assert(kael::native::SimdFormula<ExpFormula, kael::BFloat16, kael::BFloat16, 1>);
static_assert(!kael::native::SimdFormula<ExpFormula, double, float, 1>);
#endif

// The strided loop: every out_step-th element of the output from every in_step-th of the input.
template <typename T, typename F>
void expect_strided_loop_matches(std::int64_t n, std::int64_t out_step, std::int64_t in_step, F f) {
  std::vector<T> a(static_cast<std::size_t>(n * in_step));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<T>(static_cast<float>((i * 7) % 23) / 4.0f - 2.0f);
  std::vector<T> out(static_cast<std::size_t>(n * out_step), static_cast<T>(-1.0f));
  std::array<char*, 2> ptrs{reinterpret_cast<char*>(out.data()), reinterpret_cast<char*>(a.data())};
  const std::array<std::int64_t, 2> strides{static_cast<std::int64_t>(sizeof(T)) * out_step,
                                            static_cast<std::int64_t>(sizeof(T)) * in_step};
  kael::native::PointwiseInner<T, T, 1, F>{f}(ptrs.data(), strides.data(), n);
  for (std::int64_t i = 0; i < n * out_step; ++i) {
    const T want = i % out_step == 0 ? static_cast<T>(f(a[static_cast<std::size_t>(i / out_step * in_step)]))
                                     : static_cast<T>(-1.0f);
    ASSERT_EQ(static_cast<float>(out[static_cast<std::size_t>(i)]), static_cast<float>(want))
        << "n " << n << ", element " << i << ", steps " << out_step << " " << in_step;
  }
}

TEST(LoopForms, SimdFormulaMatchesTheScalarFormulaInEveryLoop) {
  for (const std::int64_t n : {0, 1, 15, 16, 17, 31, 33, 63, 64, 65, 300, 16384 + 255, 70000}) {
    for (const int out_offset : {0, 1, 3}) {
      for (const int in_offset : {0, 1, 2}) {
        expect_contiguous_loop_matches<float, float, 1>(n, out_offset, in_offset, ExpFormula{});
        expect_contiguous_loop_matches<kael::Half, kael::Half, 1>(n, out_offset, in_offset, ExpFormula{});
        expect_contiguous_loop_matches<kael::BFloat16, kael::BFloat16, 1>(n, out_offset, in_offset, ExpFormula{});
      }
    }
    expect_strided_loop_matches<float>(n, 2, 3, ExpFormula{});
    expect_strided_loop_matches<kael::Half>(n, 3, 1, ExpFormula{});
    expect_strided_loop_matches<kael::BFloat16>(n, 1, 2, ExpFormula{});
  }
}

TEST(LoopForms, ContiguousLoopMatchesElementwiseResults) {
  for (const std::int64_t n : {0, 1, 15, 16, 17, 63, 64, 65, 300, 1000, 16384, 16384 + 255, 70000}) {
    for (const int out_offset : {0, 1, 3, 5}) {
      for (const int in_offset : {0, 1, 2}) {
        expect_contiguous_loop_matches<float, float, 2>(n, out_offset, in_offset, [](float x, float y) { return x + y; });
        expect_contiguous_loop_matches<bool, float, 2>(n, out_offset, in_offset, [](float x, float y) { return x < y; });
        expect_contiguous_loop_matches<double, float, 1>(n, out_offset, in_offset, [](float x) { return double{x} * 3; });
        expect_contiguous_loop_matches<std::int64_t, std::int64_t, 2>(
            n, out_offset, in_offset, [](std::int64_t x, std::int64_t y) { return x * y + 7; });
        expect_contiguous_loop_matches<std::uint8_t, std::uint8_t, 1>(
            n, out_offset, in_offset, [](std::uint8_t x) { return static_cast<std::uint8_t>(x + 1); });
        expect_contiguous_loop_matches<std::int16_t, double, 1>(
            n, out_offset, in_offset, [](double x) { return static_cast<std::int16_t>(x); });
      }
    }
  }
}

// The size from which outputs stream (Note [Streaming stores]): forced by KAEL_STREAMING_STORES,
// else half the last-level cache and never more than 64 MB, whatever cache the machine reports.
TEST(LoopForms, StreamingThresholdIsForcedOrAtMost64MB) {
  const char* env = std::getenv("KAEL_STREAMING_STORES");
  const std::int64_t bytes = kael::native::streaming_store_min_bytes();
  if (env != nullptr && std::string(env) == "1") {
    EXPECT_EQ(bytes, 1);
  } else if (env != nullptr && std::string(env) == "0") {
    EXPECT_EQ(bytes, std::numeric_limits<std::int64_t>::max());
  } else {
    EXPECT_GT(bytes, 0);
    EXPECT_LE(bytes, std::int64_t{64} << 20);
  }
}

}  // namespace
