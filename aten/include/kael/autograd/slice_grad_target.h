// Note [Slice gradients added in place]
// Splitting a tensor (split, chunk, a[:, i:j]) gives one SliceBackward node per piece. Each would
// scatter its piece's gradient into zeros of the whole tensor and the engine would add those up:
// for a qkv projection split in three, three fills and two adds of the whole (B, T, 3C) gradient,
// where PyTorch's SplitBackward concatenates once. So when the engine runs a SliceBackward node
// while it already holds a gradient for the sliced tensor that nothing else references (one
// owner, not a view, its storage its own, contiguous) and no graph is being recorded, it offers
// that gradient as the target: slice_backward adds the piece's gradient into its slice in place
// and returns the target itself, which the engine then keeps instead of adding. The first piece
// still scatters into zeros; the sum is the same, element by element, as the adds it replaces.
#pragma once

#include "kael/core/tensor.h"

namespace kael::autograd::detail {

// The gradient the running SliceBackward node may add into (null when none); set by the engine
// around one node's apply, taken (and cleared) by slice_backward.
Tensor*& slice_grad_target();

}  // namespace kael::autograd::detail
