// Sorting along one dim on the CPU: sort, argsort and topk.
//
// x: any shape and strides; values, indices: x's shape (topk: dim's size replaced by k),
// contiguous; indices are int64 positions along dim. Each line along dim is copied into
// (key, position) pairs, ordered, and written back; lines are spread over threads
// (reduce_engine.h). NaN orders above every number, as in PyTorch (last when ascending, first
// when descending).
//
// Note [Sort order of ties]
// sort is always stable: equal keys keep their order along dim, with stable=False too. PyTorch's
// stable=True gives the same order; its stable=False order of ties depends on which kernel it
// picks (x86-simd-sort for int32/int64/float32/float64, std::sort otherwise), so only its values
// are comparable. topk selects as PyTorch's CPU kernel does (libstdc++'s partial_sort of
// (key, position) pairs when k * 64 <= n, otherwise nth_element and a sort of the first k - 1),
// with the same NaN-aware comparison, so ties pick PyTorch's positions.
#include <algorithm>
#include <limits>
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

// a orders before b: ascending with NaN last, or descending with NaN first.
template <typename K, bool Descending>
struct KeyLess {
  template <typename P>
  bool operator()(const P& a, const P& b) const {
    if constexpr (Descending) {
      return (is_nan(a.first) && !is_nan(b.first)) || a.first > b.first;
    } else {
      return (!is_nan(a.first) && is_nan(b.first)) || a.first < b.first;
    }
  }
};

// The key type of T: the compute type (float for float16/bfloat16; converting back is exact).
template <typename T>
using key_t = opmath_t<T>;

// Sorts the lines of s.input into s.out and s.indices (either may be undefined: argsort).
void sort_lines(const Tensor& x, std::int64_t dim, const Tensor& values, const Tensor& indices, bool descending) {
  const LinePlan in = make_line_plan(x, x.dim() == 0 ? 0 : dim);
  const LinePlan out = make_line_plan(indices, indices.dim() == 0 ? 0 : dim);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = key_t<T>;
    using Pair = std::pair<K, std::int64_t>;
    const T* xd = x.data<T>();
    T* vd = values.defined() ? values.data<T>() : nullptr;
    std::int64_t* id = indices.data<std::int64_t>();
    const std::int64_t n = in.length, xs = in.stride, os = out.stride;
    // the cost estimate saturates: a line of an empty tensor may be 2^61 long (shape (0, 2^61))
    const std::int64_t cost = n > std::numeric_limits<std::int64_t>::max() / 8 ? n : n * 8;
    for_each_line(in, out, cost, [&](std::int64_t, std::int64_t x_offset, std::int64_t out_offset) {
      std::vector<Pair> line(static_cast<std::size_t>(n));
      for (std::int64_t k = 0; k < n; ++k) line[k] = {static_cast<K>(xd[x_offset + k * xs]), k};
      if (descending) {
        std::stable_sort(line.begin(), line.end(), KeyLess<K, true>{});
      } else {
        std::stable_sort(line.begin(), line.end(), KeyLess<K, false>{});
      }
      for (std::int64_t k = 0; k < n; ++k) {
        if (vd) vd[out_offset + k * os] = convert<T>(line[k].first);
        id[out_offset + k * os] = line[k].second;
      }
    });
  });
}

template <typename F>
void run_unlocked(LineSetup& s, F&& loop) {
  UnlockedSection section;
  if (section.active()) s.input = section.own(s.input);
  section.unlock();
  loop();
}

}  // namespace

std::tuple<Tensor, Tensor> sort_cpu(const Tensor& self, std::int64_t dim, bool descending, std::optional<bool> stable) {
  (void)stable;  // sort is always stable (Note [Sort order of ties])
  LineSetup s = setup_lines("sort", self, dim, self.dtype(), self.dtype(), /*with_indices=*/true);
  run_unlocked(s, [&] { sort_lines(s.input, s.dim, s.out, s.indices, descending); });
  return {s.out, s.indices};
}

Tensor argsort_cpu(const Tensor& self, std::int64_t dim, bool descending, bool stable) {
  (void)stable;  // sort is always stable (Note [Sort order of ties])
  LineSetup s = setup_lines("argsort", self, dim, self.dtype(), ScalarType::Int64, /*with_indices=*/false);
  run_unlocked(s, [&] { sort_lines(s.input, s.dim, Tensor(), s.out, descending); });
  return s.out;
}

std::tuple<Tensor, Tensor> topk_cpu(const Tensor& self, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  KAEL_CHECK(self.dtype() != ScalarType::Bool, "topk: does not support bool dtypes on CPU");
  const std::int64_t w = wrap_dim("topk", dim, self.dim());
  const std::int64_t n = self.dim() == 0 ? 1 : self.sizes()[w];
  KAEL_CHECK(k >= 0 && k <= n, "topk: selected index k out of range (k = " << k << ", size of dim " << w
                                                                           << " is " << n << ")");
  LineSetup s = setup_lines("topk", self, dim, self.dtype(), self.dtype(), /*with_indices=*/true, k);
  // A 0-d input gives a 0-d result holding its element, for k = 0 too (as PyTorch).
  if (self.dim() == 0) k = 1;
  run_unlocked(s, [&] {
    const Tensor& x = s.input;
    const LinePlan in = make_line_plan(x, x.dim() == 0 ? 0 : s.dim);
    const LinePlan out = make_line_plan(s.out, s.out.dim() == 0 ? 0 : s.dim);
    if (k == 0) return;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using K = key_t<T>;
      using Pair = std::pair<K, std::int64_t>;
      const T* xd = x.data<T>();
      T* vd = s.out.data<T>();
      std::int64_t* id = s.indices.data<std::int64_t>();
      const std::int64_t xs = in.stride, os = out.stride;
      const std::int64_t cost = n > std::numeric_limits<std::int64_t>::max() / 4 ? n : n * 4;  // saturates
      for_each_line(in, out, cost, [&](std::int64_t, std::int64_t x_offset, std::int64_t out_offset) {
        std::vector<Pair> q(static_cast<std::size_t>(n));
        for (std::int64_t j = 0; j < n; ++j) q[j] = {static_cast<K>(xd[x_offset + j * xs]), j};
        auto select = [&](auto less) {
          if (k * 64 <= n) {
            std::partial_sort(q.begin(), q.begin() + k, q.end(), less);
          } else {
            std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), less);
            if (sorted) std::sort(q.begin(), q.begin() + (k - 1), less);
          }
        };
        if (largest) {
          select(KeyLess<K, true>{});
        } else {
          select(KeyLess<K, false>{});
        }
        for (std::int64_t j = 0; j < k; ++j) {
          vd[out_offset + j * os] = convert<T>(q[j].first);
          id[out_offset + j * os] = q[j].second;
        }
      });
    });
  });
  return {s.out, s.indices};
}

}  // namespace kael::native
