// Small composite ops: written in terms of registered ops, so autograd, a Python key and every
// device see those.
#include <cmath>
#include <cstdlib>
#include <vector>
#include <tuple>

#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/cat.h"
#include "kael/ops/clone.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/div.h"
#include "kael/ops/eq.h"
#include "kael/ops/expand.h"
#include "kael/ops/flip.h"
#include "kael/ops/index_select.h"
#include "kael/ops/isnan.h"
#include "kael/ops/logical_xor.h"
#include "kael/ops/lt.h"
#include "kael/ops/amax.h"
#include "kael/ops/amin.h"
#include "kael/ops/add.h"
#include "kael/ops/mul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/sub.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sort.h"
#include "kael/ops/sum.h"
#include "kael/ops/to.h"
#include "kael/ops/where.h"
#include "kael/ops/zeros_like.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/t.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/_logit.h"
#include "kael/ops/norm.h"
#include "kael/ops/pow.h"
#include "kael/ops/transpose.h"
#include "kael/ops/view.h"

namespace kael::native {

Tensor t(const Tensor& self) {
  KAEL_CHECK(self.dim() <= 2, "t: t() expects a tensor with <= 2 dimensions, but self is " << self.dim() << "D");
  if (self.dim() < 2) return kael::view(self, self.sizes());
  return kael::transpose(self, 0, 1);
}

Tensor expand_as(const Tensor& self, const Tensor& other) { return kael::expand(self, other.sizes()); }

// ---- shapes and conversions after another tensor, and their PyTorch spellings

Tensor view_as(const Tensor& self, const Tensor& other) { return kael::view(self, other.sizes()); }
Tensor reshape_as(const Tensor& self, const Tensor& other) { return kael::reshape(self, other.sizes()); }
Tensor broadcast_to(const Tensor& self, IntArrayRef size) { return kael::expand(self, size); }
Tensor type_as(const Tensor& self, const Tensor& other) { return kael::to(self, other, false, false); }

// PyTorch's ravel is contiguous().view(-1): a copy for any non-contiguous input, even one that
// reshape could view.
Tensor ravel(const Tensor& self) {
  const std::int64_t flat[] = {-1};
  return kael::view(kael::contiguous(self), IntArrayRef(flat));
}

Tensor flipud(const Tensor& self) {
  KAEL_CHECK(self.dim() >= 1, "flipud: Input must be >= 1-d.");
  const std::int64_t dims[] = {0};
  return kael::flip(self, IntArrayRef(dims));
}

Tensor fliplr(const Tensor& self) {
  KAEL_CHECK(self.dim() >= 2, "fliplr: Input must be >= 2-d.");
  const std::int64_t dims[] = {1};
  return kael::flip(self, IntArrayRef(dims));
}

Tensor msort(const Tensor& self) { return std::get<0>(kael::sort(self, 0, false, std::nullopt)); }

// ---- rotations, differences, flat reads, scaling by powers of two

// As PyTorch's: k taken modulo 4 (a negative k turns the other way), each quarter turn a flip and
// a transpose; k = 0 gives a contiguous copy.
Tensor rot90(const Tensor& self, std::int64_t k, IntArrayRef dims) {
  KAEL_CHECK(dims.size() == 2, "rot90: expected total rotation dims == 2, but got dims = " << dims.size());
  const std::int64_t nd = self.dim();
  KAEL_CHECK(nd >= 2, "rot90: expected total dims >= 2, but got total dims = " << nd);
  KAEL_CHECK(dims[0] != dims[1] && std::abs(dims[0] - dims[1]) != nd,
             "rot90: expected rotation dims to be different, but got dim0 = " << dims[0] << " and dim1 = " << dims[1]);
  KAEL_CHECK(dims[0] < nd && dims[0] >= -nd, "rot90: Rotation dim0 out of range, dim0 = " << dims[0]);
  KAEL_CHECK(dims[1] < nd && dims[1] >= -nd, "rot90: Rotation dim1 out of range, dim1 = " << dims[1]);
  const std::int64_t d0 = dims[0] < 0 ? dims[0] + nd : dims[0], d1 = dims[1] < 0 ? dims[1] + nd : dims[1];
  const std::int64_t first[] = {d0}, second[] = {d1}, both[] = {d0, d1};
  switch (((k % 4) + 4) % 4) {
    case 1:
      return kael::transpose(kael::flip(self, IntArrayRef(second)), d0, d1);
    case 2:
      return kael::flip(self, IntArrayRef(both));
    case 3:
      return kael::transpose(kael::flip(self, IntArrayRef(first)), d0, d1);
    default:
      return kael::clone(self);
  }
}

// The n-th forward difference along dim (bool: exclusive or), prepend and append joined first.
// n = 0 gives a new tensor in the graph (a clone), never input itself, as PyTorch's.
Tensor diff(const Tensor& self, std::int64_t n, std::int64_t dim, const std::optional<Tensor>& prepend,
            const std::optional<Tensor>& append) {
  KAEL_CHECK(self.dim() >= 1, "diff: diff expects input to be at least one-dimensional");
  KAEL_CHECK(n >= 0, "diff: order must be non-negative but got " << n);
  Tensor x = self;
  if (prepend || append) {
    std::vector<Tensor> parts;
    if (prepend) parts.push_back(*prepend);
    parts.push_back(self);
    if (append) parts.push_back(*append);
    x = kael::cat(TensorList(parts), dim);
  }
  if (n == 0) return kael::clone(x);
  const std::int64_t d = dim < 0 ? dim + x.dim() : dim;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t size = x.sizes()[static_cast<std::size_t>(d)];
    if (size == 0) break;
    const Tensor later = kael::narrow(x, d, 1, size - 1), earlier = kael::narrow(x, d, 0, size - 1);
    x = x.dtype() == ScalarType::Bool ? kael::logical_xor(later, earlier) : kael::sub(later, earlier);
  }
  return x;
}

// input read as 1-d at index (negative counts from the end), in index's shape. The bounds are
// checked before anything is read, with PyTorch's IndexError.
Tensor take(const Tensor& self, const Tensor& index) {
  KAEL_CHECK(index.dtype() == ScalarType::Int64,
             "take(): Expected a long tensor for index, but got " << index.dtype());
  const std::int64_t n = self.numel();
  const std::int64_t flat_shape[] = {-1};
  const Tensor flat = kael::reshape(index, IntArrayRef(flat_shape));
  if (index.numel() > 0) {
    for (const std::int64_t i : {kael::amin(flat).item().to<std::int64_t>(), kael::amax(flat).item().to<std::int64_t>()})
      KAEL_CHECK_INDEX(i >= -n && i < n,
                       "take: out of range: tried to access index " << i << " on a tensor of " << n << " elements.");
  }
  const Tensor wrapped = kael::where(kael::lt(flat, Scalar(std::int64_t{0})), kael::add(flat, Scalar(n)), flat);
  return kael::reshape(kael::index_select(kael::reshape(self, IntArrayRef(flat_shape)), 0, wrapped), index.sizes());
}

// input * 2**other, as PyTorch's mul(input, pow(2.0, other)) (so integers give the default dtype).
Tensor ldexp(const Tensor& self, const Tensor& other) { return kael::mul(self, kael::pow(Scalar(2.0), other)); }

// input itself; a bool tensor raises, as PyTorch's unary +.
Tensor positive(const Tensor& self) {
  KAEL_CHECK(self.dtype() != ScalarType::Bool, "positive(): The `+` operator, on a bool tensor is not supported.");
  return self;
}

// ---- infinities and NaN

Tensor isposinf(const Tensor& self) {
  if (!is_floating(self.dtype())) return kael::zeros_like(self, ScalarType::Bool, std::nullopt);
  return kael::eq(self, Scalar(INFINITY));
}

Tensor isneginf(const Tensor& self) {
  if (!is_floating(self.dtype())) return kael::zeros_like(self, ScalarType::Bool, std::nullopt);
  return kael::eq(self, Scalar(-INFINITY));
}

// NaN selected away (not multiplied by 0), so that its gradient is 0 there, as PyTorch's.
Tensor nansum(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  const Tensor x = is_floating(self.dtype()) ? kael::where(kael::isnan(self), Scalar(0), self) : self;
  return kael::sum(x, dim, keepdim, dtype);
}

Tensor nanmean(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  KAEL_CHECK(is_floating(self.dtype()),
             "nanmean(): expected input to have floating point or complex dtype but got " << self.dtype());
  const Tensor count = kael::sum(kael::logical_not(kael::isnan(self)), dim, keepdim, std::nullopt);
  return kael::div(nansum(self, dim, keepdim, dtype), count);
}

// Note [In-place view ops]
// t_, transpose_, squeeze_ and unsqueeze_ give self the geometry of the view op's result (sizes,
// strides and offset of a view over self's own storage); the elements stay. The view op runs
// first, so its checks (dims, ranges) raise before self changes. Autograd records the op as any
// in-place op (the view op's derivative, self's history rebased onto it); a view that requires
// grad is refused, since rebasing it would record a write into its base (CopySlices) where
// nothing was written.
namespace {
const Tensor& take_geometry(const char* op, const Tensor& self, const Tensor& view) {
  KAEL_CHECK(!(self.impl()->is_view() && autograd::requires_grad(self)),
             op << ": an in-place view op on a view that requires grad is not supported; call clone() first");
  self.impl()->set_geometry(DimVector(view.sizes()), DimVector(view.strides()), view.impl()->offset());
  return self;
}
}  // namespace

const Tensor& t_(const Tensor& self) {
  KAEL_CHECK(self.dim() <= 2, "t_: t_() expects a tensor with <= 2 dimensions, but self is " << self.dim() << "D");
  return take_geometry("t_", self, kael::t(self));
}

const Tensor& transpose_(const Tensor& self, std::int64_t dim0, std::int64_t dim1) {
  return take_geometry("transpose_", self, kael::transpose(self, dim0, dim1));
}

const Tensor& squeeze_(const Tensor& self, std::optional<std::int64_t> dim) {
  return take_geometry("squeeze_", self, kael::squeeze(self, dim));
}

const Tensor& unsqueeze_(const Tensor& self, std::int64_t dim) {
  return take_geometry("unsqueeze_", self, kael::unsqueeze(self, dim));
}

// torch.norm's string forms: 'fro' is the 2-norm of the elements over dim (at most two dims);
// 'nuc' (the sum of the singular values) needs an SVD, which kael does not have.
Tensor norm_str(const Tensor& self, std::string_view p, std::optional<IntArrayRef> dim, bool keepdim,
                std::optional<ScalarType> dtype) {
  KAEL_CHECK(p != "nuc", "norm: p='nuc' (the nuclear norm) is not supported: kael has no singular value decomposition");
  KAEL_CHECK(p == "fro", "norm: expected p to be a number, 'fro' or 'nuc', but got '" << p << "'");
  KAEL_CHECK(!dim || dim->size() <= 2, "norm: p='fro' takes at most 2 dims, got " << dim->size());
  return kael::norm(self, 2.0, dim, keepdim, dtype);
}

// logit's eps=None is PyTorch's -1: the kernel clamps only for eps >= 0.
Tensor logit(const Tensor& self, std::optional<double> eps) { return kael::_logit(self, Scalar(eps.value_or(-1.0))); }
const Tensor& logit_(const Tensor& self, std::optional<double> eps) {
  // the kernel's own check would name it (_logit_)
  KAEL_CHECK(is_floating(self.dtype()), "logit_: result type " << default_dtype()
                                                               << " can't be cast to the desired output type "
                                                               << self.dtype());
  return kael::_logit_(self, Scalar(eps.value_or(-1.0)));
}

Tensor square(const Tensor& self) { return kael::pow(self, Scalar(std::int64_t{2})); }

}  // namespace kael::native
