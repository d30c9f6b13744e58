// Derivative helpers of the neural-network ops (declared in kael/autograd/formula_helpers.h),
// composites of registered ops.
#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>

#include "kael/autograd/autograd.h"
#include "kael/autograd/formula_helpers.h"
#include "kael/core/error.h"
#include "kael/ops/sum_to_size.h"
#include "kael/ops/_gelu_backward.h"
#include "kael/ops/_gelu_grad.h"
#include "kael/ops/_gelu_tanh_backward.h"
#include "kael/ops/_gelu_tanh_grad.h"
#include "kael/ops/_layer_norm_backward_input.h"
#include "kael/ops/_layer_norm_backward_weight.h"
#include "kael/ops/_sdpa_backward.h"
#include "kael/ops/_sdpa_dropout_mask.h"
#include "kael/ops/add.h"
#include "kael/ops/arange.h"
#include "kael/ops/detach.h"
#include "kael/ops/exp.h"
#include "kael/ops/ge.h"
#include "kael/ops/log.h"
#include "kael/ops/matmul.h"
#include "kael/ops/mean.h"
#include "kael/ops/mul.h"
#include "kael/ops/native_batch_norm_backward_input.h"
#include "kael/ops/native_batch_norm_backward_weight.h"
#include "kael/ops/reshape.h"
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

// Note [Fused backward kernels]
// The derivative helpers below compose registered ops, so a gradient is differentiable again
// (create_graph=True) and runs on any device. When the backward pass builds no graph (grad mode
// off: create_graph=False) and every tensor is on the CPU, layer_norm's and attention's
// gradients come from fused kernels instead (the registry's _layer_norm_backward_input/_weight,
// _gelu_backward, _gelu_tanh_backward and _sdpa_backward, called through the dispatcher): one pass
// over the rows, and attention's three gradients from one pass that never stores the (L, S) weights.
bool fused_backward(std::initializer_list<const Tensor*> tensors) {
  if (GradMode::is_enabled()) return false;
  for (const Tensor* t : tensors)
    if (t->defined() && !t->device().is_cpu()) return false;
  return true;
}

std::int64_t numel_of(IntArrayRef shape) {
  std::int64_t n = 1;
  for (std::int64_t s : shape) n *= s;
  return n;
}

// The gradients of one _scaled_dot_product_attention node: its formulas for query, key and value
// are three calls with the same arguments (in that order, each only when its input needs a
// gradient), and the fused kernel computes all three at once. The first call runs it and keeps
// the other two for the calls that follow; a call takes its own and drops it. The entry holds
// its arguments (so their identities cannot be reused while it lives) and their version counters,
// so it serves only calls on the very same, unchanged tensors; a call that finds no match runs
// the kernel again and replaces the entry.
struct SdpaMemo {
  Tensor grad, query, key, value, mask;
  std::uint32_t versions[5] = {};
  bool is_causal = false;
  std::optional<double> scale;
  double dropout_p = 0;
  std::int64_t seed = 0, offset = 0;
  Tensor grads[4];  // query, key, value, attn_mask: reduced to their shapes and dtypes; undefined once taken

  static std::uint32_t version_of(const Tensor& t) { return t.defined() ? t.impl()->version() : 0; }

  bool matches(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m, bool causal,
               std::optional<double> sc, double p, std::int64_t sd, std::int64_t off) const {
    const Tensor* mine[5] = {&grad, &query, &key, &value, &mask};
    const Tensor* theirs[5] = {&g, &q, &k, &v, &m};
    for (int i = 0; i < 5; ++i) {
      if (mine[i]->defined() != theirs[i]->defined()) return false;
      if (mine[i]->defined() && (!mine[i]->is_same(*theirs[i]) || versions[i] != version_of(*theirs[i]))) return false;
    }
    return is_causal == causal && scale == sc && (dropout_p == p || (dropout_p != dropout_p && p != p)) &&
           seed == sd && offset == off;
  }

  void clear() { *this = SdpaMemo(); }
};

thread_local SdpaMemo sdpa_memo;

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
  if (fused_backward({&grad, &self}) && grad.dtype() == self.dtype())
    return kael::_layer_norm_backward_input(grad, self, numel_of(normalized_shape), std::nullopt, eps);
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
  if (fused_backward({&grad, &self, weight ? &*weight : &grad}) && grad.dtype() == self.dtype() &&
      (!weight || weight->dtype() == self.dtype()))
    return kael::_layer_norm_backward_input(grad, self, numel_of(normalized_shape), weight, eps);
  const Tensor g = weight ? kael::mul(grad, *weight) : grad;
  return standardize_backward(g, self, Tensor(), normalized_shape, eps);
}

Tensor layer_norm_backward_weight(const Tensor& grad, const Tensor& self, IntArrayRef normalized_shape, double eps) {
  if (fused_backward({&grad, &self}) && grad.dtype() == self.dtype())
    return kael::reshape(kael::_layer_norm_backward_weight(grad, self, numel_of(normalized_shape), eps),
                         normalized_shape);
  return kael::sum_to_size(kael::mul(grad, kael::standardize(self, normalized_shape, eps)), normalized_shape);
}

Tensor gelu_backward(const Tensor& grad, const Tensor& self) {
  if (fused_backward({&grad, &self}) && grad.dtype() == self.dtype() &&
      is_floating(self.dtype()) && grad.is_contiguous() &&
      self.is_contiguous() &&
      std::equal(grad.sizes().begin(), grad.sizes().end(), self.sizes().begin(), self.sizes().end()))
    return kael::_gelu_backward(grad, self);
  return kael::mul(grad, kael::_gelu_grad(self));
}

Tensor gelu_tanh_backward(const Tensor& grad, const Tensor& self) {
  if (fused_backward({&grad, &self}) && grad.dtype() == self.dtype() &&
      is_floating(self.dtype()) && grad.is_contiguous() &&
      self.is_contiguous() &&
      std::equal(grad.sizes().begin(), grad.sizes().end(), self.sizes().begin(), self.sizes().end()))
    return kael::_gelu_tanh_backward(grad, self);
  return kael::mul(grad, kael::_gelu_tanh_grad(self));
}

Tensor layer_norm_backward_bias(const Tensor& grad, IntArrayRef normalized_shape) {
  return kael::sum_to_size(grad, normalized_shape);
}

// ---- batch norm

namespace {

// The dims batch norm reduces over (all but the channel dim 1) and the shape of a per-channel
// tensor broadcast against the input.
struct ChannelDims {
  DimVector dims, shape;
  explicit ChannelDims(const Tensor& self) {
    for (std::int64_t d = 0; d < self.dim(); ++d) {
      if (d != 1) dims.push_back(d);
      shape.push_back(d == 1 ? self.sizes()[1] : 1);
    }
  }
};

// (self - mean) * invstd of the batch, differentiable in self.
Tensor batch_xhat(const Tensor& self, const ChannelDims& cd, double eps) {
  const IntArrayRef d(cd.dims);
  const Tensor xc = kael::sub(self, kael::mean(self, d, true));
  return kael::mul(xc, kael::rsqrt(kael::add(kael::mean(kael::mul(xc, xc), d, true), Scalar(eps))));
}

}  // namespace

Tensor batch_norm_backward_input(const Tensor& grad, const Tensor& self, const std::optional<Tensor>& weight,
                                 const Tensor& save_mean, const Tensor& save_invstd, bool training, double eps) {
  const Tensor w = weight ? *weight : Tensor();
  if (fused_backward({&grad, &self, &w, &save_mean, &save_invstd}))
    return kael::native_batch_norm_backward_input(grad, self, weight, save_mean, save_invstd, training);
  const ChannelDims cd(self);
  const IntArrayRef d(cd.dims), shape(cd.shape);
  const Tensor g = weight ? kael::mul(grad, kael::reshape(*weight, shape)) : grad;
  // (save_mean and save_invstd are results of the forward node: detached, so that a graph built here
  // does not lead back into it; in evaluation they are the running statistics, constants)
  if (!training) return as_dtype(kael::mul(g, kael::reshape(kael::detach(save_invstd), shape)), self.dtype());
  // invstd * (g - mean(g) - xhat * mean(g * xhat)), the batch's statistics recomputed from self
  // so that the gradient is differentiable in self again.
  const Tensor xhat = batch_xhat(self, cd, eps);
  const Tensor xc = kael::sub(self, kael::mean(self, d, true));
  const Tensor invstd = kael::rsqrt(kael::add(kael::mean(kael::mul(xc, xc), d, true), Scalar(eps)));
  const Tensor centred = kael::sub(g, kael::mean(g, d, true));
  const Tensor dx = kael::mul(invstd, kael::sub(centred, kael::mul(xhat, kael::mean(kael::mul(g, xhat), d, true))));
  return as_dtype(dx, self.dtype());
}

Tensor batch_norm_backward_weight(const Tensor& grad, const Tensor& self, const Tensor& weight, const Tensor& save_mean,
                                  const Tensor& save_invstd, bool training, double eps) {
  if (fused_backward({&grad, &self, &save_mean, &save_invstd}))
    return as_dtype(kael::native_batch_norm_backward_weight(grad, self, save_mean, save_invstd), weight.dtype());
  const ChannelDims cd(self);
  const IntArrayRef d(cd.dims), shape(cd.shape);
  const Tensor xhat =
      training ? batch_xhat(self, cd, eps)
               : kael::mul(kael::sub(self, kael::reshape(kael::detach(save_mean), shape)),
                           kael::reshape(kael::detach(save_invstd), shape));
  return as_dtype(kael::sum(kael::mul(grad, xhat), d), weight.dtype());
}

Tensor batch_norm_backward_bias(const Tensor& grad, const Tensor& bias) {
  const ChannelDims cd(grad);
  return kael::sum(grad, IntArrayRef(cd.dims), false, bias.dtype());
}

Tensor sdpa_backward(int which, const Tensor& grad, const Tensor& query, const Tensor& key, const Tensor& value,
                     const std::optional<Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
                     double dropout_p, std::int64_t seed, std::int64_t offset) {
  const Tensor mask = attn_mask ? *attn_mask : Tensor();
  if (fused_backward({&grad, &query, &key, &value, &mask})) {
    SdpaMemo& memo = sdpa_memo;
    if (!memo.matches(grad, query, key, value, mask, is_causal, scale, dropout_p, seed, offset) ||
        !memo.grads[which].defined()) {
      memo.clear();
      const Tensor* inputs[4] = {&query, &key, &value, &mask};
      // the inputs whose gradient this call or the ones that follow take (the others get no call)
      bool wanted[4];
      for (int i = 0; i < 4; ++i) wanted[i] = i == which || (i > which && inputs[i]->defined() && requires_grad(*inputs[i]));
      const auto [dq, dk, dv, dm] = kael::_sdpa_backward(grad, query, key, value, attn_mask, is_causal, scale,
                                                          dropout_p, seed, offset, wanted[3]);
      const std::array<Tensor, 4> full{dq, dk, dv, dm};
      for (int i = 0; i < 4; ++i)
        if (wanted[i]) memo.grads[i] = as_dtype(kael::sum_to_size(full[i], inputs[i]->sizes()), inputs[i]->dtype());
      memo.grad = grad;
      memo.query = query;
      memo.key = key;
      memo.value = value;
      memo.mask = mask;
      const Tensor* args[5] = {&grad, &query, &key, &value, &mask};
      for (int i = 0; i < 5; ++i) memo.versions[i] = SdpaMemo::version_of(*args[i]);
      memo.is_causal = is_causal;
      memo.scale = scale;
      memo.dropout_p = dropout_p;
      memo.seed = seed;
      memo.offset = offset;
    }
    Tensor out = std::move(memo.grads[which]);
    memo.grads[which] = Tensor();
    if (!memo.grads[0].defined() && !memo.grads[1].defined() && !memo.grads[2].defined() &&
        !memo.grads[3].defined())
      memo.clear();
    return out;
  }
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
    return kael::sum_to_size(kael::matmul(kael::transpose(weights, -2, -1), grad), value.sizes());
  }
  Tensor dattn = kael::matmul(grad, kael::transpose(value, -2, -1));
  if (keep) dattn = kael::mul(dattn, *keep);
  const Tensor ds = softmax_backward(dattn, attn, -1, query.dtype());
  if (which == 3) return as_dtype(kael::sum_to_size(ds, attn_mask->sizes()), attn_mask->dtype());
  if (which == 0) return kael::sum_to_size(kael::mul(kael::matmul(ds, key), Scalar(s)), query.sizes());
  return kael::sum_to_size(kael::mul(kael::matmul(kael::transpose(ds, -2, -1), query), Scalar(s)), key.sizes());
}

}  // namespace kael::autograd::detail
