// Derivative helpers of the neural-network ops (declared in kael/autograd/formula_helpers.h),
// composites of registered ops.
#include <cmath>

#include "kael/autograd/formula_helpers.h"
#include "kael/core/error.h"
#include "kael/ops/_sdpa_dropout_mask.h"
#include "kael/ops/add.h"
#include "kael/ops/arange.h"
#include "kael/ops/exp.h"
#include "kael/ops/ge.h"
#include "kael/ops/log.h"
#include "kael/ops/matmul.h"
#include "kael/ops/mean.h"
#include "kael/ops/mul.h"
#include "kael/ops/rsqrt.h"
#include "kael/ops/softmax.h"
#include "kael/ops/standardize.h"
#include "kael/ops/sub.h"
#include "kael/ops/sum.h"
#include "kael/ops/to.h"
#include "kael/ops/transpose.h"
#include "kael/ops/unsqueeze.h"

namespace kael::autograd::detail {

namespace {

Tensor as_dtype(const Tensor& t, ScalarType dtype) { return t.dtype() == dtype ? t : kael::to(t, dtype); }

// The last normalized_shape.size() dims of self.
DimVector last_dims(const Tensor& self, IntArrayRef normalized_shape) {
  DimVector dims;
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  for (std::int64_t d = self.dim() - k; d < self.dim(); ++d) dims.push_back(d);
  return dims;
}

// 0 where keep is true, -inf where it is false, in dtype.
Tensor additive_mask(const Tensor& keep, ScalarType dtype) { return kael::log(kael::to(keep, dtype)); }

}  // namespace

Tensor softmax_backward(const Tensor& grad, const Tensor& result, std::int64_t dim, ScalarType dtype) {
  const DimVector d{dim};
  const Tensor gy = kael::mul(grad, result);
  return as_dtype(kael::sub(gy, kael::mul(result, kael::sum(gy, IntArrayRef(d), true))), dtype);
}

Tensor log_softmax_backward(const Tensor& grad, const Tensor& result, std::int64_t dim, ScalarType dtype) {
  const DimVector d{dim};
  return as_dtype(kael::sub(grad, kael::mul(kael::exp(result), kael::sum(grad, IntArrayRef(d), true))), dtype);
}

Tensor standardize_backward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef normalized_shape,
                            double eps) {
  (void)result;  // recomputed below from self: result may be rounded to float16/bfloat16
  const DimVector dims = last_dims(self, normalized_shape);
  const IntArrayRef d(dims);
  const Tensor xc = kael::sub(self, kael::mean(self, d, true));
  const Tensor rstd = kael::rsqrt(kael::add(kael::mean(kael::mul(xc, xc), d, true), Scalar(eps)));
  const Tensor y = kael::mul(xc, rstd);
  const Tensor centred = kael::sub(grad, kael::mean(grad, d, true));
  return kael::mul(rstd, kael::sub(centred, kael::mul(y, kael::mean(kael::mul(grad, y), d, true))));
}

Tensor layer_norm_backward_input(const Tensor& grad, const Tensor& self, IntArrayRef normalized_shape,
                                 const std::optional<Tensor>& weight, double eps) {
  const Tensor g = weight ? kael::mul(grad, *weight) : grad;
  return standardize_backward(g, self, Tensor(), normalized_shape, eps);
}

Tensor layer_norm_backward_weight(const Tensor& grad, const Tensor& self, IntArrayRef normalized_shape, double eps) {
  return sum_to_size(kael::mul(grad, kael::standardize(self, normalized_shape, eps)), normalized_shape);
}

Tensor layer_norm_backward_bias(const Tensor& grad, IntArrayRef normalized_shape) {
  return sum_to_size(grad, normalized_shape);
}

Tensor sdpa_backward(int which, const Tensor& grad, const Tensor& query, const Tensor& key, const Tensor& value,
                     const std::optional<Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
                     double dropout_p, std::int64_t seed, std::int64_t offset) {
  const std::int64_t L = query.size(-2), S = key.size(-2);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  Tensor scores = kael::mul(kael::matmul(query, kael::transpose(key, -2, -1)), Scalar(s));
  if (attn_mask) {
    scores = kael::add(scores, attn_mask->dtype() == ScalarType::Bool ? additive_mask(*attn_mask, query.dtype())
                                                                       : *attn_mask);
  }
  if (is_causal) {
    const Tensor rows = kael::unsqueeze(kael::arange(Scalar(L)), 1), cols = kael::unsqueeze(kael::arange(Scalar(S)), 0);
    scores = kael::add(scores, additive_mask(kael::ge(rows, cols), query.dtype()));
  }
  const Tensor attn = kael::softmax(scores, -1);
  // with dropout, the forward pass multiplied the weights by these factors (Note [Attention dropout])
  const std::optional<Tensor> keep =
      dropout_p > 0 ? std::optional<Tensor>(kael::_sdpa_dropout_mask(query, attn.sizes(), dropout_p, seed, offset))
                    : std::nullopt;
  if (which == 2) {
    const Tensor weights = keep ? kael::mul(attn, *keep) : attn;
    return sum_to_size(kael::matmul(kael::transpose(weights, -2, -1), grad), value.sizes());
  }
  Tensor dattn = kael::matmul(grad, kael::transpose(value, -2, -1));
  if (keep) dattn = kael::mul(dattn, *keep);
  const Tensor ds = softmax_backward(dattn, attn, -1, query.dtype());
  if (which == 0) return sum_to_size(kael::mul(kael::matmul(ds, key), Scalar(s)), query.sizes());
  return sum_to_size(kael::mul(kael::matmul(kael::transpose(ds, -2, -1), query), Scalar(s)), key.sizes());
}

}  // namespace kael::autograd::detail
