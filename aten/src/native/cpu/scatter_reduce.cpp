// CPU kernels of scatter with a reduction: scatter(_)(..., reduce=) and scatter_reduce(_).
#include <algorithm>
#include <limits>
#include <string_view>
#include <type_traits>

#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "index_kernels.h"

namespace kael::native {

using namespace index_kernels;  // the helpers of this folder's indexing kernels

// Note [Scatter reductions]
// scatter(..., reduce='add'|'multiply') and scatter_reduce(..., 'sum'|'prod'|'mean'|'amax'|'amin',
// include_self) combine src into self at the positions index gives along dim, in index order
// (serially, so the result is deterministic). The work runs on a contiguous copy of self in the
// compute type (float32 for float16/bfloat16, rounded once when copied back, as in Note [Half
// accumulation]); without include_self the positions that receive a value start from the
// reduction's identity, as in PyTorch. mean divides each sum by its count (the positions no value
// reaches keep self), with floor division for integers; amax/amin propagate NaN from either side;
// on bool tensors sum/amax are `or` and prod/amin `and`.

namespace {

enum class ScatterReduce : std::uint8_t { Sum, Prod, Mean, Amax, Amin };

template <typename A>
A scatter_identity(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::Prod:
      return A(1);
    case ScatterReduce::Amax:
      if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
      return std::numeric_limits<A>::lowest();
    case ScatterReduce::Amin:
      if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
      return std::numeric_limits<A>::max();
    default:
      return A(0);
  }
}

// self[index[i]] = f(self[index[i]], src[i]) along dim over index's shape; self is contiguous.
template <typename A, typename F>
void scatter_combine(const Tensor& self, std::int64_t d, const Tensor& index, const Tensor& src, F f) {
  const DimVector shape = sizes_as_vector(index);
  const Restrided s = along_dim(self, d);
  const std::int64_t step = s.step;
  indexed_loop<std::int64_t>(shape, restrided(self, shape, s.strides), restrided(src, shape, strides_as_vector(src)),
                             restrided(index, shape, strides_as_vector(index)), /*parallel=*/false,
                             [step, &f](char* a, char* b, std::int64_t i) {
                               A* p = reinterpret_cast<A*>(a + i * step);
                               *p = f(*p, *reinterpret_cast<const A*>(b));
                             });
}

template <typename A>
void scatter_reduce_into(const Tensor& work, std::int64_t d, const Tensor& index, const Tensor& src, ScatterReduce r,
                         bool include_self) {
  if (!include_self) {
    const A id = scatter_identity<A>(r);
    const DimVector shape = sizes_as_vector(index);
    const Restrided s = along_dim(work, d);
    const std::int64_t step = s.step;
    indexed_loop<std::int64_t>(shape, restrided(work, shape, s.strides),
                               restrided(work, shape, DimVector(shape.size(), 0)),
                               restrided(index, shape, strides_as_vector(index)), /*parallel=*/false,
                               [step, id](char* a, char*, std::int64_t i) {
                                 *reinterpret_cast<A*>(a + i * step) = id;
                               });
  }
  if constexpr (std::is_same_v<A, bool>) {
    if (r == ScatterReduce::Sum || r == ScatterReduce::Amax) {
      scatter_combine<A>(work, d, index, src, [](bool a, bool b) { return a || b; });
    } else {
      scatter_combine<A>(work, d, index, src, [](bool a, bool b) { return a && b; });
    }
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;  // wraps as in PyTorch, never undefined
    switch (r) {
      case ScatterReduce::Sum:
      case ScatterReduce::Mean:
        scatter_combine<A>(work, d, index, src,
                           [](A a, A b) { return static_cast<A>(static_cast<U>(a) + static_cast<U>(b)); });
        break;
      case ScatterReduce::Prod:
        scatter_combine<A>(work, d, index, src, [](A a, A b) {
          using W = std::uint64_t;
          return static_cast<A>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b)));
        });
        break;
      case ScatterReduce::Amax:
        scatter_combine<A>(work, d, index, src, [](A a, A b) { return std::max(a, b); });
        break;
      case ScatterReduce::Amin:
        scatter_combine<A>(work, d, index, src, [](A a, A b) { return std::min(a, b); });
        break;
    }
  } else {
    switch (r) {
      case ScatterReduce::Sum:
      case ScatterReduce::Mean:
        scatter_combine<A>(work, d, index, src, [](A a, A b) { return a + b; });
        break;
      case ScatterReduce::Prod:
        scatter_combine<A>(work, d, index, src, [](A a, A b) { return a * b; });
        break;
      case ScatterReduce::Amax:  // PyTorch: isnan(src) ? src : std::max(self, src)
        scatter_combine<A>(work, d, index, src, [](A a, A b) { return b != b ? b : (a < b ? b : a); });
        break;
      case ScatterReduce::Amin:
        scatter_combine<A>(work, d, index, src, [](A a, A b) { return b != b ? b : (b < a ? b : a); });
        break;
    }
  }
  if (r != ScatterReduce::Mean) return;
  if constexpr (!std::is_same_v<A, bool>) {
    // counts of the values each position averaged (self included), at least 1
    Tensor counts = alloc_cpu(work.sizes(), ScalarType::Int64);
    fill_cpu(counts, Scalar(std::int64_t{include_self ? 1 : 0}));
    const DimVector shape = sizes_as_vector(index);
    const Restrided c = along_dim(counts, d);
    const std::int64_t step = c.step;
    indexed_loop<std::int64_t>(shape, restrided(counts, shape, c.strides),
                               restrided(counts, shape, DimVector(shape.size(), 0)),
                               restrided(index, shape, strides_as_vector(index)), /*parallel=*/false,
                               [step](char* a, char*, std::int64_t i) {
                                 ++*reinterpret_cast<std::int64_t*>(a + i * step);
                               });
    A* w = work.data<A>();
    const std::int64_t* n = counts.data<std::int64_t>();
    for (std::int64_t i = 0, e = work.numel(); i < e; ++i) {
      const std::int64_t k = std::max<std::int64_t>(n[i], 1);
      if constexpr (std::is_integral_v<A>) {
        const auto v = static_cast<std::int64_t>(w[i]);
        const std::int64_t q = v / k;  // floor division, as PyTorch's
        w[i] = static_cast<A>(q - ((v % k != 0 && v < 0) ? 1 : 0));
      } else {
        w[i] = w[i] / static_cast<A>(k);
      }
    }
  }
}

// Checks a scatter reduction into self (before any write) and runs it; src is a tensor of self's
// dtype.
const Tensor& scatter_reduce_checked(const char* op, const Tensor& self, std::int64_t dim, const Tensor& index,
                                     const Tensor& src, ScatterReduce r, bool include_self) {
  check_cpu(op, self, index);
  check_cpu(op, self, src);
  const std::int64_t d = wrap_dim(op, dim, dims_as_vector(self));
  KAEL_CHECK(src.dtype() == self.dtype(), op << ": Expected self.dtype to be equal to src.dtype (got " << self.dtype()
                                             << " and " << src.dtype() << ")");
  KAEL_CHECK_IMPLEMENTED(r != ScatterReduce::Mean || self.dtype() != ScalarType::Bool,
                         op << ": reduce='mean' is not implemented for dtype " << self.dtype());
  check_gather_scatter(op, self, d, index, &src);
  check_gather_index_range(op, index, size_as_vector(self, d), d);
  assert_no_internal_overlap(op, self);
  if (index.numel() == 0) return self;
  const Tensor idx = long_index(readable_input(op, self, index));
  const Tensor s = readable_input(op, self, src);
  const ScalarType acc = is_reduced_floating(self.dtype()) ? ScalarType::Float32 : self.dtype();
  Tensor work = alloc_cpu(self.sizes(), acc);
  copy_cpu(work, self);
  Tensor s_acc = s;
  if (acc != s.dtype()) {
    s_acc = alloc_cpu(s.sizes(), acc);
    copy_cpu(s_acc, s);
  }
  visit_dtype(acc, [&](auto tag) {
    using A = typename decltype(tag)::type;
    if constexpr (!is_reduced_floating_v<A>) scatter_reduce_into<A>(work, d, idx, s_acc, r, include_self);
  });
  self.bump_version();
  copy_cpu(self, work);
  return self;
}

ScatterReduce scatter_reduce_kind(std::string_view reduce) {
  if (reduce == "sum") return ScatterReduce::Sum;
  if (reduce == "prod") return ScatterReduce::Prod;
  if (reduce == "mean") return ScatterReduce::Mean;
  if (reduce == "amax") return ScatterReduce::Amax;
  KAEL_CHECK(reduce == "amin", "scatter_reduce: reduce argument must be either sum, prod, mean, amax or amin, got "
                                   << reduce);
  return ScatterReduce::Amin;
}

ScatterReduce scatter_add_or_multiply(const char* op, std::string_view reduce) {
  if (reduce == "add") return ScatterReduce::Sum;
  KAEL_CHECK(reduce == "multiply",
             op << ": reduce argument must be either add or multiply, got '" << reduce << "'");
  return ScatterReduce::Prod;
}

// The number as a tensor of index's shape and self's dtype (src of scatter(value, reduce=)).
Tensor value_like_index(const Tensor& self, const Tensor& index, const Scalar& value) {
  Tensor v = alloc_cpu(index.sizes(), self.dtype());
  fill_cpu(v, value);
  return v;
}

}  // namespace

Tensor scatter_src_reduce_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                              std::string_view reduce) {
  const ScatterReduce r = scatter_add_or_multiply("scatter", reduce);
  Tensor out = clone_cpu(self);
  scatter_reduce_checked("scatter", out, dim, index, src, r, true);
  return out;
}

Tensor scatter_value_reduce_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value,
                                std::string_view reduce) {
  const ScatterReduce r = scatter_add_or_multiply("scatter", reduce);
  Tensor out = clone_cpu(self);
  scatter_reduce_checked("scatter", out, dim, index, value_like_index(self, index, value), r, true);
  return out;
}

const Tensor& scatter_src_reduce_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                                      std::string_view reduce) {
  return scatter_reduce_checked("scatter_", self, dim, index, src, scatter_add_or_multiply("scatter_", reduce), true);
}

const Tensor& scatter_value_reduce_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Scalar& value,
                                        std::string_view reduce) {
  const ScatterReduce r = scatter_add_or_multiply("scatter_", reduce);
  return scatter_reduce_checked("scatter_", self, dim, index, value_like_index(self, index, value), r, true);
}

Tensor scatter_reduce_cpu(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                          std::string_view reduce, bool include_self) {
  const ScatterReduce r = scatter_reduce_kind(reduce);
  Tensor out = clone_cpu(self);
  scatter_reduce_checked("scatter_reduce", out, dim, index, src, r, include_self);
  return out;
}

const Tensor& scatter_reduce_cpu_(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
                                  std::string_view reduce, bool include_self) {
  return scatter_reduce_checked("scatter_reduce_", self, dim, index, src, scatter_reduce_kind(reduce), include_self);
}

}  // namespace kael::native
