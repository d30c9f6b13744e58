// Pointwise composites written from registered ops (isposinf, deg2rad, heaviside, ...), so
// autograd, a Python key and every device see the ops they call.
#include <limits>
#include <numbers>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/abs.h"
#include "kael/ops/add.h"
#include "kael/ops/clamp.h"
#include "kael/ops/detach.h"
#include "kael/ops/div.h"
#include "kael/ops/eq.h"
#include "kael/ops/exp.h"
#include "kael/ops/exp2.h"
#include "kael/ops/ge.h"
#include "kael/ops/gt.h"
#include "kael/ops/isinf.h"
#include "kael/ops/le.h"
#include "kael/ops/log.h"
#include "kael/ops/log1p.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/logical_or.h"
#include "kael/ops/lt.h"
#include "kael/ops/maximum.h"
#include "kael/ops/minimum.h"
#include "kael/ops/mul.h"
#include "kael/ops/neg.h"
#include "kael/ops/sin.h"
#include "kael/ops/sqrt.h"
#include "kael/ops/sub.h"
#include "kael/ops/to.h"
#include "kael/ops/where.h"
#include "kael/ops/zeros_like.h"

namespace kael::native {

namespace {
// Integers and bool computed in the default dtype, as torch's unary float ops.
Tensor as_floating(const Tensor& self) { return is_floating(self.dtype()) ? self : kael::to(self, default_dtype()); }

void check_floating(const char* op, const Tensor& t) {
  KAEL_CHECK(is_floating(t.dtype()),
             op << ": not implemented for dtype " << t.dtype() << " (floating inputs only, as torch's kernel)");
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// max(a, b) + f(-|a - b|) / scale, a itself where a and b are the same infinity (whose
// difference is NaN): log(exp(a) + exp(b)) with f = log1p(exp(.)), its base-2 form with exp2.
template <typename Tail>
Tensor log_add(const char* op, const Tensor& self, const Tensor& other, Tail tail) {
  check_floating(op, self);
  check_floating(op, other);
  const Tensor m = kael::maximum(self, other);
  const Tensor same_inf = kael::logical_and(kael::isinf(self), kael::eq(self, other));
  return kael::where(same_inf, self, kael::add(m, tail(kael::neg(kael::abs(kael::sub(self, other))))));
}
}  // namespace

Tensor isposinf(const Tensor& self) {
  if (!is_floating(self.dtype())) return kael::zeros_like(self, ScalarType::Bool);
  return kael::eq(self, std::numeric_limits<double>::infinity());
}

Tensor isneginf(const Tensor& self) {
  if (!is_floating(self.dtype())) return kael::zeros_like(self, ScalarType::Bool);
  return kael::eq(self, -std::numeric_limits<double>::infinity());
}

Tensor deg2rad(const Tensor& self) { return kael::mul(as_floating(self), std::numbers::pi / 180.0); }

Tensor rad2deg(const Tensor& self) { return kael::mul(as_floating(self), 180.0 / std::numbers::pi); }

Tensor heaviside(const Tensor& self, const Tensor& values) {
  KAEL_CHECK(self.dtype() == values.dtype(), "heaviside is not yet implemented for tensors with different dtypes.");
  return kael::where(kael::eq(self, 0), values, kael::to(kael::gt(self, 0), self.dtype()));
}

Tensor logaddexp(const Tensor& self, const Tensor& other) {
  return log_add("logaddexp", self, other, [](const Tensor& d) { return kael::log1p(kael::exp(d)); });
}

Tensor logaddexp2(const Tensor& self, const Tensor& other) {
  return log_add("logaddexp2", self, other,
                 [](const Tensor& d) { return kael::div(kael::log1p(kael::exp2(d)), std::numbers::ln2); });
}

// m * sqrt(1 + (n / m)^2) with m the larger magnitude and n the smaller, so that it overflows only
// when the result does and its gradient x / hypot holds down to the subnormals; inf wherever an
// input is infinite, even beside NaN.
Tensor hypot(const Tensor& self, const Tensor& other) {
  check_floating("hypot", self);
  check_floating("hypot", other);
  const Tensor infinite = kael::logical_or(kael::isinf(self), kael::isinf(other));
  const Tensor a = kael::abs(kael::where(infinite, 0, self));
  const Tensor b = kael::abs(kael::where(infinite, 0, other));
  const Tensor m = kael::maximum(a, b);
  const Tensor n = kael::minimum(a, b);
  const Tensor q = kael::div(n, kael::where(kael::eq(m, 0), 1, m));
  const Tensor r = kael::mul(m, kael::sqrt(kael::add(kael::mul(q, q), 1)));
  return kael::where(infinite, kInf, r);
}

// 1 - (pi x)^2 / 6 where |pi x| < 1e-4 (sin(y)/y to the last bit in float64): its gradient
// -pi^2 x / 3 is finite down to 0, where sin(px) / px's has (px)^2 underflowing to 0.
Tensor sinc(const Tensor& self) {
  const Tensor x = as_floating(self);
  const Tensor small = kael::lt(kael::abs(x), 1e-4 / std::numbers::pi);
  const Tensor px = kael::mul(kael::where(small, 1, x), std::numbers::pi);
  const Tensor tiny_px = kael::mul(kael::where(small, x, 0), std::numbers::pi);
  return kael::where(small, kael::sub(1, kael::div(kael::mul(tiny_px, tiny_px), 6.0)),
                     kael::div(kael::sin(px), px));
}

// log(p) - log1p(-p): its gradient 1/p + 1/(1 - p) is inf at 0 and 1 (log(p / (1 - p)) gives
// 0 * inf there); NaN (value and gradient) outside [0, 1]. With eps, p is clamped to
// [eps, 1 - eps] and the gradient is 0 outside it and at NaN, as torch's.
Tensor logit(const Tensor& self, std::optional<double> eps) {
  Tensor p = eps ? kael::clamp(self, Scalar(*eps), Scalar(1.0 - *eps)) : self;
  p = as_floating(p);
  if (!eps) {
    const Tensor outside = kael::logical_or(kael::lt(p, 0), kael::gt(p, 1));
    const Tensor q = kael::where(outside, 0.5, p);
    return kael::where(outside, kael::mul(kael::where(outside, p, 0), std::numeric_limits<double>::quiet_NaN()),
                       kael::sub(kael::log(q), kael::log1p(kael::neg(q))));
  }
  const Tensor inside = kael::logical_and(kael::ge(self, *eps), kael::le(self, 1.0 - *eps));
  const Tensor q = kael::where(inside, p, 0.5);
  return kael::where(inside, kael::sub(kael::log(q), kael::log1p(kael::neg(q))),
                     kael::detach(kael::log(kael::div(p, kael::sub(1.0, p)))));
}

}  // namespace kael::native
