// Tests of shapes and views: DimVector, stride helpers, view ops through the C++ API,
// dim wrapping and the format of kael error messages.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/small_vector.h"
#include "kael/core/tensor.h"
#include "kael/core/tensor_impl.h"
#include "kael/ops.h"

namespace {

using kael::DimVector;
using kael::Tensor;
using I64 = std::vector<std::int64_t>;

I64 vec(kael::IntArrayRef r) { return I64(r.begin(), r.end()); }

// Whether the DimVector keeps its elements inside the object (no heap block).
bool is_inline(const DimVector& v) {
  const auto* p = reinterpret_cast<const char*>(v.data());
  const auto* self = reinterpret_cast<const char*>(&v);
  return p >= self && p < self + sizeof(DimVector);
}

// A contiguous int64 tensor 0, 1, ..., numel-1 of the given shape.
Tensor iota(I64 shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return kael::reshape(kael::arange(n), shape);
}

std::int64_t offset_of(const Tensor& t) { return t.impl()->offset(); }
bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage() == b.impl()->storage(); }
std::int64_t elem_distance(const Tensor& view, const Tensor& base) {
  return (static_cast<const char*>(view.data_ptr()) - static_cast<const char*>(base.data_ptr())) /
         base.element_size();
}

// Element at a multi-index through sizes/strides (int64 tensors).
std::int64_t at(const Tensor& t, I64 index) {
  const std::int64_t* p = t.data<std::int64_t>();
  for (std::size_t d = 0; d < index.size(); ++d) p += index[d] * t.strides()[d];
  return *p;
}

using kael::testing::error_of;

// ---------------------------------------------------------------- DimVector

TEST(DimVector, InlineUpToFiveThenHeap) {
  DimVector v;
  EXPECT_TRUE(v.empty());
  EXPECT_TRUE(is_inline(v));
  for (std::int64_t i = 0; i < 5; ++i) {
    v.push_back(i * 10);
    EXPECT_TRUE(is_inline(v)) << "size " << v.size();
  }
  v.push_back(50);
  EXPECT_FALSE(is_inline(v));
  ASSERT_EQ(v.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(v[i], static_cast<std::int64_t>(i) * 10);
  for (std::int64_t i = 6; i < 100; ++i) v.push_back(i * 10);
  ASSERT_EQ(v.size(), 100u);
  for (std::size_t i = 0; i < 100; ++i) ASSERT_EQ(v[i], static_cast<std::int64_t>(i) * 10);

  const DimVector five{1, 2, 3, 4, 5}, six{1, 2, 3, 4, 5, 6};
  EXPECT_TRUE(is_inline(five));
  EXPECT_FALSE(is_inline(six));
  EXPECT_TRUE(is_inline(DimVector(5, 7)));
  EXPECT_FALSE(is_inline(DimVector(6, 7)));
}

TEST(DimVector, Constructors) {
  const DimVector a(3, 9);
  EXPECT_EQ(vec(a), (I64{9, 9, 9}));
  const DimVector b(4);
  EXPECT_EQ(vec(b), (I64{0, 0, 0, 0}));
  const std::int64_t raw[] = {4, 5, 6, 7, 8, 9, 10};
  const DimVector c{kael::IntArrayRef(raw)};
  EXPECT_EQ(vec(c), (I64{4, 5, 6, 7, 8, 9, 10}));
  const DimVector d{};
  EXPECT_TRUE(d.empty());
}

TEST(DimVector, CopyIsDeep) {
  for (std::size_t n : {3u, 5u, 6u, 12u}) {
    DimVector a;
    for (std::size_t i = 0; i < n; ++i) a.push_back(static_cast<std::int64_t>(i) + 1);
    DimVector b(a);
    EXPECT_EQ(b, a);
    EXPECT_NE(b.data(), a.data());
    b[0] = -1;
    EXPECT_EQ(a[0], 1) << n;
    EXPECT_EQ(is_inline(b), n <= 5);

    DimVector c{42};
    c = a;
    EXPECT_EQ(c, a);
    EXPECT_NE(c.data(), a.data());
    c[n - 1] = -5;
    EXPECT_EQ(a[n - 1], static_cast<std::int64_t>(n));
  }
}

TEST(DimVector, CopyAssignShrinkAndGrow) {
  DimVector big{1, 2, 3, 4, 5, 6, 7, 8};
  const DimVector small{9, 8};
  big = small;
  EXPECT_EQ(vec(big), (I64{9, 8}));
  DimVector s2{1};
  s2 = DimVector{1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(vec(s2), (I64{1, 2, 3, 4, 5, 6, 7}));
}

TEST(DimVector, SelfAssignment) {
  DimVector a{1, 2, 3, 4, 5, 6, 7};
  DimVector& ref = a;
  a = ref;
  EXPECT_EQ(vec(a), (I64{1, 2, 3, 4, 5, 6, 7}));
  a = std::move(ref);
  EXPECT_EQ(vec(a), (I64{1, 2, 3, 4, 5, 6, 7}));
}

TEST(DimVector, MoveInlineCopiesAndEmptiesSource) {
  DimVector a{1, 2, 3};
  DimVector b(std::move(a));
  EXPECT_EQ(vec(b), (I64{1, 2, 3}));
  EXPECT_TRUE(is_inline(b));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  a.push_back(4);          // the moved-from vector is still usable
  EXPECT_EQ(vec(a), (I64{4}));
}

TEST(DimVector, MoveHeapStealsBuffer) {
  DimVector a{1, 2, 3, 4, 5, 6, 7};
  const std::int64_t* buf = a.data();
  DimVector b(std::move(a));
  EXPECT_EQ(b.data(), buf);
  EXPECT_EQ(vec(b), (I64{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(is_inline(a));

  DimVector c{9};
  c = std::move(b);
  EXPECT_EQ(c.data(), buf);
  EXPECT_EQ(vec(c), (I64{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)

  // Move-assigning an inline vector into a heap one frees the heap and goes inline.
  DimVector d{5, 6};
  c = std::move(d);
  EXPECT_EQ(vec(c), (I64{5, 6}));
  EXPECT_TRUE(is_inline(c));
}

TEST(DimVector, Insert) {
  DimVector v{1, 2, 3};
  v.insert(0, 0);
  EXPECT_EQ(vec(v), (I64{0, 1, 2, 3}));
  v.insert(4, 4);  // at the end
  EXPECT_EQ(vec(v), (I64{0, 1, 2, 3, 4}));
  EXPECT_TRUE(is_inline(v));
  v.insert(2, 99);  // crosses into the heap
  EXPECT_EQ(vec(v), (I64{0, 1, 99, 2, 3, 4}));
  EXPECT_FALSE(is_inline(v));
  v.insert(6, 7);
  v.insert(0, -1);
  EXPECT_EQ(vec(v), (I64{-1, 0, 1, 99, 2, 3, 4, 7}));
  DimVector e;
  e.insert(0, 5);
  EXPECT_EQ(vec(e), (I64{5}));
}

TEST(DimVector, Erase) {
  DimVector v{0, 1, 2, 3, 4, 5, 6};
  v.erase(0);
  EXPECT_EQ(vec(v), (I64{1, 2, 3, 4, 5, 6}));
  v.erase(5);  // the last
  EXPECT_EQ(vec(v), (I64{1, 2, 3, 4, 5}));
  v.erase(2);
  EXPECT_EQ(vec(v), (I64{1, 2, 4, 5}));
  v.erase(0);
  v.erase(0);
  v.erase(0);
  v.erase(0);
  EXPECT_TRUE(v.empty());
}

TEST(DimVector, ResizeAssignPopAndEquality) {
  DimVector v{1, 2};
  v.resize(7, 3);
  EXPECT_EQ(vec(v), (I64{1, 2, 3, 3, 3, 3, 3}));
  v.resize(1);
  EXPECT_EQ(vec(v), (I64{1}));
  v.assign(4, 8);
  EXPECT_EQ(vec(v), (I64{8, 8, 8, 8}));
  v.pop_back();
  EXPECT_EQ(v.back(), 8);
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v, (DimVector{8, 8, 8}));
  EXPECT_FALSE(v == (DimVector{8, 8}));
  EXPECT_FALSE(v == (DimVector{8, 8, 9}));
  v.clear();
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v, DimVector());
}

// ---------------------------------------------------------------- stride helpers

TEST(Strides, ContiguousStrides) {
  EXPECT_EQ(vec(kael::contiguous_strides(I64{2, 3, 4})), (I64{12, 4, 1}));
  EXPECT_EQ(vec(kael::contiguous_strides(I64{5})), (I64{1}));
  EXPECT_TRUE(kael::contiguous_strides(I64{}).empty());
  EXPECT_EQ(vec(kael::contiguous_strides(I64{2, 1, 3})), (I64{3, 3, 1}));
  // A size-0 dim counts as 1 for the strides of the dims before it (as in PyTorch).
  EXPECT_EQ(vec(kael::contiguous_strides(I64{2, 0, 3})), (I64{3, 3, 1}));
  EXPECT_EQ(vec(kael::contiguous_strides(I64{1, 2, 3, 4, 5, 6, 7})), (I64{5040, 2520, 840, 210, 42, 7, 1}));
}

TEST(Strides, ComputeContiguous) {
  EXPECT_TRUE(kael::compute_contiguous(I64{2, 3}, I64{3, 1}));
  EXPECT_FALSE(kael::compute_contiguous(I64{2, 3}, I64{1, 2}));
  EXPECT_FALSE(kael::compute_contiguous(I64{2, 3}, I64{6, 2}));
  EXPECT_TRUE(kael::compute_contiguous(I64{}, I64{}));
  // Strides of size-1 dims do not matter.
  EXPECT_TRUE(kael::compute_contiguous(I64{2, 1, 3}, I64{3, 99, 1}));
  EXPECT_TRUE(kael::compute_contiguous(I64{1, 1}, I64{7, 7}));
  // Empty tensors are contiguous (size 0 in the last dim; see the test below for others).
  EXPECT_TRUE(kael::compute_contiguous(I64{2, 3, 0}, I64{5, 7, 11}));
  // Broadcast (stride 0) dims of size > 1 are not.
  EXPECT_FALSE(kael::compute_contiguous(I64{2, 3}, I64{0, 1}));
}

// PyTorch treats every tensor without elements as contiguous, whatever its strides.
// compute_contiguous walks dims from the last and returns false at the first stride
// mismatch before it reaches the size-0 dim.
TEST(Strides, ComputeContiguousEmptyWithZeroSizeBeforeMismatch) {
  EXPECT_TRUE(kael::compute_contiguous(I64{0, 3}, I64{1, 5}));
  EXPECT_TRUE(kael::compute_contiguous(I64{3, 0, 2}, I64{1, 3, 3}));
}

TEST(Strides, CheckedNumel) {
  EXPECT_EQ(kael::checked_numel("t", I64{2, 3, 4}), 24);
  EXPECT_EQ(kael::checked_numel("t", I64{}), 1);
  EXPECT_EQ(kael::checked_numel("t", I64{5, 0, 7}), 0);
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(kael::checked_numel("t", I64{big}), big);
  EXPECT_EQ(kael::checked_numel("t", I64{0, big, big}), 0);
}

TEST(Strides, CheckedNumelRejectsNegativeSizes) {
  kael::testing::expect_exactly<kael::Error>([&] { kael::checked_numel("t", I64{2, -1}); });
  kael::testing::expect_exactly<kael::Error>([&] { kael::checked_numel("t", I64{-3}); });
  kael::testing::expect_exactly<kael::Error>([&] { kael::checked_numel("t", I64{0, -1}); });
  const std::string msg = error_of([] { kael::checked_numel("myop", I64{2, -5}); });
  EXPECT_NE(msg.find("myop: negative dimension -5 in size [2, -5]"), std::string::npos) << msg;
}

TEST(Strides, CheckedNumelRejectsOverflow) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  kael::testing::expect_exactly<kael::Error>([&] { kael::checked_numel("t", I64{big, 2}); });
  kael::testing::expect_exactly<kael::Error>(
      [&] { kael::checked_numel("t", I64{std::int64_t{1} << 32, std::int64_t{1} << 32}); });
  EXPECT_NO_THROW(kael::checked_numel("t", I64{std::int64_t{1} << 31, std::int64_t{1} << 31}));
  const std::string msg = error_of([&] { kael::checked_numel("myop", I64{big, 3}); });
  EXPECT_NE(msg.find("myop: size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is too large"), std::string::npos) << msg;
}

TEST(Strides, FactoriesValidateSizes) {
  kael::testing::expect_exactly<kael::Error>([&] { kael::empty(I64{2, -1}); });
  kael::testing::expect_exactly<kael::Error>([&] { kael::zeros(I64{-2}); });
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2;
  kael::testing::expect_exactly<kael::Error>([&] { kael::empty(I64{big, 4}); });
}

// ---------------------------------------------------------------- tensors and views

TEST(Views, ContiguousFactoryLayout) {
  const Tensor t = kael::zeros(I64{2, 3, 4});
  EXPECT_EQ(vec(t.sizes()), (I64{2, 3, 4}));
  EXPECT_EQ(vec(t.strides()), (I64{12, 4, 1}));
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(offset_of(t), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(-3), 12);
  EXPECT_EQ(t.dtype(), kael::ScalarType::Float32);
  EXPECT_EQ(t.element_size(), 4);
}

TEST(Views, View) {
  const Tensor a = kael::arange(24);
  const Tensor v = kael::view(a, I64{2, 3, 4});
  EXPECT_EQ(vec(v.sizes()), (I64{2, 3, 4}));
  EXPECT_EQ(vec(v.strides()), (I64{12, 4, 1}));
  EXPECT_EQ(v.data_ptr(), a.data_ptr());
  EXPECT_TRUE(shares_storage(v, a));
  EXPECT_FALSE(v.is_same(a));

  const Tensor w = kael::view(v, I64{4, -1});
  EXPECT_EQ(vec(w.sizes()), (I64{4, 6}));
  EXPECT_EQ(vec(w.strides()), (I64{6, 1}));

  // Writes through a view are visible in the base.
  v.data<std::int64_t>()[5] = 1000;
  EXPECT_EQ(a.data<std::int64_t>()[5], 1000);
}

TEST(Views, ViewOfNonContiguousWhenStridesAllow) {
  // Splitting and merging dims that stay contiguous in memory works on a transposed tensor.
  const Tensor t = kael::transpose(iota({4, 6}), 0, 1);  // sizes [6, 4], strides [1, 6]
  const Tensor v = kael::view(t, I64{2, 3, 4});
  EXPECT_EQ(vec(v.sizes()), (I64{2, 3, 4}));
  EXPECT_EQ(vec(v.strides()), (I64{3, 1, 6}));
  EXPECT_TRUE(shares_storage(v, t));
  EXPECT_EQ(at(v, {1, 2, 3}), at(t, {5, 3}));

  const Tensor u = kael::view(t, I64{6, 2, 1, 2});
  EXPECT_EQ(vec(u.sizes()), (I64{6, 2, 1, 2}));
  EXPECT_EQ(at(u, {4, 1, 0, 1}), at(t, {4, 3}));
}

TEST(Views, ImpossibleViewRaises) {
  const Tensor t = kael::transpose(iota({4, 6}), 0, 1);
  EXPECT_THROW(kael::view(t, I64{24}), kael::Error);
  const std::string msg = error_of([&] { kael::view(t, I64{24}); });
  EXPECT_NE(msg.find("view size is not compatible"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reshape"), std::string::npos) << msg;
}

TEST(Views, BadViewShapesRaise) {
  const Tensor a = kael::arange(24);
  EXPECT_THROW(kael::view(a, I64{5, 5}), kael::Error);
  EXPECT_THROW(kael::view(a, I64{-1, -1}), kael::Error);
  EXPECT_THROW(kael::view(a, I64{7, -1}), kael::Error);
  EXPECT_THROW(kael::view(a, I64{-2, -12}), kael::Error);
  const std::string msg = error_of([&] { kael::view(a, I64{5, 5}); });
  EXPECT_NE(msg.find("shape '[5, 5]' is invalid for input of size 24"), std::string::npos) << msg;
}

TEST(Views, ViewOfEmptyAndZeroDim) {
  const Tensor e = kael::zeros(I64{0, 3});
  const Tensor v = kael::view(e, I64{3, 0, 1});
  EXPECT_EQ(vec(v.sizes()), (I64{3, 0, 1}));
  EXPECT_TRUE(shares_storage(v, e));
  EXPECT_THROW(kael::view(e, I64{-1, 0}), kael::Error);  // -1 is ambiguous with 0 elements

  const Tensor s = kael::full(kael::IntArrayRef{}, 3.0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  const Tensor s1 = kael::view(s, I64{1, 1});
  EXPECT_EQ(vec(s1.sizes()), (I64{1, 1}));
  EXPECT_EQ(kael::view(s1, I64{}).dim(), 0);
}

TEST(Views, ReshapeViewsWhenPossibleCopiesOtherwise) {
  const Tensor a = iota({4, 6});
  const Tensor r = kael::reshape(a, I64{3, 8});
  EXPECT_EQ(r.data_ptr(), a.data_ptr());
  EXPECT_TRUE(shares_storage(r, a));

  const Tensor t = kael::transpose(a, 0, 1);
  const Tensor c = kael::reshape(t, I64{24});
  EXPECT_FALSE(shares_storage(c, t));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(vec(c.sizes()), (I64{24}));
  // Row-major order of the transposed tensor: t[i][j] = a[j][i] = 6 * j + i.
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 4; ++j) ASSERT_EQ(c.data<std::int64_t>()[i * 4 + j], 6 * j + i);
  EXPECT_THROW(kael::reshape(a, I64{5, -1}), kael::Error);
}

TEST(Views, Permute) {
  const Tensor a = iota({2, 3, 4});
  const Tensor p = kael::permute(a, I64{2, 0, 1});
  EXPECT_EQ(vec(p.sizes()), (I64{4, 2, 3}));
  EXPECT_EQ(vec(p.strides()), (I64{1, 12, 4}));
  EXPECT_EQ(p.data_ptr(), a.data_ptr());
  EXPECT_FALSE(p.is_contiguous());
  EXPECT_EQ(at(p, {3, 1, 2}), at(a, {1, 2, 3}));
  const Tensor q = kael::permute(a, I64{-1, -3, 1});
  EXPECT_EQ(vec(q.sizes()), (I64{4, 2, 3}));
  EXPECT_TRUE(kael::permute(a, I64{0, 1, 2}).is_contiguous());
}

TEST(Views, PermuteErrors) {
  const Tensor a = iota({2, 3, 4});
  EXPECT_THROW(kael::permute(a, I64{0, 1}), kael::Error);
  EXPECT_THROW(kael::permute(a, I64{0, 1, 1}), kael::Error);
  EXPECT_THROW(kael::permute(a, I64{0, 1, -3}), kael::Error);  // -3 is dim 0 again
  EXPECT_THROW(kael::permute(a, I64{0, 1, 3}), kael::IndexError);
}

TEST(Views, Transpose) {
  const Tensor a = iota({2, 3, 4});
  const Tensor t = kael::transpose(a, 0, 2);
  EXPECT_EQ(vec(t.sizes()), (I64{4, 3, 2}));
  EXPECT_EQ(vec(t.strides()), (I64{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.data_ptr(), a.data_ptr());
  const Tensor u = kael::transpose(a, -1, -3);
  EXPECT_EQ(vec(u.sizes()), vec(t.sizes()));
  EXPECT_EQ(vec(u.strides()), vec(t.strides()));
  const Tensor same = kael::transpose(a, 1, 1);
  EXPECT_EQ(vec(same.strides()), (I64{12, 4, 1}));
  EXPECT_THROW(kael::transpose(a, 0, 3), kael::IndexError);
  EXPECT_THROW(kael::transpose(a, -4, 0), kael::IndexError);
}

TEST(Views, Expand) {
  const Tensor a = iota({3, 1});
  const Tensor e = kael::expand(a, I64{2, 3, 4});
  EXPECT_EQ(vec(e.sizes()), (I64{2, 3, 4}));
  EXPECT_EQ(vec(e.strides()), (I64{0, 1, 0}));
  EXPECT_EQ(e.data_ptr(), a.data_ptr());
  EXPECT_EQ(e.numel(), 24);
  EXPECT_FALSE(e.is_contiguous());
  EXPECT_EQ(at(e, {1, 2, 3}), 2);

  const Tensor k = kael::expand(a, I64{-1, 5});
  EXPECT_EQ(vec(k.sizes()), (I64{3, 5}));
  EXPECT_EQ(vec(k.strides()), (I64{1, 0}));

  const Tensor s = kael::full(kael::IntArrayRef{}, 1.0);
  EXPECT_EQ(vec(kael::expand(s, I64{2, 2}).strides()), (I64{0, 0}));
}

TEST(Views, ExpandErrors) {
  const Tensor a = iota({3, 1});
  EXPECT_THROW(kael::expand(a, I64{4, 4}), kael::Error);  // non-singleton 3 -> 4
  EXPECT_THROW(kael::expand(a, I64{3}), kael::Error);     // fewer dims
  EXPECT_THROW(kael::expand(a, I64{-1, 3, 1}), kael::Error);  // -1 in a new leading dim
  const std::string msg = error_of([&] { kael::expand(a, I64{4, 4}); });
  EXPECT_NE(msg.find("expanded size of the tensor (4) must match the existing size (3)"), std::string::npos) << msg;
}

TEST(Views, Squeeze) {
  const Tensor a = iota({1, 3, 1, 2});
  const Tensor all = kael::squeeze(a);
  EXPECT_EQ(vec(all.sizes()), (I64{3, 2}));
  EXPECT_EQ(vec(all.strides()), (I64{2, 1}));
  EXPECT_EQ(all.data_ptr(), a.data_ptr());

  const Tensor s0 = kael::squeeze(a, 0);
  EXPECT_EQ(vec(s0.sizes()), (I64{3, 1, 2}));
  EXPECT_EQ(vec(s0.strides()), (I64{2, 2, 1}));
  const Tensor s2 = kael::squeeze(a, -2);
  EXPECT_EQ(vec(s2.sizes()), (I64{1, 3, 2}));
  const Tensor s1 = kael::squeeze(a, 1);  // size 3: unchanged
  EXPECT_EQ(vec(s1.sizes()), (I64{1, 3, 1, 2}));
  EXPECT_EQ(vec(s1.strides()), vec(a.strides()));
  EXPECT_THROW(kael::squeeze(a, 4), kael::IndexError);

  // Many size-1 dims (beyond the inline capacity of DimVector).
  const Tensor ones = kael::zeros(I64{1, 1, 1, 1, 1, 1, 1, 2});
  EXPECT_EQ(vec(kael::squeeze(ones).sizes()), (I64{2}));
  EXPECT_EQ(kael::squeeze(kael::zeros(I64{1, 1})).dim(), 0);
}

TEST(Views, Unsqueeze) {
  const Tensor a = iota({2, 3});
  const Tensor u0 = kael::unsqueeze(a, 0);
  EXPECT_EQ(vec(u0.sizes()), (I64{1, 2, 3}));
  EXPECT_EQ(vec(u0.strides()), (I64{6, 3, 1}));
  const Tensor u1 = kael::unsqueeze(a, 1);
  EXPECT_EQ(vec(u1.sizes()), (I64{2, 1, 3}));
  EXPECT_EQ(vec(u1.strides()), (I64{3, 3, 1}));
  const Tensor u2 = kael::unsqueeze(a, -1);
  EXPECT_EQ(vec(u2.sizes()), (I64{2, 3, 1}));
  EXPECT_EQ(vec(u2.strides()), (I64{3, 1, 1}));
  EXPECT_EQ(u2.data_ptr(), a.data_ptr());
  EXPECT_TRUE(u0.is_contiguous() && u1.is_contiguous() && u2.is_contiguous());
  EXPECT_THROW(kael::unsqueeze(a, 3), kael::IndexError);
  EXPECT_THROW(kael::unsqueeze(a, -4), kael::IndexError);

  const Tensor s = kael::full(kael::IntArrayRef{}, 1.0);
  EXPECT_EQ(vec(kael::unsqueeze(s, 0).sizes()), (I64{1}));
  EXPECT_EQ(vec(kael::unsqueeze(s, -1).sizes()), (I64{1}));
}

TEST(Views, Flatten) {
  const Tensor a = iota({2, 3, 4});
  const Tensor f = kael::flatten(a);
  EXPECT_EQ(vec(f.sizes()), (I64{24}));
  EXPECT_EQ(f.data_ptr(), a.data_ptr());
  const Tensor f1 = kael::flatten(a, 1);
  EXPECT_EQ(vec(f1.sizes()), (I64{2, 12}));
  EXPECT_EQ(vec(f1.strides()), (I64{12, 1}));
  const Tensor f01 = kael::flatten(a, 0, -2);
  EXPECT_EQ(vec(f01.sizes()), (I64{6, 4}));
  const Tensor same = kael::flatten(a, 1, 1);
  EXPECT_EQ(vec(same.sizes()), (I64{2, 3, 4}));
  EXPECT_TRUE(shares_storage(same, a));

  // Not viewable: copies.
  const Tensor t = kael::transpose(a, 0, 2);
  const Tensor ft = kael::flatten(t);
  EXPECT_FALSE(shares_storage(ft, t));
  EXPECT_EQ(ft.data<std::int64_t>()[1], at(a, {1, 0, 0}));

  EXPECT_EQ(vec(kael::flatten(kael::full(kael::IntArrayRef{}, 1.0)).sizes()), (I64{1}));
  EXPECT_THROW(kael::flatten(a, 2, 1), kael::Error);
  EXPECT_THROW(kael::flatten(a, 0, 3), kael::IndexError);
}

TEST(Views, Narrow) {
  const Tensor a = iota({2, 3, 4});
  const Tensor n = kael::narrow(a, 2, 1, 2);
  EXPECT_EQ(vec(n.sizes()), (I64{2, 3, 2}));
  EXPECT_EQ(vec(n.strides()), (I64{12, 4, 1}));
  EXPECT_EQ(offset_of(n), 1);
  EXPECT_EQ(elem_distance(n, a), 1);
  EXPECT_TRUE(shares_storage(n, a));
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_EQ(at(n, {1, 2, 1}), at(a, {1, 2, 2}));

  const Tensor m = kael::narrow(a, 0, -1, 1);  // negative start
  EXPECT_EQ(vec(m.sizes()), (I64{1, 3, 4}));
  EXPECT_EQ(offset_of(m), 12);
  EXPECT_TRUE(m.is_contiguous());

  // Narrowing a narrowed view accumulates offsets.
  const Tensor nn = kael::narrow(kael::narrow(a, 1, 1, 2), 2, 2, 2);
  EXPECT_EQ(offset_of(nn), 4 + 2);
  EXPECT_EQ(at(nn, {0, 0, 0}), 6);

  EXPECT_EQ(kael::narrow(a, 1, 3, 0).numel(), 0);  // empty at the end is allowed
}

TEST(Views, NarrowErrors) {
  const Tensor a = iota({2, 3, 4});
  EXPECT_THROW(kael::narrow(a, 3, 0, 1), kael::IndexError);
  EXPECT_THROW(kael::narrow(a, 1, 4, 0), kael::IndexError);
  EXPECT_THROW(kael::narrow(a, 1, -4, 1), kael::IndexError);
  EXPECT_THROW(kael::narrow(a, 1, 2, 2), kael::Error);
  EXPECT_THROW(kael::narrow(a, 1, 0, -1), kael::Error);
  EXPECT_THROW(kael::narrow(kael::full(kael::IntArrayRef{}, 1.0), 0, 0, 1), kael::IndexError);
}

TEST(Views, Select) {
  const Tensor a = iota({2, 3, 4});
  const Tensor s = kael::select(a, 1, 2);
  EXPECT_EQ(vec(s.sizes()), (I64{2, 4}));
  EXPECT_EQ(vec(s.strides()), (I64{12, 1}));
  EXPECT_EQ(offset_of(s), 8);
  EXPECT_EQ(elem_distance(s, a), 8);
  EXPECT_EQ(at(s, {1, 3}), at(a, {1, 2, 3}));

  const Tensor last = kael::select(a, 0, -1);
  EXPECT_EQ(vec(last.sizes()), (I64{3, 4}));
  EXPECT_EQ(offset_of(last), 12);
  EXPECT_TRUE(last.is_contiguous());

  // Down to a 0-d view of one element.
  const Tensor e = kael::select(kael::select(kael::select(a, 0, 1), 0, 2), 0, 3);
  EXPECT_EQ(e.dim(), 0);
  EXPECT_EQ(offset_of(e), 23);
  EXPECT_EQ(e.item().to<std::int64_t>(), 23);

  // Select of a narrowed, transposed view.
  const Tensor t = kael::select(kael::transpose(kael::narrow(a, 2, 1, 3), 0, 2), 0, 2);  // a[:, :, 3]^T
  EXPECT_EQ(vec(t.sizes()), (I64{3, 2}));
  EXPECT_EQ(vec(t.strides()), (I64{4, 12}));
  EXPECT_EQ(offset_of(t), 3);
}

TEST(Views, SelectErrors) {
  const Tensor a = iota({2, 3, 4});
  EXPECT_THROW(kael::select(a, 1, 3), kael::IndexError);
  EXPECT_THROW(kael::select(a, 1, -4), kael::IndexError);
  EXPECT_THROW(kael::select(a, 3, 0), kael::IndexError);
  EXPECT_THROW(kael::select(kael::full(kael::IntArrayRef{}, 1.0), 0, 0), kael::IndexError);
}

TEST(Views, EmptyTensorsAreContiguous) {
  const Tensor e = kael::zeros(I64{2, 0, 3});
  EXPECT_TRUE(e.is_contiguous());
  const Tensor t = kael::transpose(e, 0, 2);  // sizes [3, 0, 2], strides [1, 3, 3]
  EXPECT_EQ(vec(t.strides()), (I64{1, 3, 3}));
  EXPECT_TRUE(t.is_contiguous());                // as in PyTorch
  EXPECT_TRUE(kael::contiguous(t).is_same(t));  // so contiguous() need not copy
}

TEST(Views, ContiguousAndDetach) {
  const Tensor a = iota({2, 3});
  EXPECT_TRUE(kael::contiguous(a).is_same(a));
  const Tensor t = kael::transpose(a, 0, 1);
  const Tensor c = kael::contiguous(t);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(shares_storage(c, t));
  EXPECT_EQ(at(c, {2, 1}), at(a, {1, 2}));
  const Tensor d = kael::detach(t);
  EXPECT_FALSE(d.is_same(t));
  EXPECT_TRUE(shares_storage(d, t));
  EXPECT_EQ(vec(d.strides()), vec(t.strides()));
}

TEST(Views, StorageOutlivesBase) {
  Tensor v;
  {
    const Tensor a = iota({4, 5});
    v = kael::select(a, 0, 3);
  }
  // The view keeps its base (and so the storage) alive.
  ASSERT_TRUE(v.impl()->is_view());
  EXPECT_EQ(v.impl()->view_base()->use_count(), 1);
  EXPECT_EQ(v.impl()->storage()->use_count(), 2);
  EXPECT_EQ(at(v, {4}), 19);
}

TEST(Views, RecordTheRootBase) {
  const Tensor a = kael::clone(iota({4, 5}));
  EXPECT_FALSE(a.impl()->is_view());
  const Tensor row = kael::select(a, 0, 1);
  const Tensor elem = kael::select(row, 0, 2);
  EXPECT_TRUE(row.impl()->view_base().get() == a.impl());
  EXPECT_TRUE(elem.impl()->view_base().get() == a.impl());  // a view of a view: the root
  EXPECT_FALSE(kael::detach(a).impl()->is_view());            // as torch: x.detach()._base is None
  EXPECT_FALSE(kael::clone(row).impl()->is_view());
  EXPECT_FALSE(kael::contiguous(kael::transpose(a, 0, 1)).impl()->is_view());
  EXPECT_TRUE(kael::contiguous(a).is_same(a));
}

// ---------------------------------------------------------------- dims

TEST(WrapDim, InRange) {
  EXPECT_EQ(kael::wrap_dim("op", 0, 3), 0);
  EXPECT_EQ(kael::wrap_dim("op", 2, 3), 2);
  EXPECT_EQ(kael::wrap_dim("op", -1, 3), 2);
  EXPECT_EQ(kael::wrap_dim("op", -3, 3), 0);
  // 0-d tensors accept 0 and -1.
  EXPECT_EQ(kael::wrap_dim("op", 0, 0), 0);
  EXPECT_EQ(kael::wrap_dim("op", -1, 0), 0);
}

TEST(WrapDim, OutOfRangeIsIndexError) {
  EXPECT_THROW(kael::wrap_dim("op", 3, 3), kael::IndexError);
  EXPECT_THROW(kael::wrap_dim("op", -4, 3), kael::IndexError);
  EXPECT_THROW(kael::wrap_dim("op", 1, 0), kael::IndexError);
  EXPECT_THROW(kael::wrap_dim("op", -2, 0), kael::IndexError);
  const std::string msg = error_of([] { kael::wrap_dim("myop", 5, 3); });
  EXPECT_NE(msg.find("myop: dimension out of range (expected to be in range of [-3, 2], but got 5)"),
            std::string::npos)
      << msg;
}

TEST(WrapDim, TensorSizeAndStride) {
  const Tensor a = kael::zeros(I64{2, 3});
  EXPECT_EQ(a.size(0), 2);
  EXPECT_EQ(a.size(-1), 3);
  EXPECT_EQ(a.stride(-2), 3);
  EXPECT_THROW(a.size(2), kael::IndexError);
  EXPECT_THROW(a.stride(-3), kael::IndexError);
}

// A 0-d tensor has no dims to report a size or stride of (PyTorch: "dimension specified as
// 0 but tensor has no dimensions"). wrap_dim accepts 0 and -1 for 0-d tensors, and
// Tensor::size/stride index sizes()[0] of an empty shape with the result.
TEST(WrapDim, ZeroDimTensorHasNoSize) {
  const Tensor s = kael::full(kael::IntArrayRef{}, 1.0);
  ASSERT_EQ(s.dim(), 0);
  EXPECT_THROW(s.size(0), kael::IndexError);
  EXPECT_THROW(s.size(-1), kael::IndexError);
  EXPECT_THROW(s.stride(0), kael::IndexError);
}

// ---------------------------------------------------------------- error messages

// The parts of "<why> [kael check '<cond>' failed at <file>:<line>]" (Note [Error messages]).
struct ErrorParts {
  bool ok = false;
  std::string file, line, cond, why;
};

ErrorParts parse_error(const std::string& msg) {
  ErrorParts e;
  const std::string check = " [kael check '", failed = "' failed at ";
  const std::size_t c = msg.rfind(check);
  if (c == std::string::npos || c == 0 || msg.back() != ']') return e;
  const std::size_t f = msg.rfind(failed);
  if (f == std::string::npos || f <= c + check.size()) return e;
  const std::string where = msg.substr(f + failed.size(), msg.size() - 1 - f - failed.size());
  const std::size_t colon = where.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == where.size()) return e;
  e.file = where.substr(0, colon);
  e.line = where.substr(colon + 1);
  for (char ch : e.line)
    if (ch < '0' || ch > '9') return e;
  e.cond = msg.substr(c + check.size(), f - c - check.size());
  e.why = msg.substr(0, c);
  e.ok = true;
  return e;
}

TEST(ErrorFormat, ParserSelfCheck) {
  const ErrorParts e = parse_error("op: y [kael check 'x' failed at a/b.cpp:12]");
  EXPECT_TRUE(e.ok);
  EXPECT_EQ(e.why, "op: y");
  EXPECT_EQ(e.cond, "x");
  EXPECT_EQ(e.file, "a/b.cpp");
  EXPECT_EQ(e.line, "12");
  EXPECT_FALSE(parse_error("op: y [kael check 'x' failed at a/b.cpp]").ok);
  EXPECT_FALSE(parse_error("op: y [check 'x' failed at a/b.cpp:12]").ok);
  EXPECT_FALSE(parse_error("op: y [kael check 'x' failed at a/b.cpp:1x]").ok);
  EXPECT_FALSE(parse_error(" [kael check 'x' failed at a/b.cpp:12]").ok);
  EXPECT_FALSE(parse_error("op: y [kael check 'x' failed at a/b.cpp:12").ok);
}

TEST(ErrorFormat, CoreErrorsHaveRelativePaths) {
  const std::string msg = error_of([] { kael::wrap_dim("myop", 7, 2); });
  const ErrorParts e = parse_error(msg);
  ASSERT_TRUE(e.ok) << msg;
  ASSERT_FALSE(e.file.empty());
  EXPECT_NE(e.file.front(), '/') << e.file;
  EXPECT_EQ(e.file, "aten/src/core/tensor.cpp");
  EXPECT_GT(std::stoi(e.line), 0);
  EXPECT_EQ(e.cond, "dim >= -n && dim < n");
  EXPECT_EQ(e.why.rfind("myop: ", 0), 0u) << e.why;
}

TEST(ErrorFormat, ErrorsFromHeadersAndGeneratedCodeHaveRelativePaths) {
  // check_has_tensor (an inline function in a header), a generated dispatch stub, a view op.
  const std::string from_header = error_of([] { kael::add(1, 2); });
  const std::string from_stub = error_of([] { kael::empty(I64{1}, std::nullopt, kael::parse_device("cuda")); });
  const std::string from_view = error_of([] { kael::view(kael::arange(6), I64{4}); });
  for (const std::string& msg : {from_header, from_stub, from_view}) {
    const ErrorParts e = parse_error(msg);
    ASSERT_TRUE(e.ok) << msg;
    ASSERT_FALSE(e.file.empty());
    EXPECT_NE(e.file.front(), '/') << msg;
    EXPECT_TRUE(e.file.rfind("aten/", 0) == 0 || e.file.rfind("build/", 0) == 0) << msg;
  }
  EXPECT_EQ(parse_error(from_header).file, "aten/include/kael/dispatch/keys.h");
  EXPECT_EQ(parse_error(from_stub).file, "aten/src/dispatch/dispatcher.cpp");
  EXPECT_EQ(parse_error(from_view).file, "aten/src/native/views.cpp");
  EXPECT_NE(from_header.find("add: expected at least one tensor argument"), std::string::npos) << from_header;
  EXPECT_NE(from_stub.find("empty is not implemented for CUDA"), std::string::npos) << from_stub;
}

TEST(ErrorFormat, CheckMacroFormatsAndThrowsTheRightClass) {
  const int line = __LINE__ + 2;
  try {
    KAEL_CHECK_VALUE(1 + 1 == 3, "op: " << 42 << " is not " << 2.5);
    FAIL() << "KAEL_CHECK_VALUE did not throw";
  } catch (const kael::ValueError& e) {
    const std::string where = "check '1 + 1 == 3' failed at test/cpp/test_shape.cpp:" + std::to_string(line);
    EXPECT_EQ(e.message(), "op: 42 is not 2.5");
    EXPECT_EQ(e.location(), where);
    EXPECT_EQ(std::string(e.what()), "op: 42 is not 2.5 [kael " + where + "]");
  }
  EXPECT_THROW(KAEL_CHECK_INDEX(false, "x"), kael::IndexError);
  EXPECT_THROW(KAEL_CHECK_TYPE(false, "x"), kael::TypeError);
  EXPECT_THROW(KAEL_CHECK(false, "x"), kael::Error);
  EXPECT_NO_THROW(KAEL_CHECK(true, "x"));
}

TEST(ErrorFormat, CheckEvaluatesConditionOnceAndMessageOnlyOnFailure) {
  int cond_calls = 0, msg_calls = 0;
  auto cond = [&] { ++cond_calls; return true; };
  auto why = [&] { ++msg_calls; return "why"; };
  KAEL_CHECK(cond(), why());
  EXPECT_EQ(cond_calls, 1);
  EXPECT_EQ(msg_calls, 0);
  EXPECT_THROW(KAEL_CHECK(!cond(), why()), kael::Error);
  EXPECT_EQ(cond_calls, 2);
  EXPECT_EQ(msg_calls, 1);
}

TEST(ErrorFormat, ErrorHierarchy) {
  EXPECT_THROW(throw kael::IndexError("x"), kael::Error);
  EXPECT_THROW(throw kael::ValueError("x"), kael::Error);
  EXPECT_THROW(throw kael::TypeError("x"), kael::Error);
  EXPECT_THROW(throw kael::NotImplementedError("x"), kael::Error);
  EXPECT_THROW(throw kael::Error("x"), std::runtime_error);
  // a dtype an op has no kernel for is NotImplementedError, as torch's dtype dispatch raises
  const I64 three{3};
  kael::testing::expect_exactly<kael::NotImplementedError>(
      [&] { kael::abs(kael::zeros(three, kael::ScalarType::Bool)); });
  kael::testing::expect_exactly<kael::NotImplementedError>(
      [&] { kael::rand(three, std::nullopt, kael::ScalarType::Int64); });
  // thrown without a check: no location, and what() is the message
  const kael::ValueError plain("op: plain");
  EXPECT_EQ(std::string(plain.what()), "op: plain");
  EXPECT_EQ(plain.message(), "op: plain");
  EXPECT_TRUE(plain.location().empty());
  EXPECT_EQ(kael::shape_str(I64{2, 3}), "[2, 3]");
  EXPECT_EQ(kael::shape_str(I64{}), "[]");
}

}  // namespace

namespace {

// Note [Maximum dims]: every C++ entry point that creates sizes stops at kMaxDims, before
// allocating, with a ValueError naming the op.
TEST(MaxDims, EntryPointsRejectMoreThan64Dims) {
  static_assert(kael::kMaxDims == 64);
  const I64 ok(64, 1), too_many(65, 1);
  EXPECT_EQ(kael::empty(ok).dim(), 64);
  auto expect_rejected = [](const char* op, auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << op << " accepted 65 dims";
    } catch (const kael::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(op) + ": a tensor has at most 64 dimensions (got 65)"),
                std::string::npos)
          << e.what();
    }
  };
  const Tensor one = kael::ones(I64{1});
  const Tensor t64 = kael::zeros(ok);
  expect_rejected("empty", [&] { kael::empty(too_many); });
  expect_rejected("empty_strided", [&] { kael::empty_strided(too_many, too_many); });
  expect_rejected("view", [&] { kael::view(one, too_many); });
  expect_rejected("reshape", [&] { kael::reshape(one, too_many); });
  expect_rejected("expand", [&] { kael::expand(one, too_many); });
  expect_rejected("as_strided", [&] { kael::as_strided(one, too_many, too_many); });
  expect_rejected("unsqueeze", [&] { kael::unsqueeze(t64, 0); });
  expect_rejected("tensor", [&] {
    kael::TensorImpl::make(t64.impl()->storage_ptr(), t64.dtype(), DimVector(too_many), DimVector(too_many), 0);
  });
}

}  // namespace
