// CPU kernels of the counting and lookup ops: bincount, searchsorted, bucketize, one_hot.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/index_ops.h"
#include "kael/native/pointwise.h"
#include "kael/ops/movedim.h"

namespace kael::native {

namespace {

// A contiguous copy of t in dtype (t itself when it already is one).
Tensor contiguous_as(const Tensor& t, ScalarType dtype) {
  if (t.dtype() == dtype && t.is_contiguous()) return t;
  Tensor out = alloc_cpu(t.sizes(), dtype);
  copy_cpu(out, t);
  return out;
}

// The smallest and largest value of an integral tensor (n > 0), read as int64.
template <typename T>
std::pair<std::int64_t, std::int64_t> min_max(const T* p, std::int64_t n) {
  std::int64_t lo = static_cast<std::int64_t>(p[0]), hi = lo;
  for (std::int64_t i = 1; i < n; ++i) {
    const auto v = static_cast<std::int64_t>(p[i]);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return {lo, hi};
}

}  // namespace

// ------------------------------------------------------------------ bincount

Tensor bincount_cpu(const Tensor& self, const std::optional<Tensor>& weights, std::int64_t minlength) {
  constexpr const char* op = "bincount";
  KAEL_CHECK_IMPLEMENTED(is_integral(self.dtype(), /*include_bool=*/false),
                         op << ": \"bincount_cpu\" not implemented for '" << self.dtype() << "'");
  KAEL_CHECK(minlength >= 0, op << ": minlength should be >= 0 (got " << minlength << ")");
  KAEL_CHECK(self.dim() == 1, op << ": bincount only supports 1-d non-negative integral inputs (got a " << self.dim()
                                 << "-d input)");
  if (self.numel() == 0) {  // PyTorch looks at no weights then: int64 zeros
    const std::int64_t sizes[] = {minlength};
    Tensor out = alloc_cpu(sizes, ScalarType::Int64);
    std::fill(out.data<std::int64_t>(), out.data<std::int64_t>() + minlength, std::int64_t{0});
    return out;
  }
  const bool weighted = weights.has_value();
  if (weighted) {
    check_same_device(op, self.device(), weights->device());
    KAEL_CHECK(weights->dim() == 1 && weights->sizes()[0] == self.sizes()[0],
               op << ": weights should be 1-d and have the same length as input (got " << shape_str(weights->sizes())
                  << " and " << shape_str(self.sizes()) << ")");
  }
  const ScalarType out_dtype =
      !weighted ? ScalarType::Int64 : (weights->dtype() == ScalarType::Float32 ? ScalarType::Float32 : ScalarType::Float64);
  const Tensor x = contiguous_as(self, ScalarType::Int64);
  const std::int64_t n = x.numel();
  const std::int64_t* v = x.data<std::int64_t>();
  std::int64_t length = minlength;
  if (n > 0) {
    const auto [lo, hi] = min_max(v, n);
    KAEL_CHECK(lo >= 0, op << ": bincount only supports 1-d non-negative integral inputs (got " << lo << ")");
    KAEL_CHECK(hi < INT64_MAX, op << ": value " << hi << " is too large");
    length = std::max(length, hi + 1);
  }
  const std::int64_t sizes[] = {length};
  Tensor out = alloc_cpu(sizes, out_dtype);
  if (!weighted) {
    std::int64_t* o = out.data<std::int64_t>();
    std::fill(o, o + length, 0);
    for (std::int64_t i = 0; i < n; ++i) ++o[v[i]];
    return out;
  }
  visit_dtype(out_dtype, [&](auto tag) {
    using O = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<O>) {
      const Tensor w = contiguous_as(*weights, out_dtype);
      const O* wp = w.data<O>();
      O* o = out.data<O>();
      std::fill(o, o + length, O(0));
      for (std::int64_t i = 0; i < n; ++i) o[v[i]] += wp[i];
    }
  });
  return out;
}

// ------------------------------------------------------------------ searchsorted, bucketize

namespace {

// PyTorch's cus_lower_bound / cus_upper_bound (NaN sorts after every number).
template <typename T>
std::int64_t bound(const T* b, const std::int64_t* sorter, std::int64_t n, T v, bool right) {
  std::int64_t start = 0, end = n;
  while (start < end) {
    const std::int64_t mid = start + ((end - start) >> 1);
    const T m = sorter ? b[sorter[mid]] : b[mid];
    const bool go_right = right ? !(m > v) : !(m >= v);
    if (go_right) {
      start = mid + 1;
    } else {
      end = mid;
    }
  }
  return start;
}

Tensor searchsorted_impl(const Tensor& boundaries, const Tensor& input, ScalarType compute, bool out_int32,
                         bool right, const std::optional<Tensor>& sorter) {
  constexpr const char* op = "searchsorted";
  check_same_device(op, boundaries.device(), input.device());
  const std::int64_t bd = boundaries.dim(), id = input.dim();
  if (id == 0) {
    KAEL_CHECK(bd == 1, op << ": input value can be a scalar only when boundaries tensor dimension is 1, but we got "
                              "boundaries tensor dim("
                           << bd << ") and input value's dim(" << id << ") numel(" << input.numel() << ")");
  }
  bool leading_match = bd == id && bd > 0;
  for (std::int64_t d = 0; leading_match && d + 1 < bd; ++d) leading_match = boundaries.sizes()[d] == input.sizes()[d];
  KAEL_CHECK(bd == 1 || leading_match,
             op << ": boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor "
                   "and input value tensor must match, but we got boundaries tensor "
                << shape_str(boundaries.sizes()) << " and input value tensor " << shape_str(input.sizes()));
  const std::int64_t n = boundaries.sizes()[bd - 1];
  Tensor sort_index;
  if (sorter) {
    check_same_device(op, boundaries.device(), sorter->device());
    KAEL_CHECK(sorter->dtype() == ScalarType::Int64,
               op << ": sorter must be a tensor of long dtype but got dtype " << sorter->dtype());
    KAEL_CHECK(std::ranges::equal(sorter->sizes(), boundaries.sizes()),
               op << ": boundary and sorter must have the same size, but got boundary tensor "
                  << shape_str(boundaries.sizes()) << "and got sorter tensor " << shape_str(sorter->sizes()));
    sort_index = contiguous_as(*sorter, ScalarType::Int64);
    const std::int64_t* s = sort_index.data<std::int64_t>();
    for (std::int64_t i = 0; i < sort_index.numel(); ++i)
      KAEL_CHECK_INDEX(s[i] >= 0 && s[i] < n, op << ": sorter index out of range (got " << s[i] << " for size " << n
                                                 << ")");
  }
  // (the dtype is refused only with values to look up, as PyTorch's kernel runs only then)
  KAEL_CHECK_IMPLEMENTED(input.numel() == 0 || compute != ScalarType::Bool,
                         op << ": \"searchsorted_out_cpu\" not implemented for 'Bool'");
  KAEL_CHECK(!out_int32 || n < (std::int64_t{1} << 31),
             op << ": the size of boundaries must be less than 2^31 for out_int32 (got " << n << ")");
  // float16/bfloat16 compare as float32 (exact)
  const ScalarType as = is_reduced_floating(compute) ? ScalarType::Float32 : compute;
  const Tensor b = contiguous_as(boundaries, as);
  const Tensor x = contiguous_as(input, as);
  Tensor out = alloc_cpu(input.sizes(), out_int32 ? ScalarType::Int32 : ScalarType::Int64);
  const std::int64_t count = x.numel();
  if (count == 0) return out;
  const std::int64_t row = id == 0 ? 1 : input.sizes()[id - 1];  // input values per boundaries row
  visit_dtype(as, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool> && !is_reduced_floating_v<T>) {
      const T* bp = b.data<T>();
      const T* xp = x.data<T>();
      const std::int64_t* sp = sorter ? sort_index.data<std::int64_t>() : nullptr;
      for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t r = bd == 1 ? 0 : i / row;
        const std::int64_t k = bound(bp + r * n, sp ? sp + r * n : nullptr, n, xp[i], right);
        if (out_int32) {
          out.data<std::int32_t>()[i] = static_cast<std::int32_t>(k);
        } else {
          out.data<std::int64_t>()[i] = k;
        }
      }
    }
  });
  return out;
}

ScalarType common_dtype(const Operand& a, const Operand& b) { return result_type({&a, &b}); }

}  // namespace

namespace {
// side= as PyTorch reads it: 'left' or 'right', not the opposite of right=.
bool searchsorted_right(bool right, std::optional<std::string_view> side) {
  if (!side) return right;
  KAEL_CHECK(*side == "left" || *side == "right",
             "searchsorted: side can only be 'left' or 'right' but got " << *side);
  KAEL_CHECK(!(right && *side == "left"),
             "searchsorted: side and right can't be set to opposites, got side of left while right was True");
  return *side == "right";
}
}  // namespace

Tensor searchsorted_cpu(const Tensor& sorted_sequence, const Tensor& self, bool out_int32, bool right_arg,
                        std::optional<std::string_view> side, const std::optional<Tensor>& sorter) {
  const bool right = searchsorted_right(right_arg, side);
  KAEL_CHECK(sorted_sequence.dim() > 0,
             "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
             "tensor and input value tensor must match, but we got boundaries tensor "
                 << shape_str(sorted_sequence.sizes()) << " and input value tensor " << shape_str(self.sizes()));
  return searchsorted_impl(sorted_sequence, self, common_dtype(sorted_sequence, self), out_int32, right, sorter);
}

Tensor searchsorted_scalar_cpu(const Tensor& sorted_sequence, const Scalar& self, bool out_int32, bool right_arg,
                               std::optional<std::string_view> side, const std::optional<Tensor>& sorter) {
  const bool right = searchsorted_right(right_arg, side);
  const ScalarType compute = common_dtype(sorted_sequence, self);
  Tensor value = alloc_cpu(IntArrayRef{}, compute);
  visit_dtype(compute, [&](auto tag) {  // converted as a cast (uint8 boundaries: -1 is 255, as in PyTorch)
    using T = typename decltype(tag)::type;
    *value.data<T>() = self.to<T>();
  });
  KAEL_CHECK(sorted_sequence.dim() == 1,
             "searchsorted: input value can be a scalar only when boundaries tensor dimension is 1, but we got "
             "boundaries tensor dim("
                 << sorted_sequence.dim() << ") and input value's dim(0) numel(1)");
  return searchsorted_impl(sorted_sequence, value, compute, out_int32, right, sorter);
}

Tensor bucketize_cpu(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  KAEL_CHECK(boundaries.dim() == 1, "bucketize: boundaries tensor must be 1 dimension, but got dim("
                                        << boundaries.dim() << ")");
  return searchsorted_impl(boundaries, self, common_dtype(boundaries, self), out_int32, right, std::nullopt);
}

Tensor bucketize_scalar_cpu(const Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  KAEL_CHECK(boundaries.dim() == 1, "bucketize: boundaries tensor must be 1 dimension, but got dim("
                                        << boundaries.dim() << ")");
  return searchsorted_scalar_cpu(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}

// ------------------------------------------------------------------ one_hot

Tensor one_hot_cpu(const Tensor& self, std::int64_t num_classes) {
  constexpr const char* op = "one_hot";
  KAEL_CHECK(self.dtype() == ScalarType::Int64,
             op << ": one_hot is only applicable to index tensor of type LongTensor (got " << self.dtype() << ")");
  check_max_dims(op, self.dim() + 1);
  const Tensor x = contiguous_as(self, ScalarType::Int64);
  const std::int64_t n = x.numel();
  const std::int64_t* v = x.data<std::int64_t>();
  std::int64_t classes = num_classes;
  if (n == 0) {
    KAEL_CHECK(num_classes > 0, op << ": Can not infer total number of classes from empty tensor.");
  } else {
    const auto [lo, hi] = min_max(v, n);
    KAEL_CHECK(lo >= 0, op << ": Class values must be non-negative (got " << lo << ").");
    if (num_classes == -1) {
      KAEL_CHECK(hi < INT64_MAX, op << ": class value " << hi << " is too large");
      classes = hi + 1;
    } else {
      KAEL_CHECK(hi < num_classes, op << ": Class values must be smaller than num_classes (got " << hi << " and "
                                      << num_classes << ").");
    }
  }
  DimVector shape(self.sizes());
  shape.push_back(classes);
  Tensor out = alloc_cpu(shape, ScalarType::Int64);
  std::int64_t* o = out.data<std::int64_t>();
  std::fill(o, o + out.numel(), std::int64_t{0});
  for (std::int64_t i = 0; i < n; ++i) o[i * classes + v[i]] = 1;
  return out;
}

// ------------------------------------------------------------------ unique

namespace {

template <typename T>
bool unique_less(T a, T b) {
  if constexpr (is_floating_v<T>) {
    const auto x = static_cast<opmath_t<T>>(a), y = static_cast<opmath_t<T>>(b);
    return x < y || (!std::isnan(x) && std::isnan(y));  // NaN last, as PyTorch sorts
  } else {
    return a < b;
  }
}

template <typename T>
bool unique_equal(T a, T b) {
  if constexpr (is_reduced_floating_v<T>) {
    return static_cast<float>(a) == static_cast<float>(b);
  } else {
    return a == b;  // NaN is never equal: every NaN is its own value, as in PyTorch
  }
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique_cpu(const Tensor& self, bool sorted, bool return_inverse,
                                              bool return_counts) {
  (void)sorted;  // PyTorch's CPU kernel sorts either way; so does kael's
  const Tensor x = contiguous_as(self, self.dtype());
  const std::int64_t n = x.numel();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::vector<std::int64_t> group_start;  // positions in `order` where a new value starts
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = x.data<T>();
    // stable: among equal values the first occurrence comes first and is the one kept
    std::stable_sort(order.begin(), order.end(), [v](std::int64_t a, std::int64_t b) { return unique_less(v[a], v[b]); });
    for (std::int64_t i = 0; i < n; ++i)
      if (i == 0 || !unique_equal(v[order[i]], v[order[i - 1]])) group_start.push_back(i);
  });
  const std::int64_t groups = static_cast<std::int64_t>(group_start.size());
  const std::int64_t value_sizes[] = {groups};
  Tensor values = alloc_cpu(value_sizes, self.dtype());
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = x.data<T>();
    T* o = values.data<T>();
    for (std::int64_t g = 0; g < groups; ++g) o[g] = v[order[group_start[g]]];
  });
  const std::int64_t none[] = {0}, count_sizes[] = {return_counts ? groups : 0};
  Tensor inverse = alloc_cpu(return_inverse ? self.sizes() : IntArrayRef(none), ScalarType::Int64);
  Tensor counts = alloc_cpu(count_sizes, ScalarType::Int64);
  if (return_inverse || return_counts) {
    std::int64_t* inv = return_inverse ? inverse.data<std::int64_t>() : nullptr;
    std::int64_t* cnt = return_counts ? counts.data<std::int64_t>() : nullptr;
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t end = g + 1 < groups ? group_start[g + 1] : n;
      if (cnt) cnt[g] = end - group_start[g];
      if (inv)
        for (std::int64_t i = group_start[g]; i < end; ++i) inv[order[i]] = g;
    }
  }
  return {values, inverse, counts};
}

namespace {
// unique along dim d of a tensor without elements: the tensor as it is and empty inverse and
// counts, where every other dim has elements (PyTorch's check)
std::tuple<Tensor, Tensor, Tensor> empty_unique_along(const char* op, const Tensor& self, std::int64_t d) {
  for (std::int64_t k = 0; k < self.dim(); ++k)
    KAEL_CHECK(k == d || self.sizes()[k] != 0,
               op << ": There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  const std::int64_t zero[] = {0};
  return {alloc_cpu(self.sizes(), self.dtype()), alloc_cpu(zero, ScalarType::Int64), alloc_cpu(zero, ScalarType::Int64)};
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique_dim_cpu(const Tensor& self, std::int64_t dim, bool sorted,
                                                  bool return_inverse, bool return_counts) {
  constexpr const char* op = "unique_dim";
  (void)sorted;  // sorted either way, as in PyTorch
  KAEL_CHECK_INDEX(self.dim() > 0, op << ": Dimension specified as " << dim << " but tensor has no dimensions");
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  if (self.numel() == 0) {
    return empty_unique_along(op, self, d);
  }
  // rows: self with dim moved first, as a contiguous (n, m) block
  DimVector perm{d};
  for (std::int64_t k = 0; k < self.dim(); ++k)
    if (k != d) perm.push_back(k);
  DimVector moved_sizes;
  for (const std::int64_t k : perm) moved_sizes.push_back(self.sizes()[k]);
  DimVector moved_strides;
  for (const std::int64_t k : perm) moved_strides.push_back(self.strides()[k]);
  const Tensor moved(TensorImpl::make_view(*self.impl(), moved_sizes, moved_strides, self.impl()->offset()));
  const Tensor rows = contiguous_as(moved, self.dtype());
  const std::int64_t n = moved_sizes[0], m = rows.numel() / n;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::vector<std::int64_t> group_start;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = rows.data<T>();
    auto less = [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t k = 0; k < m; ++k) {
        const T x = v[a * m + k], y = v[b * m + k];
        if (unique_less(x, y)) return true;
        if (unique_less(y, x)) return false;
      }
      return false;
    };
    auto equal = [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t k = 0; k < m; ++k)
        if (!unique_equal(v[a * m + k], v[b * m + k])) return false;
      return true;
    };
    std::stable_sort(order.begin(), order.end(), less);
    for (std::int64_t i = 0; i < n; ++i)
      if (i == 0 || !equal(order[i], order[i - 1])) group_start.push_back(i);
  });
  const std::int64_t groups = static_cast<std::int64_t>(group_start.size());
  DimVector out_sizes(moved_sizes);
  out_sizes[0] = groups;
  Tensor out_rows = alloc_cpu(out_sizes, self.dtype());
  const std::int64_t isz = self.element_size();
  for (std::int64_t g = 0; g < groups; ++g)
    std::memcpy(static_cast<char*>(out_rows.data_ptr()) + g * m * isz,
                static_cast<const char*>(rows.data_ptr()) + order[group_start[g]] * m * isz,
                static_cast<std::size_t>(m * isz));
  // back to self's dim order
  DimVector inverse_perm(self.dim());
  for (std::int64_t k = 0; k < self.dim(); ++k) inverse_perm[perm[k]] = k;
  DimVector vs, vst;
  const DimVector rs = contiguous_strides(out_sizes);
  for (std::int64_t k = 0; k < self.dim(); ++k) {
    vs.push_back(out_sizes[inverse_perm[k]]);
    vst.push_back(rs[inverse_perm[k]]);
  }
  Tensor values = alloc_cpu(vs, self.dtype());
  copy_cpu(values, Tensor(TensorImpl::make(out_rows.impl()->storage_ptr(), self.dtype(), vs, vst, 0)));
  // PyTorch's unique_dim gives the inverse and the counts whatever the flags say
  (void)return_inverse;
  (void)return_counts;
  const std::int64_t inv_n[] = {n}, cnt_n[] = {groups};
  Tensor inverse = alloc_cpu(inv_n, ScalarType::Int64);
  Tensor counts = alloc_cpu(cnt_n, ScalarType::Int64);
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t end = g + 1 < groups ? group_start[g + 1] : n;
    counts.data<std::int64_t>()[g] = end - group_start[g];
    for (std::int64_t i = group_start[g]; i < end; ++i) inverse.data<std::int64_t>()[order[i]] = g;
  }
  return {values, inverse, counts};
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive_cpu(const Tensor& self, bool return_inverse, bool return_counts,
                                                          std::optional<std::int64_t> dim) {
  constexpr const char* op = "unique_consecutive";
  // Runs of equal elements (slices along dim) collapse to their first; NaN equals nothing, so
  // every NaN is a run of its own (PyTorch compares with !=).
  if (dim) {
    KAEL_CHECK_INDEX(self.dim() > 0, op << ": Dimension specified as " << *dim << " but tensor has no dimensions");
    const std::int64_t d = wrap_dim(op, *dim, self.dim());
    if (self.numel() == 0) {
      return empty_unique_along(op, self, d);
    }
    const std::int64_t dims_d[] = {d}, dims_0[] = {0};
    const Tensor rows = contiguous_as(kael::movedim(self, dims_d, dims_0), self.dtype());
    const std::int64_t n = rows.sizes()[0], m = rows.numel() / n;
    std::vector<std::int64_t> group_start;
    visit_dtype(self.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* v = rows.data<T>();
      for (std::int64_t i = 0; i < n; ++i) {
        bool same = i > 0;
        for (std::int64_t k = 0; same && k < m; ++k) same = unique_equal(v[i * m + k], v[group_start.back() * m + k]);
        if (!same) group_start.push_back(i);
      }
    });
    const std::int64_t groups = static_cast<std::int64_t>(group_start.size());
    DimVector out_sizes(rows.sizes());
    out_sizes[0] = groups;
    Tensor out_rows = alloc_cpu(out_sizes, self.dtype());
    const std::int64_t isz = self.element_size();
    for (std::int64_t g = 0; g < groups; ++g)
      std::memcpy(static_cast<char*>(out_rows.data_ptr()) + g * m * isz,
                  static_cast<const char*>(rows.data_ptr()) + group_start[g] * m * isz,
                  static_cast<std::size_t>(m * isz));
    const std::int64_t inv_n[] = {n}, cnt_n[] = {groups};
    Tensor inverse = alloc_cpu(inv_n, ScalarType::Int64), counts = alloc_cpu(cnt_n, ScalarType::Int64);
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::int64_t end = g + 1 < groups ? group_start[g + 1] : n;
      counts.data<std::int64_t>()[g] = end - group_start[g];
      for (std::int64_t i = group_start[g]; i < end; ++i) inverse.data<std::int64_t>()[i] = g;
    }
    return {contiguous_as(kael::movedim(out_rows, dims_0, dims_d), self.dtype()), inverse, counts};
  }
  const Tensor x = contiguous_as(self, self.dtype());
  const std::int64_t n = x.numel();
  std::vector<std::int64_t> group_start;
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = x.data<T>();
    for (std::int64_t i = 0; i < n; ++i)
      if (i == 0 || !unique_equal(v[i], v[group_start.back()])) group_start.push_back(i);
  });
  const std::int64_t groups = static_cast<std::int64_t>(group_start.size());
  const std::int64_t value_sizes[] = {groups};
  Tensor values = alloc_cpu(value_sizes, self.dtype());
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* v = x.data<T>();
    T* o = values.data<T>();
    for (std::int64_t g = 0; g < groups; ++g) o[g] = v[group_start[g]];
  });
  const std::int64_t none[] = {0}, count_sizes[] = {return_counts ? groups : 0};
  Tensor inverse = alloc_cpu(return_inverse ? self.sizes() : IntArrayRef(none), ScalarType::Int64);
  Tensor counts = alloc_cpu(count_sizes, ScalarType::Int64);
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int64_t end = g + 1 < groups ? group_start[g + 1] : n;
    if (return_counts) counts.data<std::int64_t>()[g] = end - group_start[g];
    if (return_inverse)
      for (std::int64_t i = group_start[g]; i < end; ++i) inverse.data<std::int64_t>()[i] = g;
  }
  return {values, inverse, counts};
}

}  // namespace kael::native
