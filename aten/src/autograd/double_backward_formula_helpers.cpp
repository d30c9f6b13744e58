// Derivative helpers of backward kernels (gelu's, embedding's, cross_entropy_losses') and of
// index_put, declared in kael/autograd/formula_helpers.h: composites of registered ops, so
// double (and higher) backward runs through them.
#include <cmath>

#include "kael/autograd/formula_helpers.h"
#include "kael/ops/_index.h"
#include "kael/ops/add.h"
#include "kael/ops/cross_entropy_losses_backward.h"
#include "kael/ops/embedding.h"
#include "kael/ops/exp.h"
#include "kael/ops/index_put.h"
#include "kael/ops/mul.h"
#include "kael/ops/ne.h"
#include "kael/ops/ones.h"
#include "kael/ops/softmax.h"
#include "kael/ops/sub.h"
#include "kael/ops/sum.h"
#include "kael/ops/tanh.h"
#include "kael/ops/to.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/where.h"
#include "kael/ops/zeros.h"

namespace kael::autograd::detail {

Tensor index_put_self_backward(const Tensor& grad, TensorList indices, IntArrayRef values_sizes, bool accumulate) {
  if (accumulate) return grad;
  // the positions written lose their old value, and with it its gradient
  return kael::index_put(grad, indices, kael::zeros(values_sizes, grad.dtype(), grad.device()), false);
}

Tensor gelu_double_backward(const Tensor& grad, const Tensor& self) {
  // d/dx (Phi(x) + x phi(x)) = phi(x) (2 - x^2)
  constexpr double kInvSqrt2Pi = 0.5 * M_2_SQRTPI * M_SQRT1_2;
  const Tensor x2 = kael::mul(self, self);
  const Tensor pdf = kael::mul(kael::exp(kael::mul(x2, Scalar(-0.5))), Scalar(kInvSqrt2Pi));
  return kael::mul(grad, kael::mul(pdf, kael::sub(Scalar(2.0), x2)));
}

Tensor gelu_tanh_double_backward(const Tensor& grad, const Tensor& self) {
  // gelu'(x) = (1 + t) / 2 + x (1 - t^2) u' / 2 with u = k (x + c x^3), t = tanh(u), so
  // gelu''(x) = (1 - t^2) (u' - x t u'^2 + x u'' / 2)
  constexpr double k = M_SQRT2 * M_2_SQRTPI * 0.5;
  constexpr double c = 0.044715;
  const Tensor x2 = kael::mul(self, self);
  const Tensor u = kael::mul(kael::add(self, kael::mul(kael::mul(self, x2), Scalar(c))), Scalar(k));
  const Tensor t = kael::tanh(u);
  const Tensor sech2 = kael::sub(Scalar(1.0), kael::mul(t, t));
  const Tensor du = kael::mul(kael::add(kael::mul(x2, Scalar(3.0 * c)), Scalar(1.0)), Scalar(k));
  const Tensor d2u = kael::mul(self, Scalar(6.0 * k * c));
  const Tensor inner = kael::add(kael::sub(du, kael::mul(kael::mul(self, t), kael::mul(du, du))),
                                 kael::mul(kael::mul(self, d2u), Scalar(0.5)));
  return kael::mul(grad, kael::mul(sech2, inner));
}

Tensor embedding_double_backward(const Tensor& grad, const Tensor& indices, std::int64_t padding_idx) {
  // embedding_backward sums rows of its grad_output into rows of the weight's gradient: its
  // derivative reads those rows back, except at padding_idx (which received nothing)
  const Tensor rows = kael::embedding(grad, indices, -1);
  if (padding_idx < 0) return rows;
  return kael::mul(rows, kael::unsqueeze(kael::to(kael::ne(indices, Scalar(padding_idx)), rows.dtype()), -1));
}

namespace {
std::int64_t class_dim(const Tensor& self) { return self.dim() == 1 ? 0 : 1; }
}  // namespace

Tensor cross_entropy_losses_double_backward_grad(const Tensor& grad, const Tensor& self, const Tensor& target,
                                                 std::int64_t ignore_index, double label_smoothing) {
  // the backward kernel is linear in grad_output: its derivative is the kernel's value at ones,
  // contracted with grad over the classes
  const std::int64_t d = class_dim(self);
  DimVector loss_shape;
  for (std::int64_t i = 0; i < self.dim(); ++i)
    if (i != d) loss_shape.push_back(self.sizes()[i]);
  const Tensor per_class = kael::cross_entropy_losses_backward(kael::ones(loss_shape, self.dtype(), self.device()), self,
                                                               target, ignore_index, label_smoothing);
  const DimVector dims{d};
  return kael::sum(kael::mul(grad, per_class), IntArrayRef(dims), false);
}

Tensor cross_entropy_losses_double_backward_self(const Tensor& grad, const Tensor& grad_output, const Tensor& self,
                                                 const Tensor& target, std::int64_t ignore_index) {
  // d/dx of w * (softmax(x) - smoothed target) applied to grad: t - s * sum(t) with t = w * s * grad,
  // w = grad_output, 0 on the ignored samples (selected, not multiplied by a mask: an infinite w stays
  // out of them). In PyTorch's order (its log_softmax double backward): an infinite w makes the row
  // inf - inf = NaN, as there, not w times the finite bracket.
  const std::int64_t d = class_dim(self);
  const DimVector dims{d};
  const Tensor s = kael::softmax(self, d);
  Tensor w = grad_output;
  if (!is_floating(target.dtype())) w = kael::where(kael::ne(target, Scalar(ignore_index)), w, Scalar(0));
  w = kael::unsqueeze(w, d);
  const Tensor t = kael::mul(kael::mul(w, s), grad);
  return kael::sub(t, kael::mul(s, kael::sum(t, IntArrayRef(dims), true)));
}

}  // namespace kael::autograd::detail
