// Products, norms and statistics written in terms of registered ops (outer, trace, kron, dist,
// renorm, inner, tensordot, cdist, cov, corrcoef, trapezoid), so autograd, a Python key and every device see
// those; the checks and messages are PyTorch's.
#include <algorithm>
#include <string_view>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/ops/add.h"
#include "kael/ops/diagonal.h"
#include "kael/ops/div.h"
#include "kael/ops/addmm.h"
#include "kael/ops/amin.h"
#include "kael/ops/baddbmm.h"
#include "kael/ops/clamp.h"
#include "kael/ops/ge.h"
#include "kael/ops/gt.h"
#include "kael/ops/le.h"
#include "kael/ops/matmul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/permute.h"
#include "kael/ops/select.h"
#include "kael/ops/sqrt.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/t.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/view.h"
#include "kael/ops/zeros.h"
#include "kael/ops/mul.h"
#include "kael/ops/norm.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sub.h"
#include "kael/ops/sum.h"
#include "kael/ops/where.h"
#include "kael/native/pointwise.h"

namespace kael::native {

Tensor outer(const Tensor& self, const Tensor& vec2) {
  KAEL_CHECK(self.dim() == 1 && vec2.dim() == 1,
             "outer: expected 1-d tensors, got " << self.dim() << "D and " << vec2.dim() << "D");
  const std::int64_t column[] = {-1, 1};
  return kael::mul(kael::reshape(self, IntArrayRef(column)), vec2);
}

// Integers sum to int64, as torch.trace; bool is refused, as PyTorch's kernel has none.
Tensor trace(const Tensor& self) {
  // the dtype first, as torch's
  KAEL_CHECK_IMPLEMENTED(self.dtype() != ScalarType::Bool, "trace: \"trace\" not implemented for 'Bool'");
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
  const std::int64_t d = wrap_dim("renorm", dim, nd);
  DimVector others;
  for (std::int64_t i = 0; i < nd; ++i)
    if (i != d) others.push_back(i);
  const Tensor norms = kael::norm(self, pv, IntArrayRef(others), true);
  const Tensor factor = kael::where(kael::gt(norms, maxnorm), kael::div(maxnorm, kael::add(norms, Scalar(1e-7))),
                                    Scalar(1.0));
  return kael::mul(self, factor);
}

// ---- inner and cdist

// The sum of products over the last dims: (a..., k) and (b..., k) give (a..., b...), one matrix
// product (sizes spelled out: -1 is ambiguous when k is 0). A 0-d input multiplies.
Tensor inner(const Tensor& self, const Tensor& other) {
  if (self.dim() == 0 || other.dim() == 0) return kael::mul(self, other);
  KAEL_CHECK(self.sizes().back() == other.sizes().back(),
             "inner: inner() the last dimension must match on both input tensors but got shapes "
                 << shape_str(self.sizes()) << " and " << shape_str(other.sizes()));
  const std::int64_t k = self.sizes().back();
  DimVector result;
  std::int64_t m = 1, n = 1;
  for (std::int64_t d = 0; d + 1 < self.dim(); ++d) {
    m *= self.sizes()[d];
    result.push_back(self.sizes()[d]);
  }
  for (std::int64_t d = 0; d + 1 < other.dim(); ++d) {
    n *= other.sizes()[d];
    result.push_back(other.sizes()[d]);
  }
  const std::int64_t left[] = {m, k}, right[] = {n, k};
  const Tensor product =
      kael::matmul(kael::reshape(self, IntArrayRef(left)), kael::t(kael::reshape(other, IntArrayRef(right))));
  return kael::reshape(product, IntArrayRef(result));
}

// The sum of products over the pairs of dims (dims_self[i], dims_other[i]), as torch's op (its
// Python front, kael.tensordot, turns an int or a pair of lists into the two lists): the
// contracted dims go last in self and first in other, and one matrix product contracts them
// (sizes spelled out: -1 is ambiguous when a size is 0). A contracted dim of size 1 on one side
// is summed away on the other first, as torch does, so its sizes need not match.
Tensor tensordot(const Tensor& self, const Tensor& other, IntArrayRef dims_self, IntArrayRef dims_other) {
  constexpr const char* op = "tensordot";
  KAEL_CHECK(dims_self.size() == dims_other.size(),
             op << ": both dimension lists should have same length, got " << dims_self.size() << " and "
                << dims_other.size());
  KAEL_CHECK(self.dtype() == other.dtype(), op << ": both inputs should have same dtype, got " << self.dtype()
                                               << " and " << other.dtype());
  auto wrapped = [&](IntArrayRef dims, std::int64_t ndim) {
    std::vector<bool> seen(static_cast<std::size_t>(ndim), false);
    DimVector out;
    for (std::int64_t d : dims) {
      KAEL_CHECK_INDEX(ndim > 0, op << ": Dimension specified as " << d << " but tensor has no dimensions");
      const std::int64_t w = wrap_dim(op, d, ndim);
      KAEL_CHECK(!seen[static_cast<std::size_t>(w)],
                 op << ": dim " << w << " appears multiple times in the list of dims");
      seen[static_cast<std::size_t>(w)] = true;
      out.push_back(w);
    }
    return out;
  };
  const DimVector da = wrapped(dims_self, self.dim()), db = wrapped(dims_other, other.dim());
  Tensor a = self, b = other;
  std::int64_t k = 1;
  for (std::size_t i = 0; i < da.size(); ++i) {
    const std::int64_t sa = a.sizes()[da[i]], sb = b.sizes()[db[i]];
    const std::int64_t one[] = {da[i]}, other_one[] = {db[i]};
    if (sb == 1) {
      a = kael::sum(a, IntArrayRef(one), true, std::nullopt);
    } else if (sa == 1) {
      b = kael::sum(b, IntArrayRef(other_one), true, std::nullopt);
    } else {
      KAEL_CHECK(sa == sb, op << ": contracted dimensions need to match, but first has size " << sa << " in dim "
                              << da[i] << " and second has size " << sb << " in dim " << db[i]);
      k *= sa;
    }
  }
  DimVector order_a, result;
  std::int64_t m = 1, n = 1;
  for (std::int64_t d = 0; d < a.dim(); ++d)
    if (std::find(da.begin(), da.end(), d) == da.end()) {
      order_a.push_back(d);
      result.push_back(a.sizes()[d]);
      m *= a.sizes()[d];
    }
  for (std::int64_t d : da) order_a.push_back(d);
  DimVector order_b = db;
  for (std::int64_t d = 0; d < b.dim(); ++d)
    if (std::find(db.begin(), db.end(), d) == db.end()) {
      order_b.push_back(d);
      result.push_back(b.sizes()[d]);
      n *= b.sizes()[d];
    }
  const std::int64_t left[] = {m, k}, right[] = {k, n};
  const Tensor product = kael::matmul(kael::reshape(kael::permute(a, IntArrayRef(order_a)), IntArrayRef(left)),
                                      kael::reshape(kael::permute(b, IntArrayRef(order_b)), IntArrayRef(right)));
  return kael::reshape(product, IntArrayRef(result));
}

// The p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M), batch dims
// broadcast: (..., P, R), from the broadcast differences (torch may take a matrix product for
// p = 2 and more than 25 rows, which rounds otherwise).
Tensor cdist(const Tensor& x1, const Tensor& x2, double p, std::optional<std::string_view> compute_mode) {
  constexpr const char* op = "cdist";
  // torch.cdist's modes choose whether p = 2 may go through a matrix product; kael always
  // takes the differences, so they are checked and otherwise alike (None is refused, as torch's).
  const std::string_view mode = compute_mode.value_or("None");
  KAEL_CHECK_VALUE(mode == "use_mm_for_euclid_dist_if_necessary" || mode == "use_mm_for_euclid_dist" ||
                       mode == "donot_use_mm_for_euclid_dist",
                   op << ": " << mode << " is not a valid value for compute_mode");
  KAEL_CHECK(x1.dim() >= 2, op << ": cdist only supports at least 2D tensors, X1 got: " << x1.dim() << "D");
  KAEL_CHECK(x2.dim() >= 2, op << ": cdist only supports at least 2D tensors, X2 got: " << x2.dim() << "D");
  KAEL_CHECK(x1.sizes().back() == x2.sizes().back(), op << ": X1 and X2 must have the same number of columns. X1: "
                                                         << x1.sizes().back() << " X2: " << x2.sizes().back());
  KAEL_CHECK(is_floating(x1.dtype()),
             op << ": cdist only supports floating-point dtypes, X1 got: " << dtype_name(x1.dtype()));
  KAEL_CHECK(is_floating(x2.dtype()),
             op << ": cdist only supports floating-point dtypes, X2 got: " << dtype_name(x2.dtype()));
  KAEL_CHECK(p >= 0, op << ": cdist only supports non-negative p values, got " << p);
  const Tensor diff = kael::sub(kael::unsqueeze(x1, -2), kael::unsqueeze(x2, -3));
  const std::int64_t last[] = {-1};
  // No columns: every distance is 0, for p = inf too (whose norm of nothing is a max of nothing).
  if (x1.sizes().back() == 0) return kael::sum(diff, IntArrayRef(last), false, std::nullopt);
  return kael::norm(diff, p, IntArrayRef(last), false, std::nullopt);
}

// ---- cov and corrcoef

// The covariance of the variables in input's rows (observations in its columns), weighted by
// fweights (integer frequencies) and aweights (floating weights), as torch.cov: the result is
// squeezed, and a correction that leaves no degrees of freedom warns and divides by 0.
Tensor cov(const Tensor& self, std::int64_t correction, const std::optional<Tensor>& fweights,
           const std::optional<Tensor>& aweights) {
  constexpr const char* op = "cov";
  KAEL_CHECK(self.dim() <= 2, op << ": cov(): expected input to have two or fewer dimensions but got an input with "
                                 << self.dim() << " dimensions");
  KAEL_CHECK(self.dtype() != ScalarType::Bool, op << ": cov(): bool dtype is not supported for input");
  const std::int64_t row[] = {1, -1};
  const Tensor in = self.dim() < 2 ? kael::view(self, IntArrayRef(row)) : self;
  const std::int64_t observations = in.sizes()[1];
  std::optional<Tensor> w;
  if (fweights) {
    const Tensor& f = *fweights;
    KAEL_CHECK(f.dim() <= 1, op << ": cov(): expected fweights to have one or fewer dimensions but got fweights with "
                                << f.dim() << " dimensions");
    KAEL_CHECK(is_integral(f.dtype(), false),
               op << ": cov(): expected fweights to have integral dtype but got fweights with "
                  << dtype_name(f.dtype()) << " dtype");
    KAEL_CHECK(f.numel() == observations,
               op << ": cov(): expected fweights to have the same numel as there are observations in the input but got "
                  << f.numel() << " != " << observations);
    KAEL_CHECK(observations == 0 || kael::amin(f).item().to<double>() >= 0, op << ": cov(): fweights cannot be negative");
    w = f;
  }
  if (aweights) {
    const Tensor& a = *aweights;
    KAEL_CHECK(a.dim() <= 1, op << ": cov(): expected aweights to have one or fewer dimensions but got aweights with "
                                << a.dim() << " dimensions");
    KAEL_CHECK(is_floating(a.dtype()),
               op << ": cov(): expected aweights to have floating point dtype but got aweights with "
                  << dtype_name(a.dtype()) << " dtype");
    KAEL_CHECK(a.numel() == observations,
               op << ": cov(): expected aweights to have the same numel as there are observations in the input but got "
                  << a.numel() << " != " << observations);
    KAEL_CHECK(observations == 0 || kael::amin(a).item().to<double>() >= 0, op << ": cov(): aweights cannot be negative");
    w = w ? kael::mul(*w, a) : a;
  }
  const std::int64_t columns[] = {1};
  Tensor centered, scaled;
  if (!w) {
    const Tensor avg = kael::div(kael::sum(in, IntArrayRef(columns), false, std::nullopt), Scalar(observations));
    std::int64_t factor = observations - correction;
    if (factor <= 0) {
      warn(WarningKind::User,
           "cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of observations.");
      factor = 0;
    }
    centered = kael::sub(in, kael::unsqueeze(avg, 1));
    return kael::squeeze(kael::div(kael::matmul(centered, kael::t(centered)), Scalar(factor)), std::nullopt);
  }
  const Tensor w_sum = kael::sum(*w, std::nullopt, false, std::nullopt);
  KAEL_CHECK(w_sum.item().to<double>() != 0, op << ": cov(): weights sum to zero, can't be normalized");
  const Tensor avg = kael::div(kael::sum(kael::mul(in, *w), IntArrayRef(columns), false, std::nullopt), w_sum);
  Tensor factor = aweights && correction != 0
                      ? kael::sub(w_sum, kael::div(kael::mul(kael::sum(kael::mul(*w, *aweights), std::nullopt, false,
                                                                            std::nullopt),
                                                              Scalar(correction)),
                                                    w_sum))
                      : kael::sub(w_sum, Scalar(correction));
  if (factor.item().to<double>() <= 0) {
    warn(WarningKind::User,
         "cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of observations.");
    factor = kael::mul(factor, Scalar(0));
  }
  centered = kael::sub(in, kael::unsqueeze(avg, 1));
  scaled = kael::mul(centered, *w);
  return kael::squeeze(kael::div(kael::matmul(centered, kael::t(scaled)), factor), std::nullopt);
}

// Pearson's correlation coefficients: the covariance over the products of the deviations,
// clipped to [-1, 1]; a single variable gives c / c (NaN for a covariance of 0, inf or NaN).
Tensor corrcoef(const Tensor& self) {
  KAEL_CHECK(self.dim() <= 2,
             "corrcoef: corrcoef(): expected input to have two or fewer dimensions but got an input with "
                 << self.dim() << " dimensions");
  const Tensor c = cov(self, 1, std::nullopt, std::nullopt);
  if (c.dim() == 0) return kael::div(c, c);
  const Tensor stddev = kael::sqrt(kael::diagonal(c, 0, 0, 1));
  const std::int64_t column[] = {-1, 1}, row[] = {1, -1};
  const Tensor scaled =
      kael::div(kael::div(c, kael::view(stddev, IntArrayRef(column))), kael::view(stddev, IntArrayRef(row)));
  return kael::clamp(scaled, std::optional<Scalar>(Scalar(-1)), std::optional<Scalar>(Scalar(1)));
}

// ---- trapezoid (trapz)

namespace {

// PyTorch's result for an empty dim: zeros of y's dtype with dim removed (NumPy's answer).
std::optional<Tensor> trapezoid_of_nothing(const char* op, const Tensor& y, std::int64_t& dim) {
  KAEL_CHECK_INDEX(y.dim() > 0, op << ": dimension specified as " << dim << " but tensor has no dimensions");
  dim = wrap_dim(op, dim, y.dim());
  if (y.sizes()[dim] != 0) return std::nullopt;
  DimVector sizes(y.sizes());
  sizes.erase(static_cast<std::size_t>(dim));
  return kael::zeros(IntArrayRef(sizes), y.dtype(), y.device());
}

// x[1:] - x[:-1] along dim (Python's slices: a dim of size 1 or 0 gives an empty difference).
Tensor slice_diff(const Tensor& x, std::int64_t dim) {
  const std::int64_t n = x.sizes()[dim], k = std::max<std::int64_t>(n - 1, 0);
  return kael::sub(kael::narrow(x, dim, std::min<std::int64_t>(1, n), k), kael::narrow(x, dim, 0, k));
}

Tensor trapezoid_x_impl(const char* op, const Tensor& y, const Tensor& x, std::int64_t dim) {
  if (auto nothing = trapezoid_of_nothing(op, y, dim)) return *nothing;
  KAEL_CHECK(y.dtype() != ScalarType::Bool && x.dtype() != ScalarType::Bool,
             op << ": trapezoid: received a bool input for `x` or `y`, but bool is not supported");
  Tensor x_viewed = x;
  if (x.dim() == 1) {
    KAEL_CHECK(x.sizes()[0] == y.sizes()[dim], op << ": trapezoid: There must be one `x` value for each sample point ("
                                                  << x.sizes()[0] << " for " << y.sizes()[dim] << ")");
    DimVector sizes(static_cast<std::size_t>(y.dim()), 1);
    sizes[static_cast<std::size_t>(dim)] = x.sizes()[0];
    x_viewed = kael::view(x, IntArrayRef(sizes));
  } else if (x.dim() < y.dim()) {
    DimVector sizes(static_cast<std::size_t>(y.dim() - x.dim()), 1);
    for (const std::int64_t s : x.sizes()) sizes.push_back(s);
    x_viewed = kael::view(x, IntArrayRef(sizes));
  }
  const std::int64_t n = y.sizes()[dim];
  const Tensor pairs = kael::add(kael::narrow(y, dim, 0, n - 1), kael::narrow(y, dim, 1, n - 1));
  const std::int64_t dims[] = {dim};
  return kael::div(kael::sum(kael::mul(pairs, slice_diff(x_viewed, dim)), IntArrayRef(dims), false, std::nullopt),
                   Scalar(2.0));
}

// A constant spacing: dx * (sum(y) - (y[0] + y[-1]) / 2), PyTorch's form of the rule.
Tensor trapezoid_dx_impl(const char* op, const Tensor& y, const Scalar& dx, std::int64_t dim) {
  if (auto nothing = trapezoid_of_nothing(op, y, dim)) return *nothing;
  KAEL_CHECK(y.dtype() != ScalarType::Bool,
             op << ": trapezoid: received a bool input for `y`, but bool is not supported");
  KAEL_CHECK(!dx.is_bool(), op << ": trapezoid: Currently, we only support dx as a real number.");
  const std::int64_t dims[] = {dim};
  const Tensor ends = kael::mul(kael::add(kael::select(y, dim, 0), kael::select(y, dim, -1)), Scalar(0.5));
  return kael::mul(kael::sub(kael::sum(y, IntArrayRef(dims), false, std::nullopt), ends), Scalar(dx.to_double()));
}

}  // namespace

Tensor trapezoid_x(const Tensor& y, const Tensor& x, std::int64_t dim) { return trapezoid_x_impl("trapezoid", y, x, dim); }
Tensor trapezoid_dx(const Tensor& y, const Scalar& dx, std::int64_t dim) {
  return trapezoid_dx_impl("trapezoid", y, dx, dim);
}
Tensor trapz_x(const Tensor& y, const Tensor& x, std::int64_t dim) { return trapezoid_x_impl("trapz", y, x, dim); }
Tensor trapz_dx(const Tensor& y, double dx, std::int64_t dim) { return trapezoid_dx_impl("trapz", y, Scalar(dx), dim); }

// ---- mm, mv, dot, vdot (matmul after their checks), addmm_, baddbmm_

namespace {
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b, const char* words) {
  KAEL_CHECK(a.dtype() == b.dtype(), op << ": expected " << words << " to have the same dtype, but got: "
                                        << dtype_name(a.dtype()) << " != " << dtype_name(b.dtype()));
}
}  // namespace

// The product of two matrices, without broadcasting.
Tensor mm(const Tensor& self, const Tensor& mat2) {
  KAEL_CHECK(self.dim() == 2, "mm: self must be a matrix, got a tensor of " << self.dim() << " dims");
  KAEL_CHECK(mat2.dim() == 2, "mm: mat2 must be a matrix, got a tensor of " << mat2.dim() << " dims");
  check_same_dtype("mm", self, mat2, "self and mat2");
  return kael::matmul(self, mat2);
}

Tensor mv(const Tensor& self, const Tensor& vec) {
  KAEL_CHECK(self.dim() == 2 && vec.dim() == 1,
             "mv: vector + matrix @ vector expected, got " << self.dim() << ", " << vec.dim());
  check_same_dtype("mv", self, vec, "self and vec");
  return kael::matmul(self, vec);
}

Tensor dot(const Tensor& self, const Tensor& tensor) {
  KAEL_CHECK(self.dim() == 1 && tensor.dim() == 1,
             "dot: 1D tensors expected, but got " << self.dim() << "D and " << tensor.dim() << "D tensors");
  KAEL_CHECK(self.dtype() == tensor.dtype(), "dot: expected both vectors to have same dtype, but found "
                                                 << dtype_name(self.dtype()) << " and " << dtype_name(tensor.dtype()));
  KAEL_CHECK(self.numel() == tensor.numel(),
             "dot: inconsistent tensor size, expected tensor [" << self.numel() << "] and src [" << tensor.numel()
                                                                << "] to have the same number of elements, but got "
                                                                << self.numel() << " and " << tensor.numel()
                                                                << " elements respectively");
  return kael::matmul(self, tensor);
}

// dot: real dtypes have no conjugate.
Tensor vdot(const Tensor& self, const Tensor& other) { return dot(self, other); }

// The in-place forms: the product computed out of place, checked against self (shape, dtype)
// and copied, so that a failing check leaves self alone.
const Tensor& addmm_(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                     const Scalar& alpha) {
  const Tensor source = in_place_source(self, {&mat1, &mat2});
  return write_in_place("addmm_", self, kael::addmm(source, mat1, mat2, beta, alpha));
}

const Tensor& baddbmm_(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
                       const Scalar& alpha) {
  const Tensor source = in_place_source(self, {&batch1, &batch2});
  return write_in_place("baddbmm_", self, kael::baddbmm(source, batch1, batch2, beta, alpha));
}

}  // namespace kael::native
