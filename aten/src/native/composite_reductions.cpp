// NaN-ignoring reductions written from registered ops, so autograd, a Python key and every
// device see the ops they call.
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/div.h"
#include "kael/ops/isnan.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/nansum.h"
#include "kael/ops/sum.h"
#include "kael/ops/where.h"

namespace kael::native {

Tensor nansum(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  const Tensor x = is_floating(self.dtype()) ? kael::where(kael::isnan(self), 0, self) : self;
  return kael::sum(x, dim, keepdim, dtype);
}

Tensor nanmean(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  KAEL_CHECK(is_floating(self.dtype()),
             "nanmean(): expected input to have floating point or complex dtype but got " << self.dtype());
  const Tensor keep = kael::logical_not(kael::isnan(self));
  return kael::div(kael::nansum(self, dim, keepdim, dtype), kael::sum(keep, dim, keepdim));
}

}  // namespace kael::native
