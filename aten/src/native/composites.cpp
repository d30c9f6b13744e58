// Small composite ops: written in terms of registered ops, so autograd, a Python key and every
// device see those.
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/expand.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/t.h"
#include "kael/ops/unsqueeze.h"
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

Tensor square(const Tensor& self) { return kael::pow(self, Scalar(std::int64_t{2})); }

}  // namespace kael::native
