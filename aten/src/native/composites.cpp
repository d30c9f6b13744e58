// Small composite ops: written in terms of registered ops, so autograd, a Python key and every
// device see those.
#include <algorithm>
#include <cmath>
#include <string>
#include <cstdlib>
#include <vector>
#include <tuple>

#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/as_strided.h"
#include "kael/ops/cat.h"
#include "kael/ops/fill_.h"
#include "kael/ops/index_put_.h"
#include "kael/ops/logaddexp.h"
#include "kael/ops/clone.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/div.h"
#include "kael/ops/eq.h"
#include "kael/ops/expand.h"
#include "kael/ops/flip.h"
#include "kael/ops/index_select.h"
#include "kael/ops/isnan.h"
#include "kael/ops/logical_xor.h"
#include "kael/ops/lt.h"
#include "kael/ops/amax.h"
#include "kael/ops/amin.h"
#include "kael/ops/add.h"
#include "kael/ops/mul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/sub.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sort.h"
#include "kael/ops/sum.h"
#include "kael/ops/to.h"
#include "kael/ops/where.h"
#include "kael/ops/zeros_like.h"
#include "kael/ops/squeeze.h"
#include "kael/ops/t.h"
#include "kael/ops/unsqueeze.h"
#include "kael/ops/_logit.h"
#include "kael/ops/norm.h"
#include "kael/ops/pow.h"
#include "kael/ops/transpose.h"
#include "kael/ops/view.h"

namespace kael::native {

Tensor t(const Tensor& self) {
  KAEL_CHECK(self.dim() <= 2, "t: t() expects a tensor with <= 2 dimensions, but self is " << self.dim() << "D");
  if (self.dim() < 2) return kael::view(self, self.sizes());
  return kael::transpose(self, 0, 1);
}

Tensor expand_as(const Tensor& self, const Tensor& other) { return kael::expand(self, other.sizes()); }

// ---- shapes and conversions after another tensor, and their PyTorch spellings

Tensor view_as(const Tensor& self, const Tensor& other) { return kael::view(self, other.sizes()); }
Tensor reshape_as(const Tensor& self, const Tensor& other) { return kael::reshape(self, other.sizes()); }
Tensor broadcast_to(const Tensor& self, IntArrayRef size) { return kael::expand(self, size); }
Tensor type_as(const Tensor& self, const Tensor& other) { return kael::to(self, other, false, false); }

// PyTorch's ravel is contiguous().view(-1): a copy for any non-contiguous input, even one that
// reshape could view.
Tensor ravel(const Tensor& self) {
  const std::int64_t flat[] = {-1};
  return kael::view(kael::contiguous(self), IntArrayRef(flat));
}

Tensor flipud(const Tensor& self) {
  KAEL_CHECK(self.dim() >= 1, "flipud: Input must be >= 1-d.");
  const std::int64_t dims[] = {0};
  return kael::flip(self, IntArrayRef(dims));
}

Tensor fliplr(const Tensor& self) {
  KAEL_CHECK(self.dim() >= 2, "fliplr: Input must be >= 2-d.");
  const std::int64_t dims[] = {1};
  return kael::flip(self, IntArrayRef(dims));
}

Tensor msort(const Tensor& self) { return std::get<0>(kael::sort(self, 0, false, std::nullopt)); }

// ---- rotations, differences, flat reads, scaling by powers of two

// As PyTorch's: k taken modulo 4 (a negative k turns the other way), each quarter turn a flip and
// a transpose; k = 0 gives a contiguous copy.
Tensor rot90(const Tensor& self, std::int64_t k, IntArrayRef dims) {
  KAEL_CHECK(dims.size() == 2, "rot90: expected total rotation dims == 2, but got dims = " << dims.size());
  const std::int64_t nd = self.dim();
  KAEL_CHECK(nd >= 2, "rot90: expected total dims >= 2, but got total dims = " << nd);
  // each dim wrapped (IndexError out of range), then compared, as PyTorch's
  const std::int64_t d0 = wrap_dim("rot90", dims[0], nd), d1 = wrap_dim("rot90", dims[1], nd);
  KAEL_CHECK(d0 != d1,
             "rot90: expected rotation dims to be different, but got dim0 = " << dims[0] << " and dim1 = " << dims[1]);
  const std::int64_t first[] = {d0}, second[] = {d1}, both[] = {d0, d1};
  switch (((k % 4) + 4) % 4) {
    case 1:
      return kael::transpose(kael::flip(self, IntArrayRef(second)), d0, d1);
    case 2:
      return kael::flip(self, IntArrayRef(both));
    case 3:
      return kael::transpose(kael::flip(self, IntArrayRef(first)), d0, d1);
    default:
      return kael::clone(self);
  }
}

// The n-th forward difference along dim (bool: exclusive or), prepend and append joined first.
// n = 0 gives a new tensor in the graph (a clone), never input itself, as PyTorch's.
Tensor diff(const Tensor& self, std::int64_t n, std::int64_t dim, const std::optional<Tensor>& prepend,
            const std::optional<Tensor>& append) {
  KAEL_CHECK(self.dim() >= 1, "diff: diff expects input to be at least one-dimensional");
  KAEL_CHECK(n >= 0, "diff: order must be non-negative but got " << n);
  const std::int64_t d = wrap_dim("diff", dim, self.dim());
  // prepend and append: input's dims, input's sizes but along dim, as PyTorch's
  for (const auto* other : {&prepend, &append}) {
    if (!*other) continue;
    const Tensor& t = **other;
    KAEL_CHECK(t.dim() == self.dim(), "diff: diff expects prepend or append to be the same dimension as input");
    for (std::int64_t i = 0; i < t.dim(); ++i)
      KAEL_CHECK(i == d || t.sizes()[static_cast<std::size_t>(i)] == self.sizes()[static_cast<std::size_t>(i)],
                 "diff: diff expects the shape of tensor to prepend or append to match that of input except along "
                 "the differencing dimension; input.size("
                     << i << ") = " << self.sizes()[static_cast<std::size_t>(i)] << ", but got tensor.size(" << i
                     << ") = " << t.sizes()[static_cast<std::size_t>(i)]);
  }
  Tensor x = self;
  if (prepend || append) {
    std::vector<Tensor> parts;
    if (prepend) parts.push_back(*prepend);
    parts.push_back(self);
    if (append) parts.push_back(*append);
    x = kael::cat(TensorList(parts), d);
  }
  if (n == 0) return kael::clone(x);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t size = x.sizes()[static_cast<std::size_t>(d)];
    if (size == 0) break;
    const Tensor later = kael::narrow(x, d, 1, size - 1), earlier = kael::narrow(x, d, 0, size - 1);
    x = x.dtype() == ScalarType::Bool ? kael::logical_xor(later, earlier) : kael::sub(later, earlier);
  }
  return x;
}

// input read as 1-d at index (negative counts from the end), in index's shape. The bounds are
// checked before anything is read, with PyTorch's IndexError.
Tensor take(const Tensor& self, const Tensor& index) {
  KAEL_CHECK(index.dtype() == ScalarType::Int64,
             "take(): Expected a long tensor for index, but got " << index.dtype());
  const std::int64_t n = self.numel();
  const std::int64_t flat_shape[] = {-1};
  const Tensor flat = kael::reshape(index, IntArrayRef(flat_shape));
  if (index.numel() > 0) {
    for (const std::int64_t i : {kael::amin(flat).item().to<std::int64_t>(), kael::amax(flat).item().to<std::int64_t>()})
      KAEL_CHECK_INDEX(i >= -n && i < n,
                       "take: out of range: tried to access index " << i << " on a tensor of " << n << " elements.");
  }
  const Tensor wrapped = kael::where(kael::lt(flat, Scalar(std::int64_t{0})), kael::add(flat, Scalar(n)), flat);
  return kael::reshape(kael::index_select(kael::reshape(self, IntArrayRef(flat_shape)), 0, wrapped), index.sizes());
}

// input * 2**other, as PyTorch's mul(input, pow(2.0, other)) (so integers give the default dtype).
Tensor ldexp(const Tensor& self, const Tensor& other) { return kael::mul(self, kael::pow(Scalar(2.0), other)); }

// input itself; a bool tensor raises, as PyTorch's unary +.
Tensor positive(const Tensor& self) {
  KAEL_CHECK(self.dtype() != ScalarType::Bool, "positive(): The `+` operator, on a bool tensor is not supported.");
  return self;
}

// ---- infinities and NaN

Tensor isposinf(const Tensor& self) {
  if (!is_floating(self.dtype())) return kael::zeros_like(self, ScalarType::Bool, std::nullopt);
  return kael::eq(self, Scalar(INFINITY));
}

Tensor isneginf(const Tensor& self) {
  if (!is_floating(self.dtype())) return kael::zeros_like(self, ScalarType::Bool, std::nullopt);
  return kael::eq(self, Scalar(-INFINITY));
}

// NaN selected away (not multiplied by 0), so that its gradient is 0 there, as PyTorch's.
Tensor nansum(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  const Tensor x = is_floating(self.dtype()) ? kael::where(kael::isnan(self), Scalar(0), self) : self;
  return kael::sum(x, dim, keepdim, dtype);
}

Tensor nanmean(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  KAEL_CHECK(is_floating(self.dtype()),
             "nanmean(): expected input to have floating point or complex dtype but got " << self.dtype());
  KAEL_CHECK(!dtype || is_floating(*dtype), "nanmean(): could not infer output dtype. Optional dtype must be either a "
                                            "floating point or complex dtype. Got: "
                                                << *dtype);
  const Tensor count = kael::sum(kael::logical_not(kael::isnan(self)), dim, keepdim, std::nullopt);
  return kael::div(nansum(self, dim, keepdim, dtype), count);
}

// Note [In-place view ops]
// t_, transpose_, squeeze_ and unsqueeze_ give self the geometry of the view op's result (sizes,
// strides and offset of a view over self's own storage); the elements stay. The view op runs
// first, so its checks (dims, ranges) raise before self changes. Autograd records the op as any
// in-place op (the view op's derivative, self's history rebased onto it); a view that requires
// grad is refused, since rebasing it would record a write into its base (CopySlices) where
// nothing was written.
namespace {
const Tensor& take_geometry(const char* op, const Tensor& self, const Tensor& view) {
  KAEL_CHECK(!(self.impl()->is_view() && autograd::requires_grad(self)),
             op << ": an in-place view op on a view that requires grad is not supported; call clone() first");
  self.impl()->set_geometry(DimVector(view.sizes()), DimVector(view.strides()), view.impl()->offset());
  return self;
}
}  // namespace

const Tensor& t_(const Tensor& self) {
  KAEL_CHECK(self.dim() <= 2, "t_: t_() expects a tensor with <= 2 dimensions, but self is " << self.dim() << "D");
  return take_geometry("t_", self, kael::t(self));
}

const Tensor& transpose_(const Tensor& self, std::int64_t dim0, std::int64_t dim1) {
  return take_geometry("transpose_", self, kael::transpose(self, dim0, dim1));
}

const Tensor& squeeze_(const Tensor& self, std::optional<std::int64_t> dim) {
  return take_geometry("squeeze_", self, kael::squeeze(self, dim));
}

const Tensor& unsqueeze_(const Tensor& self, std::int64_t dim) {
  return take_geometry("unsqueeze_", self, kael::unsqueeze(self, dim));
}

// torch.norm's string forms: 'fro' is the 2-norm of the elements over dim (at most two dims);
// 'nuc' (the sum of the singular values) needs an SVD, which kael does not have.
Tensor norm_str(const Tensor& self, std::string_view p, std::optional<IntArrayRef> dim, bool keepdim,
                std::optional<ScalarType> dtype) {
  KAEL_CHECK(p != "nuc", "norm: p='nuc' (the nuclear norm) is not supported: kael has no singular value decomposition");
  KAEL_CHECK(p == "fro", "norm: expected p to be a number, 'fro' or 'nuc', but got '" << p << "'");
  KAEL_CHECK(!dim || dim->size() <= 2, "norm: p='fro' takes at most 2 dims, got " << dim->size());
  return kael::norm(self, 2.0, dim, keepdim, dtype);
}

// logit's eps=None is PyTorch's -1: the kernel clamps only for eps >= 0.
Tensor logit(const Tensor& self, std::optional<double> eps) { return kael::_logit(self, Scalar(eps.value_or(-1.0))); }
const Tensor& logit_(const Tensor& self, std::optional<double> eps) {
  // the kernel's own check would name it (_logit_)
  KAEL_CHECK(is_floating(self.dtype()), "logit_: result type " << default_dtype()
                                                               << " can't be cast to the desired output type "
                                                               << self.dtype());
  return kael::_logit_(self, Scalar(eps.value_or(-1.0)));
}

Tensor square(const Tensor& self) { return kael::pow(self, Scalar(std::int64_t{2})); }

// ---- masked_scatter, fill_diagonal_, unfold, logcumsumexp

// source's first elements, in order, written where mask (broadcast to self's shape) is set; the
// checks run before the write, which index_put_ does (and checks self against source for overlap).
const Tensor& masked_scatter_(const Tensor& self, const Tensor& mask, const Tensor& source) {
  constexpr const char* op = "masked_scatter_";
  assert_no_internal_overlap(op, self);
  KAEL_CHECK(self.dtype() == source.dtype(), op << ": masked_scatter: expected self and source to have same dtypes but got "
                                                << dtype_name(self.dtype()) << " and " << dtype_name(source.dtype()));
  KAEL_CHECK(mask.dtype() == ScalarType::Bool,
             op << ": masked_scatter_only supports boolean masks, but got mask with dtype " << dtype_name(mask.dtype()));
  const Tensor expanded = kael::expand(mask, self.sizes());
  const std::int64_t count = kael::sum(expanded, std::nullopt, false, std::nullopt).item().to<std::int64_t>();
  KAEL_CHECK(source.numel() >= count, op << ": Number of elements of source < number of ones in mask (" << source.numel()
                                         << " < " << count << ")");
  const std::int64_t flat[] = {-1};
  const Tensor values = kael::narrow(kael::reshape(source, IntArrayRef(flat)), 0, 0, count);
  const Tensor indices[] = {expanded};
  kael::index_put_(self, TensorList(indices), values, false);
  return self;
}

// self and mask broadcast together, self copied (contiguous), then scattered into.
Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source) {
  const DimVector shape = broadcast_shapes("masked_scatter", self.sizes(), mask.sizes());
  const Tensor result = kael::contiguous(kael::clone(kael::expand(self, IntArrayRef(shape))));
  masked_scatter_(result, kael::expand(mask, IntArrayRef(shape)), source);
  return result;
}

// The main diagonal (every dim equal, or the leading square of a matrix) filled in place; wrap
// continues a tall matrix's diagonal every N + 1 rows, read as PyTorch's flat stepping.
const Tensor& fill_diagonal_(const Tensor& self, const Scalar& fill_value, bool wrap) {
  constexpr const char* op = "fill_diagonal_";
  const std::int64_t nd = self.dim();
  KAEL_CHECK(nd >= 2, op << ": dimensions must larger than 1");
  const std::int64_t height = self.sizes()[0], width = self.sizes()[1];
  if (nd > 2) {
    for (std::int64_t i = 1; i < nd; ++i)
      KAEL_CHECK(self.sizes()[i] == height,
                 op << ": all dimensions of input must be of equal length, got " << shape_str(self.sizes()));
  }
  std::int64_t stride = 0;
  for (const std::int64_t s : self.strides()) stride += s;
  const std::int64_t size[] = {std::min(height, width)}, strides[] = {stride};
  kael::fill_(kael::as_strided(self, IntArrayRef(size), IntArrayRef(strides), self.impl()->offset()), fill_value);
  if (wrap && nd == 2 && height > width + 1) {
    const std::int64_t step = width + 1;
    const std::int64_t wrap_size[] = {(self.numel() + step - 1) / step - size[0]};
    kael::fill_(kael::as_strided(self, IntArrayRef(wrap_size), IntArrayRef(strides),
                                 self.impl()->offset() + self.strides()[0] * (width + 1)),
                fill_value);
  }
  return self;
}

// A view of the slices of `size` elements every `step` along dimension, in a new last dim (a
// 0-d tensor is read as one element).
Tensor unfold(const Tensor& self, std::int64_t dimension, std::int64_t size, std::int64_t step) {
  constexpr const char* op = "unfold";
  const std::int64_t d = wrap_dim(op, dimension, self.dim());
  const std::int64_t max_size = self.dim() == 0 ? 1 : self.sizes()[d];
  KAEL_CHECK(size <= max_size, op << ": maximum size for tensor at dimension " << d << " is " << max_size
                                  << " but size is " << size);
  KAEL_CHECK(size >= 0, op << ": size is " << size << " but must be >= 0");
  KAEL_CHECK(step > 0, op << ": step is " << step << " but must be > 0");
  DimVector sizes(self.sizes()), strides(self.strides());
  sizes.push_back(size);
  strides.push_back(self.dim() == 0 ? 1 : strides[static_cast<std::size_t>(d)]);
  if (self.dim() > 0) {
    sizes[static_cast<std::size_t>(d)] = (sizes[static_cast<std::size_t>(d)] - size) / step + 1;
    strides[static_cast<std::size_t>(d)] *= step;
  }
  return kael::as_strided(self, IntArrayRef(sizes), IntArrayRef(strides), self.impl()->offset());
}

// log(cumsum(exp(input))) along dim without overflow: an inclusive scan of logaddexp in log2(n)
// steps (Hillis-Steele: at step s each position takes in the one s before it).
Tensor logcumsumexp(const Tensor& self, std::int64_t dim) {
  constexpr const char* op = "logcumsumexp";
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         op << ": \"logcumsumexp_out_cpu\" not implemented for '" << dtype_name(self.dtype()) << "'");
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  if (self.dim() == 0) return kael::clone(self);
  const std::int64_t n = self.sizes()[d];
  Tensor x = kael::clone(self);
  for (std::int64_t s = 1; s < n; s *= 2) {
    const Tensor head = kael::narrow(x, d, 0, s);
    const Tensor combined = kael::logaddexp(kael::narrow(x, d, 0, n - s), kael::narrow(x, d, s, n - s));
    const Tensor pieces[] = {head, combined};
    x = kael::cat(TensorList(pieces), d);
  }
  return x;
}

// self summed over the dims that broadcasting `size` to self's shape expanded (PyTorch's
// Tensor.sum_to_size): the leading dims, and each dim where size has 1 and self does not; self
// itself when nothing is summed. Autograd's formulas undo broadcasting with it.
Tensor sum_to_size(const Tensor& self, IntArrayRef size) {
  const IntArrayRef have = self.sizes();
  const auto braces = [](IntArrayRef s) {
    std::string text = "{";
    for (std::size_t i = 0; i < s.size(); ++i) text += (i ? ", " : "") + std::to_string(s[i]);
    return text + "}";
  };
  const bool fits = have.size() >= size.size() && [&] {
    const std::size_t lead = have.size() - size.size();
    for (std::size_t i = 0; i < size.size(); ++i)
      if (size[i] != 1 && size[i] != have[lead + i]) return false;
    return true;
  }();
  KAEL_CHECK(fits, "sum_to_size: size " << braces(size) << " is not expandable to size " << braces(have) << ".");
  if (std::equal(have.begin(), have.end(), size.begin(), size.end())) return self;
  const std::size_t lead = have.size() - size.size();
  DimVector dims;
  for (std::size_t i = 0; i < lead; ++i) dims.push_back(static_cast<std::int64_t>(i));
  for (std::size_t i = 0; i < size.size(); ++i)
    if (size[i] == 1 && have[lead + i] != 1) dims.push_back(static_cast<std::int64_t>(lead + i));
  const Tensor summed = dims.empty() ? self : kael::sum(self, IntArrayRef(dims), /*keepdim=*/true);
  return lead ? kael::reshape(summed, size) : summed;
}

}  // namespace kael::native
