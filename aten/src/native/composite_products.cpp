// Products written from registered ops (outer, trace, the in-place addmm_ and baddbmm_), so
// autograd, a Python key and every device see the ops they call.
#include <algorithm>
#include <optional>
#include <sstream>
#include <string>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/addmm.h"
#include "kael/ops/baddbmm.h"
#include "kael/ops/copy_.h"
#include "kael/ops/diagonal.h"
#include "kael/ops/mul.h"
#include "kael/ops/outer.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sum.h"

namespace kael::native {

Tensor outer(const Tensor& self, const Tensor& vec2) {
  KAEL_CHECK(self.dim() == 1 && vec2.dim() == 1,
             "outer: expected 1-d tensors, got " << self.dim() << "D and " << vec2.dim() << "D");
  const std::int64_t column[] = {-1, 1};
  return kael::mul(kael::reshape(self, column), vec2);
}

Tensor ger(const Tensor& self, const Tensor& vec2) { return kael::outer(self, vec2); }

Tensor trace(const Tensor& self) {
  KAEL_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim " << self.dim());
  return kael::sum(kael::diagonal(self), std::nullopt);
}

namespace {
std::string shape_text(IntArrayRef sizes) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << "]";
  return out.str();
}

// The result computed out of place, checked against self (shape, then dtype), then written by
// copy_, so a failing check leaves self alone.
const Tensor& write_into(const char* op, const Tensor& self, const Tensor& result) {
  KAEL_CHECK_VALUE(std::ranges::equal(result.sizes(), self.sizes()),
                   op << ": output with shape " << shape_text(self.sizes()) << " doesn't match the broadcast shape "
                      << shape_text(result.sizes()));
  KAEL_CHECK(can_cast(result.dtype(), self.dtype()),
             op << ": result type " << result.dtype() << " can't be cast to the desired output type " << self.dtype());
  return kael::copy_(self, result);
}
}  // namespace

const Tensor& addmm_(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                     const Scalar& alpha) {
  return write_into("addmm_", self, kael::addmm(self, mat1, mat2, beta, alpha));
}

const Tensor& baddbmm_(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
                       const Scalar& alpha) {
  return write_into("baddbmm_", self, kael::baddbmm(self, batch1, batch2, beta, alpha));
}

}  // namespace kael::native
