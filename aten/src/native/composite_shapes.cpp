// Shape and layout composites written from registered ops (torch's *_as views, broadcast_to,
// flipud and fliplr), so autograd, a Python key and every device see the ops they call.
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/expand.h"
#include "kael/ops/flip.h"
#include "kael/ops/reshape.h"
#include "kael/ops/to.h"
#include "kael/ops/view.h"

namespace kael::native {

Tensor type_as(const Tensor& self, const Tensor& other) { return kael::to(self, other.dtype()); }

Tensor view_as(const Tensor& self, const Tensor& other) { return kael::view(self, other.sizes()); }

Tensor reshape_as(const Tensor& self, const Tensor& other) { return kael::reshape(self, other.sizes()); }

Tensor broadcast_to(const Tensor& self, IntArrayRef size) { return kael::expand(self, size); }

Tensor flipud(const Tensor& self) {
  KAEL_CHECK(self.dim() >= 1, "flipud: Input must be >= 1-d.");
  const std::int64_t dims[] = {0};
  return kael::flip(self, dims);
}

Tensor fliplr(const Tensor& self) {
  KAEL_CHECK(self.dim() >= 2, "fliplr: Input must be >= 2-d.");
  const std::int64_t dims[] = {1};
  return kael::flip(self, dims);
}

}  // namespace kael::native
