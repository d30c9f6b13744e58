#include "kael/autograd/formula_helpers.h"

#include <algorithm>

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
#include "kael/ops/expand.h"
#include "kael/ops/mul.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sum.h"
#include "kael/ops/unsqueeze.h"

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

}  // namespace

Tensor maybe_multiply(const Tensor& grad, const Scalar& alpha) {
  const bool one = alpha.is_floating() ? alpha.to_double() == 1.0 : alpha.to<std::int64_t>() == 1;
  if (one) return grad;
  return kael::mul(grad, alpha);
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

}  // namespace kael::autograd::detail
