// Small composite ops: written in terms of registered ops, so autograd, a Python key and every
// device see those.
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/expand.h"
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
