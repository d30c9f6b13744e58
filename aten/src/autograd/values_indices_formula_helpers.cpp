// Formula helpers of the ops that return values and indices along one dim (max/min with a dim,
// sort, topk), and of scatter_reduce.
#include "kael/autograd/formula_helpers.h"

#include "kael/core/error.h"
#include "kael/ops/div.h"
#include "kael/ops/eq.h"
#include "kael/ops/gather.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/masked_fill.h"
#include "kael/ops/mul.h"
#include "kael/ops/ones_like.h"
#include "kael/ops/scatter.h"
#include "kael/ops/scatter_add.h"
#include "kael/ops/scatter_reduce.h"
#include "kael/ops/to.h"
#include "kael/ops/where.h"
#include "kael/ops/zeros_like.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/zeros.h"

namespace kael::autograd::detail {

Tensor value_selecting_reduction_backward(const Tensor& grad, std::int64_t dim, const Tensor& indices,
                                          IntArrayRef sizes, bool keepdim) {
  const auto nd = static_cast<std::int64_t>(sizes.size());
  const Tensor zeros = kael::zeros(sizes, grad.dtype(), grad.device());
  if (nd == 0) return kael::scatter(zeros, 0, indices, grad);
  const std::int64_t d = wrap_dim("value_selecting_reduction_backward", dim, nd);
  if (keepdim) return kael::scatter(zeros, d, indices, grad);
  return kael::scatter(zeros, d, kael::unsqueeze(indices, d), kael::unsqueeze(grad, d));
}

Tensor scatter_reduce_backward(bool for_src, const Tensor& grad, const Tensor& self, std::int64_t dim,
                               const Tensor& index, const Tensor& src, std::string_view reduce, bool include_self,
                               const Tensor& result) {
  const ScalarType t = grad.dtype();
  Tensor grad_self, grad_src;
  if (reduce == "sum") {
    grad_self = grad;
    grad_src = kael::gather(grad, dim, index);
  } else if (reduce == "mean") {
    Tensor n = include_self ? kael::ones_like(grad) : kael::zeros_like(grad);
    n = kael::scatter_add(n, dim, index, kael::ones_like(src, t));
    n = kael::masked_fill(n, kael::eq(n, Scalar(0)), Scalar(1));
    grad_self = kael::div(grad, n);
    grad_src = kael::div(kael::gather(grad, dim, index), kael::gather(n, dim, index));
  } else if (reduce == "prod") {
    // the product of the other factors, computed without dividing by a zero
    const Tensor masked_self = kael::masked_fill(self, kael::eq(self, Scalar(0)), Scalar(1));
    const Tensor masked_self_result = kael::scatter_reduce(masked_self, dim, index, src, reduce, include_self);
    grad_self = kael::div(kael::mul(grad, masked_self_result), masked_self);
    const Tensor src_zero = kael::eq(src, Scalar(0));
    const Tensor src_num_zeros =
        kael::gather(kael::scatter_add(kael::zeros_like(self), dim, index, kael::to(src_zero, self.dtype())), dim, index);
    const Tensor src_single_zero = kael::logical_and(src_zero, kael::eq(src_num_zeros, Scalar(1)));
    const Tensor masked_src = kael::masked_fill(src, src_single_zero, Scalar(1));
    const Tensor masked_src_result = kael::scatter_reduce(self, dim, index, masked_src, reduce, include_self);
    grad_src = kael::where(src_single_zero, kael::gather(kael::mul(grad, masked_src_result), dim, index),
                           kael::div(kael::gather(kael::mul(grad, result), dim, index),
                                     kael::masked_fill(src, src_zero, Scalar(1))));
  } else {
    KAEL_CHECK(reduce == "amax" || reduce == "amin",
               "scatter_reduce_backward: reduce argument must be either sum, prod, mean, amax or amin, got " << reduce);
    const Tensor value = kael::gather(result, dim, index);
    Tensor self_is_result = kael::to(kael::eq(self, result), t);
    if (!include_self) self_is_result = kael::scatter(self_is_result, dim, index, Scalar(0));  // not a candidate
    const Tensor src_is_result = kael::to(kael::eq(src, value), t);
    const Tensor count = kael::scatter_add(self_is_result, dim, index, src_is_result);
    const Tensor shared = kael::div(grad, count);
    grad_self = kael::mul(self_is_result, shared);
    grad_src = kael::mul(src_is_result, kael::gather(shared, dim, index));
  }
  if (for_src) return grad_src;
  if (!include_self) grad_self = kael::scatter(grad_self, dim, index, Scalar(0));
  return grad_self;
}

}  // namespace kael::autograd::detail
