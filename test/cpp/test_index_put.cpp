// The advanced-indexing kernels behind t[idx] and t[idx] = v: _index (gather) and index_put_
// (write or accumulate), on small cases worked out by hand (Note [index_put]); test/python compares
// the Python indexing built on them with PyTorch.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kael/core/error.h"
#include "kael/ops.h"
#include "test_util.h"

namespace {

using kael::ScalarType;
using kael::Tensor;

Tensor doubles(kael::IntArrayRef shape, std::vector<double> v) {
  Tensor t = kael::empty(shape, ScalarType::Float64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return t;
}

Tensor longs(kael::IntArrayRef shape, std::vector<std::int64_t> v) {
  Tensor t = kael::empty(shape, ScalarType::Int64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int64_t>()[i] = v[i];
  return t;
}

Tensor longs(std::vector<std::int64_t> v) {
  const std::int64_t n[] = {static_cast<std::int64_t>(v.size())};
  return longs(n, std::move(v));
}

Tensor bools(kael::IntArrayRef shape, std::vector<bool> v) {
  Tensor t = kael::empty(shape, ScalarType::Bool);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

std::vector<std::int64_t> sizes(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

// [[0, 1], [2, 3], [4, 5]]
Tensor grid32() {
  const std::int64_t s[] = {3, 2};
  return doubles(s, {0, 1, 2, 3, 4, 5});
}

TEST(IndexKernel, GathersRowsWithOneIndexAndKeepsTheRest) {
  const Tensor idx[] = {longs({2, 0, 2})};
  const Tensor r = kael::_index(grid32(), idx);
  EXPECT_EQ(sizes(r), (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(values(r), (std::vector<double>{4, 5, 0, 1, 4, 5}));
}

TEST(IndexKernel, NegativeIndicesCountFromTheEnd) {
  const Tensor idx[] = {longs({-1, -3})};
  EXPECT_EQ(values(kael::_index(grid32(), idx)), (std::vector<double>{4, 5, 0, 1}));
}

TEST(IndexKernel, SeveralIndicesBroadcastTogether) {
  // rows [[0], [2]] with cols [1, 0] broadcast to [2, 2]: [[g[0,1], g[0,0]], [g[2,1], g[2,0]]]
  const std::int64_t s21[] = {2, 1};
  const Tensor idx[] = {longs(s21, {0, 2}), longs({1, 0})};
  const Tensor r = kael::_index(grid32(), idx);
  EXPECT_EQ(sizes(r), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(values(r), (std::vector<double>{1, 0, 5, 4}));
}

TEST(IndexKernel, Int32IndicesAndNonContiguousSelf) {
  const Tensor t = kael::transpose(grid32(), 0, 1);  // [[0, 2, 4], [1, 3, 5]]
  const Tensor idx[] = {kael::to(longs({1}), ScalarType::Int32)};
  EXPECT_EQ(values(kael::_index(t, idx)), (std::vector<double>{1, 3, 5}));
}

TEST(IndexKernel, BoolMasksSelectTheTruePositions) {
  const std::int64_t s3[] = {3}, s32[] = {3, 2};
  const Tensor rows[] = {bools(s3, {true, false, true})};
  EXPECT_EQ(values(kael::_index(grid32(), rows)), (std::vector<double>{0, 1, 4, 5}));
  const Tensor cells[] = {bools(s32, {false, true, true, false, false, true})};
  const Tensor r = kael::_index(grid32(), cells);
  EXPECT_EQ(sizes(r), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(values(r), (std::vector<double>{1, 2, 5}));
  const Tensor none[] = {bools(s3, {false, false, false})};
  EXPECT_EQ(sizes(kael::_index(grid32(), none)), (std::vector<std::int64_t>{0, 2}));
}

TEST(IndexKernel, EmptyIndexGivesAnEmptyResult) {
  const Tensor idx[] = {longs({})};
  EXPECT_EQ(sizes(kael::_index(grid32(), idx)), (std::vector<std::int64_t>{0, 2}));
}

TEST(IndexKernel, BadIndicesAreIndexErrors) {
  const Tensor high[] = {longs({0, 3})};
  const std::string msg = kael::testing::error_of([&] { kael::_index(grid32(), high); });
  EXPECT_NE(msg.find("index 3 is out of bounds for dimension 0 with size 3"), std::string::npos) << msg;
  const Tensor low[] = {longs({-4})};
  EXPECT_THROW(kael::_index(grid32(), low), kael::IndexError);
  const Tensor floats[] = {doubles(std::vector<std::int64_t>{1}, {0})};
  EXPECT_THROW(kael::_index(grid32(), floats), kael::IndexError);
  const Tensor three[] = {longs({0}), longs({0}), longs({0})};
  EXPECT_THROW(kael::_index(grid32(), three), kael::IndexError);
  const std::int64_t s2[] = {2};
  const Tensor short_mask[] = {bools(s2, {true, false})};
  EXPECT_THROW(kael::_index(grid32(), short_mask), kael::IndexError);
  const Tensor mismatched[] = {longs({0, 1}), longs({0, 1, 0})};
  // torch's IndexError "shape mismatch: indexing tensors could not be broadcast together"
  kael::testing::expect_exactly<kael::IndexError>([&] { kael::_index(grid32(), mismatched); });
}

TEST(IndexPutKernel, WritesRowsAndBroadcastsValues) {
  Tensor t = grid32();
  const Tensor idx[] = {longs({0, 2})};
  const std::int64_t s1[] = {1};
  kael::index_put_(t, idx, doubles(s1, {9}));  // one value for every element of rows 0 and 2
  EXPECT_EQ(values(t), (std::vector<double>{9, 9, 2, 3, 9, 9}));
  const std::int64_t s2[] = {2};
  kael::index_put_(t, idx, doubles(s2, {7, 8}));  // a row broadcast to both rows
  EXPECT_EQ(values(t), (std::vector<double>{7, 8, 2, 3, 7, 8}));
}

TEST(IndexPutKernel, ElementsThroughTwoIndices) {
  Tensor t = grid32();
  const Tensor idx[] = {longs({0, 1, 2}), longs({1, 0, -1})};
  kael::index_put_(t, idx, doubles(std::vector<std::int64_t>{3}, {10, 20, 30}));
  EXPECT_EQ(values(t), (std::vector<double>{0, 10, 20, 3, 4, 30}));
}

TEST(IndexPutKernel, AccumulateAddsDuplicatesAndWritingKeepsTheLast) {
  const std::int64_t s4[] = {4};
  Tensor acc = doubles(s4, {1, 1, 1, 1});
  const Tensor idx[] = {longs({0, 0, 2, 0})};
  const Tensor v = doubles(s4, {1, 2, 3, 4});
  kael::index_put_(acc, idx, v, /*accumulate=*/true);
  EXPECT_EQ(values(acc), (std::vector<double>{8, 1, 4, 1}));
  Tensor put = doubles(s4, {1, 1, 1, 1});
  kael::index_put_(put, idx, v);
  EXPECT_EQ(values(put), (std::vector<double>{4, 1, 3, 1}));  // serial loop: the last write wins
}

TEST(IndexPutKernel, AccumulateOnIntegersWrapsAndOnBoolsIsOr) {
  const std::int64_t s1[] = {1};
  Tensor big = longs(s1, {INT64_MAX});
  const Tensor idx[] = {longs({0})};
  kael::index_put_(big, idx, longs(s1, {1}), true);
  EXPECT_EQ(big.data<std::int64_t>()[0], INT64_MIN);
  const std::int64_t s2[] = {2};
  Tensor b = bools(s2, {false, true});
  const Tensor both[] = {longs({0, 1})};
  kael::index_put_(b, both, bools(s2, {true, false}), true);
  EXPECT_TRUE(b.data<bool>()[0]);
  EXPECT_TRUE(b.data<bool>()[1]);
}

TEST(IndexPutKernel, BoolMaskAssignment) {
  Tensor t = grid32();
  const std::int64_t s32[] = {3, 2};
  const Tensor mask[] = {bools(s32, {true, false, false, true, true, false})};
  kael::index_put_(t, mask, doubles(kael::IntArrayRef{}, {-1}));  // a 0-d value
  EXPECT_EQ(values(t), (std::vector<double>{-1, 1, 2, -1, -1, 5}));
}

TEST(IndexPutKernel, FunctionalVariantLeavesSelfAlone) {
  const Tensor t = grid32();
  const Tensor idx[] = {longs({1})};
  const std::int64_t s1[] = {1};
  const Tensor r = kael::index_put(t, idx, doubles(s1, {5}), true);
  EXPECT_EQ(values(r), (std::vector<double>{0, 1, 7, 8, 4, 5}));
  EXPECT_EQ(values(t), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

TEST(IndexPutKernel, EveryCheckRunsBeforeTheFirstWrite) {
  const std::vector<double> untouched{0, 1, 2, 3, 4, 5};
  const std::int64_t s1[] = {1}, s3[] = {3};
  Tensor t = grid32();
  const Tensor late_bad[] = {longs({0, 1, 5})};  // valid positions first, then one out of range
  EXPECT_THROW(kael::index_put_(t, late_bad, doubles(s1, {9})), kael::IndexError);
  EXPECT_EQ(values(t), untouched);
  const Tensor ok[] = {longs({0, 1})};
  EXPECT_THROW(kael::index_put_(t, ok, longs(s1, {9})), kael::Error);  // dtype mismatch
  EXPECT_EQ(values(t), untouched);
  const std::string msg = kael::testing::error_of([&] { kael::index_put_(t, ok, doubles(s3, {1, 2, 3})); });
  EXPECT_NE(msg.find("index_put_: shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result "
                     "of shape [2, 2]"),
            std::string::npos)
      << msg;
  kael::testing::expect_exactly<kael::Error>([&] { kael::index_put_(t, ok, doubles(s3, {1, 2, 3})); });
  EXPECT_EQ(values(t), untouched);
}

TEST(IndexPutKernel, ValuesOverlappingSelf) {
  // values that share elements with self: an error before any write where the overlap is
  // certain (as torch), else read from a snapshot taken before the first write (Note [index_put])
  const std::int64_t s4[] = {4};
  Tensor t = doubles(s4, {0, 1, 2, 3});
  const Tensor idx[] = {longs({1, 2, 3})};
  const std::string msg = kael::testing::error_of([&] { kael::index_put_(t, idx, kael::slice(t, 0, 0, 3, 1)); });
  EXPECT_NE(msg.find("index_put_: unsupported operation: some elements of the input tensor and the written-to "
                     "tensor refer to a single memory location"),
            std::string::npos)
      << msg;
  EXPECT_EQ(values(t), (std::vector<double>{0, 1, 2, 3}));
  const Tensor whole[] = {longs({3, 2, 1, 0})};
  EXPECT_THROW(kael::index_put_(t, whole, t), kael::Error);
  EXPECT_EQ(values(t), (std::vector<double>{0, 1, 2, 3}));
  Tensor g = grid32();  // column 0 written into column 1 through indices
  const Tensor cells[] = {longs({0, 1, 2}), longs({1, 1, 1})};
  kael::index_put_(g, cells, kael::select(g, 1, 0));
  EXPECT_EQ(values(g), (std::vector<double>{0, 0, 2, 2, 4, 4}));
}

TEST(IndexPutKernel, EmptyIndicesAndEmptyValuesAreNoOps) {
  Tensor t = grid32();
  const Tensor none[] = {longs({})};
  const std::int64_t s02[] = {0, 2}, s2[] = {2};
  kael::index_put_(t, none, doubles(s02, {}));
  kael::index_put_(t, none, doubles(s2, {7, 8}), true);  // broadcast to [0, 2]: nothing to add
  EXPECT_EQ(values(t), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  const std::int64_t s0[] = {0};
  kael::testing::expect_exactly<kael::Error>([&] { kael::index_put_(t, none, doubles(s0, {})); });  // [0] vs [0, 2]
}

}  // namespace
