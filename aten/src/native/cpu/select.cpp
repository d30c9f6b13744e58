// Selection along one dim on the CPU, with PyTorch's own algorithms: kthvalue (its quickselect),
// median and nanmedian (std::nth_element, along a dim over positions, over all elements over
// the values) and mode (std::sort of (value, position) pairs).
//
// Note [Selection ties]
// Where equal keys tie (0.0 and -0.0, repeated values, NaN among NaN), which element a
// selection returns, and so its index and the sign of a zero, is an accident of the algorithm
// that selects. PyTorch's CPU kernels pick with the algorithms below; kael runs the same ones on
// the same sequences with the same comparisons, so it picks the same elements. Along a dim the
// results keep the dim (size 1); the Python functions squeeze it.
#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"
#include "reduce_engine.h"

namespace kael::native {

namespace {

// PyTorch's quick_select_template (aten/src/ATen/native/SortingUtils.h): moves the k-th
// element of v (0-based, in gt_or_nan's order) to v[k], swapping positions p along.
template <typename K, typename Gt>
void quick_select(std::vector<K>& v, std::vector<std::int64_t>& p, std::int64_t k, Gt gt_or_nan) {
  auto swap = [&](std::int64_t i, std::int64_t j) {
    std::swap(v[i], v[j]);
    std::swap(p[i], p[j]);
  };
  std::int64_t lo = 0, hi = static_cast<std::int64_t>(v.size()) - 1;
  while (true) {
    if (hi <= lo) return;
    if (hi == lo + 1) {
      if (gt_or_nan(v[lo], v[hi])) swap(lo, hi);
      return;
    }
    const std::int64_t mid = lo + (hi - lo) / 2;  // median of three as the pivot
    swap(mid, lo + 1);
    if (gt_or_nan(v[lo + 1], v[hi])) swap(lo + 1, hi);
    if (gt_or_nan(v[lo], v[hi])) swap(lo, hi);
    if (gt_or_nan(v[lo + 1], v[lo])) swap(lo + 1, lo);
    std::int64_t i = lo + 1, j = hi;
    const K pivot = v[lo];
    while (true) {
      do ++i;
      while (gt_or_nan(pivot, v[i]));
      do --j;
      while (gt_or_nan(v[j], pivot));
      if (j < i) break;
      swap(i, j);
    }
    swap(lo, j);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
}

// The element type of a line's copy: bool as a byte (std::vector<bool> holds bits).
template <typename T>
using Elem = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;

// Runs pick(line values, out value, out index) over every line of self along dim; the results
// keep dim with size 1.
template <typename Pick>
std::tuple<Tensor, Tensor> select_lines(const char* op, const Tensor& self, std::int64_t dim, Pick pick) {
  LineSetup s = setup_lines(op, self, dim, self.dtype(), self.dtype(), /*with_indices=*/true, 1);
  const std::int64_t n = self.dim() == 0 ? 1 : self.sizes()[s.dim];
  UnlockedSection section;
  if (section.active()) s.input = section.own(s.input);
  section.unlock();
  const LinePlan in = make_line_plan(s.input, s.input.dim() == 0 ? 0 : s.dim);
  const LinePlan out = make_line_plan(s.out, s.out.dim() == 0 ? 0 : s.dim);
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xd = s.input.data<T>();
    T* vd = s.out.data<T>();
    std::int64_t* id = s.indices.data<std::int64_t>();
    const std::int64_t cost = n > std::numeric_limits<std::int64_t>::max() / 8 ? n : n * 8;  // saturates
    for_each_line(in, out, cost, [&](std::int64_t, std::int64_t x_offset, std::int64_t out_offset) {
      std::vector<Elem<T>> line(static_cast<std::size_t>(n));
      for (std::int64_t j = 0; j < n; ++j) line[j] = xd[x_offset + j * in.stride];
      pick(line, vd + out_offset, id + out_offset);
    });
  });
  return {s.out, s.indices};
}

// The line's length along dim, which must not be 0.
std::int64_t line_length(const char* op, const Tensor& self, std::int64_t dim) {
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  const std::int64_t n = self.dim() == 0 ? 1 : self.sizes()[d];
  KAEL_CHECK_INDEX(n > 0, op << "(): Expected reduction dim " << d << " to have non-zero size.");
  return n;
}

}  // namespace

std::tuple<Tensor, Tensor> kthvalue_select_cpu(const Tensor& self, std::int64_t k, std::int64_t dim) {
  constexpr const char* op = "kthvalue";
  const std::int64_t n = line_length(op, self, dim);
  KAEL_CHECK(k >= 1 && k <= n, op << "(): selected number k out of range for dimension "
                                  << wrap_dim(op, dim, self.dim()));
  return select_lines(op, self, dim, [&](auto& line, auto* value, std::int64_t* index) {
    using T = typename std::decay_t<decltype(line)>::value_type;
    std::vector<std::int64_t> pos(line.size());
    std::iota(pos.begin(), pos.end(), std::int64_t{0});
    // NaN as the largest, as numpy (PyTorch's comparison)
    quick_select(line, pos, k - 1, [](T x, T y) {
      using K = opmath_t<T>;
      const K a = static_cast<K>(x), b = static_cast<K>(y);
      return (is_nan(a) || a > b) && !is_nan(b);
    });
    *value = line[k - 1];
    *index = pos[k - 1];
  });
}

std::tuple<Tensor, Tensor> median_dim_select_cpu(const Tensor& self, std::int64_t dim, bool ignore_nan) {
  const char* op = ignore_nan ? "nanmedian" : "median";
  const std::int64_t n = line_length(op, self, dim);
  (void)n;
  return select_lines(op, self, dim, [&](auto& line, auto* value, std::int64_t* index) {
    using T = typename std::decay_t<decltype(line)>::value_type;
    using K = opmath_t<T>;
    const std::int64_t size = static_cast<std::int64_t>(line.size());
    auto key = [&](std::int64_t i) { return static_cast<K>(line[i]); };
    if (!ignore_nan) {  // the first NaN, if any
      for (std::int64_t i = 0; i < size; ++i)
        if (is_nan(key(i))) {
          *value = line[i];
          *index = i;
          return;
        }
    }
    std::vector<std::int64_t> idx(static_cast<std::size_t>(size));
    std::iota(idx.begin(), idx.end(), std::int64_t{0});
    auto nth = idx.begin();
    if (!ignore_nan) {
      nth += (size - 1) / 2;
      std::nth_element(idx.begin(), nth, idx.end(), [&](std::int64_t i, std::int64_t j) {
        return key(i) < key(j) || (key(i) == key(j) && i < j);
      });
    } else {
      std::int64_t nans = 0;
      for (std::int64_t i = 0; i < size; ++i) nans += is_nan(key(i)) ? 1 : 0;
      nth += (size - nans - 1) / 2;  // truncated toward 0, as C++ (and PyTorch) divides
      std::nth_element(idx.begin(), nth, idx.end(), [&](std::int64_t i, std::int64_t j) {
        return key(i) < key(j) || (key(i) == key(j) && i < j) || (is_nan(key(j)) && !is_nan(key(i)));
      });
    }
    *value = line[*nth];
    *index = *nth;
  });
}

Tensor median_all_select_cpu(const Tensor& self, bool ignore_nan) {
  // PyTorch partitions a clone of self in its memory order: self's own order when it is dense
  // (a transposed tensor keeps its strides), the logical order otherwise.
  DimVector perm(static_cast<std::size_t>(self.dim()));
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](std::int64_t a, std::int64_t b) {
    return self.strides()[a] > self.strides()[b];
  });
  DimVector ps, pst;
  for (const std::int64_t d : perm) {
    ps.push_back(self.sizes()[d]);
    pst.push_back(self.strides()[d]);
  }
  const Tensor permuted(TensorImpl::make_view(*self.impl(), ps, pst, self.impl()->offset()));
  const Tensor x = contiguous(permuted.is_contiguous() ? permuted : self);
  Tensor out = alloc_cpu(IntArrayRef{}, self.dtype());
  const std::int64_t size = x.numel();
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = opmath_t<T>;
    T* o = out.data<T>();
    if (size == 0) {
      // NaN, converted as PyTorch's result is (an integer dtype gets x86's value: INT64_MIN for
      // int64, 0 for int8; bool true: Note [Conversions between dtypes])
      *o = convert<T>(std::numeric_limits<double>::quiet_NaN());
      return;
    }
    std::vector<Elem<T>> v(x.data<T>(), x.data<T>() + size);
    std::int64_t nans = 0;
    for (const auto& e : v) nans += is_nan(static_cast<K>(e)) ? 1 : 0;
    if (!ignore_nan && nans > 0) {
      *o = convert<T>(std::numeric_limits<K>::quiet_NaN());
      return;
    }
    const std::int64_t m = ignore_nan ? (size - nans - 1) / 2 : (size - 1) / 2;
    std::nth_element(v.begin(), v.begin() + m, v.end(), [](Elem<T> a, Elem<T> b) {
      const K x = static_cast<K>(a), y = static_cast<K>(b);
      return x < y || (is_nan(y) && !is_nan(x));
    });
    *o = static_cast<T>(v[m]);
  });
  return out;
}

std::tuple<Tensor, Tensor> mode_cpu(const Tensor& self, std::int64_t dim, bool keepdim) {
  constexpr const char* op = "mode";
  const std::int64_t d = wrap_dim(op, dim, self.dim());
  line_length(op, self, dim);  // as PyTorch: an empty dim is an error even with no lines
  auto [values, indices] = select_lines(op, self, dim, [&](auto& line, auto* value, std::int64_t* index) {
    using T = typename std::decay_t<decltype(line)>::value_type;
    using K = opmath_t<T>;
    const std::int64_t size = static_cast<std::int64_t>(line.size());
    std::vector<std::pair<T, std::int64_t>> e(static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < size; ++i) e[i] = {line[i], i};
    // PyTorch's mode kernel: std::sort by value alone, then the longest run of equal values;
    // of the runs of that length the first, and of its elements the last in the sorted order
    std::sort(e.begin(), e.end(),
              [](const auto& a, const auto& b) { return static_cast<K>(a.first) < static_cast<K>(b.first); });
    T mode{};
    std::int64_t mode_index = 0, run = 0, best = 0;
    for (std::int64_t i = 0; i < size; ++i) {
      ++run;
      if (i == size - 1 || static_cast<K>(e[i].first) != static_cast<K>(e[i + 1].first)) {
        if (run > best) {
          mode = e[i].first;
          mode_index = e[i].second;
          best = run;
        }
        run = 0;
      }
    }
    *value = mode;
    *index = mode_index;
  });
  if (keepdim || self.dim() == 0) return {values, indices};
  // dim dropped: the same memory, without the dim of size 1
  DimVector sizes;
  for (std::int64_t i = 0; i < values.dim(); ++i)
    if (i != d) sizes.push_back(values.sizes()[i]);
  const DimVector strides = contiguous_strides(sizes);
  return {Tensor(TensorImpl::make(values.impl()->storage_ptr(), values.dtype(), sizes, strides, 0)),
          Tensor(TensorImpl::make(indices.impl()->storage_ptr(), ScalarType::Int64, sizes, strides, 0))};
}

}  // namespace kael::native
