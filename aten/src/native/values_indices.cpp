// Composites of the ops that return two tensors: the overloads of max and min that take another
// tensor (maximum and minimum, as in PyTorch: torch.max(a, b) is torch.maximum(a, b)), nonzero as
// one index tensor per dim, the selections by rank (kthvalue, median, nanmedian) over their
// kernels, the running extremes (cummax, cummin), and the paired statistics (aminmax, var_mean,
// std_mean).
#include <numeric>
#include <tuple>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/_kthvalue.h"
#include "kael/ops/_median_all.h"
#include "kael/ops/_median_dim.h"
#include "kael/ops/amax.h"
#include "kael/ops/amin.h"
#include "kael/ops/arange.h"
#include "kael/ops/cat.h"
#include "kael/ops/clone.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/expand.h"
#include "kael/ops/ge.h"
#include "kael/ops/isnan.h"
#include "kael/ops/le.h"
#include "kael/ops/logical_or.h"
#include "kael/ops/maximum.h"
#include "kael/ops/mean.h"
#include "kael/ops/minimum.h"
#include "kael/ops/narrow.h"
#include "kael/ops/nonzero.h"
#include "kael/ops/reshape.h"
#include "kael/ops/select.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/std.h"
#include "kael/ops/var.h"
#include "kael/ops/where.h"
#include "kael/ops/zeros.h"

namespace kael::native {

Tensor max_other(const Tensor& self, const Tensor& other) { return kael::maximum(self, other); }

Tensor min_other(const Tensor& self, const Tensor& other) { return kael::minimum(self, other); }

std::vector<Tensor> nonzero_numpy(const Tensor& self) {
  // a 0-d input counts as 1-d, as PyTorch's nonzero(as_tuple=True)
  const std::int64_t one[] = {1};
  const Tensor rows = kael::nonzero(self.dim() == 0 ? kael::reshape(self, IntArrayRef(one)) : self);
  std::vector<Tensor> out;
  for (std::int64_t d = 0; d < rows.sizes()[1]; ++d) out.push_back(kael::select(rows, 1, d));
  return out;
}

namespace {

// The length of dim d of self (a 0-d tensor has one element along its dims -1 and 0).
std::int64_t dim_length(const Tensor& self, std::int64_t d) { return self.dim() == 0 ? 1 : self.sizes()[d]; }

// The selections by rank order their elements: bool has no kernel, as in PyTorch (where it is a
// NotImplementedError, a RuntimeError: docs/decisions/torch-sweep.md).
void check_orderable(const char* op, const Tensor& self) {
  KAEL_CHECK_IMPLEMENTED(self.dtype() != ScalarType::Bool, op << "(): not implemented for 'Bool'");
}

// A kernel's (values, indices), which keep dim d with size 1, without it unless keepdim.
std::tuple<Tensor, Tensor> reduced(std::tuple<Tensor, Tensor> kept, const Tensor& self, std::int64_t d, bool keepdim) {
  if (keepdim || self.dim() == 0) return kept;
  return {kael::squeeze(std::get<0>(kept), d), kael::squeeze(std::get<1>(kept), d)};
}

}  // namespace

std::tuple<Tensor, Tensor> kthvalue(const Tensor& self, std::int64_t k, std::int64_t dim, bool keepdim) {
  const std::int64_t d = wrap_dim("kthvalue", dim, self.dim());
  const std::int64_t length = dim_length(self, d);
  KAEL_CHECK_INDEX(length != 0, "kthvalue(): Expected reduction dim " << d << " to have non-zero size.");
  KAEL_CHECK(k >= 1 && k <= length, "kthvalue(): selected number k out of range for dimension " << d << " (k = " << k
                                                                                                << ", size " << length << ")");
  check_orderable("kthvalue", self);
  return reduced(kael::_kthvalue(self, k, d), self, d, keepdim);
}

// The medians of all elements go through _median_all, whose gradient is PyTorch's
// evenly_distribute_backward (the elements equal to the median share it).
Tensor median(const Tensor& self) {
  if (self.numel() > 0) check_orderable("median", self);  // an empty one gives NaN as bool, true
  return kael::_median_all(self, false);
}

std::tuple<Tensor, Tensor> median_dim(const Tensor& self, std::int64_t dim, bool keepdim) {
  const std::int64_t d = wrap_dim("median", dim, self.dim());
  KAEL_CHECK_INDEX(dim_length(self, d) != 0, "median(): Expected reduction dim " << d << " to have non-zero size.");
  check_orderable("median", self);
  return reduced(kael::_median_dim(self, d, false), self, d, keepdim);
}

Tensor nanmedian(const Tensor& self) {
  if (self.numel() > 0) check_orderable("nanmedian", self);  // an empty one gives NaN as bool, true
  return kael::_median_all(self, is_floating(self.dtype()));
}

std::tuple<Tensor, Tensor> nanmedian_dim(const Tensor& self, std::int64_t dim, bool keepdim) {
  const std::int64_t d = wrap_dim("nanmedian", dim, self.dim());
  KAEL_CHECK_INDEX(dim_length(self, d) != 0, "nanmedian(): Expected reduction dim " << d << " to have non-zero size.");
  check_orderable("nanmedian", self);
  // without NaN (integers, or one element) it is the median
  const bool ignore_nan = is_floating(self.dtype()) && self.dim() > 0;
  return reduced(kael::_median_dim(self, d, ignore_nan), self, d, keepdim);
}

namespace {

// The running maximum (or minimum) along dim with the index of the element holding it: an
// inclusive scan in log2(n) steps of cat, where and narrow (Hillis-Steele: at step s each
// position takes in the one s before it), so autograd sees ordinary ops. The later of equal
// elements wins, and a NaN, once met, stays with the index of the latest NaN (PyTorch's rule).
// As PyTorch's cummax, an empty input is not checked against dim, and a 0-d one takes 0 and -1.
std::tuple<Tensor, Tensor> running_extreme(const char* op, const Tensor& self, std::int64_t dim, bool maximum) {
  if (self.dim() == 0) {
    KAEL_CHECK_INDEX(dim == 0 || dim == -1, op << "(): Expected reduction dim -1 or 0 for scalar but got " << dim);
    return {kael::clone(self), kael::zeros(IntArrayRef{}, ScalarType::Int64, self.device())};
  }
  if (self.numel() == 0) return {kael::clone(self), kael::zeros(self.sizes(), ScalarType::Int64, self.device())};
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t n = self.sizes()[d];
  std::vector<std::int64_t> shape(static_cast<std::size_t>(self.dim()), 1);
  shape[static_cast<std::size_t>(d)] = n;
  Tensor values = kael::clone(self);
  Tensor index = kael::contiguous(kael::expand(
      kael::reshape(kael::arange(Scalar(n), ScalarType::Int64, self.device()), IntArrayRef(shape)), self.sizes()));
  const bool floating = is_floating(self.dtype());
  for (std::int64_t s = 1; s < n; s *= 2) {
    const Tensor left = kael::narrow(values, d, 0, n - s), right = kael::narrow(values, d, s, n - s);
    Tensor take = maximum ? kael::ge(right, left) : kael::le(right, left);
    if (floating) take = kael::logical_or(take, kael::isnan(right));
    const Tensor next_values[] = {kael::narrow(values, d, 0, s), kael::where(take, right, left)};
    const Tensor next_index[] = {kael::narrow(index, d, 0, s),
                                 kael::where(take, kael::narrow(index, d, s, n - s), kael::narrow(index, d, 0, n - s))};
    values = kael::cat(TensorList(next_values), d);
    index = kael::cat(TensorList(next_index), d);
  }
  return {values, index};
}

// Every dim of self, for the reductions over all elements.
std::vector<std::int64_t> all_dims(const Tensor& self) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(self.dim()));
  std::iota(dims.begin(), dims.end(), std::int64_t{0});
  return dims;
}

}  // namespace

std::tuple<Tensor, Tensor> cummax(const Tensor& self, std::int64_t dim) {
  return running_extreme("cummax", self, dim, true);
}

std::tuple<Tensor, Tensor> cummin(const Tensor& self, std::int64_t dim) {
  return running_extreme("cummin", self, dim, false);
}

std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<std::int64_t> dim, bool keepdim) {
  if (dim) {
    const std::int64_t one[] = {*dim};
    return {kael::amin(self, IntArrayRef(one), keepdim), kael::amax(self, IntArrayRef(one), keepdim)};
  }
  KAEL_CHECK(self.numel() > 0,
             "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity (input of "
             "shape " << shape_str(self.sizes()) << ")");
  const std::vector<std::int64_t> dims = all_dims(self);
  return {kael::amin(self, IntArrayRef(dims), keepdim), kael::amax(self, IntArrayRef(dims), keepdim)};
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& self, bool unbiased) {
  return {kael::var(self, unbiased), kael::mean(self, std::nullopt)};
}

std::tuple<Tensor, Tensor> var_mean_dim(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased,
                                        bool keepdim) {
  return {kael::var(self, dim, unbiased, keepdim), kael::mean(self, dim, keepdim)};
}

std::tuple<Tensor, Tensor> var_mean_correction(const Tensor& self, std::optional<IntArrayRef> dim,
                                               const std::optional<Scalar>& correction, bool keepdim) {
  return {kael::var(self, dim, correction, keepdim), kael::mean(self, dim, keepdim)};
}

std::tuple<Tensor, Tensor> std_mean(const Tensor& self, bool unbiased) {
  return {kael::std(self, unbiased), kael::mean(self, std::nullopt)};
}

std::tuple<Tensor, Tensor> std_mean_dim(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased,
                                        bool keepdim) {
  return {kael::std(self, dim, unbiased, keepdim), kael::mean(self, dim, keepdim)};
}

std::tuple<Tensor, Tensor> std_mean_correction(const Tensor& self, std::optional<IntArrayRef> dim,
                                               const std::optional<Scalar>& correction, bool keepdim) {
  return {kael::std(self, dim, correction, keepdim), kael::mean(self, dim, keepdim)};
}

}  // namespace kael::native
