// Device-agnostic view ops (metadata only) and conversions built on them.
#include <algorithm>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/copy_.h"
#include "kael/ops/empty.h"
#include "kael/ops/empty_strided.h"
#include "kael/ops/reshape.h"
#include "kael/ops/slice.h"
#include "kael/ops/to.h"
#include "kael/ops/view.h"

namespace kael::native {

namespace {

Tensor make_view(const Tensor& base, DimVector sizes, DimVector strides, std::int64_t offset) {
  return Tensor(TensorImpl::make_view(*base.impl(), std::move(sizes), std::move(strides), offset));
}

// Resolves one -1 in a requested shape against numel.
DimVector infer_size(const char* op, IntArrayRef shape, std::int64_t numel) {
  check_max_dims(op, static_cast<std::int64_t>(shape.size()));
  DimVector out(shape);
  std::int64_t known = 1;
  std::int64_t infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      KAEL_CHECK(infer < 0, op << ": only one dimension can be inferred");
      infer = static_cast<std::int64_t>(i);
    } else {
      KAEL_CHECK(shape[i] >= 0, op << ": invalid shape dimension " << shape[i]);
      KAEL_CHECK(!__builtin_mul_overflow(known, shape[i], &known),
                 op << ": shape '" << shape_str(shape) << "' is too large");
    }
  }
  if (infer >= 0) {
    KAEL_CHECK(known != 0 && numel % known == 0,
               op << ": shape '" << shape_str(shape) << "' is invalid for input of size " << numel);
    out[infer] = numel / known;
  } else {
    KAEL_CHECK(known == numel, op << ": shape '" << shape_str(shape) << "' is invalid for input of size " << numel);
  }
  return out;
}

// Strides for viewing (sizes, strides) as new_sizes without copying, if possible
// (PyTorch's computeStride: each run of dims that is contiguous in memory may be regrouped).
std::optional<DimVector> view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes) {
  const std::int64_t numel = checked_numel("view", sizes);
  DimVector out(new_sizes.size());
  if (sizes.empty()) return contiguous_strides(new_sizes);  // a 0-d tensor: every new size is 1
  if (numel == 0) {
    if (sizes.size() == new_sizes.size() && std::equal(sizes.begin(), sizes.end(), new_sizes.begin()))
      return DimVector(strides);
    return contiguous_strides(new_sizes);
  }
  std::int64_t view_d = static_cast<std::int64_t>(new_sizes.size()) - 1;
  std::int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  std::int64_t tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor view(const Tensor& self, IntArrayRef size) {
  DimVector shape = infer_size("view", size, self.numel());
  auto strides = view_strides(self.sizes(), self.strides(), shape);
  KAEL_CHECK(strides.has_value(),
             "view: view size is not compatible with input tensor's size and stride (at least one dimension "
             "spans across two contiguous subspaces). Use .reshape(...) instead.");
  return make_view(self, std::move(shape), std::move(*strides), self.impl()->offset());
}

// CompositeImplicit: a view when the strides allow it, otherwise a contiguous copy (not a view).
Tensor reshape(const Tensor& self, IntArrayRef shape) {
  DimVector sizes = infer_size("reshape", shape, self.numel());
  if (view_strides(self.sizes(), self.strides(), sizes)) return kael::view(self, sizes);
  Tensor out = kael::empty(sizes, self.dtype(), self.device());
  kael::copy_(kael::view(out, self.sizes()), self);
  return out;
}

Tensor permute(const Tensor& self, IntArrayRef dims) {
  const std::int64_t nd = self.dim();
  KAEL_CHECK(static_cast<std::int64_t>(dims.size()) == nd,
             "permute: number of dims don't match in permute (input has " << nd << " dims, got " << dims.size() << ")");
  DimVector sizes(nd), strides(nd);
  std::uint64_t seen = 0;
  DimVector seen_big;
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t d = wrap_dim("permute", dims[i], nd);
    const bool repeated = d < 64 ? ((seen >> d) & 1u) : std::find(seen_big.begin(), seen_big.end(), d) != seen_big.end();
    KAEL_CHECK(!repeated, "permute: repeated dim " << dims[i] << " in " << shape_str(dims));
    if (d < 64) {
      seen |= std::uint64_t{1} << d;
    } else {
      seen_big.push_back(d);
    }
    sizes[i] = self.sizes()[d];
    strides[i] = self.strides()[d];
  }
  return make_view(self, std::move(sizes), std::move(strides), self.impl()->offset());
}

Tensor transpose(const Tensor& self, std::int64_t dim0, std::int64_t dim1) {
  const std::int64_t d0 = wrap_dim("transpose", dim0, self.dim()), d1 = wrap_dim("transpose", dim1, self.dim());
  if (self.dim() == 0) return make_view(self, DimVector(), DimVector(), self.impl()->offset());
  DimVector sizes(self.sizes()), strides(self.strides());
  std::swap(sizes[d0], sizes[d1]);
  std::swap(strides[d0], strides[d1]);
  return make_view(self, std::move(sizes), std::move(strides), self.impl()->offset());
}

Tensor expand(const Tensor& self, IntArrayRef size) {
  const std::int64_t nd = static_cast<std::int64_t>(size.size()), od = self.dim();
  check_max_dims("expand", nd);
  KAEL_CHECK(nd >= od, "expand: the number of sizes provided (" << nd
                                                               << ") must be greater or equal to the number of "
                                                                  "dimensions in the tensor ("
                                                               << od << ")");
  DimVector sizes(nd), strides(nd);
  for (std::int64_t i = nd - 1; i >= 0; --i) {
    const std::int64_t j = i - (nd - od);
    if (j >= 0) {
      const std::int64_t have = self.sizes()[j];
      std::int64_t want = size[i] == -1 ? have : size[i];
      KAEL_CHECK(have == want || have == 1,
                 "expand: the expanded size of the tensor (" << want << ") must match the existing size (" << have
                                                             << ") at non-singleton dimension " << i
                                                             << ". Target sizes: " << shape_str(size)
                                                             << ". Tensor sizes: " << shape_str(self.sizes()));
      KAEL_CHECK(want >= 0, "expand: invalid size " << want);
      sizes[i] = want;
      strides[i] = have == want ? self.strides()[j] : 0;
    } else {
      KAEL_CHECK(size[i] >= 0, "expand: the expanded size " << size[i] << " is not allowed in a leading, "
                                                            << "non-existing dimension " << i);
      sizes[i] = size[i];
      strides[i] = 0;
    }
  }
  checked_numel("expand", sizes);
  return make_view(self, std::move(sizes), std::move(strides), self.impl()->offset());
}

Tensor squeeze(const Tensor& self, std::optional<std::int64_t> dim) {
  DimVector sizes, strides;
  if (dim) {
    const std::int64_t d = wrap_dim("squeeze", *dim, self.dim());
    sizes = DimVector(self.sizes());
    strides = DimVector(self.strides());
    if (self.dim() > 0 && sizes[d] == 1) {
      sizes.erase(d);
      strides.erase(d);
    }
  } else {
    for (std::int64_t i = 0; i < self.dim(); ++i) {
      if (self.sizes()[i] == 1) continue;
      sizes.push_back(self.sizes()[i]);
      strides.push_back(self.strides()[i]);
    }
  }
  return make_view(self, std::move(sizes), std::move(strides), self.impl()->offset());
}

Tensor unsqueeze(const Tensor& self, std::int64_t dim) {
  const std::int64_t d = wrap_dim("unsqueeze", dim, self.dim() + 1);
  check_max_dims("unsqueeze", self.dim() + 1);
  DimVector sizes(self.sizes()), strides(self.strides());
  const std::int64_t stride = d < self.dim() ? self.sizes()[d] * self.strides()[d] : 1;
  sizes.insert(d, 1);
  strides.insert(d, stride);
  return make_view(self, std::move(sizes), std::move(strides), self.impl()->offset());
}

Tensor flatten(const Tensor& self, std::int64_t start_dim, std::int64_t end_dim) {
  const std::int64_t s = wrap_dim("flatten", start_dim, self.dim()), e = wrap_dim("flatten", end_dim, self.dim());
  KAEL_CHECK(s <= e, "flatten: start_dim (" << start_dim << ") cannot come after end_dim (" << end_dim << ")");
  if (self.dim() == 0) {
    const std::int64_t one[] = {1};
    return kael::reshape(self, one);
  }
  if (s == e) return self;
  DimVector shape;
  for (std::int64_t i = 0; i < s; ++i) shape.push_back(self.sizes()[i]);
  std::int64_t merged = 1;
  for (std::int64_t i = s; i <= e; ++i) merged *= self.sizes()[i];
  shape.push_back(merged);
  for (std::int64_t i = e + 1; i < self.dim(); ++i) shape.push_back(self.sizes()[i]);
  return kael::reshape(self, shape);
}

Tensor narrow(const Tensor& self, std::int64_t dim, std::int64_t start, std::int64_t length) {
  KAEL_CHECK_INDEX(self.dim() > 0, "narrow: cannot be applied to a 0-dim tensor");
  const std::int64_t d = wrap_dim("narrow", dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  KAEL_CHECK_INDEX(start >= -size && start <= size,
                   "narrow: start out of range (expected to be in range of [" << -size << ", " << size
                                                                              << "], but got " << start << ")");
  if (start < 0) start += size;
  KAEL_CHECK(length >= 0 && start <= size - length,
             "narrow: start (" << start << ") + length (" << length << ") exceeds dimension size (" << size << ")");
  return kael::slice(self, d, start, start + length, 1);
}

Tensor slice(const Tensor& self, std::int64_t dim, std::optional<std::int64_t> start, std::optional<std::int64_t> end,
             std::int64_t step) {
  KAEL_CHECK_INDEX(self.dim() > 0, "slice: cannot be applied to a 0-dim tensor");
  const std::int64_t d = wrap_dim("slice", dim, self.dim());
  KAEL_CHECK_VALUE(step > 0, "slice: slice step must be positive (got " << step << ")");
  const std::int64_t size = self.sizes()[d];
  // Python's rules: negative bounds count from the end, then both are clamped to [0, size].
  auto clamp = [size](std::int64_t i) {
    if (i < 0) i = i < -size ? 0 : i + size;
    return std::min(i, size);
  };
  const std::int64_t lo = start ? clamp(*start) : 0;
  const std::int64_t hi = std::max(lo, end ? clamp(*end) : size);
  // Python's length, exact for every step: PyTorch's (hi - lo + step - 1) / step overflows for
  // a step near 2**63 (docs/hardening.md, "Known differences").
  const std::int64_t length = hi == lo ? 0 : (hi - lo - 1) / step + 1;
  DimVector sizes(self.sizes()), strides(self.strides());
  sizes[d] = length;
  // The new stride overflows only where it is never used (at most one element along d, or an
  // empty tensor with strides no storage bounds). PyTorch wraps it and refuses a negative
  // result; kael does the same without the signed overflow.
  const auto stride =
      static_cast<std::int64_t>(static_cast<std::uint64_t>(strides[d]) * static_cast<std::uint64_t>(step));
  KAEL_CHECK(stride >= 0, "slice: the stride " << strides[d] << " times the step " << step << " overflows");
  strides[d] = stride;
  std::int64_t offset = 0;  // overflows only for an empty tensor with strides no storage bounds
  KAEL_CHECK(!__builtin_mul_overflow(lo, self.strides()[d], &offset) &&
                 !__builtin_add_overflow(offset, self.impl()->offset(), &offset),
             "slice: the storage offset of start " << lo << " with stride " << self.strides()[d] << " overflows");
  return make_view(self, std::move(sizes), std::move(strides), offset);
}

Tensor as_strided(const Tensor& self, IntArrayRef size, IntArrayRef stride, std::optional<std::int64_t> storage_offset) {
  KAEL_CHECK(size.size() == stride.size(), "as_strided: mismatch in length of strides and shape (" << size.size()
                                                                                                  << " sizes, "
                                                                                                  << stride.size()
                                                                                                  << " strides)");
  check_max_dims("as_strided", static_cast<std::int64_t>(size.size()));
  const std::int64_t offset = storage_offset.value_or(self.impl()->offset());
  KAEL_CHECK(offset >= 0, "as_strided: Tensor: invalid storage offset " << offset);
  std::int64_t last = offset;  // index of the last element reached
  bool empty = false;
  for (std::size_t i = 0; i < size.size(); ++i) {
    KAEL_CHECK(size[i] >= 0, "as_strided: Trying to create tensor with negative dimension " << size[i] << ": "
                                                                                            << shape_str(size));
    KAEL_CHECK(stride[i] >= 0, "as_strided: negative strides are not supported (got " << shape_str(stride) << ")");
    empty = empty || size[i] == 0;
    std::int64_t span = 0;
    KAEL_CHECK(!__builtin_mul_overflow(size[i] > 0 ? size[i] - 1 : 0, stride[i], &span) &&
                   !__builtin_add_overflow(last, span, &last),
               "as_strided: sizes " << shape_str(size) << " and strides " << shape_str(stride) << " overflow");
  }
  const std::int64_t item = self.element_size();
  std::int64_t needed = 0;  // (last + 1) * item, which overflows for an offset near 2**63
  KAEL_CHECK(empty || (!__builtin_add_overflow(last, 1, &needed) && !__builtin_mul_overflow(needed, item, &needed)),
             "as_strided: storage offset " << offset << " with sizes " << shape_str(size) << " and strides "
                                           << shape_str(stride) << " overflows");
  const std::int64_t have = static_cast<std::int64_t>(self.impl()->storage()->nbytes());
  KAEL_CHECK(needed <= have, "as_strided: setStorage: sizes " << shape_str(size) << ", strides " << shape_str(stride)
                                                              << ", storage offset " << offset << ", and itemsize "
                                                              << item << " requiring a storage size of " << needed
                                                              << " are out of bounds for storage of size " << have);
  return make_view(self, DimVector(size), DimVector(stride), offset);
}

Tensor select(const Tensor& self, std::int64_t dim, std::int64_t index) {
  KAEL_CHECK_INDEX(self.dim() > 0, "select: cannot be applied to a 0-dim tensor");
  const std::int64_t d = wrap_dim("select", dim, self.dim());
  const std::int64_t size = self.sizes()[d];
  KAEL_CHECK_INDEX(index >= -size && index < size, "select: index " << index << " is out of range for dimension "
                                                                    << d << " with size " << size);
  if (index < 0) index += size;
  DimVector sizes(self.sizes()), strides(self.strides());
  const std::int64_t offset = self.impl()->offset() + index * strides[d];
  sizes.erase(d);
  strides.erase(d);
  return make_view(self, std::move(sizes), std::move(strides), offset);
}

Tensor contiguous(const Tensor& self) {
  if (self.is_contiguous()) return self;
  Tensor out = kael::empty(self.sizes(), self.dtype(), self.device());
  kael::copy_(out, self);
  return out;
}

// Keeps the memory layout of dense inputs (PyTorch's preserve_format).
Tensor clone(const Tensor& self) {
  const OperandView v = view_of(self);
  Tensor out = self.is_contiguous()
                   ? kael::empty(self.sizes(), self.dtype(), self.device())
                   : kael::empty_strided(self.sizes(), output_strides_like(self.sizes(), &v, 1), self.dtype(),
                                         self.device());
  kael::copy_(out, self);
  return out;
}

// Shares storage with self but is not a view of it in autograd's sense (as in PyTorch:
// x.detach()._base is None).
Tensor detach(const Tensor& self) {
  Tensor out(TensorImpl::make(self.impl()->storage_ptr(), self.dtype(), DimVector(self.sizes()),
                              DimVector(self.strides()), self.impl()->offset()));
  out.impl()->add_keys(self.key_set() - DispatchKeySet(DispatchKey::Autograd));
  out.impl()->share_version_counter(*self.impl());  // as PyTorch: detach shares the version counter
  return out;
}

// The elements of self read as dtype (torch's view(dtype)). With another element size the last
// dim, which must have stride 1, is split into or joined from the smaller elements; every other
// stride and the offset are counted in the new elements. Checked in torch's order, before any
// tensor is made. Not a view in autograd's sense and not differentiable, as in torch (its
// _base is None), but it shares self's storage and version counter.
Tensor view_dtype(const Tensor& self, ScalarType dtype) {
  const std::int64_t from = itemsize(self.dtype()), to = itemsize(dtype), nd = self.dim();
  DimVector sizes(self.sizes()), strides(self.strides());
  std::int64_t offset = self.impl()->offset();
  if (from != to) {
    const auto what = [&] {
      return std::string(" to view ") + torch_type_name(self.dtype()) + " as " + torch_type_name(dtype) +
             " (different element sizes)";
    };
    KAEL_CHECK(nd > 0, "view: self.dim() cannot be 0" << what());
    const auto check_last_stride = [&] {
      KAEL_CHECK(strides[nd - 1] == 1, "view: self.stride(-1) must be 1" << what() << ", but got " << strides[nd - 1]);
    };
    if (from > to) {
      check_last_stride();
      const std::int64_t ratio = from / to;
      bool overflow = __builtin_mul_overflow(sizes[nd - 1], ratio, &sizes[nd - 1]) ||
                      __builtin_mul_overflow(offset, ratio, &offset);
      for (std::int64_t d = 0; d < nd - 1; ++d) overflow = overflow || __builtin_mul_overflow(strides[d], ratio, &strides[d]);
      KAEL_CHECK(!overflow, "view: the sizes " << shape_str(self.sizes()) << " and strides " << shape_str(self.strides())
                                               << " overflow in elements of " << ratio << " times fewer bytes");
    } else {
      // torch's order: the last size, the offset, the last stride, the other strides
      const std::int64_t ratio = to / from;
      KAEL_CHECK(sizes[nd - 1] % ratio == 0,
                 "view: self.size(-1) must be divisible by " << ratio << what() << ", but got " << sizes[nd - 1]);
      KAEL_CHECK(offset % ratio == 0,
                 "view: self.storage_offset() must be divisible by " << ratio << what() << ", but got " << offset);
      check_last_stride();
      for (std::int64_t d = 0; d < nd - 1; ++d) {
        KAEL_CHECK(strides[d] % ratio == 0, "view: self.stride(" << d << ") must be divisible by " << ratio << what()
                                                                 << ", but got " << strides[d]);
        strides[d] /= ratio;
      }
      sizes[nd - 1] /= ratio;
      offset /= ratio;
    }
  }
  Tensor out(TensorImpl::make(self.impl()->storage_ptr(), dtype, std::move(sizes), std::move(strides), offset));
  out.impl()->add_keys(self.key_set() - DispatchKeySet(DispatchKey::Autograd));
  out.impl()->share_version_counter(*self.impl());
  return out;
}

// non_blocking is accepted for PyTorch's signature (its position matters: t.to(dtype, True)
// is non_blocking, not copy); every copy on the CPU is synchronous.
Tensor to_dtype(const Tensor& self, ScalarType dtype, bool non_blocking, bool copy) {
  return kael::to(self, self.device(), dtype, non_blocking, copy);
}

Tensor to_other(const Tensor& self, const Tensor& other, bool non_blocking, bool copy) {
  return kael::to(self, other.device(), other.dtype(), non_blocking, copy);
}

}  // namespace kael::native
