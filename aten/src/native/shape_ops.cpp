// Device-agnostic shape and indexing ops: views (diagonal, unflatten) and ops composed of
// registered ops (repeat, tile, take_along_dim, diag, diag_embed, count_nonzero, argwhere).
#include <algorithm>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/add.h"
#include "kael/ops/clone.h"
#include "kael/ops/copy_.h"
#include "kael/ops/diagonal.h"
#include "kael/ops/empty.h"
#include "kael/ops/expand.h"
#include "kael/ops/gather.h"
#include "kael/ops/lt.h"
#include "kael/ops/mul.h"
#include "kael/ops/ne.h"
#include "kael/ops/nonzero.h"
#include "kael/ops/repeat.h"
#include "kael/ops/reshape.h"
#include "kael/ops/sum.h"
#include "kael/ops/view.h"
#include "kael/ops/zeros.h"

namespace kael::native {

namespace {

std::int64_t checked_mul(const char* op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  KAEL_CHECK(!__builtin_mul_overflow(a, b, &r), op << ": size " << a << " * " << b << " overflows");
  return r;
}

}  // namespace

// ------------------------------------------------------------------ views

Tensor diagonal(const Tensor& self, std::int64_t offset, std::int64_t dim1, std::int64_t dim2) {
  constexpr const char* op = "diagonal";
  const std::int64_t nd = self.dim();
  const std::int64_t d1 = wrap_dim(op, dim1, nd), d2 = wrap_dim(op, dim2, nd);
  KAEL_CHECK(d1 != d2, op << ": diagonal dimensions cannot be identical " << dim1 << ", " << dim2);
  const std::int64_t n1 = self.sizes()[d1], n2 = self.sizes()[d2];
  std::int64_t length = 0;
  std::int64_t storage_offset = self.impl()->offset();
  if (offset >= 0) {
    length = std::max<std::int64_t>(std::min(n1, n2 - std::min(offset, n2)), 0);
    if (length > 0) storage_offset += offset * self.strides()[d2];
  } else {
    const std::int64_t back = offset == INT64_MIN ? n1 : std::min(-offset, n1);
    length = std::max<std::int64_t>(std::min(n1 - back, n2), 0);
    if (length > 0) storage_offset -= offset * self.strides()[d1];
  }
  DimVector sizes, strides;
  for (std::int64_t d = 0; d < nd; ++d) {
    if (d == d1 || d == d2) continue;
    sizes.push_back(self.sizes()[d]);
    strides.push_back(self.strides()[d]);
  }
  sizes.push_back(length);
  strides.push_back(self.strides()[d1] + self.strides()[d2]);
  return Tensor(TensorImpl::make_view(*self.impl(), std::move(sizes), std::move(strides), storage_offset));
}

Tensor unflatten(const Tensor& self, std::int64_t dim, IntArrayRef sizes) {
  constexpr const char* op = "unflatten";
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  KAEL_CHECK(!sizes.empty(), op << ": sizes must be non-empty");
  if (self.dim() == 0) KAEL_CHECK_INDEX(false, op << ": Dimension specified as " << dim << " but tensor has no dimensions");
  const std::int64_t size = self.sizes()[d];
  std::int64_t known = 1;
  std::int64_t infer = -1;
  bool overflow = false;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      KAEL_CHECK(infer < 0, op << ": only one dimension can be inferred");
      infer = static_cast<std::int64_t>(i);
      continue;
    }
    KAEL_CHECK(sizes[i] >= 0, op << ": invalid shape dimension " << sizes[i]);
    overflow = overflow || __builtin_mul_overflow(known, sizes[i], &known);
  }
  DimVector inner(sizes);
  if (infer >= 0) {
    KAEL_CHECK(!overflow && known != 0 && size % known == 0,
               op << ": Provided sizes " << shape_str(sizes) << " don't multiply up to the size of dim " << dim << " ("
                  << size << ") in the input tensor");
    inner[infer] = size / known;
  } else {
    KAEL_CHECK(!overflow && known == size, op << ": Provided sizes " << shape_str(sizes)
                                              << " don't multiply up to the size of dim " << dim << " (" << size
                                              << ") in the input tensor");
  }
  DimVector shape;
  for (std::int64_t i = 0; i < d; ++i) shape.push_back(self.sizes()[i]);
  for (const std::int64_t s : inner) shape.push_back(s);
  for (std::int64_t i = d + 1; i < self.dim(); ++i) shape.push_back(self.sizes()[i]);
  check_max_dims(op, static_cast<std::int64_t>(shape.size()));
  return kael::view(self, shape);
}

// ------------------------------------------------------------------ repeat, tile

Tensor repeat(const Tensor& self, IntArrayRef repeats) {
  constexpr const char* op = "repeat";
  const std::int64_t nd = self.dim(), nr = static_cast<std::int64_t>(repeats.size());
  KAEL_CHECK(nr >= nd, op << ": Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                             "tensor (got "
                          << nr << " and " << nd << ")");
  check_max_dims(op, nr);
  const std::int64_t pad = nr - nd;
  DimVector target(nr), padded(nr);
  for (std::int64_t i = 0; i < nr; ++i) {
    padded[i] = i < pad ? 1 : self.sizes()[i - pad];
    target[i] = checked_mul(op, padded[i], repeats[i]);
  }
  // PyTorch checks the result's sizes, not the repeats: a dim of size 0 repeated -3 times is 0
  for (std::int64_t i = 0; i < nr; ++i)
    KAEL_CHECK(target[i] >= 0, op << ": Trying to create tensor with negative dimension " << target[i] << ": "
                                  << shape_str(target));
  checked_numel(op, target);
  Tensor out = kael::empty(target, self.dtype(), self.device());
  if (out.numel() == 0) return out;
  // out viewed as [r0, s0, r1, s1, ...] (only the dims that repeat get their r) is self
  // broadcast along the r dims.
  DimVector split, source;
  for (std::int64_t i = 0; i < nr; ++i) {
    if (repeats[i] != 1) {
      split.push_back(repeats[i]);
      source.push_back(1);
    }
    split.push_back(padded[i]);
    source.push_back(padded[i]);
  }
  kael::copy_(kael::view(out, split), kael::expand(kael::view(self, source), split));
  return out;
}

Tensor tile(const Tensor& self, IntArrayRef dims) {
  const std::int64_t nd = self.dim(), nr = static_cast<std::int64_t>(dims.size());
  if (nr >= nd) return kael::repeat(self, dims);
  DimVector repeats(nd - nr, 1);
  for (const std::int64_t r : dims) repeats.push_back(r);
  return kael::repeat(self, repeats);
}

// ------------------------------------------------------------------ lookups composed of ops

Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<std::int64_t> dim) {
  constexpr const char* op = "take_along_dim";
  auto wrapped = [&](const Tensor& idx, std::int64_t size) {
    // with a dim, negative indices count from the end, as in PyTorch
    return kael::add(idx, kael::mul(kael::lt(idx, Scalar(std::int64_t{0})), Scalar(size)));
  };
  if (!dim) {
    const std::int64_t flat[] = {-1};
    const Tensor x = kael::reshape(self, flat);
    return kael::gather(x, 0, kael::reshape(indices, flat), false);  // no wrapping here, as in PyTorch
  }
  KAEL_CHECK(indices.dtype() == ScalarType::Int64,
             op << ": dtype of indices should be Long but got " << indices.dtype());
  KAEL_CHECK_INDEX(self.dim() > 0, op << ": Dimension specified as " << *dim << " but tensor has no dimensions");
  const std::int64_t d = wrap_dim(op, *dim, self.dim());
  KAEL_CHECK(self.dim() == indices.dim(), op << ": input and indices should have the same number of dimensions, "
                                                "but got "
                                             << self.dim() << " dimensions for input, and " << indices.dim()
                                             << " dimensions for indices");
  DimVector a(self.sizes()), b(indices.sizes());
  a[d] = indices.sizes()[d];
  DimVector shape = broadcast_shapes(op, a, b);
  DimVector self_shape(shape), index_shape(shape);
  self_shape[d] = self.sizes()[d];
  index_shape[d] = indices.sizes()[d];
  return kael::gather(kael::expand(self, self_shape), d, wrapped(kael::expand(indices, index_shape), self.sizes()[d]),
                      false);
}

Tensor argwhere(const Tensor& self) { return kael::nonzero(self); }

Tensor count_nonzero(const Tensor& self, std::optional<IntArrayRef> dim) {
  return kael::sum(kael::ne(self, Scalar(std::int64_t{0})), dim, false, std::nullopt);
}

Tensor diag(const Tensor& self, std::int64_t diagonal) {
  constexpr const char* op = "diag";
  KAEL_CHECK(self.dim() == 1 || self.dim() == 2, op << ": Supports 1D or 2D tensors. Got " << self.dim() << "D");
  if (self.dim() == 2) return kael::clone(kael::diagonal(self, diagonal, 0, 1));
  std::int64_t n = 0;
  KAEL_CHECK(diagonal != INT64_MIN && !__builtin_add_overflow(self.sizes()[0], std::abs(diagonal), &n),
             op << ": diagonal " << diagonal << " is too large");
  const std::int64_t shape[] = {n, n};
  Tensor out = kael::zeros(shape, self.dtype(), self.device());
  kael::copy_(kael::diagonal(out, diagonal, 0, 1), self);
  return out;
}

Tensor diag_embed(const Tensor& self, std::int64_t offset, std::int64_t dim1, std::int64_t dim2) {
  constexpr const char* op = "diag_embed";
  const std::int64_t nd = self.dim() + 1;
  const std::int64_t d1 = wrap_dim(op, dim1, nd), d2 = wrap_dim(op, dim2, nd);
  KAEL_CHECK(d1 != d2, op << ": diagonal dimensions cannot be identical " << dim1 << ", " << dim2);
  check_max_dims(op, nd);
  const std::int64_t last = self.dim() == 0 ? 1 : self.sizes()[self.dim() - 1];
  std::int64_t n = 0;
  KAEL_CHECK(offset != INT64_MIN && !__builtin_add_overflow(last, std::abs(offset), &n),
             op << ": offset " << offset << " is too large");
  DimVector shape;
  std::int64_t src = 0;
  for (std::int64_t d = 0; d < nd; ++d) {
    if (d == d1 || d == d2) {
      shape.push_back(n);
    } else {
      shape.push_back(self.sizes()[src++]);
    }
  }
  Tensor out = kael::zeros(shape, self.dtype(), self.device());
  kael::copy_(kael::diagonal(out, offset, d1, d2), self);
  return out;
}

}  // namespace kael::native
