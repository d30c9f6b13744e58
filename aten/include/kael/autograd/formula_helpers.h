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
Tensor prod_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<std::int64_t> dim,
                     bool keepdim);
Tensor extreme_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                        bool keepdim);
Tensor norm_backward(const Tensor& grad, const Tensor& self, double p, const Tensor& result,
                     std::optional<IntArrayRef> dim, bool keepdim);
Tensor logsumexp_backward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef dim, bool keepdim);
Tensor var_backward(const Tensor& grad, const Tensor& self, std::optional<IntArrayRef> dim, double correction,
                    bool keepdim);
Tensor std_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                    double correction, bool keepdim);
Tensor cumsum_backward(const Tensor& grad, const Tensor& self, std::int64_t dim);
Tensor cumprod_backward(const Tensor& grad, const Tensor& self, std::int64_t dim, const Tensor& result);
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

// The gradient of prod over dim (every dim when None): grad * (product of the other elements),
// exact when the input holds zeros (one zero: only it gets a gradient; two or more: none).
inline Var prod_backward(const Var& grad, const Var& self, const Var& result, std::optional<std::int64_t> dim,
                         bool keepdim) {
  return detail::prod_backward(grad, self, result, dim, keepdim);
}

// The gradient of amax/amin/max/min: grad shared evenly among the elements equal to the result
// (NaN matching NaN), as PyTorch's.
inline Var extreme_backward(const Var& grad, const Var& self, const Var& result, std::optional<IntArrayRef> dim,
                            bool keepdim) {
  return detail::extreme_backward(grad, self, result, dim, keepdim);
}

// The gradient of the vector p-norm (0 where the norm is 0).
inline Var norm_backward(const Var& grad, const Var& self, double p, const Var& result,
                         std::optional<IntArrayRef> dim, bool keepdim) {
  return detail::norm_backward(grad, self, p, result, dim, keepdim);
}

// The gradient of logsumexp: grad * exp(self - result).
inline Var logsumexp_backward(const Var& grad, const Var& self, const Var& result, IntArrayRef dim, bool keepdim) {
  return detail::logsumexp_backward(grad, self, result, dim, keepdim);
}

// The gradient of var: grad * 2 (self - mean) / (N - correction).
inline Var var_backward(const Var& grad, const Var& self, std::optional<IntArrayRef> dim, double correction,
                        bool keepdim) {
  return detail::var_backward(grad, self, dim, correction, keepdim);
}

// The gradient of std: var's with grad / (2 std), 0 where std is 0.
inline Var std_backward(const Var& grad, const Var& self, const Var& result, std::optional<IntArrayRef> dim,
                        double correction, bool keepdim) {
  return detail::std_backward(grad, self, result, dim, correction, keepdim);
}

// The gradient of cumsum: the reversed cumulative sum of grad along dim.
inline Var cumsum_backward(const Var& grad, const Var& self, std::int64_t dim) {
  return detail::cumsum_backward(grad, self, dim);
}

// The gradient of cumprod, exact when the input holds zeros.
inline Var cumprod_backward(const Var& grad, const Var& self, std::int64_t dim, const Var& result) {
  return detail::cumprod_backward(grad, self, dim, result);
}

}  // namespace kael::autograd
#endif
