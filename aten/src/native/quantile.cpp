// quantile and nanquantile, for a tensor of q or a number q: written from sort, gather and lerp,
// so autograd, a Python key and every device see them.
#include <optional>
#include <string_view>
#include <tuple>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/all.h"
#include "kael/ops/any.h"
#include "kael/ops/ceil.h"
#include "kael/ops/clamp.h"
#include "kael/ops/expand.h"
#include "kael/ops/floor.h"
#include "kael/ops/full.h"
#include "kael/ops/full_like.h"
#include "kael/ops/gather.h"
#include "kael/ops/ge.h"
#include "kael/ops/isnan.h"
#include "kael/ops/le.h"
#include "kael/ops/lerp.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/movedim.h"
#include "kael/ops/mul.h"
#include "kael/ops/reshape.h"
#include "kael/ops/round.h"
#include "kael/ops/sort.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/sub.h"
#include "kael/ops/sum.h"
#include "kael/ops/to.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/where.h"

namespace kael::native {

namespace {

enum class Interpolation { Linear, Lower, Higher, Midpoint, Nearest };

Interpolation interpolation_of(const char* op, std::string_view name) {
  if (name == "linear") return Interpolation::Linear;
  if (name == "lower") return Interpolation::Lower;
  if (name == "higher") return Interpolation::Higher;
  if (name == "midpoint") return Interpolation::Midpoint;
  KAEL_CHECK(name == "nearest", op << "() interpolation must be one of linear, lower, higher, midpoint or nearest, but got "
                                   << name);
  return Interpolation::Nearest;
}

// The q-th quantiles of self over dim (all elements when None) as PyTorch computes them: the
// rows sorted (NaN last), each quantile's rank q * (n - 1) among a row's values (its values that
// are not NaN with ignore_nan; a row holding NaN reads a NaN element otherwise, so the gradient
// reaches it as in PyTorch), the two elements around it gathered and interpolated. The
// quantiles' dim comes first in the result; a 0-d q leaves it out.
Tensor quantile_impl(const char* op, const Tensor& self, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                     std::string_view interpolation, bool ignore_nan) {
  const Interpolation mode = interpolation_of(op, interpolation);
  KAEL_CHECK(self.numel() > 0, op << "() input tensor must be non-empty");
  KAEL_CHECK(q.dim() <= 1, op << "() q must be a scalar or 1D tensor (got a " << q.dim() << "-d tensor)");
  KAEL_CHECK(self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64,
             op << "() input tensor must be either float or double dtype, got " << dtype_name(self.dtype()));
  KAEL_CHECK(q.dtype() == self.dtype(), op << "() q tensor must be same dtype as the input tensor (q "
                                           << dtype_name(q.dtype()) << ", input " << dtype_name(self.dtype()) << ")");
  const std::int64_t flat[] = {-1}, one[] = {1};
  const Tensor qs = kael::reshape(q, IntArrayRef(flat));
  const std::int64_t nq = qs.numel();
  std::int64_t d = 0;
  Tensor x = self;
  if (dim) {
    d = wrap_dim(op, *dim, self.dim());
    if (self.dim() == 0) x = kael::reshape(self, IntArrayRef(one));
  } else {
    x = kael::reshape(self, IntArrayRef(flat));
  }
  // (as PyTorch: the dim is checked before the values of q)
  KAEL_CHECK(nq == 0 || kael::all(kael::logical_and(kael::ge(qs, Scalar(0)), kael::le(qs, Scalar(1))), std::nullopt)
                            .item()
                            .to<bool>(),
             op << "() q values must be in the range [0, 1]");
  const std::int64_t n = x.sizes()[d];
  const std::int64_t last[] = {-1};
  const std::int64_t from[] = {d};
  const Tensor sorted = kael::movedim(std::get<0>(kael::sort(x, d)), IntArrayRef(from), IntArrayRef(last));
  DimVector shape(sorted.sizes().first(sorted.sizes().size() - 1));  // the rows' dims, then the quantiles'
  shape.push_back(nq);
  Tensor rank;
  if (ignore_nan) {
    const Tensor count = kael::sum(kael::logical_not(kael::isnan(sorted)), IntArrayRef(last), true);
    rank = kael::mul(qs, kael::to(kael::sub(kael::clamp(count, std::optional<Scalar>(Scalar(std::int64_t{1})),
                                                        std::nullopt),
                                            Scalar(std::int64_t{1})),
                                  self.dtype()));
  } else {
    const Tensor has_nan = kael::any(kael::isnan(sorted), IntArrayRef(last), true);
    rank = kael::expand(kael::where(has_nan, Scalar(static_cast<double>(n - 1)), kael::mul(qs, Scalar(n - 1))),
                        IntArrayRef(shape));
  }
  const Tensor lo = kael::floor(rank), hi = kael::ceil(rank);
  Tensor pos_lo = lo, pos_hi = hi;
  if (mode == Interpolation::Lower) pos_hi = lo;
  if (mode == Interpolation::Higher) pos_lo = hi;
  if (mode == Interpolation::Nearest) pos_lo = pos_hi = kael::round(rank);
  const Tensor v_lo = kael::gather(sorted, -1, kael::expand(kael::to(pos_lo, ScalarType::Int64), IntArrayRef(shape)));
  const Tensor v_hi = kael::gather(sorted, -1, kael::expand(kael::to(pos_hi, ScalarType::Int64), IntArrayRef(shape)));
  Tensor out = v_lo;
  if (mode == Interpolation::Linear) out = kael::lerp(v_lo, v_hi, kael::expand(kael::sub(rank, lo), v_lo.sizes()));
  if (mode == Interpolation::Midpoint) out = kael::lerp(v_lo, v_hi, kael::full_like(v_lo, Scalar(0.5)));
  const std::int64_t first[] = {0};
  out = kael::movedim(out, IntArrayRef(last), IntArrayRef(first));  // (nq, rows...)
  if (keepdim) {
    if (dim) {
      if (self.dim() > 0) out = kael::unsqueeze(out, d + 1);
    } else {
      DimVector kept(static_cast<std::size_t>(self.dim()) + 1, 1);
      kept[0] = nq;
      out = kael::reshape(out, IntArrayRef(kept));
    }
  }
  return q.dim() == 0 ? kael::squeeze(out, 0) : out;
}

// A number q as the 0-d tensor of self's dtype that PyTorch's scalar overload makes of it.
Tensor scalar_q(const char* op, const Tensor& self, double q) {
  KAEL_CHECK(q >= 0 && q <= 1, op << "() q must be in the range [0, 1] but got " << q);
  return kael::full(IntArrayRef{}, Scalar(q), self.dtype(), self.device());
}

}  // namespace

Tensor quantile(const Tensor& self, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                std::string_view interpolation) {
  return quantile_impl("quantile", self, q, dim, keepdim, interpolation, false);
}

Tensor quantile_scalar(const Tensor& self, double q, std::optional<std::int64_t> dim, bool keepdim,
                       std::string_view interpolation) {
  return quantile_impl("quantile", self, scalar_q("quantile", self, q), dim, keepdim, interpolation, false);
}

Tensor nanquantile(const Tensor& self, const Tensor& q, std::optional<std::int64_t> dim, bool keepdim,
                   std::string_view interpolation) {
  return quantile_impl("nanquantile", self, q, dim, keepdim, interpolation, true);
}

Tensor nanquantile_scalar(const Tensor& self, double q, std::optional<std::int64_t> dim, bool keepdim,
                          std::string_view interpolation) {
  return quantile_impl("nanquantile", self, scalar_q("nanquantile", self, q), dim, keepdim, interpolation, true);
}

}  // namespace kael::native
