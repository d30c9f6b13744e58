// Tests of the overlap classification (Note [Memory overlap]) and of copy_cpu, whose rules the
// Python tests cannot reach directly: PyTorch's copy_ raises on partial overlap, does nothing
// for a tensor copied onto itself, and kael reads a source it cannot tell apart from the
// destination from a snapshot.
#include <gtest/gtest.h>

#include "test_util.h"

#include <cstdint>
#include <string>
#include <vector>

#include "kael/core/mem_overlap.h"
#include "kael/native/pointwise.h"
#include "kael/ops.h"

namespace {

using kael::MemOverlap;
using kael::MemOverlapStatus;
using kael::Tensor;
using I64 = std::vector<std::int64_t>;

Tensor iota(I64 shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return kael::reshape(kael::arange(n), shape);
}

I64 values(const Tensor& t) {
  const Tensor c = kael::contiguous(t);
  const auto* p = c.data<std::int64_t>();
  return I64(p, p + c.numel());
}

Tensor step(const Tensor& t, std::int64_t start, std::int64_t step_size) {
  // t[start::step_size] of a 1-d tensor, through reshape/select (kael has no strided slice op)
  const std::int64_t n = (t.size(0) - start) / step_size;
  return kael::select(kael::reshape(kael::narrow(t, 0, start, n * step_size), I64{n, step_size}), 1, 0);
}

TEST(MemOverlap, DenseLayouts) {
  EXPECT_TRUE(kael::is_non_overlapping_and_dense(iota({3, 4})));
  EXPECT_TRUE(kael::is_non_overlapping_and_dense(kael::transpose(iota({3, 4}), 0, 1)));
  EXPECT_TRUE(kael::is_non_overlapping_and_dense(kael::permute(iota({2, 3, 4}), I64{2, 0, 1})));
  EXPECT_TRUE(kael::is_non_overlapping_and_dense(kael::select(iota({3, 4}), 0, 1)));
  EXPECT_TRUE(kael::is_non_overlapping_and_dense(kael::arange(0)));
  EXPECT_FALSE(kael::is_non_overlapping_and_dense(kael::narrow(iota({3, 4}), 1, 0, 2)));
  EXPECT_FALSE(kael::is_non_overlapping_and_dense(kael::select(iota({3, 4}), 1, 0)));
  EXPECT_FALSE(kael::is_non_overlapping_and_dense(kael::expand(iota({1, 4}), I64{3, 4})));
}

TEST(MemOverlap, Internal) {
  EXPECT_EQ(kael::has_internal_overlap(iota({3, 4})), MemOverlap::No);
  EXPECT_EQ(kael::has_internal_overlap(kael::expand(iota({1, 4}), I64{3, 4})), MemOverlap::Yes);
  EXPECT_EQ(kael::has_internal_overlap(kael::expand(iota({1, 4}), I64{1, 4})), MemOverlap::No);
  EXPECT_EQ(kael::has_internal_overlap(kael::narrow(iota({3, 4}), 1, 0, 2)), MemOverlap::TooHard);
  const std::string msg = kael::testing::error_of(
      [] { kael::assert_no_internal_overlap("op_", kael::expand(iota({1, 4}), I64{3, 4})); });
  EXPECT_NE(msg.find("op_: unsupported operation: more than one element of the written-to tensor refers to a "
                     "single memory location. Please clone() the tensor before performing the operation."),
            std::string::npos)
      << msg;
}

TEST(MemOverlap, Status) {
  const Tensor a = iota({3, 4});
  EXPECT_EQ(kael::get_overlap_status(a, a), MemOverlapStatus::Full);
  EXPECT_EQ(kael::get_overlap_status(a, kael::detach(a)), MemOverlapStatus::Full);  // another impl
  EXPECT_EQ(kael::get_overlap_status(a, kael::clone(a)), MemOverlapStatus::No);
  EXPECT_EQ(kael::get_overlap_status(a, kael::transpose(a, 0, 1)), MemOverlapStatus::Partial);  // same bytes
  EXPECT_EQ(kael::get_overlap_status(a, kael::select(a, 0, 0)), MemOverlapStatus::Partial);
  EXPECT_EQ(kael::get_overlap_status(kael::select(a, 0, 0), kael::select(a, 0, 1)), MemOverlapStatus::No);
  EXPECT_EQ(kael::get_overlap_status(kael::narrow(a, 0, 1, 2), kael::narrow(a, 0, 0, 2)), MemOverlapStatus::Partial);
  EXPECT_EQ(kael::get_overlap_status(kael::narrow(a, 1, 1, 2), kael::narrow(a, 1, 0, 2)), MemOverlapStatus::TooHard);
  EXPECT_EQ(kael::get_overlap_status(a, kael::arange(0)), MemOverlapStatus::No);
  const std::string msg =
      kael::testing::error_of([&] { kael::assert_no_partial_overlap("op_", a, kael::select(a, 0, 0)); });
  EXPECT_NE(msg.find("op_: unsupported operation: some elements of the input tensor and the written-to tensor "
                     "refer to a single memory location."),
            std::string::npos)
      << msg;
  EXPECT_NO_THROW(kael::assert_no_partial_overlap("op_", a, a));
  EXPECT_THROW(kael::assert_no_overlap("op", a, a), kael::Error);  // Full counts for no-overlap ops
  EXPECT_NO_THROW(kael::assert_no_overlap("op", a, kael::clone(a)));
}

TEST(MemOverlap, MayShareMemory) {
  const Tensor v = kael::arange(12);
  EXPECT_FALSE(kael::may_share_memory(step(v, 0, 2), step(v, 1, 2)));  // interleaved
  EXPECT_TRUE(kael::may_share_memory(step(v, 0, 2), step(v, 2, 2)));
  EXPECT_TRUE(kael::may_share_memory(step(v, 0, 2), kael::narrow(v, 0, 3, 4)));
  EXPECT_FALSE(kael::may_share_memory(kael::narrow(v, 0, 0, 6), kael::narrow(v, 0, 6, 6)));
  EXPECT_FALSE(kael::may_share_memory(step(v, 0, 3), step(v, 1, 3)));
  EXPECT_FALSE(kael::may_share_memory(v, kael::arange(12)));
  // columns 0 and 2 of a 3x4 matrix: stride 4 and offset 2 never meet
  const Tensor m = iota({3, 4});
  EXPECT_FALSE(kael::may_share_memory(kael::select(m, 1, 0), kael::select(m, 1, 2)));
  EXPECT_TRUE(kael::may_share_memory(kael::narrow(m, 1, 0, 2), kael::narrow(m, 1, 1, 2)));
}

TEST(CopyCpu, PartialOverlapRaisesBeforeWriting) {
  const Tensor v = kael::arange(6);
  const I64 before = values(v);
  EXPECT_THROW(kael::native::copy_cpu(kael::narrow(v, 0, 1, 5), kael::narrow(v, 0, 0, 5)), kael::Error);
  EXPECT_THROW(kael::native::copy_cpu(v, kael::select(v, 0, 2)), kael::Error);  // as torch's x.copy_(x[2])
  EXPECT_EQ(values(v), before);
  EXPECT_THROW(kael::native::copy_cpu(kael::expand(kael::narrow(v, 0, 0, 1), I64{4}), kael::arange(4)),
               kael::Error);
}

TEST(CopyCpu, FullOverlapIsANoOp) {
  const Tensor v = kael::arange(6);
  kael::native::copy_cpu(v, kael::detach(v));
  EXPECT_EQ(values(v), (I64{0, 1, 2, 3, 4, 5}));
}

TEST(CopyCpu, OverlapTooHardToTellReadsTheSourceFirst) {
  // v[::2] = v[1:4]: a forward copy would read v[2] after writing it (PyTorch gives 0 1 1 3 2 5);
  // every element must get the value the source had before the copy.
  const Tensor v = kael::arange(6);
  kael::native::copy_cpu(step(v, 0, 2), kael::narrow(v, 0, 1, 3));
  EXPECT_EQ(values(v), (I64{1, 1, 2, 3, 3, 5}));
  const Tensor m = iota({3, 4});
  kael::native::copy_cpu(kael::narrow(kael::narrow(m, 0, 1, 2), 1, 1, 2),
                         kael::narrow(kael::narrow(m, 0, 0, 2), 1, 0, 2));
  EXPECT_EQ(values(m), (I64{0, 1, 2, 3, 4, 0, 1, 7, 8, 4, 5, 11}));
}

TEST(CopyCpu, DisjointInterleavedCopy) {
  const Tensor v = kael::arange(7);
  kael::native::copy_cpu(step(v, 0, 2), step(v, 1, 2));
  EXPECT_EQ(values(v), (I64{1, 1, 3, 3, 5, 5, 6}));
}

}  // namespace
