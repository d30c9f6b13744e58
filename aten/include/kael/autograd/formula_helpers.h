#pragma once
// Helpers that the derivative formulas of native_functions.yaml call (see the generated
// kael/autograd/formulas.h). Each is built from registered ops, so it runs on any device and
// is itself differentiable. The work is done over plain Tensors in formula_helpers.cpp, which
// does not include kael/var.h (so adding an op does not recompile it); the inline wrappers
// below give formulas Vars back.

#include <optional>

#include "kael/core/tensor.h"

namespace kael::autograd {

namespace detail {
Tensor maybe_multiply(const Tensor& grad, const Scalar& alpha);
Tensor sum_to_size(const Tensor& grad, IntArrayRef sizes);
Tensor sum_backward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim);
Tensor mean_backward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim);
}  // namespace detail

}  // namespace kael::autograd

#ifdef KAEL_FORMULA_HELPERS_VAR
#include "kael/var.h"

namespace kael::autograd {

// grad * alpha, or grad itself when alpha is 1 (no op runs).
inline Var maybe_multiply(const Var& grad, const Scalar& alpha) { return detail::maybe_multiply(grad, alpha); }

// Sums grad down to `sizes`, undoing broadcasting: leading dims are summed away, and dims where
// `sizes` has 1 and grad does not are summed with keepdim.
inline Var sum_to_size(const Var& grad, IntArrayRef sizes) { return detail::sum_to_size(grad, sizes); }

// The gradient of sum(self, dim, keepdim) for an input of `sizes`: grad with the reduced dims
// restored (when keepdim was false), expanded to `sizes`. dim None (or []) reduces every dim.
inline Var sum_backward(const Var& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  return detail::sum_backward(grad, sizes, dim, keepdim);
}

// The gradient of mean: sum_backward divided by the number of elements each output averaged.
inline Var mean_backward(const Var& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  return detail::mean_backward(grad, sizes, dim, keepdim);
}

}  // namespace kael::autograd
#endif
