#include "kael/autograd/formula_helpers.h"

#include <algorithm>
#include <cmath>

#include "kael/core/error.h"
#include "kael/ops/copy_.h"
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

// sum_{j >= i} v_j along dim.
Tensor reverse_cumsum(const Tensor& v, std::int64_t dim) {
  const std::int64_t d[] = {dim};
  return kael::sub(kael::add(kael::sum(v, IntArrayRef(d), true, std::nullopt), v), kael::cumsum(v, dim, std::nullopt));
}

}  // namespace

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

Tensor sum_to_size(const Tensor& grad, IntArrayRef sizes) {
  const IntArrayRef g = grad.sizes();
  KAEL_CHECK_VALUE(g.size() >= sizes.size(), "sum_to_size: size " << shape_str(sizes) << " is not expandable to "
                                                                   << shape_str(g));
  if (std::equal(g.begin(), g.end(), sizes.begin(), sizes.end())) return grad;
  const std::size_t lead = g.size() - sizes.size();
  DimVector dims;
  for (std::size_t i = 0; i < lead; ++i) dims.push_back(static_cast<std::int64_t>(i));
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    KAEL_CHECK_VALUE(sizes[i] == g[lead + i] || sizes[i] == 1,
                     "sum_to_size: size " << shape_str(sizes) << " is not expandable to " << shape_str(g));
    if (sizes[i] == 1 && g[lead + i] != 1) dims.push_back(static_cast<std::int64_t>(lead + i));
  }
  Tensor r = grad;
  if (!dims.empty()) r = kael::sum(grad, IntArrayRef(dims), /*keepdim=*/true);
  return kael::reshape(r, sizes);
}

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
  return sum_to_size(kael::reshape(placed, shape), self.sizes());
}

Tensor prod_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<std::int64_t> dim,
                     bool keepdim) {
  const ScalarType t = grad.dtype();
  std::int64_t d[1] = {0};
  std::optional<IntArrayRef> dims;
  if (dim) {
    d[0] = *dim;
    dims = IntArrayRef(d);
  }
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dims, keepdim);
  (void)result;  // recomputed below without the zeros
  const Tensor zero = as_mask(kael::eq(self, Scalar(0)), t);   // 1 where self is 0
  const Tensor safe = kael::add(self, zero, Scalar(1));         // self with its zeros replaced by 1
  const Tensor zeros = kael::sum(zero, dims, true, std::nullopt);
  Tensor others = dim ? kael::prod(safe, *dim, true, std::nullopt)  // product of the non-zero elements
                      : kael::reshape(kael::prod(safe, std::nullopt), DimVector(self.dim(), 1));
  // No zero: product / self. One zero: that element gets the product of the others. More: 0.
  const Tensor none = as_mask(kael::eq(zeros, Scalar(0)), t);
  const Tensor one = as_mask(kael::eq(zeros, Scalar(1)), t);
  const Tensor factor =
      kael::add(kael::div(kael::mul(none, others), safe), kael::mul(kael::mul(one, zero), others), Scalar(1));
  return kael::mul(g, factor);
}

Tensor extreme_backward(const Tensor& grad, const Tensor& self, const Tensor& result, std::optional<IntArrayRef> dim,
                        bool keepdim) {
  const Tensor g = unsqueeze_reduced(grad, self.sizes(), dim, keepdim);
  const Tensor r = unsqueeze_reduced(result, self.sizes(), dim, keepdim);
  const Tensor hit = as_mask(kael::logical_or(kael::eq(self, r), kael::logical_and(kael::isnan(self), kael::isnan(r))),
                             grad.dtype());
  const Tensor count = kael::sum(hit, dim, true, std::nullopt);
  return kael::mul(kael::div(hit, count), g);
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
  const Tensor r_zero = as_mask(kael::eq(r, Scalar(0)), t);
  const Tensor scale =
      kael::mul(kael::div(g, kael::pow(kael::add(r, r_zero, Scalar(1)), Scalar(p - 1))), kael::sub(Scalar(1), r_zero, Scalar(1)));
  if (p == 2) return kael::mul(self, scale);
  const Tensor x_zero = as_mask(kael::eq(self, Scalar(0)), t);
  const Tensor power = kael::mul(kael::pow(kael::add(kael::abs(self), x_zero, Scalar(1)), Scalar(p - 1)),
                                 kael::sub(Scalar(1), x_zero, Scalar(1)));
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
  const Tensor zero = as_mask(kael::eq(result, Scalar(0)), result.dtype());
  const Tensor safe = kael::add(result, zero, Scalar(1));
  const Tensor grad_var =
      kael::mul(kael::div(grad, kael::mul(safe, Scalar(2))), kael::sub(Scalar(1), zero, Scalar(1)));
  return var_backward(grad_var, self, dim, correction, keepdim);
}

Tensor cumsum_backward(const Tensor& grad, const Tensor& self, std::int64_t dim) {
  (void)self;
  return reverse_cumsum(grad, dim);
}

Tensor cumprod_backward(const Tensor& grad, const Tensor& self, std::int64_t dim, const Tensor& result) {
  // Along dim, with z the first zero of a line: an element before z gets
  // sum_{i <= j < z} grad_j result_j / x_i; z itself gets prod_{k < z} x_k * sum_{j >= z} grad_j
  // prod_{z < k <= j} x_k; elements after z get 0.
  const ScalarType t = grad.dtype();
  const std::int64_t d[] = {dim};
  const IntArrayRef dims(d);
  const Tensor zero = as_mask(kael::eq(self, Scalar(0)), t);
  const Tensor zeros_so_far = kael::cumsum(zero, dim, std::nullopt);
  const Tensor before = as_mask(kael::eq(zeros_so_far, Scalar(0)), t);        // strictly before z
  const Tensor first = kael::mul(zero, as_mask(kael::eq(zeros_so_far, Scalar(1)), t));  // z
  const Tensor after = kael::sub(Scalar(1), before, Scalar(1));               // z and later
  const Tensor safe = kael::add(kael::mul(self, before), after, Scalar(1));   // x before z, 1 from z on
  const Tensor head =
      kael::mul(kael::div(reverse_cumsum(kael::mul(kael::mul(grad, result), before), dim), safe), before);
  const Tensor prefix = kael::prod(safe, dim, true, std::nullopt);  // (the dim_int overload)              // prod_{k < z} x_k
  const Tensor tail_x = kael::add(kael::mul(kael::mul(self, after), kael::sub(Scalar(1), first, Scalar(1))),
                                  kael::add(before, first, Scalar(1)), Scalar(1));  // 1 up to z, x after
  const Tensor tail = kael::sum(kael::mul(kael::mul(after, grad), kael::cumprod(tail_x, dim, std::nullopt)), dims, true,
                                std::nullopt);
  return kael::add(head, kael::mul(first, kael::mul(prefix, tail)), Scalar(1));
}

}  // namespace kael::autograd::detail
