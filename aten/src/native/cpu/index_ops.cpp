// CPU kernels of the indexing ops: index_select, gather, scatter(_), scatter_add(_), index_add(_),
// index_copy(_), index_fill(_), masked_select, nonzero. Scatter with a reduction is
// scatter_reduce.cpp; the loop helpers they share are index_kernels.h.
//
// Note [Indexed loops]
// index_select, gather, scatter and index_add are one loop, as in PyTorch's TensorIterator-based
// kernels: the loop walks a shape (the index's for gather/scatter, the output's or source's for
// index_select/index_add) over three operands: the tensor that is read or written element by
// element, the indexed tensor restrided with stride 0 along `dim`, and the index (broadcast with
// stride 0 along every dim but `dim` for the vector-indexed ops). The inner loop adds
// index * stride(dim) to the indexed operand's pointer. Indices are checked before the loop
// (Note [Index checks come first] in kael/native/index_ops.h). Loops that read through indices
// (gather, index_select) run in parallel; loops that write through them (scatter, index_add)
// run serially, so duplicate indices accumulate in index order and results are deterministic.
//
// Note [Half accumulation]
// scatter_add and index_add of float16/bfloat16 add in float32 (into a float32 copy of self) and
// round each element once, as kael computes every float16/bfloat16 op. PyTorch's CPU kernels
// round after every addition on some paths (1-d self, alpha != 1, some layouts) and accumulate in
// float32 on others, so with duplicate indices their results may differ from kael's by the
// rounding of partial sums; the tests compare with PyTorch computing in float32, rounded once.
#include <algorithm>
#include <optional>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "index_kernels.h"

namespace kael::native {

namespace index_kernels {

Tensor readable_input(const char* op, const Tensor& self, const Tensor& input) {
  assert_no_overlap(op, self, input);
  if (get_overlap_status(self, input) == MemOverlapStatus::TooHard && may_share_memory(self, input))
    return snapshot_cpu(input);
  return input;
}

void check_gather_scatter(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                          const Tensor* src) {
  // PyTorch checks an empty index's dtype and dims no more than its values
  KAEL_CHECK(index.dtype() == ScalarType::Int64 || index.dtype() == ScalarType::Int32 || index.numel() == 0,
             op << ": Expected dtype int32/int64 for index (got " << index.dtype() << ")");
  const std::int64_t nd = dims_as_vector(self);
  KAEL_CHECK(dims_as_vector(index) == nd || index.numel() == 0,
             op << ": Index tensor must have the same number of dimensions as " << (src ? "self" : "input")
                << " tensor (" << shape_str(index.sizes()) << " and " << shape_str(self.sizes()) << ")");
  if (src)
    KAEL_CHECK(dims_as_vector(*src) == nd || index.numel() == 0,
               op << ": Index tensor must have the same number of dimensions as src tensor ("
                  << shape_str(index.sizes()) << " and " << shape_str(src->sizes()) << ")");
  if (index.numel() == 0) return;
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t n = size_as_vector(index, i);
    if (i != dim)
      KAEL_CHECK(n <= size_as_vector(self, i),
                 op << ": Size does not match at dimension " << i << " expected index "
                    << shape_str(index.sizes()) << " to be no larger than self " << shape_str(self.sizes())
                    << " apart from dimension " << dim);
    if (src)
      KAEL_CHECK(n <= size_as_vector(*src, i),
                 op << ": Expected index " << shape_str(index.sizes()) << " to be no larger than self "
                    << shape_str(self.sizes()) << " apart from dimension " << dim
                    << " and to be no larger size than src " << shape_str(src->sizes()));
  }
}

Tensor long_index(const Tensor& index) {
  if (index.dtype() != ScalarType::Int32) return index;
  Tensor out = alloc_cpu(index.sizes(), ScalarType::Int64);
  copy_cpu(out, index);
  return out;
}

Restrided along_dim(const Tensor& t, std::int64_t dim) {
  Restrided r{strides_as_vector(t), 0};
  r.step = r.strides[dim] * t.element_size();
  r.strides[dim] = 0;
  return r;
}

Tensor clone_cpu(const Tensor& self) {
  Tensor out = alloc_like_cpu(self);
  copy_cpu(out, self);
  return out;
}

}  // namespace index_kernels

using namespace index_kernels;  // the helpers of this folder's indexing kernels

namespace {

// ------------------------------------------------------------------ index_select

void check_vector_index(const char* op, const Tensor& index, bool allow_int32) {
  KAEL_CHECK_INDEX(index.dim() <= 1, op << ": Index is supposed to be a vector, but got dim: " << index.dim()
                                        << " with size: " << shape_str(index.sizes()));
  KAEL_CHECK(index.dtype() == ScalarType::Int64 || (allow_int32 && index.dtype() == ScalarType::Int32),
             op << ": Expected dtype " << (allow_int32 ? "int32 or int64" : "int64") << " for index (got "
                << index.dtype() << ")");
}

}  // namespace

namespace {

// The first element of index outside [low, size), if any.
std::optional<std::int64_t> out_of_range(const Tensor& index, std::int64_t low, std::int64_t size) {
  std::optional<std::int64_t> bad;
  for_each_index(index, [&](std::int64_t v) {
    if (v < low || v >= size) {
      bad = v;
      return false;
    }
    return true;
  });
  return bad;
}

}  // namespace

void check_index_range(const char* op, const Tensor& index, std::int64_t size, std::int64_t dim, bool allow_negative) {
  const std::optional<std::int64_t> bad = out_of_range(index, allow_negative ? -size : 0, size);
  KAEL_CHECK_INDEX(!bad,
                   op << ": index " << *bad << " is out of bounds for dimension " << dim << " with size " << size);
}

void check_gather_index_range(const char* op, const Tensor& index, std::int64_t size, std::int64_t dim) {
  const std::optional<std::int64_t> bad = out_of_range(index, 0, size);
  KAEL_CHECK(!bad, op << ": index " << *bad << " is out of bounds for dimension " << dim << " with size " << size);
}

Tensor index_select_cpu(const Tensor& self, std::int64_t dim, const Tensor& index) {
  constexpr const char* op = "index_select";
  check_cpu(op, self, index);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  check_vector_index(op, index, /*allow_int32=*/true);
  const std::int64_t k = index.numel();
  const std::int64_t size = size_as_vector(self, d);
  if (self.dim() == 0)
    KAEL_CHECK_INDEX(k == 1, op << ": index_select(): Index to scalar can have only 1 value, got " << k
                                << " value(s)");
  check_index_range(op, index, size, d);
  DimVector shape = sizes_as_vector(self);
  shape[d] = k;
  Tensor out = alloc_cpu(self.dim() == 0 ? IntArrayRef{} : IntArrayRef(shape), self.dtype());
  if (out.numel() == 0) return out;
  const DimVector out_strides = contiguous_strides(shape);
  DimVector self_strides = strides_as_vector(self);
  const std::int64_t step = self_strides[d] * self.element_size();
  self_strides[d] = 0;
  DimVector index_strides(shape.size(), 0);
  index_strides[d] = index.dim() == 0 ? 0 : index.strides()[0];
  visit_index_dtype(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    visit_dtype(self.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      indexed_loop<I>(shape, restrided(out, shape, out_strides), restrided(self, shape, self_strides),
                      restrided(index, shape, index_strides), /*parallel=*/true,
                      [step](char* o, char* s, std::int64_t i) {
                        *reinterpret_cast<T*>(o) = *reinterpret_cast<const T*>(s + i * step);
                      },
                      [step](char* o, char* s, std::int64_t i, std::int64_t n, std::int64_t so, std::int64_t ss) {
                        if (so != sizeof(T) || ss != sizeof(T)) return false;
                        std::memcpy(o, s + i * step, static_cast<std::size_t>(n) * sizeof(T));
                        return true;
                      });
    });
  });
  return out;
}

// ------------------------------------------------------------------ gather and scatter

namespace {

enum class ScatterMode : std::uint8_t { Set, Add };

// self[index[i]] (op)= src[i] along dim, for every i of index's shape; src is a tensor of self's
// dtype or (value) a number. Every check has passed.
void scatter_loop(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor* src, const Scalar& value,
                  ScatterMode mode) {
  if (index.numel() == 0) return;
  const DimVector shape = sizes_as_vector(index);
  const Restrided s = along_dim(self, dim);
  const DimVector index_strides = strides_as_vector(index);
  const std::int64_t step = s.step;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (src) {
      const DimVector src_strides = strides_as_vector(*src);
      auto body = [&](auto f) {
        indexed_loop<std::int64_t>(shape, restrided(self, shape, s.strides), restrided(*src, shape, src_strides),
                                   restrided(index, shape, index_strides), /*parallel=*/false, f);
      };
      if (mode == ScatterMode::Set) {
        body([step](char* a, char* b, std::int64_t i) {
          *reinterpret_cast<T*>(a + i * step) = *reinterpret_cast<const T*>(b);
        });
      } else {
        body([step](char* a, char* b, std::int64_t i) {
          T* p = reinterpret_cast<T*>(a + i * step);
          if constexpr (std::is_same_v<T, bool>) {
            *p = load_bool(p) || *reinterpret_cast<const bool*>(b);
          } else if constexpr (std::is_integral_v<T>) {
            using U = std::make_unsigned_t<T>;  // wraps as in PyTorch, never undefined
            *p = static_cast<T>(static_cast<U>(*p) + static_cast<U>(*reinterpret_cast<const T*>(b)));
          } else {
            using A = opmath_t<T>;
            *p = static_cast<T>(static_cast<A>(*p) + static_cast<A>(*reinterpret_cast<const T*>(b)));
          }
        });
      }
      return;
    }
    const T v = value.to<T>();
    const DimVector zero(shape.size(), 0);
    indexed_loop<std::int64_t>(shape, restrided(self, shape, s.strides), restrided(self, shape, zero),
                               restrided(index, shape, index_strides), /*parallel=*/false,
                               [step, v](char* a, char*, std::int64_t i) { *reinterpret_cast<T*>(a + i * step) = v; });
  });
}

// Checks scatter_/scatter_add_ into self (before any write) and runs it.
const Tensor& scatter_checked(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                              const Tensor* src, const Scalar& value, ScatterMode mode) {
  check_cpu(op, self, index);
  if (src) check_cpu(op, self, *src);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  if (src)
    KAEL_CHECK(src->dtype() == self.dtype(), op << ": Expected self.dtype to be equal to src.dtype (got "
                                                << self.dtype() << " and " << src->dtype() << ")");
  check_gather_scatter(op, self, d, index, src);
  check_gather_index_range(op, index, size_as_vector(self, d), d);
  assert_no_internal_overlap(op, self);
  const Tensor idx = long_index(readable_input(op, self, index));
  if (src) {
    const Tensor s = readable_input(op, self, *src);
    self.bump_version();
    if (mode == ScatterMode::Add && is_reduced_floating(self.dtype())) {
      // float16/bfloat16 add up in float32 and round once (see Note [Half accumulation])
      Tensor acc = alloc_cpu(self.sizes(), ScalarType::Float32);
      copy_cpu(acc, self);
      Tensor s32 = alloc_cpu(s.sizes(), ScalarType::Float32);
      copy_cpu(s32, s);
      scatter_loop(acc, d, idx, &s32, value, mode);
      copy_cpu(self, acc);
    } else {
      scatter_loop(self, d, idx, &s, value, mode);
    }
  } else {
    self.bump_version();
    scatter_loop(self, d, idx, nullptr, value, mode);
  }
  return self;
}

}  // namespace

// A new tensor of self's shape and dtype laid out in self's memory order, as PyTorch's
// empty_like(preserve_format) (a transposed input gives a transposed result).
Tensor alloc_like_cpu(const Tensor& self) {
  if (self.is_contiguous()) return alloc_cpu(self.sizes(), self.dtype());
  const OperandView v = view_of(self);
  return alloc_strided_cpu(self.sizes(), output_strides_like(self.sizes(), &v, 1), self.dtype());
}

Tensor gather_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, bool sparse_grad) {
  constexpr const char* op = "gather";
  (void)sparse_grad;  // only changes the gradient's layout in PyTorch; kael's gradients are dense
  check_cpu(op, self, index);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  check_gather_scatter(op, self, d, index, nullptr);
  check_gather_index_range(op, index, size_as_vector(self, d), d);
  Tensor out = alloc_cpu(index.sizes(), self.dtype());
  if (out.numel() == 0) return out;
  const Tensor idx = long_index(index);
  const DimVector shape = sizes_as_vector(idx);
  const Restrided s = along_dim(self, d);
  const std::int64_t step = s.step;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    indexed_loop<std::int64_t>(shape, restrided(out, shape, contiguous_strides(shape)),
                               restrided(self, shape, s.strides),
                               restrided(idx, shape, strides_as_vector(idx)), /*parallel=*/true,
                               [step](char* o, char* x, std::int64_t i) {
                                 *reinterpret_cast<T*>(o) = *reinterpret_cast<const T*>(x + i * step);
                               });
  });
  return out;
}

Tensor scatter_src_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = clone_cpu(self);
  scatter_checked("scatter", out, dim, index, &src, Scalar(), ScatterMode::Set);
  return out;
}

Tensor scatter_value_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  check_convertible("scatter", value, self.dtype());  // as PyTorch: scatter(0, i, 128) into int8 raises
  Tensor out = clone_cpu(self);
  scatter_checked("scatter", out, dim, index, nullptr, value, ScatterMode::Set);
  return out;
}

const Tensor& scatter_src_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_checked("scatter_", self, dim, index, &src, Scalar(), ScatterMode::Set);
}

const Tensor& scatter_value_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  check_convertible("scatter_", value, self.dtype());
  return scatter_checked("scatter_", self, dim, index, nullptr, value, ScatterMode::Set);
}

Tensor scatter_add_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = clone_cpu(self);
  scatter_checked("scatter_add", out, dim, index, &src, Scalar(), ScatterMode::Add);
  return out;
}

const Tensor& scatter_add_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_checked("scatter_add_", self, dim, index, &src, Scalar(), ScatterMode::Add);
}

// ------------------------------------------------------------------ index_add

namespace {

// self[index[i]] += alpha * source[i] along dim; every check has passed, source has self's dtype.
void index_add_loop(const Tensor& self, std::int64_t d, const Tensor& idx, const Tensor& src, const Scalar& alpha) {
  const DimVector shape = sizes_as_vector(src);
  const Restrided s = along_dim(self, d);
  const std::int64_t step = s.step;
  DimVector index_strides(shape.size(), 0);
  index_strides[d] = idx.dim() == 0 ? 0 : idx.strides()[0];
  visit_index_dtype(idx.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    visit_dtype(self.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto body = [&](auto f) {
        indexed_loop<I>(shape, restrided(self, shape, s.strides), restrided(src, shape, strides_as_vector(src)),
                        restrided(idx, shape, index_strides), /*parallel=*/false, f);
      };
      if constexpr (std::is_same_v<T, bool>) {
        const bool a = alpha.to<bool>();
        body([step, a](char* p, char* b, std::int64_t i) {
          bool* q = reinterpret_cast<bool*>(p + i * step);
          *q = load_bool(q) || (a && *reinterpret_cast<const bool*>(b));
        });
      } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;  // wraps as in PyTorch, never undefined
        const U a = static_cast<U>(alpha.to<T>());
        body([step, a](char* p, char* b, std::int64_t i) {
          T* q = reinterpret_cast<T*>(p + i * step);
          *q = static_cast<T>(static_cast<U>(*q) + a * static_cast<U>(*reinterpret_cast<const T*>(b)));
        });
      } else {
        // source * alpha is rounded to T before it is added, as PyTorch computes it
        using A = opmath_t<T>;
        const A a = static_cast<A>(alpha.to<T>());
        indexed_loop<I>(
            shape, restrided(self, shape, s.strides), restrided(src, shape, strides_as_vector(src)),
            restrided(idx, shape, index_strides), /*parallel=*/false,
            [step, a](char* p, char* b, std::int64_t i) {
              T* q = reinterpret_cast<T*>(p + i * step);
              const T product = static_cast<T>(static_cast<A>(*reinterpret_cast<const T*>(b)) * a);
              *q = static_cast<T>(static_cast<A>(*q) + static_cast<A>(product));
            },
            [step, a](char* p, char* b, std::int64_t i, std::int64_t n, std::int64_t sp, std::int64_t sb) {
              if (sp != sizeof(T) || sb != sizeof(T)) return false;
              T* __restrict q = reinterpret_cast<T*>(p + i * step);
              const T* __restrict x = reinterpret_cast<const T*>(b);
              for (std::int64_t k = 0; k < n; ++k)
                q[k] = static_cast<T>(static_cast<A>(q[k]) + static_cast<A>(static_cast<T>(static_cast<A>(x[k]) * a)));
              return true;
            });
      }
    });
  });
}

const Tensor& index_add_checked(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                                const Tensor& source, const Scalar& alpha) {
  check_cpu(op, self, index);
  check_cpu(op, self, source);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  check_vector_index(op, index, /*allow_int32=*/true);
  KAEL_CHECK(source.dtype() == self.dtype(), op << ": self (" << self.dtype() << ") and source (" << source.dtype()
                                                << ") must have the same scalar type");
  // (unlike add, a floating alpha on an integer or bool self is not refused: PyTorch converts it,
  // truncating toward zero)
  check_convertible(op, alpha, self.dtype());
  const std::int64_t k = index.numel();
  KAEL_CHECK(dims_as_vector(source) == dims_as_vector(self),
             op << ": source tensor shape must match self tensor shape, excluding the specified dimension. Got "
                   "self.shape = "
                << shape_str(self.sizes()) << " source.shape = " << shape_str(source.sizes()));
  KAEL_CHECK(k == size_as_vector(source, d), op << ": Number of indices (" << k
                                                << ") should be equal to source.size(dim): ("
                                                << size_as_vector(source, d) << "), for dim: " << d);
  for (std::int64_t i = 0; i < dims_as_vector(self); ++i)
    KAEL_CHECK(i == d || size_as_vector(source, i) == size_as_vector(self, i),
               op << ": source tensor shape must match self tensor shape, excluding the specified dimension. "
                     "Got self.shape = "
                  << shape_str(self.sizes()) << " source.shape = " << shape_str(source.sizes()));
  check_index_range(op, index, size_as_vector(self, d), d);
  assert_no_internal_overlap(op, self);
  const Tensor idx = readable_input(op, self, index);
  const Tensor src = readable_input(op, self, source);
  self.bump_version();
  if (src.numel() == 0) return self;
  if (is_reduced_floating(self.dtype())) {
    // float16/bfloat16 add up in float32 and round once (see Note [Half accumulation])
    Tensor acc = alloc_cpu(self.sizes(), ScalarType::Float32);
    copy_cpu(acc, self);
    Tensor src32 = alloc_cpu(src.sizes(), ScalarType::Float32);
    copy_cpu(src32, src);
    index_add_loop(acc, d, idx, src32, alpha);
    copy_cpu(self, acc);
  } else {
    index_add_loop(self, d, idx, src, alpha);
  }
  return self;
}

}  // namespace

Tensor index_add_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source,
                     const Scalar& alpha) {
  Tensor out = clone_cpu(self);
  index_add_checked("index_add", out, dim, index, source, alpha);
  return out;
}

const Tensor& index_add_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source,
                             const Scalar& alpha) {
  return index_add_checked("index_add_", self, dim, index, source, alpha);
}

// ------------------------------------------------------------------ index_copy, index_fill

namespace {

// PyTorch's checks of index_copy_, in its order and with its messages and classes.
void check_index_copy(const char* op, const Tensor& self, std::int64_t d, const Tensor& index, const Tensor& source) {
  KAEL_CHECK_INDEX(index.dim() <= 1, op << ": Index should have dimension 1 or 0 (got " << index.dim() << ")");
  const std::int64_t k = index.numel();
  KAEL_CHECK_INDEX(source.dim() == self.dim() || source.dim() == 0 || self.dim() == 0,
                   op << ": When source and destination are not scalars, their dimensionality must match. Source "
                         "dimensionality ("
                      << source.dim() << "), destination dimensionality (" << self.dim() << ")");
  const std::int64_t rows = source.dim() == 0 ? 1 : source.sizes()[self.dim() == 0 ? 0 : d];
  KAEL_CHECK_INDEX(k == rows, op << ": Number of indices (" << k << ") should be equal to source.size(dim) (" << rows
                                 << ")");
  if (source.dim() == self.dim())
    for (std::int64_t i = 0; i < self.dim(); ++i)
      KAEL_CHECK(i == d || source.sizes()[i] == self.sizes()[i],
                 op << ": Source/destination tensor must have same slice shapes. Destination slice shape: "
                    << self.sizes()[i] << " at dimension " << i << " and source slice shape: " << source.sizes()[i]
                    << " at dimension " << i << ".");
  KAEL_CHECK(index.dtype() == ScalarType::Int64, op << ": Expected a long tensor for index, but got " << index.dtype());
  KAEL_CHECK(self.dtype() == source.dtype(), op << ": self and source expected to have the same dtype, but got (self) "
                                                << self.dtype() << " and (source) " << source.dtype());
  check_index_range(op, index, size_as_vector(self, d), d);
}

const Tensor& index_copy_checked(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                                 const Tensor& source) {
  check_cpu(op, self, index);
  check_cpu(op, self, source);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  check_index_copy(op, self, d, index, source);
  assert_no_internal_overlap(op, self);
  const Tensor idx = readable_input(op, self, index);
  const Tensor src = readable_input(op, self, source);
  self.bump_version();
  if (src.numel() == 0) return self;
  // source viewed with self's dims (a 0-d or one-element source of a 0-d or 1-d self)
  DimVector shape = sizes_as_vector(self);
  shape[d] = idx.numel();
  DimVector src_strides = src.dim() == 0 ? DimVector(shape.size(), 0) : strides_as_vector(src);
  const Restrided s = along_dim(self, d);
  const std::int64_t step = s.step;
  DimVector index_strides(shape.size(), 0);
  index_strides[d] = idx.dim() == 0 ? 0 : idx.strides()[0];
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    indexed_loop<std::int64_t>(
        shape, restrided(self, shape, s.strides), restrided(src, shape, src_strides),
        restrided(idx, shape, index_strides), /*parallel=*/false,
        [step](char* p, char* b, std::int64_t i) {
          *reinterpret_cast<T*>(p + i * step) = *reinterpret_cast<const T*>(b);
        },
        [step](char* p, char* b, std::int64_t i, std::int64_t n, std::int64_t sp, std::int64_t sb) {
          if (sp != sizeof(T) || sb != sizeof(T)) return false;
          std::memmove(p + i * step, b, static_cast<std::size_t>(n) * sizeof(T));
          return true;
        });
  });
  return self;
}

const Tensor& index_fill_checked(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                                 const Scalar& value) {
  check_cpu(op, self, index);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  KAEL_CHECK_INDEX(index.dtype() == ScalarType::Int64, op << ": Expected dtype int64 for index (got "
                                                          << index.dtype() << ")");
  KAEL_CHECK(index.dim() <= 1, op << ": Index has to be a vector/scalar (got " << index.dim() << " dims)");
  const std::int64_t size = size_as_vector(self, d);
  check_index_range(op, index, size, d, /*allow_negative=*/true);
  assert_no_internal_overlap(op, self);
  const Tensor idx = readable_input(op, self, index);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = value.checked_to<T>(op);
    self.bump_version();
    if (self.numel() == 0 || idx.numel() == 0) return;
    DimVector shape = sizes_as_vector(self);
    shape[d] = idx.numel();
    const Restrided s = along_dim(self, d);
    const std::int64_t step = s.step;
    DimVector index_strides(shape.size(), 0);
    index_strides[d] = idx.dim() == 0 ? 0 : idx.strides()[0];
    indexed_loop<std::int64_t>(shape, restrided(self, shape, s.strides), restrided(self, shape, s.strides),
                               restrided(idx, shape, index_strides), /*parallel=*/false,
                               [step, size, v](char* p, char*, std::int64_t i) {
                                 *reinterpret_cast<T*>(p + (i < 0 ? i + size : i) * step) = v;
                               });
  });
  return self;
}

Scalar fill_value(const char* op, const Tensor& value) {
  KAEL_CHECK(value.dim() == 0, op << " only supports a 0-dimensional value tensor, but got tensor with "
                                  << value.dim() << " dimension(s).");
  return value.item();
}

}  // namespace

Tensor index_copy_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source) {
  Tensor out = clone_cpu(self);
  index_copy_checked("index_copy", out, dim, index, source);
  return out;
}

const Tensor& index_copy_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source) {
  return index_copy_checked("index_copy_", self, dim, index, source);
}

Tensor index_fill_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  Tensor out = clone_cpu(self);
  index_fill_checked("index_fill", out, dim, index, value);
  return out;
}

const Tensor& index_fill_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value) {
  return index_fill_checked("index_fill_", self, dim, index, value);
}

Tensor index_fill_tensor_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& value) {
  const Scalar v = fill_value("index_fill", value);
  Tensor out = clone_cpu(self);
  index_fill_checked("index_fill", out, dim, index, v);
  return out;
}

const Tensor& index_fill_tensor_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index,
                                     const Tensor& value) {
  return index_fill_checked("index_fill_", self, dim, index, fill_value("index_fill_", value));
}

// ------------------------------------------------------------------ masked_select, nonzero

namespace {

template <typename T>
bool is_nonzero(T v) {
  if constexpr (is_reduced_floating_v<T>) {
    return static_cast<float>(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

// Calls f(char* element) for every element of t in row-major order (serially).
template <typename F>
void for_each_element(const Tensor& t, IntArrayRef shape, IntArrayRef strides, F f) {
  const OperandView v{static_cast<char*>(t.data_ptr()), shape, strides, static_cast<int>(t.element_size())};
  const LoopGeometry<1> g = make_geometry<1>(shape, {v}, /*reorder=*/false);
  run_loop<1>(
      g,
      [&f](char* const* ptrs, const std::int64_t* s, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) f(ptrs[0] + i * s[0]);
      },
      /*parallel=*/false);
}

}  // namespace

Tensor masked_select_cpu(const Tensor& self, const Tensor& mask) {
  constexpr const char* op = "masked_select";
  check_cpu(op, self, mask);
  KAEL_CHECK(mask.dtype() == ScalarType::Bool, op << ": expected BoolTensor for mask (got " << mask.dtype() << ")");
  const DimVector shape = broadcast_shapes(op, self.sizes(), mask.sizes());
  const OperandView sv = view_of(self), mv = view_of(mask);
  const DimVector ss = broadcast_strides(shape, sv, 1), ms = broadcast_strides(shape, mv, 1);
  std::int64_t count = 0;
  for_each_element(mask, shape, ms, [&](char* p) { count += *reinterpret_cast<const bool*>(p) ? 1 : 0; });
  const std::int64_t sizes[] = {count};
  Tensor out = alloc_cpu(sizes, self.dtype());
  if (count == 0) return out;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = out.data<T>();
    const LoopGeometry<2> g = make_geometry<2>(shape, {OperandView{sv.data, shape, ss, sv.itemsize},
                                                       OperandView{mv.data, shape, ms, mv.itemsize}},
                                               /*reorder=*/false);
    run_loop<2>(
        g,
        [&o](char* const* ptrs, const std::int64_t* s, std::int64_t n) {
          for (std::int64_t i = 0; i < n; ++i)
            if (*reinterpret_cast<const bool*>(ptrs[1] + i * s[1]))
              *o++ = *reinterpret_cast<const T*>(ptrs[0] + i * s[0]);
        },
        /*parallel=*/false);
  });
  return out;
}

Tensor nonzero_cpu(const Tensor& self) {
  const std::int64_t nd = self.dim();
  std::int64_t count = 0;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_element(self, self.sizes(), self.strides(), [&](char* p) {
      count += is_nonzero(*reinterpret_cast<const T*>(p)) ? 1 : 0;
    });
  });
  const std::int64_t sizes[] = {count, nd};
  Tensor out = alloc_cpu(sizes, ScalarType::Int64);
  if (count == 0 || self.numel() == 0) return out;
  std::int64_t* o = out.data<std::int64_t>();
  DimVector counter(nd, 0);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for_each_element(self, self.sizes(), self.strides(), [&](char* p) {
      if (is_nonzero(*reinterpret_cast<const T*>(p))) {
        for (std::int64_t d = 0; d < nd; ++d) *o++ = counter[d];
      }
      for (std::int64_t d = nd - 1; d >= 0; --d) {
        if (++counter[d] < self.sizes()[d]) break;
        counter[d] = 0;
      }
    });
  });
  return out;
}

}  // namespace kael::native
