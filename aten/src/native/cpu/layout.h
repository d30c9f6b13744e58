#pragma once
// Channels-last layouts as the CPU kernels that walk them directly see them (batch norm, max
// pooling): PyTorch's channels_last (4-d, NHWC order) and channels_last_3d (5-d, NDHWC).

#include <cstdint>

#include "kael/core/small_vector.h"
#include "kael/core/tensor.h"

namespace kael::native {

// Whether t (4-d or 5-d) is dense with dim 1 innermost and the others in order: channels-last.
// A size-1 dim may have any stride.
inline bool channels_last_dense(const Tensor& t) {
  if (t.dim() != 4 && t.dim() != 5) return false;
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  std::int64_t expected = 1;
  const auto next = [&](std::int64_t d) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
    return true;
  };
  if (!next(1)) return false;
  for (std::int64_t d = t.dim() - 1; d >= 2; --d)
    if (!next(d)) return false;
  return next(0);
}

// The channels-last strides of a 4-d or 5-d shape (PyTorch's: products of the real sizes).
inline DimVector channels_last_strides(IntArrayRef sizes) {
  const std::int64_t nd = static_cast<std::int64_t>(sizes.size());
  DimVector strides(nd);
  std::int64_t s = 1;
  strides[1] = s;
  s *= sizes[1];
  for (std::int64_t d = nd - 1; d >= 2; --d) {
    strides[d] = s;
    s *= sizes[d];
  }
  strides[0] = s;
  return strides;
}

}  // namespace kael::native
