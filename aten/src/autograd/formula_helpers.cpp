#include "kael/autograd/formula_helpers.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kael/core/error.h"
#include "kael/ops/copy_.h"
#include "kael/ops/sum_to_size.h"
#include "kael/ops/diagonal.h"
#include "kael/ops/div.h"
#include "kael/ops/index_add.h"
#include "kael/ops/index_select.h"
#include "kael/ops/nonzero.h"
#include "kael/ops/roll.h"
#include "kael/ops/scatter_add.h"
#include "kael/ops/zeros.h"
#include "kael/native/pointwise.h"
#include "kael/ops/abs.h"
#include "kael/ops/add.h"
#include "kael/ops/cumprod.h"
#include "kael/ops/cumsum.h"
#include "kael/ops/div.h"
#include "kael/ops/eq.h"
#include "kael/ops/exp.h"
#include "kael/ops/expand.h"
#include "kael/ops/isnan.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/logical_or.h"
#include "kael/ops/mean.h"
#include "kael/ops/mul.h"
#include "kael/ops/ge.h"
#include "kael/ops/gt.h"
#include "kael/ops/le.h"
#include "kael/ops/lt.h"
#include "kael/ops/sin.h"
#include "kael/ops/cos.h"
#include "kael/ops/ne.h"
#include "kael/ops/pow.h"
#include "kael/ops/prod.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sgn.h"
#include "kael/ops/sub.h"
#include "kael/ops/sum.h"
#include "kael/ops/matmul.h"
#include "kael/ops/t.h"
#include "kael/ops/to.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/zeros_like.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/any.h"
#include "kael/ops/ones_like.h"
#include "kael/ops/ones.h"
#include "kael/ops/narrow.h"
#include "kael/ops/cat.h"
#include "kael/ops/flip.h"
#include "kael/ops/where.h"

namespace kael::autograd::detail {

namespace {

// The reduced dims, wrapped and sorted; every dim when `dim` is None or empty.
DimVector reduced_dims(IntArrayRef sizes, std::optional<IntArrayRef> dim) {
  const auto nd = static_cast<std::int64_t>(sizes.size());
  DimVector dims;
  if (!dim || dim->empty()) {
    for (std::int64_t d = 0; d < nd; ++d) dims.push_back(d);
    return dims;
  }
  for (std::int64_t d : *dim) dims.push_back(wrap_dim("sum_backward", d, std::max<std::int64_t>(nd, 1)));
  std::sort(dims.begin(), dims.end());
  return dims;
}

// grad of a reduction with its reduced dims restored as size 1 (when keepdim was false), so it
// broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  if (keepdim || sizes.empty()) return grad;
  if (!dim || dim->empty()) return kael::reshape(grad, DimVector(sizes.size(), 1));
  Tensor g = grad;
  for (std::int64_t d : reduced_dims(sizes, dim)) g = kael::unsqueeze(g, d);
  return g;
}

// The number of elements each output of a reduction over dim reduces.
double reduced_count(IntArrayRef sizes, std::optional<IntArrayRef> dim) {
  double count = 1;
  for (std::int64_t d : reduced_dims(sizes, dim)) count *= static_cast<double>(sizes[d]);
  return count;
}

// A bool tensor as 0/1 of dtype.
Tensor as_mask(const Tensor& b, ScalarType dtype) { return kael::to(b, dtype); }

// sum_{j >= i} v_j along dim, summed from the end (a sum-minus-prefix form turns one infinity
// into NaN everywhere).
Tensor reverse_cumsum(const Tensor& v, std::int64_t dim) {
  const std::int64_t d[] = {dim};
  return kael::flip(kael::cumsum(kael::flip(v, IntArrayRef(d)), dim, std::nullopt), IntArrayRef(d));
}

// `value` where `keep` holds, 0 elsewhere. Multiplying by a 0/1 mask instead gives NaN where the
// dropped value is inf or NaN (0 * inf): every formula that drops a branch selects with this.
Tensor keep_where(const Tensor& keep, const Tensor& value) { return kael::where(keep, value, Scalar(0)); }

// The product of the other elements along dim, for each element (exclusive products from both
// ends, no division): PyTorch's prod_safe_zeros_backward.
Tensor products_of_others(const Tensor& x, std::int64_t dim) {
  const std::int64_t n = x.size(dim);
  if (n <= 1) return kael::ones_like(x, std::nullopt, std::nullopt);
  DimVector ones_size(x.sizes().size(), 1);
  for (std::size_t i = 0; i < ones_size.size(); ++i) ones_size[i] = x.sizes()[i];
  ones_size[static_cast<std::size_t>(dim)] = 1;
  const Tensor ones = kael::ones(ones_size, x.dtype(), x.device());
  const std::int64_t d[] = {dim};
  const std::array<Tensor, 2> head{ones, kael::narrow(x, dim, 0, n - 1)};
  const std::array<Tensor, 2> tail{ones, kael::flip(kael::narrow(x, dim, 1, n - 1), IntArrayRef(d))};
  const Tensor before = kael::cumprod(kael::cat(TensorList(head), dim), dim, std::nullopt);
  const Tensor after_flipped = kael::cumprod(kael::cat(TensorList(tail), dim), dim, std::nullopt);
  return kael::mul(before, kael::flip(after_flipped, IntArrayRef(d)));
}

bool any_true(const Tensor& b) { return kael::any(b, std::nullopt, false).item().to<bool>(); }

}  // namespace

Tensor sinc_backward(const Tensor& grad, const Tensor& self) {
  const Scalar pi(3.141592653589793);
  const Tensor self_pi = kael::mul(self, pi);
  const Tensor squared_pi = kael::mul(kael::mul(self, self), pi);
  const Tensor out = kael::div(kael::mul(grad, kael::sub(kael::mul(self_pi, kael::cos(self_pi)), kael::sin(self_pi))),
                               squared_pi);
  return kael::where(kael::eq(squared_pi, Scalar(0.0)), Scalar(0.0), out);
}

Tensor logit_backward(const Tensor& grad, const Tensor& self, const Scalar& eps) {
  const double e = eps.to_double();
  const Tensor inner = kael::div(grad, kael::mul(self, kael::sub(Scalar(1.0), self)));
  if (e < 0) return kael::where(kael::logical_or(kael::lt(self, Scalar(0.0)), kael::gt(self, Scalar(1.0))),
                                Scalar(std::nan("")), inner);
  // inside the clamp (a NaN input or eps is inside nothing)
  const Tensor inside = kael::logical_and(kael::ge(self, Scalar(e)), kael::le(self, Scalar(1.0 - e)));
  return kael::where(inside, inner, Scalar(0.0));
}

Tensor maybe_multiply(const Tensor& grad, const Scalar& alpha) {
  const bool one = alpha.is_floating() ? alpha.to_double() == 1.0 : alpha.to<std::int64_t>() == 1;
  if (one) return grad;
  return kael::mul(grad, alpha);
}

Tensor mm_mat2_backward(const Tensor& grad, const Tensor& mat1, const Tensor& mat2) {
  const bool transposed = mat2.dim() == 2 && mat2.strides()[0] == 1 && mat2.strides()[1] == mat2.sizes()[0] &&
                          mat2.sizes()[0] > 1 && mat2.sizes()[1] > 1;
  if (transposed) return kael::t(kael::matmul(kael::t(grad), mat1));
  return kael::matmul(kael::t(mat1), grad);
}

Tensor sum_to(const Tensor& grad, IntArrayRef sizes) { return kael::sum_to_size(grad, sizes); }

Tensor sum_backward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  Tensor g = grad;
  if (!keepdim && !sizes.empty()) {
    if (!dim || dim->empty()) {
      const DimVector ones(sizes.size(), 1);
      g = kael::reshape(grad, ones);
    } else {
      for (std::int64_t d : reduced_dims(sizes, dim)) g = kael::unsqueeze(g, d);
    }
  }
  return kael::expand(g, sizes);
}

Tensor mean_backward(const Tensor& grad, IntArrayRef sizes, std::optional<IntArrayRef> dim, bool keepdim) {
  std::int64_t count = 1;
  for (std::int64_t d : reduced_dims(sizes, dim)) count *= sizes[d];
  return kael::div(sum_backward(grad, sizes, dim, keepdim), Scalar(static_cast<double>(count)));
}

Tensor repeat_backward(const Tensor& grad, IntArrayRef repeats, IntArrayRef sizes) {
  const std::size_t pad = repeats.size() - sizes.size();
  DimVector split, reduce;
  for (std::size_t i = 0; i < repeats.size(); ++i) {
    const std::int64_t s = i < pad ? 1 : sizes[i - pad];
    if (repeats[i] != 1) {
      reduce.push_back(static_cast<std::int64_t>(split.size()));
      split.push_back(repeats[i]);
    }
    split.push_back(s);
  }
  Tensor g = kael::reshape(grad, split);
  if (!reduce.empty()) g = kael::sum(g, IntArrayRef(reduce), false);
  return kael::reshape(g, sizes);
}

Tensor roll_backward(const Tensor& grad, IntArrayRef shifts, IntArrayRef dims) {
  DimVector back;
  for (const std::int64_t s : shifts) back.push_back(static_cast<std::int64_t>(0ULL - static_cast<std::uint64_t>(s)));
  return kael::roll(grad, back, dims);
}

Tensor diagonal_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t offset, std::int64_t dim1,
                         std::int64_t dim2) {
  Tensor out = kael::zeros(sizes, grad.dtype(), grad.device());
  kael::copy_(kael::diagonal(out, offset, dim1, dim2), grad);
  return out;
}

Tensor index_select_backward(const Tensor& grad, IntArrayRef sizes, std::int64_t dim, const Tensor& index) {
  return kael::index_add(kael::zeros(sizes, grad.dtype(), grad.device()), dim, index, grad);
}

Tensor gather_backward(const Tensor& grad, const Tensor& self, std::int64_t dim, const Tensor& index) {
  return kael::scatter_add(kael::zeros(self.sizes(), grad.dtype(), grad.device()), dim, index, grad);
}

Tensor index_add_source_backward(const Tensor& grad, std::int64_t dim, const Tensor& index, const Tensor& source,
                                 const Scalar& alpha) {
  Tensor g = kael::index_select(grad, dim, index);
  if (source.dim() == 0) g = kael::reshape(g, IntArrayRef{});
  return maybe_multiply(g, alpha);
}

Tensor masked_select_backward(const Tensor& grad, const Tensor& self, const Tensor& mask) {
  const DimVector shape = native::broadcast_shapes("masked_select_backward", self.sizes(), mask.sizes());
  const std::int64_t flat[] = {-1};
  const Tensor where = kael::reshape(kael::nonzero(kael::reshape(kael::expand(mask, shape), flat)), flat);
  const std::int64_t numel[] = {checked_numel("masked_select_backward", shape)};
  const Tensor placed = kael::index_add(kael::zeros(numel, grad.dtype(), grad.device()), 0, where, grad);
  return kael::sum_to_size(kael::reshape(placed, shape), self.sizes());
}

Tensor prod_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<std::int64_t> dim,
                     bool keepdim) {
  // PyTorch's algorithm, so that zeros, infinities and NaN give its values: without a zero in
  // the input, grad * result / self; with zeros, the product of the other elements (computed
  // without division), and for a full reduction 0 everywhere when two or more elements are 0.
  if (self.dim() == 0) return kael::mul(grad, kael::ones_like(self, grad.dtype(), std::nullopt));
  std::int64_t d[1] = {0};
  std::optional<IntArrayRef> dims;
  if (dim) {
    d[0] = wrap_dim("prod_backward", *dim, self.dim());
    dims = IntArrayRef(d);
  }
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dims, keepdim);
  const Tensor zero = kael::eq(self, Scalar(0));
  if (!any_true(zero)) return kael::mul(g, kael::div(unsqueeze_reduced(result, self.sizes(), dims, keepdim), self));
  if (dim) return kael::mul(g, products_of_others(self, d[0]));
  if (kael::sum(as_mask(zero, ScalarType::Int64), std::nullopt).item().to<std::int64_t>() > 1) {
    return kael::zeros(self.sizes(), grad.dtype(), grad.device());
  }
  const std::int64_t flat[] = {-1};
  return kael::mul(g, kael::reshape(products_of_others(kael::reshape(self, flat), 0), self.sizes()));
}

Tensor extreme_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                        bool keepdim) {
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dim, keepdim);
  const Tensor r = unsqueeze_reduced(result, self.sizes(), dim, keepdim);
  const Tensor hit = as_mask(kael::logical_or(kael::eq(self, r), kael::logical_and(kael::isnan(self), kael::isnan(r))),
                             grad.dtype());
  const Tensor count = kael::sum(hit, dim, true, std::nullopt);
  return kael::mul(kael::div(g, count), hit);
}

Tensor evenly_distribute_backward(const Tensor& grad, const Tensor& self, const Tensor& value) {
  const Tensor mask = kael::isnan(value).item().to<bool>() ? kael::isnan(self) : kael::eq(self, value);
  const Tensor share = kael::div(grad, as_mask(kael::sum(mask, std::nullopt), grad.dtype()));
  return kael::where(mask, share, Scalar(0));
}

Tensor norm_backward(const Tensor& grad, const Tensor& self, double p, const Tensor& result,
                     std::optional<IntArrayRef> dim, bool keepdim) {
  const ScalarType t = grad.dtype();
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dim, keepdim);
  const Tensor r = unsqueeze_reduced(result, self.sizes(), dim, keepdim);
  if (p == 0) return kael::zeros_like(self, std::nullopt, std::nullopt);
  if (p == 1) return kael::mul(kael::sgn(self), g);
  if (std::isinf(p)) {
    const Tensor hit = as_mask(kael::eq(kael::abs(self), r), t);
    const Tensor count = kael::sum(hit, dim, true, std::nullopt);
    return kael::mul(kael::mul(kael::sgn(self), kael::div(hit, count)), g);
  }
  // grad * sgn(x) |x|^(p-1) / norm^(p-1), 0 where the norm is 0 (and, for p < 1, where x is 0).
  const Tensor r_zero = kael::eq(r, Scalar(0));
  const Tensor scale = kael::where(r_zero, Scalar(0), kael::div(g, kael::pow(kael::where(r_zero, Scalar(1), r), Scalar(p - 1))));
  if (p == 2) return kael::mul(self, scale);
  const Tensor x_zero = kael::eq(self, Scalar(0));
  const Tensor power = kael::where(x_zero, Scalar(0), kael::pow(kael::where(x_zero, Scalar(1), kael::abs(self)), Scalar(p - 1)));
  return kael::mul(kael::mul(kael::sgn(self), power), scale);
}

Tensor logsumexp_backward(const Tensor& grad, const Tensor& self, const Tensor& result, IntArrayRef dim, bool keepdim) {
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dim, keepdim);
  const Tensor r = unsqueeze_reduced(result, self.sizes(), dim, keepdim);
  return kael::mul(g, kael::exp(kael::sub(self, r, Scalar(1))));
}

Tensor var_backward(const Tensor& grad, const Tensor& self, std::optional<IntArrayRef> dim, double c, bool keepdim) {
  const double n = reduced_count(self.sizes(), dim);
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dim, keepdim);
  const Tensor centred = kael::sub(self, kael::mean(self, dim, true, std::nullopt), Scalar(1));
  return kael::mul(kael::mul(g, centred), Scalar(2.0 / std::max(0.0, n - c)));
}

Tensor std_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                    double correction, bool keepdim) {
  const Tensor zero = kael::eq(result, Scalar(0));
  const Tensor grad_var =
      kael::where(zero, Scalar(0), kael::div(grad, kael::mul(kael::where(zero, Scalar(1), result), Scalar(2))));
  return var_backward(grad_var, self, dim, correction, keepdim);
}

Tensor cumsum_backward(const Tensor& grad, const Tensor& self, std::int64_t dim) {
  (void)self;
  return reverse_cumsum(grad, dim);
}

Tensor cumprod_backward(const Tensor& grad, const Tensor& self, std::int64_t dim, const Tensor& result) {
  // PyTorch's O(n) algorithm, branches selected (not multiplied by masks). Along dim, with z the
  // first zero of a line: an element before z gets sum_{i <= j < z} grad_j result_j / x_i; z
  // itself gets prod_{k < z} x_k * sum_{z <= j < z2} grad_j prod_{z < k <= j} x_k (z2 the second
  // zero); elements after z get 0.
  if (self.numel() <= 1) return grad;
  dim = wrap_dim("cumprod_backward", dim, self.dim());
  if (self.size(dim) == 1) return grad;
  const Tensor w = kael::mul(grad, result);
  const Tensor zero = kael::eq(self, Scalar(0));
  if (!any_true(zero)) return kael::div(reverse_cumsum(w, dim), self);
  const Tensor zeros_so_far = kael::cumsum(as_mask(zero, ScalarType::Int64), dim, std::nullopt);
  const Tensor before = kael::eq(zeros_so_far, Scalar(0));                 // strictly before z
  const Tensor from_z = kael::eq(zeros_so_far, Scalar(1));                 // z up to the second zero
  const Tensor first = kael::logical_and(zero, from_z);                    // z
  const Tensor head = keep_where(before, kael::div(reverse_cumsum(keep_where(before, w), dim),
                                                   kael::where(before, self, Scalar(1))));
  const Tensor prefix = kael::prod(kael::where(before, self, Scalar(1)), dim, true, std::nullopt);  // prod_{k < z} x_k
  const Tensor between = kael::logical_and(from_z, kael::logical_not(first));
  const std::int64_t d[] = {dim};
  const Tensor tail = kael::sum(kael::mul(kael::cumprod(kael::where(between, self, Scalar(1)), dim, std::nullopt),
                                          keep_where(from_z, grad)),
                                IntArrayRef(d), true, std::nullopt);
  return kael::add(head, keep_where(first, kael::mul(prefix, tail)), Scalar(1));
}

}  // namespace kael::autograd::detail
