#pragma once
// Helpers of the CPU indexing kernels (index_ops.cpp, scatter_reduce.cpp, flip_roll.cpp,
// tril_triu.cpp, cat.cpp): the indexed loop and the operand views it walks (Note [Indexed loops]
// in index_ops.cpp), the checks the gather/scatter family shares, and the slice view that roll
// and cat copy through. Private to aten/src/native/cpu/.
#include <cstdint>
#include <utility>

#include "kael/native/pointwise.h"

namespace kael::native::index_kernels {

// Calls f(int64 value, position) for every element of an int32/int64 tensor, in row-major order,
// until f returns false.
template <typename F>
void for_each_index(const Tensor& index, F f) {
  auto walk = [&](auto tag) {
    using I = typename decltype(tag)::type;
    const std::int64_t n = index.numel();
    if (n == 0) return;
    if (index.is_contiguous()) {
      const I* p = index.data<I>();
      for (std::int64_t i = 0; i < n; ++i)
        if (!f(static_cast<std::int64_t>(p[i]))) return;
      return;
    }
    const LoopGeometry<1> g = make_geometry<1>(index.sizes(), {view_of(index)}, /*reorder=*/false);
    bool go = true;
    run_loop<1>(
        g,
        [&](char* const* ptrs, const std::int64_t* strides, std::int64_t m) {
          for (std::int64_t i = 0; i < m && go; ++i)
            go = f(static_cast<std::int64_t>(*reinterpret_cast<const I*>(ptrs[0] + i * strides[0])));
        },
        /*parallel=*/false);
  };
  if (index.dtype() == ScalarType::Int32) {
    walk(TypeTag<std::int32_t>{});
  } else {
    walk(TypeTag<std::int64_t>{});
  }
}

// The view of t with the given sizes and strides (an operand of an indexed loop).
inline OperandView restrided(const Tensor& t, IntArrayRef sizes, IntArrayRef strides) {
  return {static_cast<char*>(t.data_ptr()), sizes, strides, static_cast<int>(t.element_size())};
}

// No row function: every row goes element by element.
struct NoRow {
  bool operator()(char*, char*, std::int64_t, std::int64_t, std::int64_t, std::int64_t) const { return false; }
};

// Runs f(char* a, char* b, int64 index) over `shape` for three operands (Note [Indexed loops]).
// A row whose elements share one index (index_select / index_add of rows) is first offered to
// row(a, b, index, n, stride_a, stride_b), which returns whether it handled it (a memcpy or a
// vectorised loop for contiguous rows).
template <typename I, typename F, typename Row = NoRow>
void indexed_loop(IntArrayRef shape, const OperandView& a, const OperandView& b, const OperandView& index,
                  bool parallel, F f, Row row = {}) {
  const LoopGeometry<3> g = make_geometry<3>(shape, {a, b, index});
  run_loop<3>(
      g,
      [&f, &row](char* const* ptrs, const std::int64_t* strides, std::int64_t n) {
        if (strides[2] == 0) {  // one index for the whole row
          const auto idx = static_cast<std::int64_t>(*reinterpret_cast<const I*>(ptrs[2]));
          char* a = ptrs[0];
          char* b = ptrs[1];
          const std::int64_t sa = strides[0], sb = strides[1];
          if (row(a, b, idx, n, sa, sb)) return;
          for (std::int64_t i = 0; i < n; ++i) f(a + i * sa, b + i * sb, idx);
          return;
        }
        for (std::int64_t i = 0; i < n; ++i)
          f(ptrs[0] + i * strides[0], ptrs[1] + i * strides[1],
            static_cast<std::int64_t>(*reinterpret_cast<const I*>(ptrs[2] + i * strides[2])));
      },
      parallel);
}

template <typename F>
void visit_index_dtype(ScalarType t, F&& f) {
  if (t == ScalarType::Int32) {
    f(TypeTag<std::int32_t>{});
  } else {
    f(TypeTag<std::int64_t>{});
  }
}

// The same-device check of two operands of an indexing op.
inline void check_cpu(const char* op, const Tensor& a, const Tensor& b) { check_same_device(op, a.device(), b.device()); }

// Sizes and strides of t as a tensor of at least one dim.
inline DimVector sizes_as_vector(const Tensor& t) { return t.dim() == 0 ? DimVector{1} : DimVector(t.sizes()); }
inline DimVector strides_as_vector(const Tensor& t) { return t.dim() == 0 ? DimVector{1} : DimVector(t.strides()); }

// Whether a value written in place into self would clobber an input still to be read: PyTorch's
// overlap checks for self, with a snapshot of an input whose overlap is too hard to tell
// (Note [Memory overlap]).
Tensor readable_input(const char* op, const Tensor& self, const Tensor& input);

// PyTorch's gather_shape_check / scatter_shape_check: index has self's dims, and no dim of the
// index is larger than self's (apart from dim) or than src's.
void check_gather_scatter(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                          const Tensor* src);

// An int32 index (which gather and the scatters take, as PyTorch does) as the int64 one their
// loops read; an int64 index as it is.
Tensor long_index(const Tensor& index);

// The operands of a scatter/gather loop over the index's shape: `t` viewed with the index's
// sizes and stride 0 along dim (step: its stride along dim, in bytes).
struct Restrided {
  DimVector strides;
  std::int64_t step;
};
Restrided along_dim(const Tensor& t, std::int64_t dim);

// A copy of self in new memory laid out as self (alloc_like_cpu).
Tensor clone_cpu(const Tensor& self);

// The view of `length` elements of t along dim from start.
inline Tensor narrow_view(const Tensor& t, std::int64_t dim, std::int64_t start, std::int64_t length) {
  DimVector sizes(t.sizes()), strides(t.strides());
  sizes[dim] = length;
  return Tensor(TensorImpl::make_view(*t.impl(), std::move(sizes), std::move(strides),
                                      t.impl()->offset() + start * t.strides()[dim]));
}

}  // namespace kael::native::index_kernels
