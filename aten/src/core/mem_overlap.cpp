// See Note [Memory overlap] in kael/core/mem_overlap.h.
#include "kael/core/mem_overlap.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "kael/core/error.h"

namespace kael {

namespace {

// The bytes [begin, end) that the elements of a non-empty tensor occupy.
struct ByteRange {
  std::uintptr_t begin = 0, end = 0;
};

ByteRange byte_range(const Tensor& t) {
  const std::int64_t isz = t.element_size();
  std::int64_t low = 0, high = 0;  // element offsets from the first element
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t span = (t.sizes()[d] - 1) * t.strides()[d];
    (span < 0 ? low : high) += span;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(t.data_ptr());
  return {base + static_cast<std::uintptr_t>(low * isz), base + static_cast<std::uintptr_t>((high + 1) * isz)};
}

bool intersect(const ByteRange& a, const ByteRange& b) { return a.begin < b.end && b.begin < a.end; }

constexpr const char* kClone = "Please clone() the tensor before performing the operation.";

}  // namespace

bool is_non_overlapping_and_dense(const Tensor& t) {
  // PyTorch's compute_non_overlapping_and_dense: dims of size >= 2 sorted by stride must be
  // contiguous in that order.
  const std::int64_t nd = t.dim();
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  if (nd == 1) return sizes[0] < 2 || strides[0] == 1;
  DimVector perm(static_cast<std::size_t>(nd));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t a, std::int64_t b) {
    if (sizes[a] < 2) return false;
    if (sizes[b] < 2) return true;
    return strides[a] < strides[b];
  });
  std::int64_t required = 1;
  for (const std::int64_t d : perm) {
    if (sizes[d] < 2) return true;
    if (strides[d] != required) return false;
    required *= sizes[d];
  }
  return true;
}

MemOverlap has_internal_overlap(const Tensor& t) {
  if (t.numel() == 0) return MemOverlap::No;  // no element to write twice (an expanded (2, 0, 3))
  if (is_non_overlapping_and_dense(t)) return MemOverlap::No;
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return MemOverlap::Yes;
  return MemOverlap::TooHard;
}

MemOverlapStatus get_overlap_status(const Tensor& a, const Tensor& b) {
  if (a.impl() == b.impl()) return MemOverlapStatus::Full;
  if (a.numel() == 0 || b.numel() == 0) return MemOverlapStatus::No;
  const ByteRange ra = byte_range(a), rb = byte_range(b);
  if (!intersect(ra, rb)) return MemOverlapStatus::No;
  if (!is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b)) return MemOverlapStatus::TooHard;
  if (ra.begin == rb.begin && ra.end == rb.end && std::ranges::equal(a.strides(), b.strides()))
    return MemOverlapStatus::Full;
  return MemOverlapStatus::Partial;
}

bool may_share_memory(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const ByteRange ra = byte_range(a), rb = byte_range(b);
  if (!intersect(ra, rb)) return false;
  // Every element of a starts at ra.begin + (a multiple of g) and every element of b at
  // rb.begin + (a multiple of g), g the gcd of all byte strides. Elements [p, p + isa) and
  // [q, q + isb) meet iff q - p lies in (-isb, isa), and q - p is congruent to r mod g.
  std::int64_t g = 0;
  for (const Tensor* t : {&a, &b})
    for (std::int64_t d = 0; d < t->dim(); ++d)
      if (t->sizes()[d] > 1) g = std::gcd(g, t->strides()[d] * t->element_size());
  if (g == 0) return true;  // one element each, and their ranges intersect
  const std::int64_t diff = static_cast<std::int64_t>(rb.begin - ra.begin);
  const std::int64_t r = ((diff % g) + g) % g;
  return r < a.element_size() || g - r < b.element_size();
}

void assert_no_internal_overlap(const char* op, const Tensor& t) {
  KAEL_CHECK(has_internal_overlap(t) != MemOverlap::Yes,
             op << ": unsupported operation: more than one element of the written-to tensor refers to a single "
                   "memory location. "
                << kClone);
}

void assert_no_partial_overlap(const char* op, const Tensor& written, const Tensor& input) {
  KAEL_CHECK(get_overlap_status(written, input) != MemOverlapStatus::Partial,
             op << ": unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                   "single memory location. "
                << kClone);
}

void assert_no_overlap(const char* op, const Tensor& written, const Tensor& input) {
  const MemOverlapStatus s = get_overlap_status(written, input);
  KAEL_CHECK(s != MemOverlapStatus::Partial && s != MemOverlapStatus::Full,
             op << ": unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                   "single memory location. "
                << kClone);
}

}  // namespace kael
