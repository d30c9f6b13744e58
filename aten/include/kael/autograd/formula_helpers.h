#pragma once
// Helpers that the derivative formulas of native_functions.yaml call (see the generated
// kael/autograd/formulas.h). Each is built from registered ops, so it runs on any device and
// is itself differentiable. The work is done over plain Tensors in formula_helpers.cpp, which
// does not include kael/var.h (so adding an op does not recompile it); the inline wrappers
// below give formulas Vars back.

#include <optional>
#include <vector>
#include <string_view>

#include "kael/core/tensor.h"

namespace kael::autograd {

namespace detail {
Tensor maybe_multiply(const Tensor& grad, const Scalar& alpha);
Tensor sum_to(const Tensor& grad, IntArrayRef sizes);  // kael::sum_to_size (a registry op)
Tensor sum_backward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim);
Tensor mean_backward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim);
// neural-network ops (nn_formula_helpers.cpp)
Tensor softmax_backward(const Tensor& grad, const Tensor& result, std::int64_t dim, ScalarType dtype);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& result, std::int64_t dim, ScalarType dtype);
Tensor standardize_backward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef normalized_shape,
                            double eps);
Tensor layer_norm_backward_input(const Tensor& grad, const Tensor& self, IntArrayRef normalized_shape,
                                 const std::optional<Tensor>& weight, double eps);
Tensor layer_norm_backward_weight(const Tensor& grad, const Tensor& self, IntArrayRef normalized_shape, double eps);
Tensor layer_norm_backward_bias(const Tensor& grad, IntArrayRef normalized_shape);
Tensor batch_norm_backward_input(const Tensor& grad, const Tensor& self, const std::optional<Tensor>& weight,
                                 const Tensor& save_mean, const Tensor& save_invstd, bool training, double eps);
Tensor batch_norm_backward_weight(const Tensor& grad, const Tensor& self, const Tensor& weight, const Tensor& save_mean,
                                  const Tensor& save_invstd, bool training, double eps);
Tensor batch_norm_backward_bias(const Tensor& grad, const Tensor& bias);
Tensor gelu_backward(const Tensor& grad, const Tensor& self);
Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& self);
Tensor sdpa_backward(int which, const Tensor& grad, const Tensor& query, const Tensor& key, const Tensor& value,
                     const std::optional<Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
                     double dropout_p, std::int64_t seed, std::int64_t offset);
Tensor repeat_backward(const Tensor& grad, IntArrayRef repeats, IntArrayRef sizes);
Tensor roll_backward(const Tensor& grad, IntArrayRef shifts, IntArrayRef dims);
Tensor diagonal_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t offset, std::int64_t dim1,
                         std::int64_t dim2);
Tensor index_select_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t dim, const Tensor& index);
Tensor gather_backward(const Tensor& grad, const Tensor& self, std::int64_t dim, const Tensor& index);
Tensor index_add_source_backward(const Tensor& grad, std::int64_t dim, const Tensor& index, const Tensor& source,
                                 const Scalar& alpha);
Tensor masked_select_backward(const Tensor& grad, const Tensor& self, const Tensor& mask);
Tensor prod_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<std::int64_t> dim,
                     bool keepdim);
Tensor extreme_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                        bool keepdim);
Tensor evenly_distribute_backward(const Tensor& grad, const Tensor& self, const Tensor& value);
Tensor norm_backward(const Tensor& grad, const Tensor& self, double p, const Tensor& result,
                     std::optional<IntArrayRef> dim, bool keepdim);
Tensor logsumexp_backward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef dim, bool keepdim);
Tensor var_backward(const Tensor& grad, const Tensor& self, std::optional<IntArrayRef> dim, double correction,
                    bool keepdim);
Tensor std_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                    double correction, bool keepdim);
Tensor cumsum_backward(const Tensor& grad, const Tensor& self, std::int64_t dim);
Tensor sinc_backward(const Tensor& grad, const Tensor& self);
Tensor logit_backward(const Tensor& grad, const Tensor& self, const Scalar& eps);
Tensor cumprod_backward(const Tensor& grad, const Tensor& self, std::int64_t dim, const Tensor& result);
// views and copies (view_formula_helpers.cpp)
Tensor as_strided_backward(const Tensor& grad, const Tensor& self, IntArrayRef size, IntArrayRef stride,
                           std::optional<std::int64_t> storage_offset);
Tensor slice_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t dim, std::optional<std::int64_t> start,
                      std::optional<std::int64_t> end, std::int64_t step);
Tensor select_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t dim, std::int64_t index);
Tensor permute_backward(const Tensor& grad, IntArrayRef dims);
std::vector<Tensor> cat_backward(const Tensor& grad, TensorList tensors, std::int64_t dim);
Tensor matmul_backward(int which, const Tensor& grad, const Tensor& self, const Tensor& other);
Tensor mm_mat2_backward(const Tensor& grad, const Tensor& mat1, const Tensor& mat2);
// ops returning values and indices along one dim (values_indices_formula_helpers.cpp)
Tensor value_selecting_reduction_backward(const Tensor& grad, std::int64_t dim, const Tensor& indices,
                                          IntArrayRef sizes, bool keepdim);
Tensor scatter_reduce_backward(bool for_src, const Tensor& grad, const Tensor& self, std::int64_t dim,
                               const Tensor& index, const Tensor& src, std::string_view reduce, bool include_self,
                               const Tensor& result);
// backward kernels and index_put (double_backward_formula_helpers.cpp)
Tensor index_put_self_backward(const Tensor& grad, TensorList indices, IntArrayRef values_sizes, bool accumulate);
Tensor gelu_double_backward(const Tensor& grad, const Tensor& self);
Tensor gelu_tanh_double_backward(const Tensor& grad, const Tensor& self);
Tensor embedding_double_backward(const Tensor& grad, const Tensor& indices, std::int64_t padding_idx);
Tensor cross_entropy_losses_double_backward_grad(const Tensor& grad, const Tensor& self, const Tensor& target,
                                                 std::int64_t ignore_index, double label_smoothing);
Tensor cross_entropy_losses_double_backward_self(const Tensor& grad, const Tensor& grad_output, const Tensor& self,
                                                 const Tensor& target, std::int64_t ignore_index);
}  // namespace detail

}  // namespace kael::autograd

#ifdef KAEL_FORMULA_HELPERS_VAR
#include "kael/var.h"

namespace kael::autograd {

// grad * alpha, or grad itself when alpha is 1 (no op runs).
inline Var maybe_multiply(const Var& grad, const Scalar& alpha) { return detail::maybe_multiply(grad, alpha); }

// Sums grad down to `sizes`, undoing broadcasting: leading dims are summed away, and dims where
// `sizes` has 1 and grad does not are summed with keepdim.
inline Var sum_to_size(const Var& grad, IntArrayRef sizes) { return detail::sum_to(grad, sizes); }
// mat1^T @ grad, the gradient of mat1 @ mat2 for mat2; computed as (grad^T @ mat1)^T when mat2 is
// a transposed contiguous matrix (Linear's weight.t()), so that its gradient, transposed back,
// is contiguous.
inline Var mm_mat2_backward(const Var& grad, const Var& mat1, const Var& mat2) {
  return detail::mm_mat2_backward(grad, mat1, mat2);
}

// The gradient of sum(self, dim, keepdim) for an input of `sizes`: grad with the reduced dims
// restored (when keepdim was false), expanded to `sizes`. dim None (or []) reduces every dim.
inline Var sum_backward(const Var& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  return detail::sum_backward(grad, sizes, dim, keepdim);
}

// The gradient of mean: sum_backward divided by the number of elements each output averaged.
inline Var mean_backward(const Var& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  return detail::mean_backward(grad, sizes, dim, keepdim);
}

// ---- neural-network ops

// The gradients of softmax and log_softmax from their result, in the input's dtype.
inline Var softmax_backward(const Var& grad, const Var& result, std::int64_t dim, ScalarType dtype) {
  return detail::softmax_backward(grad, result, dim, dtype);
}
inline Var log_softmax_backward(const Var& grad, const Var& result, std::int64_t dim, ScalarType dtype) {
  return detail::log_softmax_backward(grad, result, dim, dtype);
}
// The gradient of standardize: rstd * (g - mean(g) - y * mean(g * y)) over the normalised dims.
inline Var standardize_backward(const Var& grad, const Var& self, const Var& result, IntArrayRef normalized_shape,
                                double eps) {
  return detail::standardize_backward(grad, self, result, normalized_shape, eps);
}
inline std::optional<Tensor> as_tensor(const std::optional<Var>& v) {
  return v ? std::optional<Tensor>(*v) : std::nullopt;
}
inline Var layer_norm_backward_input(const Var& grad, const Var& self, IntArrayRef normalized_shape,
                                     const std::optional<Var>& weight, double eps) {
  return detail::layer_norm_backward_input(grad, self, normalized_shape, as_tensor(weight), eps);
}
inline Var layer_norm_backward_weight(const Var& grad, const Var& self, IntArrayRef normalized_shape, double eps) {
  return detail::layer_norm_backward_weight(grad, self, normalized_shape, eps);
}
inline Var layer_norm_backward_bias(const Var& grad, IntArrayRef normalized_shape) {
  return detail::layer_norm_backward_bias(grad, normalized_shape);
}
// The gradients of native_batch_norm (Note [Fused backward kernels]): the fused kernels when no
// graph is built, else a differentiable composite that recomputes the batch's statistics from self.
inline Var batch_norm_backward_input(const Var& grad, const Var& self, const std::optional<Var>& weight,
                                     const Var& save_mean, const Var& save_invstd, bool training, double eps) {
  return detail::batch_norm_backward_input(grad, self, as_tensor(weight), save_mean, save_invstd, training, eps);
}
inline Var batch_norm_backward_weight(const Var& grad, const Var& self, const std::optional<Var>& weight,
                                      const Var& save_mean, const Var& save_invstd, bool training, double eps) {
  return detail::batch_norm_backward_weight(grad, self, *weight, save_mean, save_invstd, training, eps);
}
inline Var batch_norm_backward_bias(const Var& grad, const std::optional<Var>& bias) {
  return detail::batch_norm_backward_bias(grad, *bias);
}
// grad * _gelu_grad(self) (one pass on the CPU when no graph is built).
inline Var gelu_backward(const Var& grad, const Var& self) { return detail::gelu_backward(grad, self); }
// grad * _gelu_tanh_grad(self) (one pass on the CPU when no graph is built).
inline Var gelu_tanh_backward(const Var& grad, const Var& self) { return detail::gelu_tanh_backward(grad, self); }
// The gradients of scaled_dot_product_attention, recomputing the attention weights with the
// unfused ops (so the backward pass stores the (L, S) matrix that the forward kernel avoids),
// and with dropout_p > 0 the forward pass's dropout factors from its Philox stream (seed, offset).
inline Var sdpa_backward_query(const Var& grad, const Var& query, const Var& key, const Var& value,
                               const std::optional<Var>& attn_mask, bool is_causal, std::optional<double> scale,
                               double dropout_p, std::int64_t seed, std::int64_t offset) {
  return detail::sdpa_backward(0, grad, query, key, value, as_tensor(attn_mask), is_causal, scale, dropout_p, seed,
                               offset);
}
inline Var sdpa_backward_key(const Var& grad, const Var& query, const Var& key, const Var& value,
                             const std::optional<Var>& attn_mask, bool is_causal, std::optional<double> scale,
                             double dropout_p, std::int64_t seed, std::int64_t offset) {
  return detail::sdpa_backward(1, grad, query, key, value, as_tensor(attn_mask), is_causal, scale, dropout_p, seed,
                               offset);
}
inline Var sdpa_backward_value(const Var& grad, const Var& query, const Var& key, const Var& value,
                               const std::optional<Var>& attn_mask, bool is_causal, std::optional<double> scale,
                               double dropout_p, std::int64_t seed, std::int64_t offset) {
  return detail::sdpa_backward(2, grad, query, key, value, as_tensor(attn_mask), is_causal, scale, dropout_p, seed,
                               offset);
}

// The gradient of a floating attn_mask: dS, the gradient of the masked scores.
inline Var sdpa_backward_mask(const Var& grad, const Var& query, const Var& key, const Var& value,
                              const std::optional<Var>& attn_mask, bool is_causal, std::optional<double> scale,
                              double dropout_p, std::int64_t seed, std::int64_t offset) {
  return detail::sdpa_backward(3, grad, query, key, value, as_tensor(attn_mask), is_causal, scale, dropout_p, seed,
                               offset);
}

// The gradient of sinc, as PyTorch's: grad * (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 where pi x^2 is 0.
inline Var sinc_backward(const Var& grad, const Var& self) { return detail::sinc_backward(grad, self); }
// The gradient of logit (kernel _logit), as PyTorch's vectorised loop computes it: grad / (x (1 - x))
// (so -inf at -0.0), NaN outside [0, 1] without eps (a negative one); with eps, 0 outside
// [eps, 1 - eps] and at NaN, and 0 everywhere for a NaN eps. (PyTorch's scalar loop, which runs
// tensors shorter than two vectors, gives +inf at -0.0 and NaN at a NaN input instead.)
inline Var logit_backward(const Var& grad, const Var& self, const Scalar& eps) {
  return detail::logit_backward(grad, self, eps);
}

// The gradient of repeat: grad viewed as [r0, s0, r1, s1, ...] summed over the repeat dims.
inline Var repeat_backward(const Var& grad, IntArrayRef repeats, IntArrayRef sizes) {
  return detail::repeat_backward(grad, repeats, sizes);
}

// The gradient of roll: grad rolled back (shifts negated).
inline Var roll_backward(const Var& grad, IntArrayRef shifts, IntArrayRef dims) {
  return detail::roll_backward(grad, shifts, dims);
}

// The gradient of diagonal: zeros of the input's sizes with grad on that diagonal.
inline Var diagonal_backward(const Var& grad, IntArrayRef sizes, std::int64_t offset, std::int64_t dim1,
                             std::int64_t dim2) {
  return detail::diagonal_backward(grad, sizes, offset, dim1, dim2);
}

// The gradient of index_select: grad added into zeros of the input's sizes at the indices.
inline Var index_select_backward(const Var& grad, IntArrayRef sizes, std::int64_t dim, const Var& index) {
  return detail::index_select_backward(grad, sizes, dim, index);
}

// The gradient of gather: grad scatter-added into zeros of the input's sizes.
inline Var gather_backward(const Var& grad, const Var& self, std::int64_t dim, const Var& index) {
  return detail::gather_backward(grad, self, dim, index);
}

// The gradient of index_add with respect to source: alpha * grad at the indices, in source's shape.
inline Var index_add_source_backward(const Var& grad, std::int64_t dim, const Var& index, const Var& source,
                                     const Scalar& alpha) {
  return detail::index_add_source_backward(grad, dim, index, source, alpha);
}

// The gradient of masked_select: grad placed where the broadcast mask is True, summed back to
// the input's sizes.
inline Var masked_select_backward(const Var& grad, const Var& self, const Var& mask) {
  return detail::masked_select_backward(grad, self, mask);
}

// The gradient of prod over dim (every dim when None): grad * (product of the other elements),
// exact when the input holds zeros (one zero: only it gets a gradient; two or more: none).
inline Var prod_backward(const Var& grad, const Var& self, const Var& result, std::optional<std::int64_t> dim,
                         bool keepdim) {
  return detail::prod_backward(grad, self, result, dim, keepdim);
}

// The gradient of amax/amin over dims: grad shared evenly among the elements equal to the result
// (NaN matching NaN), (grad / count) * mask as PyTorch's scale_grad_by_count.
inline Var extreme_backward(const Var& grad, const Var& self, const Var& result, std::optional<IntArrayRef> dim,
                            bool keepdim) {
  return detail::extreme_backward(grad, self, result, dim, keepdim);
}

// The gradient of a 0-d value picked from self's elements (max, min, median of all elements):
// grad / count in the elements equal to it (the NaN elements when it is NaN), 0 elsewhere even
// for an infinite grad, as PyTorch's evenly_distribute_backward.
inline Var evenly_distribute_backward(const Var& grad, const Var& self, const Var& value) {
  return detail::evenly_distribute_backward(grad, self, value);
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

// ---- views and copies

// The gradient of as_strided: grad added into zeros of input's storage span at the positions the
// view reads (overlapping positions sum), read back at input's positions.
inline Var as_strided_backward(const Var& grad, const Var& self, IntArrayRef size, IntArrayRef stride,
                               std::optional<std::int64_t> storage_offset) {
  return detail::as_strided_backward(grad, self, size, stride, storage_offset);
}
// The gradient of slice and select: zeros of the input's sizes with grad where the view was.
inline Var slice_backward(const Var& grad, IntArrayRef sizes, std::int64_t dim, std::optional<std::int64_t> start,
                          std::optional<std::int64_t> end, std::int64_t step) {
  return detail::slice_backward(grad, sizes, dim, start, end, step);
}
inline Var select_backward(const Var& grad, IntArrayRef sizes, std::int64_t dim, std::int64_t index) {
  return detail::select_backward(grad, sizes, dim, index);
}
// The gradient of permute: grad permuted by the inverse permutation.
inline Var permute_backward(const Var& grad, IntArrayRef dims) { return detail::permute_backward(grad, dims); }
// The gradients of cat: grad split along dim into the inputs' sizes (skipped 1-d empty inputs
// get empty gradients).
inline std::vector<Tensor> cat_backward(const Var& grad, TensorList tensors, std::int64_t dim) {
  return detail::cat_backward(grad, tensors, dim);
}

// The gradients of matmul, 1-d operands included (a vector is a row of self or a column of
// other), summed over broadcast batch dims.
inline Var matmul_backward_self(const Var& grad, const Var& self, const Var& other) {
  return detail::matmul_backward(0, grad, self, other);
}
inline Var matmul_backward_other(const Var& grad, const Var& self, const Var& other) {
  return detail::matmul_backward(1, grad, self, other);
}

// ---- ops returning values and indices along one dim

// The gradient of max/min along dim, sort and topk: grad written into zeros of the input's sizes
// at the positions `indices` selected along dim (keepdim false: dim restored first).
inline Var value_selecting_reduction_backward(const Var& grad, std::int64_t dim, const Var& indices,
                                              IntArrayRef sizes, bool keepdim) {
  return detail::value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim);
}

// The gradients of scatter_reduce with respect to self and src, as PyTorch's
// scatter_reduce_backward: sum passes grad through, mean divides it by the counts, prod multiplies
// it by the product of the other factors (exact with zeros), amax/amin share it evenly among the
// elements equal to the result; without include_self, self gets none where values were scattered.
inline Var scatter_reduce_backward_self(const Var& grad, const Var& self, std::int64_t dim, const Var& index,
                                        const Var& src, std::string_view reduce, bool include_self, const Var& result) {
  return detail::scatter_reduce_backward(false, grad, self, dim, index, src, reduce, include_self, result);
}
inline Var scatter_reduce_backward_src(const Var& grad, const Var& self, std::int64_t dim, const Var& index,
                                       const Var& src, std::string_view reduce, bool include_self, const Var& result) {
  return detail::scatter_reduce_backward(true, grad, self, dim, index, src, reduce, include_self, result);
}

// ---- backward kernels and index_put

// The gradient of index_put(_) for self: grad, or without accumulate grad with zeros where
// values were written.
inline Var index_put_self_backward(const Var& grad, TensorList indices, IntArrayRef values_sizes, bool accumulate) {
  return detail::index_put_self_backward(grad, indices, values_sizes, accumulate);
}
// The derivatives of gelu's backward kernels: grad times gelu''.
inline Var gelu_double_backward(const Var& grad, const Var& self) { return detail::gelu_double_backward(grad, self); }
inline Var gelu_tanh_double_backward(const Var& grad, const Var& self) {
  return detail::gelu_tanh_double_backward(grad, self);
}
// The derivative of embedding_backward for its grad_output: grad's rows at indices (zero at
// padding_idx).
inline Var embedding_double_backward(const Var& grad, const Var& indices, std::int64_t padding_idx) {
  return detail::embedding_double_backward(grad, indices, padding_idx);
}
// The derivatives of cross_entropy_losses_backward for its grad_output and its input.
inline Var cross_entropy_losses_double_backward_grad(const Var& grad, const Var& self, const Var& target,
                                                     std::int64_t ignore_index, double label_smoothing) {
  return detail::cross_entropy_losses_double_backward_grad(grad, self, target, ignore_index, label_smoothing);
}
inline Var cross_entropy_losses_double_backward_self(const Var& grad, const Var& grad_output, const Var& self,
                                                     const Var& target, std::int64_t ignore_index) {
  return detail::cross_entropy_losses_double_backward_self(grad, grad_output, self, target, ignore_index);
}

}  // namespace kael::autograd
#endif
