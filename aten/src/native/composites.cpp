// Small composite ops: written in terms of registered ops, so autograd, a Python key and every
// device see those.
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/expand.h"
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

Tensor square(const Tensor& self) { return kael::pow(self, Scalar(std::int64_t{2})); }

}  // namespace kael::native
