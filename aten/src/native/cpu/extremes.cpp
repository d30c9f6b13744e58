// amax/amin and max/min of everything, argmax/argmin and max/min along a dim (values and indices)
// on the CPU: the extremes of Note [Reduction rows], down rows and down columns.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>

#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/reduce.h"
#include "reduce_engine.h"
#include "reduce_ops.h"

namespace kael::native {

namespace {

// ---------------------------------------------------------------------------------- amax, amin

// max (Max) or min of n >= 1 values, NaN propagating, 32 bytes of C at a time (the compiler's
// vector extensions: the comparison and select compile to AVX2 instructions).
template <bool Max, typename C>
C extreme_vector(const C* x, std::int64_t n) {
  constexpr int W = 32 / sizeof(C);
  typedef C V __attribute__((vector_size(32)));
  C r = x[0];
  std::int64_t i = 0;
  if (n >= 4 * W) {
    // four independent accumulators: the compare-and-select chain's latency, not its
    // throughput, would bound one
    V m[4];
    for (int a = 0; a < 4; ++a) std::memcpy(&m[a], x, sizeof(V));
    decltype(m[0] != m[0]) nan{};
    for (; i + 4 * W <= n; i += 4 * W)
      for (int a = 0; a < 4; ++a) {
        V v;
        std::memcpy(&v, x + i + a * W, sizeof v);
        if constexpr (std::is_floating_point_v<C>) nan |= (v != v);
        m[a] = (Max ? v > m[a] : v < m[a]) ? v : m[a];
      }
    for (int j = 0; j < W; ++j) {
      if (nan[j]) {
        for (std::int64_t k = 0; k < n; ++k)
          if (is_nan(x[k])) return x[k];  // the first NaN, as a scalar walk finds it
      }
      for (int a = 0; a < 4; ++a) r = replaces<Max>(m[a][j], r) ? m[a][j] : r;
    }
  }
  for (; i < n; ++i) r = replaces<Max>(x[i], r) ? x[i] : r;
  return r;
}

template <typename T, bool Max>
struct ExtremeOp {
  using C = opmath_t<T>;
  T* out;
  C identity() const { return C(0); }  // unused: empty reductions are refused at set-up
  C run(const T* x, std::int64_t n, std::int64_t) const {
    if constexpr (std::is_same_v<T, C> && !std::is_same_v<T, bool>) {
      return extreme_vector<Max>(x, n);
    } else {
      C r = static_cast<C>(x[0]);
      for (std::int64_t i = 1; i < n; ++i) {
        const C v = static_cast<C>(x[i]);
        r = (!is_nan(r) & replaces<Max>(v, r)) ? v : r;  // the first NaN stays
      }
      return r;
    }
  }
  // b's elements follow a's: a NaN in a (the row's first) stays
  void merge(C& a, const C& b) const { a = (!is_nan(a) & replaces<Max>(b, a)) ? b : a; }
  void write(std::int64_t o, const C& a) const { out[o] = convert<T>(a); }
};

// Note [Extremes down columns]
// amax/amin over one reduced dim that lies outside the innermost kept dim, whose outputs are
// contiguous (x.amax(0) of a matrix, x.amax(1) of (B, T, C)) take the walk of Note [Columns in
// blocks] (reduce_engine.h) with one running extreme per output column; narrow rows that lie
// side by side are one run of elements, taken in lanes (extreme_run_into). The result is the one
// the rows give in any order (max and min are exact), NaN included: a column's first NaN in row
// order is kept (as extreme_vector returns a row's first NaN). Which of +0 and -0 a tie keeps is
// not fixed (neither is it in a contiguous row's lanes).

// The extreme of a and v, v after a (a NaN in a stays).
template <bool Max, typename C>
C extreme_step(C a, C v) {
  return (!is_nan(a) & replaces<Max>(v, a)) ? v : a;
}

// acc[c] = the extreme of acc[c] and x[c] (a NaN in acc stays: the first NaN in row order),
// c < n: a select the compiler vectorises.
template <bool Max, typename C, typename T>
void extreme_into(C* __restrict acc, const T* __restrict x, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) {
    const C a = acc[c], v = static_cast<C>(x[c]);
    acc[c] = (!is_nan(a) & replaces<Max>(v, a)) ? v : a;
  }
}

// The extremes of the columns of `rows` rows of `run` < kColumnLanes elements that lie side by
// side from x (one run of rows * run elements) into acc, in the lanes of step_column_block
// (reduce_engine.h). A column whose extreme is NaN then takes its first NaN in row order.

template <bool Max, typename C, typename T>
void extreme_run_into(const T* x, std::int64_t rows, std::int64_t run, C* acc) {
  const std::int64_t n = rows * run, P = run * ((kColumnLanes + run - 1) / run);
  for (std::int64_t c = 0; c < run; ++c) acc[c] = static_cast<C>(x[c]);
  std::int64_t i = run;
  if (n >= 2 * P) {
    C lanes[2 * kColumnLanes];
    for (std::int64_t j = 0; j < P; ++j) lanes[j] = static_cast<C>(x[j]);
    for (i = P; i + P <= n; i += P) extreme_into<Max>(lanes, x + i, P);
    for (std::int64_t j = run; j < P; ++j) acc[j % run] = extreme_step<Max>(acc[j % run], lanes[j]);
    for (std::int64_t c = 0; c < run; ++c) acc[c] = extreme_step<Max>(lanes[c], acc[c]);
  }
  for (; i < n; i += run) extreme_into<Max>(acc, x + i, run);
  for (std::int64_t c = 0; c < run; ++c) {
    if (!is_nan(acc[c])) continue;
    for (std::int64_t k = c; k < n; k += run) {
      if (is_nan(static_cast<C>(x[k]))) {
        acc[c] = static_cast<C>(x[k]);
        break;
      }
    }
  }
}

// A block of Note [Extremes down columns]: the extremes of `rows` rows of `run` columns from
// first (rows rs elements apart) into acc, each column's first NaN kept.
template <bool Max, typename T, typename C>
void extreme_column_block(const T* first, std::int64_t rows, std::int64_t rs, std::int64_t run, C* acc) {
  if (rs == run && run < kColumnLanes) {
    extreme_run_into<Max>(first, rows, run, acc);
    return;
  }
  for (std::int64_t c = 0; c < run; ++c) acc[c] = static_cast<C>(first[c]);
  std::int64_t r = 1;
  if (sweep_four_rows(run, sizeof(C)))  // Note [Four rows a sweep]
    for (; r + 4 <= rows; r += 4)
      sweep_four(acc, first + r * rs, rs, run, [](C a, T v) { return extreme_step<Max>(a, static_cast<C>(v)); });
  for (; r < rows; ++r) extreme_into<Max>(acc, first + r * rs, run);
}

template <typename T, bool Max>
void extreme_columns(const T* base, const RowPlan& p, T* out) {
  using C = opmath_t<T>;
  walk_column_blocks<C>(
      base, p, extreme_column_block<Max, T, C>,
      merge_blocks_in_order<C>(
          p.kept_sizes.back(), [](C* into, const C* from, std::int64_t run) { extreme_into<Max>(into, from, run); },
          [&](std::int64_t o, const C& a) { out[o] = convert<T>(a); }));
}

// ---------------------------------------------------------------------------------- argmax, max.dim

template <typename C>
struct ValueIndex {
  C value;
  std::int64_t index;
};

// Note [First extreme in blocks]
// argmax/argmin and max/min along a dim want the first position of a row's extreme (the first
// NaN when the row holds one). A walk that compares and moves an index per element runs one
// element per cycle at best; instead, for rows of C itself (every dtype but float16, bfloat16 and
// bool), the row is cut into blocks of kArgBlockBytes, each block's extreme comes from
// extreme_vector (vectors of lanes), the first block whose extreme beats every earlier one is
// kept (strictly: a later tie does not replace it; after a NaN nothing does), and that block alone
// is searched again, from L1, for the first element equal to its extreme (the first NaN when it
// is NaN; -0 == +0, so the first of tied zeros, as the walk finds it). The value reported is that
// element. The result is the walk's, index and value bits alike.
constexpr std::int64_t kArgBlockBytes = 4096;

// The position of the first element of x[0, n) equal to v (the first NaN when v is NaN); v is
// one of them. Chunks of 64 bytes are tested as a whole (a loop the compiler vectorises) before
// the elements of the one that holds it.
template <typename C>
std::int64_t first_equal(const C* x, std::int64_t n, C v) {
  constexpr std::int64_t L = std::max<std::int64_t>(1, 64 / static_cast<std::int64_t>(sizeof(C)));
  const bool nan = is_nan(v);
  std::int64_t i = 0;
  for (; i + L <= n; i += L) {
    bool hit = false;
    if (nan) {
      for (std::int64_t j = 0; j < L; ++j) hit |= x[i + j] != x[i + j];
    } else {
      for (std::int64_t j = 0; j < L; ++j) hit |= x[i + j] == v;
    }
    if (hit) break;
  }
  for (; i < n; ++i)
    if (nan ? is_nan(x[i]) : x[i] == v) return i;
  return n - 1;  // not reached: v is in x
}

// The first maximum (or minimum); the first NaN wins over every number.
template <typename T, bool Max>
struct ArgOp {
  using C = opmath_t<T>;
  T* values;  // null for argmax/argmin
  std::int64_t* indices;
  static bool better(C candidate, C best) {
    return (Max ? candidate > best : candidate < best) || (is_nan(candidate) && !is_nan(best));
  }
  ValueIndex<C> identity() const { return {C(0), 0}; }  // unused: refused at set-up
  ValueIndex<C> run(const T* x, std::int64_t n, std::int64_t k0) const {
    if constexpr (std::is_same_v<T, C> && !std::is_same_v<T, bool>) {
      // Note [First extreme in blocks]
      constexpr std::int64_t B = kArgBlockBytes / static_cast<std::int64_t>(sizeof(C));
      if (n >= 2 * B) {
        C best = x[0];
        std::int64_t block = -1;
        for (std::int64_t b = 0; b < n; b += B) {
          const C e = extreme_vector<Max>(x + b, std::min(B, n - b));
          if (block < 0 || better(e, best)) {
            best = e;
            block = b;
            if (is_nan(best)) break;  // nothing beats it
          }
        }
        const std::int64_t at = block + first_equal(x + block, std::min(B, n - block), best);
        return {x[at], k0 + at};
      }
    }
    C best = static_cast<C>(x[0]);
    std::int64_t at = 0;
    for (std::int64_t i = 1; i < n; ++i) {
      const C v = static_cast<C>(x[i]);
      if (better(v, best)) {
        best = v;
        at = i;
      }
    }
    return {best, k0 + at};
  }
  void merge(ValueIndex<C>& a, const ValueIndex<C>& b) const {
    if (better(b.value, a.value)) a = b;
  }
  void write(std::int64_t o, const ValueIndex<C>& a) const {
    if (values) values[o] = convert<T>(a.value);
    indices[o] = a.index;
  }
};

// Note [First extreme down columns]
// argmax/argmin and max/min along a dim that lies outside contiguous outputs (x.argmax(0) of a
// matrix, x.max(1) of (B, T, C)) take the walk of Note [Columns in blocks] with a running extreme
// and the row that holds it per column: a row replaces them only when its element is strictly
// better (the first NaN then stays), so each block keeps its first extreme; narrow rows that lie
// side by side go in lanes that keep their positions, and a column takes the best of its lanes,
// the earliest position among ties. Blocks merge in order with the same rule. The value reported
// is the input's element at the row found (its bits).

// The extreme of x (row r of the block) and the running one (value m, row i), as the walk along
// a row takes it: x only when strictly better, or NaN after a number.
template <bool Max, typename C>
inline bool takes(C x, C m) {
  return !is_nan(m) & replaces<Max>(x, m);
}

// The running extremes and rows of a block sweep four rows at a time above 16 KB, not above 8 KB
// as the other walks do: at 16 KB (float32, 2048 columns) the sweep ran slower than one row at a
// time, at 32 KB faster (docs/performance.md, "Figures behind kernel constants").
constexpr std::int64_t kSweepIndexBytes = 16384;

// Four rows of Note [Four rows a sweep] for N columns from x (rows rs elements apart, the first
// row r0 of the block): the running extremes m and their rows at, stepped by each row in turn.
template <bool Max, std::int64_t N, typename T, typename C>
void extreme_index_sweep(const T* x, std::int64_t rs, std::int64_t r0, C* __restrict m, std::int32_t* __restrict at) {
  C tm[N];
  std::int32_t ta[N];
  for (std::int64_t j = 0; j < N; ++j) {
    tm[j] = m[j];
    ta[j] = at[j];
  }
  for (std::int64_t k = 0; k < 4; ++k) {
    const T* __restrict row = x + k * rs;
    const auto rk = static_cast<std::int32_t>(r0 + k);
    for (std::int64_t j = 0; j < N; ++j) {
      const C v = static_cast<C>(row[j]);
      const bool take = takes<Max>(v, tm[j]);
      tm[j] = take ? v : tm[j];
      ta[j] = take ? rk : ta[j];
    }
  }
  for (std::int64_t j = 0; j < N; ++j) {
    m[j] = tm[j];
    at[j] = ta[j];
  }
}

// A block of Note [First extreme down columns]: each column's first extreme and its row within
// the block, into acc.
template <bool Max, typename T, typename C>
void extreme_index_column_block(const T* x, std::int64_t rows, std::int64_t rs, std::int64_t run, ValueIndex<C>* acc) {
  if (rs == run && run < kColumnLanes && rows * run >= 2 * kColumnLanes) {
    // narrow rows side by side: element i into lane i mod P (P a multiple of run), with its position
    const std::int64_t n = rows * run, P = run * ((kColumnLanes + run - 1) / run);
    C lv[2 * kColumnLanes];
    std::int32_t li[2 * kColumnLanes];
    for (std::int64_t j = 0; j < P; ++j) {
      lv[j] = static_cast<C>(x[j]);
      li[j] = static_cast<std::int32_t>(j);
    }
    std::int64_t i = P;
    for (; i + P <= n; i += P) {
      for (std::int64_t j = 0; j < P; ++j) {
        const C v = static_cast<C>(x[i + j]);
        const bool take = takes<Max>(v, lv[j]);
        lv[j] = take ? v : lv[j];
        li[j] = take ? static_cast<std::int32_t>(i + j) : li[j];
      }
    }
    for (std::int64_t j = 0; i + j < n; ++j) {  // whole rows: lane j holds column j mod run
      const C v = static_cast<C>(x[i + j]);
      if (takes<Max>(v, lv[j])) {
        lv[j] = v;
        li[j] = static_cast<std::int32_t>(i + j);
      }
    }
    for (std::int64_t c = 0; c < run; ++c) {
      C m = lv[c];
      std::int32_t at = li[c];
      for (std::int64_t j = c + run; j < P; j += run) {
        // the better lane, or among ties (neither better) the earlier position
        if (takes<Max>(lv[j], m) || (!takes<Max>(m, lv[j]) && li[j] < at)) {
          m = lv[j];
          at = li[j];
        }
      }
      acc[c] = {m, at / run};
    }
    return;
  }
  // (rows of a block index in 32 bits; narrow runs on the stack, wider ones in a buffer per call,
  // small beside the block of at least 256 rows it serves; not std::vector: C may be bool)
  constexpr std::int64_t kOnStack = 256;
  C stack_values[kOnStack];
  std::int32_t stack_rows[kOnStack];
  std::unique_ptr<C[]> heap_values;
  std::unique_ptr<std::int32_t[]> heap_rows;
  if (run > kOnStack) {
    heap_values = std::make_unique_for_overwrite<C[]>(static_cast<std::size_t>(run));
    heap_rows = std::make_unique_for_overwrite<std::int32_t[]>(static_cast<std::size_t>(run));
  }
  C* __restrict m = run > kOnStack ? heap_values.get() : stack_values;
  std::int32_t* __restrict at = run > kOnStack ? heap_rows.get() : stack_rows;
  for (std::int64_t c = 0; c < run; ++c) {
    m[c] = static_cast<C>(x[c]);
    at[c] = 0;
  }
  std::int64_t r = 1;
  if (sweep_four_rows(run, sizeof(C) + sizeof(std::int32_t), kSweepIndexBytes)) {
    // Note [Four rows a sweep], with a running extreme and its row per column
    for (; r + 4 <= rows; r += 4) {
      std::int64_t c = 0;
      for (; c + kSweepTile <= run; c += kSweepTile)
        extreme_index_sweep<Max, kSweepTile>(x + r * rs + c, rs, r, m + c, at + c);
      for (; c < run; ++c) extreme_index_sweep<Max, 1>(x + r * rs + c, rs, r, m + c, at + c);
    }
  }
  for (; r < rows; ++r) {
    const T* __restrict row = x + r * rs;
    for (std::int64_t c = 0; c < run; ++c) {
      const C v = static_cast<C>(row[c]);
      const bool take = takes<Max>(v, m[c]);
      m[c] = take ? v : m[c];
      at[c] = take ? static_cast<std::int32_t>(r) : at[c];
    }
  }
  for (std::int64_t c = 0; c < run; ++c) acc[c] = {m[c], at[c]};
}

template <typename T, bool Max>
void extreme_index_columns(const T* base, const RowPlan& p, T* values, std::int64_t* indices) {
  using C = opmath_t<T>;
  const std::int64_t rs = p.red_strides[0], run = p.kept_sizes.back();
  walk_column_blocks<ValueIndex<C>>(
      base, p, extreme_index_column_block<Max, T, C>,
      [&](std::int64_t slab, ValueIndex<C>* part, std::int64_t nblocks, std::int64_t block_rows) {
        for (std::int64_t b = 1; b < nblocks; ++b) {
          for (std::int64_t c = 0; c < run; ++c) {
            const ValueIndex<C>& later = part[b * run + c];
            if (takes<Max>(later.value, part[c].value)) part[c] = {later.value, b * block_rows + later.index};
          }
        }
        StridedWalk kept(p.kept_sizes, p.kept_strides);
        kept.seek(slab * run);
        const T* const x = base + kept.offset;
        for (std::int64_t c = 0; c < run; ++c) {
          const std::int64_t r = part[c].index;
          if (values) values[slab * run + c] = x[r * rs + c];
          indices[slab * run + c] = r;
        }
      });
}

// The first maximum (max) or minimum of each row of x: indices, and values unless null (argmax/
// argmin and max/min along a dim).
template <typename T>
void first_extremes(const Tensor& x, const RowPlan& p, bool max, T* values, std::int64_t* indices) {
  if (columns_apply(p)) {  // Note [First extreme down columns]
    if (max) {
      extreme_index_columns<T, true>(x.data<T>(), p, values, indices);
    } else {
      extreme_index_columns<T, false>(x.data<T>(), p, values, indices);
    }
  } else if (max) {
    reduce_rows<T>(x, p, ArgOp<T, true>{values, indices});
  } else {
    reduce_rows<T>(x, p, ArgOp<T, false>{values, indices});
  }
}

// amax/amin/max/min: dims, the empty check, the loop.
Tensor extreme(const char* op, const Tensor& self, ReduceDims dims, bool dim_given, bool max) {
  check_nonempty_reduction(op, self, dims, dim_given, NoDimError::Runtime);
  ReduceSetup s = setup_reduction(self, std::move(dims), self.dtype(), self.dtype());
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (columns_apply(p)) {  // Note [Extremes down columns]
        if (max) {
          extreme_columns<T, true>(x.data<T>(), p, s.out.data<T>());
        } else {
          extreme_columns<T, false>(x.data<T>(), p, s.out.data<T>());
        }
      } else if (max) {
        reduce_rows<T>(x, p, ExtremeOp<T, true>{s.out.data<T>()});
      } else {
        reduce_rows<T>(x, p, ExtremeOp<T, false>{s.out.data<T>()});
      }
    });
  });
  return s.out;
}

Tensor arg_extreme(const char* op, const Tensor& self, std::optional<std::int64_t> dim, bool keepdim, bool max) {
  KAEL_CHECK(self.dtype() != ScalarType::Bool, op << ": does not support bool input");
  ReduceDims dims = reduce_dim(op, self, dim, keepdim);
  check_nonempty_reduction(op, self, dims, dim.has_value(), NoDimError::Index);
  ReduceSetup s = setup_reduction(self, std::move(dims), self.dtype(), ScalarType::Int64);
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      first_extremes<T>(x, p, max, nullptr, s.out.data<std::int64_t>());
    });
  });
  return s.out;
}

}  // namespace

Tensor amax_cpu(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return extreme("amax", self, reduce_dims("amax", self, dim, keepdim), !dim.empty(), true);
}

Tensor amin_cpu(const Tensor& self, IntArrayRef dim, bool keepdim) {
  return extreme("amin", self, reduce_dims("amin", self, dim, keepdim), !dim.empty(), false);
}

Tensor max_cpu(const Tensor& self) { return extreme("max", self, reduce_dims("max", self, std::nullopt, false), false, true); }

Tensor min_cpu(const Tensor& self) { return extreme("min", self, reduce_dims("min", self, std::nullopt, false), false, false); }

Tensor argmax_cpu(const Tensor& self, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_extreme("argmax", self, dim, keepdim, true);
}

Tensor argmin_cpu(const Tensor& self, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_extreme("argmin", self, dim, keepdim, false);
}

namespace {
// Values and indices of the first maximum (minimum) along dim: the kernel of max.dim / min.dim.
std::tuple<Tensor, Tensor> max_min_dim(const char* op, const Tensor& self, std::int64_t dim, bool keepdim, bool max) {
  const std::int64_t d[] = {dim};
  ReduceDims dims = reduce_dims(op, self, IntArrayRef(d), keepdim);
  check_nonempty_reduction(op, self, dims, true, NoDimError::Index);
  ReduceSetup s = setup_reduction(self, std::move(dims), self.dtype(), self.dtype(), /*with_indices=*/true);
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      first_extremes<T>(x, p, max, s.out.data<T>(), s.indices.data<std::int64_t>());
    });
  });
  return {s.out, s.indices};
}
}  // namespace

std::tuple<Tensor, Tensor> max_dim_cpu(const Tensor& self, std::int64_t dim, bool keepdim) {
  return max_min_dim("max", self, dim, keepdim, true);
}

std::tuple<Tensor, Tensor> min_dim_cpu(const Tensor& self, std::int64_t dim, bool keepdim) {
  return max_min_dim("min", self, dim, keepdim, false);
}

}  // namespace kael::native
