// The CPU kernels of addmm, bmm and baddbmm: checks with PyTorch's messages, then matmul (oneDNN
// for float32 and the half types, primitives cached; a hand-written loop for small products and
// the other dtypes) and, for the add* ops, one pointwise combination with input; addmm of a bias
// row adds it in the GEMM's accumulator (addmm_bias_cpu). linear, which calls them, is
// native/nn_linear.cpp.
#include <algorithm>
#include <type_traits>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/matmul.h"
#include "kael/native/pointwise.h"
#include "kael/ops/add.h"
#include "kael/ops/matmul.h"
#include "kael/ops/mul.h"
#include "kael/ops/to.h"

namespace kael::native {

namespace {

bool is_one(const Scalar& s) { return s.is_floating() ? s.to_double() == 1.0 : s.to<std::int64_t>() == 1; }
bool is_zero(const Scalar& s) { return s.is_floating() ? s.to_double() == 0.0 : s.to<std::int64_t>() == 0; }

void check_same_dtype(const char* op, const Tensor& self, const Tensor& a, const Tensor& b) {
  KAEL_CHECK(a.dtype() == b.dtype(), op << ": expected mat1 and mat2 to have the same dtype, but got: " << a.dtype()
                                        << " != " << b.dtype());
  KAEL_CHECK(self.dtype() == a.dtype(), op << ": expected self and mat2 to have the same dtype, but got: "
                                           << self.dtype() << " != " << b.dtype());
}

// beta * self + alpha * product, self broadcast to product's shape (which must not grow). As in
// PyTorch, beta = 0 ignores self's values (NaN and inf included).
Tensor combine(const char* op, const Tensor& self, const Tensor& product, const Scalar& beta, const Scalar& alpha) {
  const DimVector shape = broadcast_shapes(op, self.sizes(), product.sizes());
  KAEL_CHECK(std::equal(shape.begin(), shape.end(), product.sizes().begin(), product.sizes().end()),
             op << ": input of shape " << shape_str(self.sizes()) << " does not broadcast to the product's shape "
                << shape_str(product.sizes()));
  if (is_zero(beta)) return is_one(alpha) ? product : kael::mul(product, alpha);
  return kael::add(is_one(beta) ? self : kael::mul(self, beta), product, alpha);
}

// beta * self + alpha * (a @ b); float16/bfloat16 compute in float32 and round once, as
// PyTorch's fused kernels do.
Tensor multiply_add(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta,
                    const Scalar& alpha) {
  const ScalarType dtype = self.dtype();
  if (is_integral(dtype, /*include_bool=*/false)) {
    // As PyTorch: beta and alpha become numbers of the integer dtype first (a float truncated,
    // a value out of its range a RuntimeError), so beta=0.5 ignores self and the result keeps
    // the dtype.
    std::int64_t beta_int = 0, alpha_int = 0;
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        beta_int = static_cast<std::int64_t>(beta.checked_to<T>(op, dtype));
        alpha_int = static_cast<std::int64_t>(alpha.checked_to<T>(op, dtype));
      }
    });
    return combine(op, self, kael::matmul(a, b), Scalar(beta_int), Scalar(alpha_int));
  }
  if (!is_reduced_floating(dtype)) return combine(op, self, kael::matmul(a, b), beta, alpha);
  const auto f32 = [](const Tensor& t) { return kael::to(t, ScalarType::Float32); };
  // oneDNN reads the half operands and sums in float32: no float32 copy of the weight per call.
  Tensor product = matmul_float32_cpu(a, b);
  if (!product.defined()) product = kael::matmul(f32(a), f32(b));
  return kael::to(combine(op, f32(self), product, beta, alpha), dtype);
}

}  // namespace


Tensor addmm_cpu(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta, const Scalar& alpha) {
  constexpr const char* op = "addmm";
  KAEL_CHECK(mat1.dim() == 2, op << ": mat1 must be a matrix, got " << mat1.dim() << "-D tensor");
  KAEL_CHECK(mat2.dim() == 2, op << ": mat2 must be a matrix, got " << mat2.dim() << "-D tensor");
  KAEL_CHECK(mat1.sizes()[1] == mat2.sizes()[0], op << ": mat1 and mat2 shapes cannot be multiplied ("
                                                    << mat1.sizes()[0] << "x" << mat1.sizes()[1] << " and "
                                                    << mat2.sizes()[0] << "x" << mat2.sizes()[1] << ")");
  check_same_dtype(op, self, mat1, mat2);
  const DimVector shape{mat1.sizes()[0], mat2.sizes()[1]};
  const DimVector b = broadcast_shapes(op, self.sizes(), shape);
  KAEL_CHECK(b == shape, op << ": input of shape " << shape_str(self.sizes())
                            << " does not broadcast to the product's shape " << shape_str(shape));
  // A bias row (Linear's): added in the product's accumulator, with no pass of its own.
  if (is_one(beta) && is_one(alpha) && self.dim() == 1) {
    if (Tensor out = addmm_bias_cpu(self, mat1, mat2); out.defined()) return out;
  }
  return multiply_add(op, self, mat1, mat2, beta, alpha);
}

namespace {
void check_bmm(const char* op, const Tensor& a, const Tensor& b) {
  KAEL_CHECK(a.dim() == 3, op << ": batch1 must be a 3D tensor, got " << a.dim() << "-D");
  KAEL_CHECK(b.dim() == 3, op << ": batch2 must be a 3D tensor, got " << b.dim() << "-D");
  KAEL_CHECK(b.sizes()[0] == a.sizes()[0] && b.sizes()[1] == a.sizes()[2],
             op << ": Expected size for first two dimensions of batch2 tensor to be: [" << a.sizes()[0] << ", "
                << a.sizes()[2] << "] but got: [" << b.sizes()[0] << ", " << b.sizes()[1] << "].");
}
}  // namespace

Tensor bmm_cpu(const Tensor& self, const Tensor& mat2) {
  check_bmm("bmm", self, mat2);
  KAEL_CHECK(self.dtype() == mat2.dtype(), "bmm: expected self and mat2 to have the same dtype, but got: "
                                               << self.dtype() << " != " << mat2.dtype());
  return kael::matmul(self, mat2);
}

Tensor baddbmm_cpu(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
                   const Scalar& alpha) {
  constexpr const char* op = "baddbmm";
  check_bmm(op, batch1, batch2);
  check_same_dtype(op, self, batch1, batch2);
  const DimVector shape{batch1.sizes()[0], batch1.sizes()[1], batch2.sizes()[2]};
  const DimVector b = broadcast_shapes(op, self.sizes(), shape);
  KAEL_CHECK(b == shape, op << ": input of shape " << shape_str(self.sizes())
                            << " does not broadcast to the product's shape " << shape_str(shape));
  return multiply_add(op, self, batch1, batch2, beta, alpha);
}

}  // namespace kael::native
