#pragma once
// Helpers that the derivative formulas of native_functions.yaml call (see the generated
// kael/autograd/formulas.h). Each is built from registered ops, so it runs on any device and
// is itself differentiable.

#include <optional>

#include "kael/var.h"

namespace kael::autograd {

// grad * alpha, or grad itself when alpha is 1 (no op runs).
Var maybe_multiply(const Var& grad, const Scalar& alpha);

// Sums grad down to `sizes`, undoing broadcasting: leading dims are summed away, and dims where
// `sizes` has 1 and grad does not are summed with keepdim.
Var sum_to_size(const Var& grad, IntArrayRef sizes);

// The gradient of sum(self, dim, keepdim) for an input of `sizes`: grad with the reduced dims
// restored (when keepdim was false), expanded to `sizes`. dim None (or []) reduces every dim.
Var sum_backward(const Var& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim);

// The gradient of mean: sum_backward divided by the number of elements each output averaged.
Var mean_backward(const Var& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim);

}  // namespace kael::autograd
