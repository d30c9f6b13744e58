// The kernels of the list ops and unique (kael/native/index_ops.h) on small cases worked out by
// hand; test/python compares the registry ops built on them with PyTorch.
#include <gtest/gtest.h>

#include <vector>

#include "kael/core/error.h"
#include "kael/native/index_ops.h"
#include "kael/ops.h"
#include "test_util.h"

namespace {

using kael::Tensor;

Tensor doubles(kael::IntArrayRef shape, std::vector<double> v) {
  Tensor t = kael::empty(shape, kael::ScalarType::Float64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, kael::ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

std::vector<std::int64_t> sizes(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

TEST(ListOps, CatStackSplitChunk) {
  const std::int64_t s23[] = {2, 3}, s13[] = {1, 3};
  const Tensor a = doubles(s23, {1, 2, 3, 4, 5, 6}), b = doubles(s13, {7, 8, 9});
  const Tensor ab[] = {a, b};
  const Tensor c = kael::native::cat_impl(ab, 0);
  EXPECT_EQ(sizes(c), (std::vector<std::int64_t>{3, 3}));
  EXPECT_EQ(values(c), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  kael::testing::expect_exactly<kael::Error>([&] { kael::native::cat_impl(ab, 1); });  // RuntimeError, as torch
  const Tensor aa[] = {a, a};
  EXPECT_EQ(sizes(kael::native::stack_impl(aa, 1)), (std::vector<std::int64_t>{2, 2, 3}));
  EXPECT_EQ(values(kael::native::stack_impl(aa, 2)), (std::vector<double>{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
  const auto pieces = kael::native::split_impl(a, 2, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(values(pieces[1]), (std::vector<double>{3, 6}));
  EXPECT_EQ(pieces[0].impl()->storage(), a.impl()->storage());  // views
  EXPECT_EQ(kael::native::chunk_impl(a, 4, 1).size(), 3u);
  const std::int64_t s0[] = {0};
  EXPECT_EQ(kael::native::chunk_impl(kael::empty(s0, kael::ScalarType::Float64), 3, 0).size(), 3u);
}

TEST(ListOps, EinsumLowersToMatmulDiagonalAndSum) {
  const std::int64_t s23[] = {2, 3}, s32[] = {3, 2}, s22[] = {2, 2};
  const Tensor a = doubles(s23, {1, 2, 3, 4, 5, 6}), b = doubles(s32, {1, 0, 0, 1, 1, 1});
  const Tensor ab[] = {a, b};
  EXPECT_EQ(values(kael::native::einsum_impl("ij,jk->ik", ab)), values(kael::matmul(a, b)));
  EXPECT_EQ(values(kael::native::einsum_impl("ij,jk", ab)), values(kael::matmul(a, b)));
  EXPECT_EQ(values(kael::native::einsum_impl("ij,jk->ki", ab)), values(kael::transpose(kael::matmul(a, b), 0, 1)));
  EXPECT_EQ(values(kael::native::einsum_impl("ij,jk->", ab)), (std::vector<double>{30}));
  const Tensor m = doubles(s22, {1, 2, 3, 4});
  const Tensor mm[] = {m};
  EXPECT_EQ(values(kael::native::einsum_impl("ii->i", mm)), (std::vector<double>{1, 4}));
  EXPECT_EQ(values(kael::native::einsum_impl("ii", mm)), (std::vector<double>{5}));
  EXPECT_EQ(values(kael::native::einsum_impl("ij->j", mm)), (std::vector<double>{4, 6}));
  EXPECT_EQ(values(kael::native::einsum_impl("...j->j...", mm)), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_THROW(kael::native::einsum_impl("ij,jk->iz", ab), kael::Error);
  EXPECT_THROW(kael::native::einsum_impl("ijk", mm), kael::Error);
}

TEST(ListOps, UniqueSortsCountsAndInverts) {
  const std::int64_t s6[] = {6};
  const Tensor x = doubles(s6, {3, 1, 3, 2, 1, 3});
  const auto [values_, inverse, counts] = kael::native::unique_cpu(x, true, true, true);
  EXPECT_EQ(values(values_), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(values(inverse), (std::vector<double>{2, 0, 2, 1, 0, 2}));
  EXPECT_EQ(values(counts), (std::vector<double>{2, 1, 3}));
  const std::int64_t s32[] = {3, 2};
  const Tensor rows = doubles(s32, {1, 2, 0, 1, 1, 2});
  const auto [r, ri, rc] = kael::native::unique_dim_cpu(rows, 0, true, false, false);
  EXPECT_EQ(values(r), (std::vector<double>{0, 1, 1, 2}));
  EXPECT_EQ(values(ri), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(values(rc), (std::vector<double>{1, 2}));
}

}  // namespace
