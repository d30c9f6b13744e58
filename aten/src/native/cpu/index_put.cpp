// index_put_: self[indices] = values (or += with accumulate) for integer or bool index tensors
// over the leading dims of self; the kernel behind `t[idx] = v` (csrc/indexing.cpp).
//
// Note [index_put]
// indices address the first k = len(indices) dims of self (a bool index of m dims stands for
// the m int64 tensors of its nonzero positions). They broadcast to one shape B; values broadcast
// to B + self.shape[k:]. Every check (dtypes, devices, shapes, index ranges, overlap) runs
// before the first write (Note [Index checks come first]); values or indices that share memory
// with self are read from a snapshot, so the write cannot clobber what is still to be read. The
// loop is serial: with duplicate indices the last write wins (accumulate adds them all up, in
// index order), which is deterministic where PyTorch leaves the order unspecified. That holds
// for an expanded self too (elements sharing memory), which PyTorch takes with a deprecation
// warning.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "kael/ops/select.h"

namespace kael::native {

namespace {

// Strides (in bytes) of t broadcast to `shape` (aligned at the right; stride 0 for new and
// size-1 dims).
std::vector<std::int64_t> broadcast_byte_strides(const Tensor& t, IntArrayRef shape) {
  std::vector<std::int64_t> out(shape.size(), 0);
  const std::int64_t lead = static_cast<std::int64_t>(shape.size()) - t.dim();
  for (std::int64_t i = 0; i < t.dim(); ++i)
    if (t.sizes()[i] != 1) out[lead + i] = t.strides()[i] * t.element_size();
  return out;
}

// Calls f(position) for every multi-index of `shape` in row-major order, keeping a byte offset
// per operand (strides[j][d] is operand j's stride along d).
template <typename F>
void odometer(IntArrayRef shape, const std::vector<std::vector<std::int64_t>>& strides, F f) {
  const std::size_t nd = shape.size(), nops = strides.size();
  for (const std::int64_t s : shape)
    if (s == 0) return;
  std::vector<std::int64_t> counter(nd, 0), offset(nops, 0);
  while (true) {
    f(offset.data());
    std::size_t d = nd;
    while (d > 0) {
      --d;
      if (++counter[d] < shape[d]) {
        for (std::size_t j = 0; j < nops; ++j) offset[j] += strides[j][d];
        break;
      }
      for (std::size_t j = 0; j < nops; ++j) offset[j] -= strides[j][d] * (shape[d] - 1);
      counter[d] = 0;
      if (d == 0) return;
    }
    if (nd == 0) return;
  }
}

std::int64_t read_index(const char* p, ScalarType t) {
  return t == ScalarType::Int32 ? *reinterpret_cast<const std::int32_t*>(p) : *reinterpret_cast<const std::int64_t*>(p);
}

}  // namespace

namespace {

// The index values against self's shape. Not where the index tensors broadcast to no element
// (x[[], [3]]): no index is used, and PyTorch and NumPy check none. (An index into a tensor
// with no elements is still checked: zeros(2, 0, 3)[[2]] raises, as in NumPy.)
void check_index_ranges(const char* op, const Tensor& self, const std::vector<Tensor>& idx, const DimVector& bshape) {
  for (std::int64_t n : bshape)
    if (n == 0) return;
  for (std::size_t d = 0; d < idx.size(); ++d)
    check_index_range(op, idx[d], self.sizes()[d], static_cast<std::int64_t>(d), /*allow_negative=*/true);
}

// The index tensors as int32/int64 tensors, one per dim of self they address (a bool index of m
// dims becomes the m columns of its nonzero positions), checked against self's shape (their
// values are checked by the caller, check_index_ranges).
std::vector<Tensor> integer_indices(const char* op, const Tensor& self, TensorList indices) {
  std::vector<Tensor> idx;
  for (const Tensor& index : indices) {
    check_same_device(op, self.device(), index.device());
    if (index.dtype() == ScalarType::Bool) {
      const std::int64_t at = static_cast<std::int64_t>(idx.size());
      KAEL_CHECK_INDEX(at + index.dim() <= self.dim(), op << ": too many indices for tensor of dimension "
                                                          << self.dim());
      for (std::int64_t j = 0; j < index.dim(); ++j)
        KAEL_CHECK_INDEX(index.sizes()[j] == self.sizes()[at + j],
                         op << ": The shape of the mask " << shape_str(index.sizes()) << " at index " << j
                            << " does not match the shape of the indexed tensor " << shape_str(self.sizes())
                            << " at index " << at + j);
      const Tensor nz = nonzero_cpu(index);  // [n, m]
      for (std::int64_t j = 0; j < index.dim(); ++j) idx.push_back(kael::select(nz, 1, j));
      continue;
    }
    KAEL_CHECK_INDEX(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32,
                     op << ": tensors used as indices must be long, int or bool tensors (got " << index.dtype()
                        << ")");
    idx.push_back(index);
  }
  KAEL_CHECK_INDEX(static_cast<std::int64_t>(idx.size()) <= self.dim(),
                   op << ": too many indices for tensor of dimension " << self.dim() << " (got " << idx.size()
                      << ")");
  return idx;
}

// "[2], [3]": the shapes of the index tensors, as torch's message lists them.
std::string index_shapes_str(const std::vector<Tensor>& idx) {
  std::string out;
  for (std::size_t j = 0; j < idx.size(); ++j) out += (j ? ", " : "") + shape_str(idx[j].sizes());
  return out;
}

// B, the broadcast shape of the index tensors (IndexError, as torch, when they do not broadcast),
// and B + self.shape[k:].
std::pair<DimVector, DimVector> index_shapes(const char* op, const Tensor& self, const std::vector<Tensor>& idx) {
  DimVector bshape;
  bool broadcast = true;
  for (const Tensor& i : idx) broadcast = broadcast && try_broadcast_shapes(DimVector(bshape), i.sizes(), bshape);
  KAEL_CHECK_INDEX(broadcast, op << ": shape mismatch: indexing tensors could not be broadcast together with shapes "
                                 << index_shapes_str(idx));
  DimVector target = bshape;
  for (std::int64_t d = static_cast<std::int64_t>(idx.size()); d < self.dim(); ++d) target.push_back(self.sizes()[d]);
  return {bshape, target};
}

// Calls f(element of self, element of other) for every element of the indexing result (shape
// target = B + self.shape[k:]): self addressed through the indices, other through its strides
// broadcast to target.
template <typename F>
void index_loop(const Tensor& self, const std::vector<Tensor>& idx, const DimVector& bshape, const DimVector& target,
                const Tensor& other, F f) {
  const std::int64_t k = static_cast<std::int64_t>(idx.size());
  const std::int64_t nb = static_cast<std::int64_t>(bshape.size());
  const std::int64_t esize = self.element_size();
  std::vector<std::vector<std::int64_t>> outer;
  for (const Tensor& i : idx) outer.push_back(broadcast_byte_strides(i, bshape));
  const std::vector<std::int64_t> ostrides = broadcast_byte_strides(other, target);
  outer.emplace_back(ostrides.begin(), ostrides.begin() + nb);
  const DimVector rest(self.sizes().subspan(static_cast<std::size_t>(k)));
  std::vector<std::vector<std::int64_t>> inner(2);
  for (std::int64_t d = k; d < self.dim(); ++d)  // a dim of one element may have any stride
    inner[0].push_back(self.sizes()[d] > 1 ? self.strides()[d] * esize : 0);
  inner[1].assign(ostrides.begin() + nb, ostrides.end());
  char* base = static_cast<char*>(self.data_ptr());
  char* obase = static_cast<char*>(other.data_ptr());
  std::vector<const char*> ibase;
  for (const Tensor& i : idx) ibase.push_back(static_cast<const char*>(i.data_ptr()));
  odometer(bshape, outer, [&](const std::int64_t* off) {
    std::int64_t self_off = 0;
    for (std::int64_t d = 0; d < k; ++d) {
      std::int64_t v = read_index(ibase[d] + off[d], idx[d].dtype());
      if (v < 0) v += self.sizes()[d];
      self_off += v * self.strides()[d] * esize;
    }
    char* s = base + self_off;
    char* o = obase + off[k];
    odometer(rest, inner, [&](const std::int64_t* in) { f(s + in[0], o + in[1]); });
  });
}

}  // namespace

Tensor index_cpu(const Tensor& self, TensorList indices) {
  constexpr const char* op = "index";
  const std::vector<Tensor> idx = integer_indices(op, self, indices);
  const auto [bshape, target] = index_shapes(op, self, idx);
  check_index_ranges(op, self, idx, bshape);
  Tensor out = alloc_cpu(target, self.dtype());
  if (out.numel() == 0) return out;
  const std::size_t esize = static_cast<std::size_t>(self.element_size());
  index_loop(self, idx, bshape, target, out, [esize](char* s, char* o) { std::memcpy(o, s, esize); });
  return out;
}

const Tensor& index_put_cpu_(const Tensor& self, TensorList indices, const Tensor& values, bool accumulate) {
  constexpr const char* op = "index_put_";
  // PyTorch's order: index shapes and dtypes, the values' shape, their dtype, then the index
  // values (its kernel checks those).
  const std::vector<Tensor> idx = integer_indices(op, self, indices);
  check_same_device(op, self.device(), values.device());
  Tensor values_in = values;
  if (!accumulate && values.numel() == 1 && indices.size() == 1 && indices[0].dtype() == ScalarType::Bool &&
      values.dtype() != self.dtype()) {
    // PyTorch's masked_fill shortcut (one bool mask, one value, no accumulation) takes
    // value.item() as a number: any dtype, with a number's overflow check.
    const Scalar v = values.item();
    check_convertible(op, v, self.dtype());
    values_in = alloc_cpu({}, self.dtype());
    fill_cpu(values_in, v);
  }
  const auto [bshape, target] = index_shapes(op, self, idx);
  DimVector values_shape;
  KAEL_CHECK(values_in.dim() <= static_cast<std::int64_t>(target.size()) &&
                 try_broadcast_shapes(target, values_in.sizes(), values_shape) && values_shape == target,
             op << ": shape mismatch: value tensor of shape " << shape_str(values_in.sizes())
                << " cannot be broadcast to indexing result of shape " << shape_str(target));
  KAEL_CHECK(values_in.dtype() == self.dtype(), op << ": Index put requires the source and destination dtypes match, "
                                                      "got "
                                                   << self.dtype() << " for the destination and " << values_in.dtype()
                                                   << " for the source.");
  check_index_ranges(op, self, idx, bshape);
  if (has_internal_overlap(self) == MemOverlap::Yes) {
    // As PyTorch: writing through an expanded self is deprecated, not refused (`x.expand(3, 4)[i]
    // = v` works); the serial loop below makes the outcome deterministic (the last write wins).
    warn(WarningKind::User,
         "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing this "
         "operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
  }
  std::vector<Tensor> idx_read;
  for (const Tensor& i : idx) {
    assert_no_overlap(op, self, i);
    idx_read.push_back(may_share_memory(self, i) ? snapshot_cpu(i) : i);
  }
  assert_no_overlap(op, self, values_in);
  const Tensor vals = may_share_memory(self, values_in) ? snapshot_cpu(values_in) : values_in;
  self.bump_version();
  if (self.numel() == 0 || vals.numel() == 0) return self;

  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_loop(self, idx_read, bshape, target, vals, [accumulate](char* s, char* v) {
      T* q = reinterpret_cast<T*>(s);
      const T x = *reinterpret_cast<const T*>(v);
      if (!accumulate) {
        *q = x;
      } else if constexpr (std::is_same_v<T, bool>) {
        *q = load_bool(q) || x;
      } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;  // wraps, never undefined
        *q = static_cast<T>(static_cast<U>(*q) + static_cast<U>(x));
      } else {
        using A = opmath_t<T>;
        *q = static_cast<T>(static_cast<A>(*q) + static_cast<A>(x));
      }
    });
  });
  return self;
}

Tensor index_put_cpu(const Tensor& self, TensorList indices, const Tensor& values, bool accumulate) {
  Tensor out = alloc_like_cpu(self);
  copy_cpu(out, self);
  index_put_cpu_(out, indices, values, accumulate);
  return out;
}

}  // namespace kael::native
