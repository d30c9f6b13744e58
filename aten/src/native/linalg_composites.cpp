// Products and norms written in terms of registered ops (outer, trace, kron, dist, renorm), so
// autograd, a Python key and every device see those; the checks and messages are PyTorch's.
#include <algorithm>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/add.h"
#include "kael/ops/diagonal.h"
#include "kael/ops/div.h"
#include "kael/ops/gt.h"
#include "kael/ops/mul.h"
#include "kael/ops/norm.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sub.h"
#include "kael/ops/sum.h"
#include "kael/ops/where.h"

namespace kael::native {

Tensor outer(const Tensor& self, const Tensor& vec2) {
  KAEL_CHECK(self.dim() == 1 && vec2.dim() == 1,
             "outer: expected 1-d tensors, got " << self.dim() << "D and " << vec2.dim() << "D");
  const std::int64_t column[] = {-1, 1};
  return kael::mul(kael::reshape(self, IntArrayRef(column)), vec2);
}

// Integers sum to int64, as torch.trace.
Tensor trace(const Tensor& self) {
  KAEL_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim " << self.dim());
  return kael::sum(kael::diagonal(self, 0, 0, 1), std::nullopt, false, std::nullopt);
}

// The Kronecker product: both inputs padded with leading 1s to one rank, interleaved as
// (a0, 1, a1, 1, ...) and (1, b0, 1, b1, ...), multiplied by broadcasting and merged pairwise.
Tensor kron(const Tensor& self, const Tensor& other) {
  const std::int64_t nd = std::max(self.dim(), other.dim());
  DimVector a_shape(static_cast<std::size_t>(nd), 1), b_shape(static_cast<std::size_t>(nd), 1);
  std::copy(self.sizes().begin(), self.sizes().end(), a_shape.end() - self.dim());
  std::copy(other.sizes().begin(), other.sizes().end(), b_shape.end() - other.dim());
  DimVector a_view, b_view, result;
  for (std::size_t i = 0; i < static_cast<std::size_t>(nd); ++i) {
    a_view.push_back(a_shape[i]);
    a_view.push_back(1);
    b_view.push_back(1);
    b_view.push_back(b_shape[i]);
    result.push_back(a_shape[i] * b_shape[i]);
  }
  const Tensor product = kael::mul(kael::reshape(self, IntArrayRef(a_view)), kael::reshape(other, IntArrayRef(b_view)));
  return kael::reshape(product, IntArrayRef(result));
}

Tensor dist(const Tensor& self, const Tensor& other, const Scalar& p) {
  return kael::norm(kael::sub(self, other), p.to_double(), std::nullopt);
}

// Each slice along dim scaled so that its p-norm is at most maxnorm (the 1e-7 is PyTorch's).
Tensor renorm(const Tensor& self, const Scalar& p, std::int64_t dim, const Scalar& maxnorm) {
  const double pv = p.to_double(), maxv = maxnorm.to_double();
  KAEL_CHECK(pv > 0, "renorm: non-positive-norm not supported");
  KAEL_CHECK(maxv >= 0, "renorm: expected maxnorm to be >= 0 but got " << maxv);
  const std::int64_t nd = self.dim();
  KAEL_CHECK(nd > 1, "renorm: input needs at least 2 dimensions, got " << nd << " dimensions");
  KAEL_CHECK_INDEX(dim >= -nd && dim < nd, "renorm(): Dimension out of range (expected to be in range of ["
                                               << -nd << ", " << nd - 1 << "], but got " << dim << ")");
  const std::int64_t d = dim < 0 ? dim + nd : dim;
  DimVector others;
  for (std::int64_t i = 0; i < nd; ++i)
    if (i != d) others.push_back(i);
  const Tensor norms = kael::norm(self, pv, IntArrayRef(others), true);
  const Tensor factor = kael::where(kael::gt(norms, maxnorm), kael::div(maxnorm, kael::add(norms, Scalar(1e-7))),
                                    Scalar(1.0));
  return kael::mul(self, factor);
}

}  // namespace kael::native
