// Reductions over dims on the CPU: prod, amax/amin (and max/min of everything), all/any, norm,
// logsumexp, var/std, argmax/argmin and max/min along a dim (values and indices).
//
// x: any shape and strides; out: x's shape with the reduced dims removed (or kept as 1),
// contiguous. Each kernel supplies the per-row operations of Note [Reduction rows]
// (reduce_engine.h), which owns the walk, the threading and its determinism. Accumulators:
// double for float32/float64 (as sum's, docs/decisions.md "float32 sums"), float for
// float16/bfloat16, wrapping uint64 for integers.
#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <tuple>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"
#include "kael/native/vec_math.h"
#include "nn_kernels.h"
#include "reduce_engine.h"

namespace kael::native {

namespace {

constexpr int kLanes = 8;  // independent accumulators, so the compiler vectorises the row loops

template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

// The accumulator of sums and products of T (see the file comment).
template <typename T>
using sum_acc_t = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double,
                                     std::conditional_t<is_reduced_floating_v<T>, float, std::uint64_t>>;

template <typename Acc, typename T>
Acc to_acc(T v) {
  if constexpr (std::is_same_v<Acc, std::uint64_t>) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));  // two's complement: products wrap
  } else {
    return static_cast<Acc>(static_cast<opmath_t<T>>(v));
  }
}

// Runs the loop of a set-up reduction on the call's own input (Note [Concurrency] in
// kael/core/concurrency.h); the outputs are new, no other thread sees them yet.
template <typename F>
void run_reduction(ReduceSetup& s, F&& loop) {
  UnlockedSection section;
  if (section.active()) s.input = section.own(s.input);
  section.unlock();
  const RowPlan plan = make_row_plan(s.input, s.dims.reduced);
  // no outputs (x of shape (7, 0, 3) reduced over dim 0): nothing to write, and the loops' walks
  // (which divide by the output's sizes) must not run
  if (plan.outputs == 0) return;
  loop(s.input, plan);
}

// ---------------------------------------------------------------------------------- prod

template <typename T>
struct ProdOp {
  using Acc = sum_acc_t<T>;
  T* out;
  Acc identity() const { return Acc(1); }
  Acc run(const T* x, std::int64_t n, std::int64_t) const {
    Acc lanes[kLanes];
    for (Acc& l : lanes) l = Acc(1);
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] *= to_acc<Acc>(x[i + j]);
    Acc r = Acc(1);
    for (; i < n; ++i) r *= to_acc<Acc>(x[i]);
    for (const Acc& l : lanes) r *= l;
    return r;
  }
  Acc step(Acc a, T v) const { return a * to_acc<Acc>(v); }  // Note [Columns in blocks]
  void merge(Acc& a, const Acc& b) const { a *= b; }
  void write(std::int64_t o, const Acc& a) const { out[o] = convert<T>(a); }
};

// ---------------------------------------------------------------------------------- amax, amin

// The larger (Max) or smaller of two values, NaN winning: NaN propagates as in PyTorch.
template <bool Max, typename C>
bool replaces(C candidate, C current) {
  // `|`, not `||`: no branch, so the row loops vectorise
  return (Max ? candidate > current : candidate < current) | is_nan(candidate);
}

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

// ---------------------------------------------------------------------------------- all, any

template <typename T>
bool truth(T v) {
  return static_cast<opmath_t<T>>(v) != opmath_t<T>(0);  // NaN is true
}

template <typename T, typename O, bool All>
struct LogicalOp {
  // (a byte of 0 or 1, not bool: loops of bytes vectorise where loops of bool do not)
  using Acc = unsigned char;
  O* out;
  Acc identity() const { return All ? 1 : 0; }
  Acc run(const T* x, std::int64_t n, std::int64_t) const {
    Acc r = identity();
    for (std::int64_t i = 0; i < n; ++i) r = step(r, x[i]);
    return r;
  }
  Acc step(Acc a, T v) const {  // (also Note [Columns in blocks])
    const auto t = static_cast<Acc>(truth(v));
    return All ? static_cast<Acc>(a & t) : static_cast<Acc>(a | t);
  }
  void merge(Acc& a, const Acc& b) const { a = All ? static_cast<Acc>(a & b) : static_cast<Acc>(a | b); }
  void write(std::int64_t o, const Acc& a) const { out[o] = static_cast<O>(a != 0); }
};

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
// time (AMD Zen 4, x.argmax(0) of (8192, 2048): 4.1-5.6 ms against 3.0-4.4; of (4096, 4096),
// 32 KB: 4.1-4.5 against 7.2-8.4).
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

// ---------------------------------------------------------------------------------- norm

enum class NormKind { Count, Abs, Square, Power };

// Sums f(|x|) over the row and finishes: count of non-zeros (p = 0), sum |x| (1), sqrt of the sum
// of squares (2), (sum |x|^p)^(1/p) otherwise.
template <typename T, NormKind Kind>
struct SumNormOp {
  using Acc = sum_acc_t<T>;
  T* out;
  double p;
  Acc identity() const { return Acc(0); }
  Acc term(T v) const {
    const Acc a = static_cast<Acc>(static_cast<opmath_t<T>>(v));
    if constexpr (Kind == NormKind::Count) {
      return a != Acc(0) ? Acc(1) : Acc(0);  // NaN counts
    } else if constexpr (Kind == NormKind::Abs) {
      return std::abs(a);
    } else if constexpr (Kind == NormKind::Square) {
      return a * a;
    } else {
      return static_cast<Acc>(std::pow(std::abs(static_cast<double>(a)), p));
    }
  }
  Acc run(const T* x, std::int64_t n, std::int64_t) const {
    Acc lanes[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += term(x[i + j]);
    Acc r = 0;
    for (; i < n; ++i) r += term(x[i]);
    for (const Acc& l : lanes) r += l;
    return r;
  }
  Acc step(Acc a, T v) const { return a + term(v); }  // Note [Columns in blocks]
  void merge(Acc& a, const Acc& b) const { a += b; }
  void write(std::int64_t o, const Acc& a) const {
    if constexpr (Kind == NormKind::Square) {
      out[o] = convert<T>(std::sqrt(a));
    } else if constexpr (Kind == NormKind::Power) {
      out[o] = convert<T>(static_cast<Acc>(std::pow(static_cast<double>(a), 1.0 / p)));
    } else {
      out[o] = convert<T>(a);
    }
  }
};

// max |x| (p = inf) or min |x| (p = -inf), NaN propagating.
template <typename T, bool Max>
struct ExtremeAbsOp {
  using C = opmath_t<T>;
  T* out;
  // (a reduction of no elements is refused at set-up; this one starts Note [Columns in blocks])
  C identity() const { return Max ? C(0) : std::numeric_limits<C>::infinity(); }
  C run(const T* x, std::int64_t n, std::int64_t) const {
    C r = std::abs(static_cast<C>(x[0]));
    for (std::int64_t i = 1; i < n; ++i) {
      const C v = std::abs(static_cast<C>(x[i]));
      r = replaces<Max>(v, r) ? v : r;
    }
    return r;
  }
  C step(C a, T v) const {  // Note [Columns in blocks]
    const C u = std::abs(static_cast<C>(v));
    return replaces<Max>(u, a) ? u : a;
  }
  void merge(C& a, const C& b) const { a = replaces<Max>(b, a) ? b : a; }
  void write(std::int64_t o, const C& a) const { out[o] = convert<T>(a); }
};

// ---------------------------------------------------------------------------------- logsumexp

// Note [logsumexp in one pass]
// PyTorch computes log(sum(exp(x - m))) + m with m = max(x) (m taken as 0 when infinite) in four
// passes over memory (amax, subtract, exp, sum). Here each row is read from memory once, in
// blocks of kLseBlock elements, into a state (m, s) that stands for sum(exp(x)) = s * exp(m):
// m a reference max (at least the max of the terms so far, up to kLseMargin below it while a
// block is summed), s in double. float32 (float16 and bfloat16 converted to it a block at a time)
// runs in the widest vectors the build targets (16 lanes with AVX-512, 8 with AVX2 + FMA), with
// per-lane maxima and sums and one horizontal step per block:
//   - one pass: a block's max and its sum of exp(x - m) are computed together against the
//     state's m (seeded with the max of the row's first 4 vectors), the terms as exp(x - M L)
//     for a reference M L within half a table step of m (LseRef: no subtraction per element)
//     and the sum then scaled by exp(M L - m); when the block's max bm is finite and at most
//     kLseMargin above m, the sum is kept and, if bm > m, rescaled to bm;
//     loads are prefetched ahead where the CPU gains from it (Note [Prefetching pointwise
//     loops]), since each starts a long chain of work;
//   - else (the first block of a short row, a block of -inf, an infinite max, a steep rise) two
//     passes, the second from L1: the block's max, which raises m (rescaling s by
//     exp(m_old - m_new) once), then the sum of exp(x - m) with every term at most 1.
// float64 (and float32 in a build without AVX2) takes the two passes in loops of independent
// lanes with vmath::exp. Special values as in PyTorch: NaN anywhere makes the result NaN, else
// +inf makes it +inf; a row of -inf (or an empty one) gives -inf. The max skips NaN and the sum
// propagates it, so a NaN in a block with a finite max shows as a NaN block sum; only blocks whose
// max is infinite (and blocks after a +inf) are scanned for NaN separately.
//
// The float32 terms use lse_exp: 2^(j / 16) from a table and a degree-3 polynomial with AVX-512,
// else a degree-5 polynomial (relative error per term at most 2.0e-7 for d >= -8, where the terms
// that make a sum lie, and 4e-7 down to -87, measured over every float32 d for both forms; so the
// sum's relative error and the result's absolute error stay below 2e-7 plus the rounding of the
// additions); differences x - M L (or x - m) below -87 count as -87, a term of at most 2^-125
// where the true one is smaller, and every row's sum holds a term of at least 1 (its largest
// element's) once rescaled, so those terms change a result by less than n 2^-124 relative.
// Chunks of a long row (Note [Reduction rows]) are cut by the shape alone, so results are the
// same bits on any number of threads.
constexpr std::int64_t kLseBlock = 4096;

template <typename C>
struct LseState {
  C m;       // max so far (-inf: no term yet; NaN or +inf: the result)
  double s;  // sum of exp(x - m)
};

template <typename C>
void lse_merge(LseState<C>& a, const LseState<C>& b) {
  if (is_nan(a.m) || is_nan(b.m)) {
    a = {std::numeric_limits<C>::quiet_NaN(), 1.0};
  } else if (a.m == std::numeric_limits<C>::infinity() || b.m == std::numeric_limits<C>::infinity()) {
    a = {std::numeric_limits<C>::infinity(), 1.0};
  } else if (b.m > a.m) {
    a = {b.m, a.s * std::exp(static_cast<double>(a.m) - static_cast<double>(b.m)) + b.s};
  } else if (b.m != -std::numeric_limits<C>::infinity()) {
    a.s += b.s * std::exp(static_cast<double>(b.m) - static_cast<double>(a.m));
  }
}

// The state of a block whose max bm is infinite, or that follows a +inf: NaN if the block holds
// one, else +inf where bm or the state is +inf; a block of -inf adds nothing.
template <typename C>
void lse_infinite_block(const C* x, std::int64_t n, C bm, LseState<C>& st) {
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) nan |= x[i] != x[i];
  if (nan) {
    st = {std::numeric_limits<C>::quiet_NaN(), 1.0};
  } else if (bm == std::numeric_limits<C>::infinity() || st.m == std::numeric_limits<C>::infinity()) {
    st = {std::numeric_limits<C>::infinity(), 1.0};
  }
}

// Raises the state's max to bm (finite) if it is larger, rescaling the sum.
template <typename C>
void lse_raise(LseState<C>& st, C bm) {
  if (bm > st.m) {
    st.s *= std::exp(static_cast<double>(st.m) - static_cast<double>(bm));  // 0 when st.m is -inf
    st.m = bm;
  }
}

// Adds a block of n values of C to the state: any C, in loops of independent lanes that the
// compiler vectorises.
template <typename C>
void lse_block(const C* x, std::int64_t n, LseState<C>& st) {
  constexpr C kInf = std::numeric_limits<C>::infinity();
  if (is_nan(st.m)) return;  // the result is NaN already
  C lanes[kLanes];
  for (C& l : lanes) l = -kInf;
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];  // skips NaN
  C bm = -kInf;
  for (; i < n; ++i) bm = x[i] > bm ? x[i] : bm;
  for (const C& l : lanes) bm = l > bm ? l : bm;
  if (!(bm > -kInf && bm < kInf) || st.m == kInf) {
    lse_infinite_block(x, n, bm, st);
    return;
  }
  lse_raise(st, bm);
  const C m = st.m;
  C sums[kLanes] = {};
  i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) sums[j] += vmath::exp(x[i + j] - m);
  double total = 0;
  for (; i < n; ++i) total += static_cast<double>(vmath::exp(x[i] - m));
  for (const C& l : sums) total += static_cast<double>(l);
  if (total != total) {
    st = {std::numeric_limits<C>::quiet_NaN(), 1.0};  // a NaN in the block
  } else {
    st.s += total;
  }
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define KAEL_LSE_SIMD 1
// float32 vectors of the widest kind the build targets.
struct LseVec {
#if defined(__AVX512F__)
  using V = __m512;
  static constexpr int kWidth = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V set(float v) { return _mm512_set1_ps(v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
#else
  using V = __m256;
  static constexpr int kWidth = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V set(float v) { return _mm256_set1_ps(v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
#endif
  // (in the compiler's vector extensions: GCC 12's _mm512_max_ps and _mm512_slli_epi32 warn)
  using I = std::uint32_t __attribute__((vector_size(sizeof(V))));  // unsigned: shifts wrap by design
  static V max(V a, V b) { return a > b ? a : b; }  // b when either is NaN
  static V shift_exponent(V t) { return reinterpret_cast<V>(reinterpret_cast<I>(t) << 23); }
};

// The terms of a block sum (Note [logsumexp in one pass]) as lse_exp(v, ref) = exp(v - ref.m), with
// ref.m = M L: L the float32 ln2 of the reduction, M a whole number of the table's steps. v log2e
// is rounded to a step relative to M in t = v log2e + (kLseShift - M), so no term needs the
// subtraction v - m: on AMD Zen 4 one 512-bit operation fewer of 13 per 16 floats, 7.0-7.2 ->
// 7.9-8.1 G elements/s in L1 (tools/bench/lse_probe.cpp). r = v - (t - (kLseShift - M)) L is
// the reduced argument relative to M L, rounded once (more exact than reducing v - m, itself a
// rounded difference). A difference v - M L below -87 is taken as -87 (the clamp ref.lo keeps the
// scale a normal float), NaN gives NaN. For |m| <= kLseDirect, M L lies within half a step of the
// state's max m, kLseShift - M is exact, and the rounding of v log2e moves r by at most 1e-4 L;
// beyond it (and in the two-pass sums) the terms are exp((v - m) - 0 L), with M = 0.
struct LseRef {
  LseVec::V lo;  // M L - 87
  LseVec::V c;   // kLseShift - M
  double m;      // M L
};
constexpr float kLseLn2 = 0x1.62e430p-1f;  // L
constexpr float kLseDirect = 4096.0f;

#if defined(__AVX512F__)
// With AVX-512, in sixteenths of ln2: d = v - M L = (k / 16) ln2 + r, k = 16 q + j, |r| <= ln2 /
// 32 (one constant for ln2: the error (k / 16) 2e-9 of r is below 3e-8 for the terms that matter,
// those of k / 16 >= -12); exp(d) = 2^q 2^(j / 16) e^r with 2^(j / 16) from a 16-entry table by one
// permute and e^r = 1 + r + r^2 / 2 + r^3 / 6 (error 9e-9). On AMD Zen 4 the loop is bound by its
// FMA pipe; this takes 6 operations there where a degree-5 polynomial over |r| <= ln2 / 2 and a
// vscalefps took 8 (7.0 -> 7.5 G elements/s on data in cache, one block at a time), with the same
// accuracy (above).
//   t = v log2e + 1.5 2^19 - M rounds d log2e to sixteenths: t's bits are those of 1.5 2^19 plus
//   k, so t's low 4 bits are j, and t's bits shifted left by 19 are q << 23 plus j << 19. The table
//   holds the bits of 2^(j / 16) less j << 19: adding the two gives the bits of 2^(q + j / 16),
//   a normal float for every q >= -126 (d >= -87 gives q >= -126).
alignas(64) inline constexpr std::array<std::uint32_t, 16> kLseExp2Sixteenths = [] {
  // the bits of 2^(j / 16) rounded to float (tools/fit_math_poly.py prints them)
  constexpr std::uint32_t kBits[16] = {0x3f800000, 0x3f85aac3, 0x3f8b95c2, 0x3f91c3d3, 0x3f9837f0, 0x3f9ef532,
                                       0x3fa5fed7, 0x3fad583f, 0x3fb504f3, 0x3fbd08a4, 0x3fc5672a, 0x3fce248c,
                                       0x3fd744fd, 0x3fe0ccdf, 0x3feac0c7, 0x3ff5257d};
  std::array<std::uint32_t, 16> t{};
  for (std::uint32_t j = 0; j < 16; ++j) t[j] = kBits[j] - (j << 19);
  return t;
}();

constexpr float kLseShift = 0x1.8p19f;  // t = v log2e + kLseShift - M rounds to a sixteenth
constexpr double kLseStep = 16.0;        // M counts sixteenths of ln2

inline LseVec::V lse_exp(LseVec::V v, const LseRef& ref) {
  using V = LseVec;
  // One vmaxps (NaN in v stays: the second operand is returned when either is NaN); written
  // with a mask as GCC 12's _mm512_max_ps warns. V::max's select compiles to a compare and a
  // masked move here (1 thread, AMD Zen 4: 22 -> 24 GB/s at 16M floats, throughput.py).
  v = _mm512_mask_max_ps(ref.lo, static_cast<__mmask16>(0xffff), ref.lo, v);
  const V::V t = V::fma(v, V::set(0x1.715476p+0f), ref.c);
  const V::V k16 = V::sub(t, ref.c);  // (M + k) / 16
  const V::V r = V::fma(k16, V::set(-kLseLn2), v);
  V::V p = V::fma(V::set(0x1.555556p-3f), r, V::set(0.5f));
  p = V::fma(p, r, V::set(1.0f));
  p = V::fma(p, r, V::set(1.0f));
  // (the permute in its masked form, the shift and add in the compiler's vector extensions: GCC
  // 12's _mm512_permutexvar_epi32 and _mm512_slli_epi32 warn where inlined; unsigned lanes, as
  // the sum wraps modulo 2^32 by design)
  const __m512i table = _mm512_load_si512(kLseExp2Sixteenths.data());
  const __m512i ti = _mm512_castps_si512(t);
  const V::I scale = reinterpret_cast<V::I>(_mm512_mask_permutexvar_epi32(table, static_cast<__mmask16>(0xffff), ti, table)) +
                     (reinterpret_cast<V::I>(ti) << 19);
  return V::mul(reinterpret_cast<V::V>(scale), p);
}
#else
// d = v - M L = k ln2 + r with one constant for ln2 (the error k 2e-9 of r is below 3e-8 for the
// terms that matter, those of k >= -12), e^r by a degree-5 polynomial (relative error 1.7e-7),
// scaled by 2^k through the bits of t.
constexpr float kLseShift = 0x1.8p23f + 127.0f;  // t = v log2e + kLseShift - M rounds to an integer
constexpr double kLseStep = 1.0;                  // M counts ln2s

inline LseVec::V lse_exp(LseVec::V v, const LseRef& ref) {
  using V = LseVec;
  v = V::max(ref.lo, v);  // NaN stays NaN
  const V::V t = V::fma(v, V::set(0x1.715476p+0f), ref.c);  // bits: 0x1.8p23's + 127 + k
  const V::V k = V::sub(t, ref.c);                          // M + k
  const V::V r = V::fma(k, V::set(-kLseLn2), v);
  V::V p = V::fma(V::set(0x1.0eab2cp-7f), r, V::set(0x1.5745bap-5f));
  p = V::fma(p, r, V::set(0x1.555d3ap-3f));
  p = V::fma(p, r, V::set(0x1.fffda8p-2f));
  p = V::fma(p, r, V::set(0x1.fffff0p-1f));
  p = V::fma(p, r, V::set(1.0f));
  return V::mul(p, V::shift_exponent(t));  // 2^k: (127 + k) in the exponent field
}
#endif

// The reference for a state's max m: M = m log2e rounded to the table's step (|m| <= kLseDirect).
inline LseRef lse_ref(double M) {
  const double mref = M * static_cast<double>(kLseLn2);
  return {LseVec::set(static_cast<float>(mref - 87.0)), LseVec::set(static_cast<float>(kLseShift - M)), mref};
}
inline LseRef lse_ref_near(float m) {
  return lse_ref(std::nearbyint(static_cast<double>(m) * std::numbers::log2e * kLseStep) / kLseStep);
}

// exp(d) for differences d = x - m (M = 0).
inline LseVec::V lse_exp(LseVec::V d) { return lse_exp(d, lse_ref(0.0)); }

// exp(y) for |y| <= ln2 / 2 (the step between a reference M L and m) in double: Taylor to y^10,
// relative error below 3e-13.
inline double lse_exp_small(double y) {
  double p = 1.0 / 3628800.0;
  for (const double c : {1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0,
                         1.0 / 6.0, 0.5, 1.0, 1.0})
    p = p * y + c;
  return p;
}

// How far a block's max may exceed the reference max of its one-pass sum (e^8 times 4096 terms
// stays far from float's range, and d log2e <= 12 keeps lse_exp's reduction exact enough).
constexpr float kLseMargin = 8.0f;
constexpr std::int64_t kLsePrefetch = 2048;  // elements (8 KB: the streaming rate of 16M floats at 1 thread reaches the rate in cache)

// The largest of v's lanes.
inline float lse_hmax(LseVec::V v) {
  alignas(64) float lanes[LseVec::kWidth];
  LseVec::store(lanes, v);
  float m = lanes[0];
  for (const float l : lanes) m = l > m ? l : m;
  return m;
}

inline double lse_hsum(LseVec::V v) {
  alignas(64) float lanes[LseVec::kWidth];
  LseVec::store(lanes, v);
  double s = 0;
  for (const float l : lanes) s += static_cast<double>(l);
  return s;
}

// One pass over a block (Note [logsumexp in one pass]): its max, and its sum of exp(x - m) relative
// to the state's max m, taken with the terms' reference at M L (kDirect) or at m.
template <bool kDirect>
inline void lse_one_pass_f32(const float* x, std::int64_t n, float m, float& block_max, double& block_sum) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const LseRef ref = kDirect ? lse_ref_near(m) : lse_ref(0.0);
  const V::V mv = V::set(m);
  const auto term = [&](V::V v) { return kDirect ? lse_exp(v, ref) : lse_exp(V::sub(v, mv), ref); };
  V::V m0 = V::set(-kInf), m1 = m0, m2 = m0, m3 = m0;
  V::V a0 = V::set(0.0f), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  const bool prefetch = prefetch_streams();
  for (; i + 4 * W <= n; i += 4 * W) {
    // the loads start long chains of work: fetch ahead (past the block too: the next row's) on
    // CPUs that gain from it (Note [Prefetching pointwise loops]; prefetch_ahead_of: the address
    // may lie past the end of the input)
    for (int l = 0; prefetch && l < 4 * W; l += 16) prefetch_ahead_of(x + i + l, 4 * kLsePrefetch);
    const V::V v0 = V::load(x + i), v1 = V::load(x + i + W), v2 = V::load(x + i + 2 * W), v3 = V::load(x + i + 3 * W);
    m0 = V::max(v0, m0);  // max(x, m) is m when x is NaN: NaN is skipped
    m1 = V::max(v1, m1);
    m2 = V::max(v2, m2);
    m3 = V::max(v3, m3);
    a0 = V::add(a0, term(v0));
    a1 = V::add(a1, term(v1));
    a2 = V::add(a2, term(v2));
    a3 = V::add(a3, term(v3));
  }
  for (; i + W <= n; i += W) {
    const V::V v = V::load(x + i);
    m0 = V::max(v, m0);
    a0 = V::add(a0, term(v));
  }
  float bm = lse_hmax(V::max(V::max(m0, m1), V::max(m2, m3)));
  double total = lse_hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
  if (kDirect) total *= lse_exp_small(ref.m - static_cast<double>(m));  // relative to m
  for (; i < n; ++i) {
    bm = x[i] > bm ? x[i] : bm;
    total += static_cast<double>(vmath::exp(x[i] - m));
  }
  block_max = bm;
  block_sum = total;
}

// Whether a block of n float32 is summed in one pass against the state st (Note [logsumexp in one
// pass]): its max m is finite (not NaN) and the block holds a vector.
inline bool lse_one_pass_applies(const LseState<float>& st, std::int64_t n) {
  return st.m > -std::numeric_limits<float>::infinity() && st.m < std::numeric_limits<float>::infinity() &&
         n >= LseVec::kWidth;
}

// Takes a one-pass block's max bm and sum (relative to st.m) into st when bm is finite and at most
// kLseMargin above st.m; false when the block needs the two passes instead (a block of -inf and
// NaN, an infinite max, or a large rise).
inline bool lse_keep(LseState<float>& st, float bm, double total) {
  const float m = st.m;
  if (!(bm > -std::numeric_limits<float>::infinity() && bm - m <= kLseMargin)) return false;
  if (total != total) {
    st = {std::numeric_limits<float>::quiet_NaN(), 1.0};  // a NaN in the block
  } else if (bm > m) {
    // exp(m - bm), m - bm in [-kLseMargin, 0), with the terms' own exp (cheaper than a call)
    alignas(64) float scale[LseVec::kWidth];
    LseVec::store(scale, lse_exp(LseVec::set(m - bm)));
    st = {bm, (st.s + total) * static_cast<double>(scale[0])};
  } else {
    st.s += total;
  }
  return true;
}

// The two passes over a block, the second from L1: its max, which raises the state's max, then
// its sum of exp(x - m) with every term at most 1.
inline void lse_two_pass_f32(const float* x, std::int64_t n, LseState<float>& st) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (is_nan(st.m)) return;  // the result is NaN already
  float bm = -kInf;
  std::int64_t i = 0;
  if (n >= W) {
    V::V m0 = V::set(-kInf), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 4 * W <= n; i += 4 * W) {
      m0 = V::max(V::load(x + i), m0);
      m1 = V::max(V::load(x + i + W), m1);
      m2 = V::max(V::load(x + i + 2 * W), m2);
      m3 = V::max(V::load(x + i + 3 * W), m3);
    }
    for (; i + W <= n; i += W) m0 = V::max(V::load(x + i), m0);
    bm = lse_hmax(V::max(V::max(m0, m1), V::max(m2, m3)));
  }
  for (; i < n; ++i) bm = x[i] > bm ? x[i] : bm;
  if (!(bm > -kInf && bm < kInf) || st.m == kInf) {
    lse_infinite_block(x, n, bm, st);
    return;
  }
  lse_raise(st, bm);
  const float m = st.m;
  double total = 0;
  i = 0;
  if (n >= W) {
    const V::V mv = V::set(m);
    V::V a0 = V::set(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 = V::add(a0, lse_exp(V::sub(V::load(x + i), mv)));
      a1 = V::add(a1, lse_exp(V::sub(V::load(x + i + W), mv)));
      a2 = V::add(a2, lse_exp(V::sub(V::load(x + i + 2 * W), mv)));
      a3 = V::add(a3, lse_exp(V::sub(V::load(x + i + 3 * W), mv)));
    }
    for (; i + W <= n; i += W) a0 = V::add(a0, lse_exp(V::sub(V::load(x + i), mv)));
    total = lse_hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
  }
  for (; i < n; ++i) total += static_cast<double>(vmath::exp(x[i] - m));
  if (total != total) {
    st = {std::numeric_limits<float>::quiet_NaN(), 1.0};  // a NaN in the block
  } else {
    st.s += total;
  }
}

// lse_block for float32 in vectors (Note [logsumexp in one pass]).
inline void lse_block_f32(const float* x, std::int64_t n, LseState<float>& st) {
  if (lse_one_pass_applies(st, n)) {
    float bm;
    double total;
    if (std::fabs(st.m) <= kLseDirect) {
      lse_one_pass_f32<true>(x, n, st.m, bm, total);
    } else {
      lse_one_pass_f32<false>(x, n, st.m, bm, total);
    }
    if (lse_keep(st, bm, total)) return;
  }
  lse_two_pass_f32(x, n, st);
}

// Note [logsumexp in four streams]
// A contiguous float32 run of kLseStreamsFrom elements or more is summed in four equal parts
// (whole vectors; the last elements, fewer than 4 vectors, join the fourth part), each into a
// state of its own (seeded from its own first vectors), the states merged in order at the end.
// Each part goes in blocks of kLseBlock as a whole row does (Note [logsumexp in one pass]); the
// one pass over block b of the four parts runs in one of two orders that give the same bits
// (each part's accumulators add the same terms in the same order either way):
//   - side by side, four streams at once, each prefetching the line kLseStreamPrefetchBytes ahead
//     of each it reads, where prefetch_reads() (the Intel cores whose sums read four streams:
//     Note [Sums in four streams] in reduce.cpp);
//   - one part after another, one stream, elsewhere (AMD Zen 4 reads several streams slower than
//     one: docs/decisions.md, "Reading several streams at once").
// The parts are cut by n alone, so the result is the same bits on any machine and thread count.
// A long row is reduced in chunks of LogSumExpOp::kLongRowChunk (64K elements: parts of 64 KB)
// rather than the engine's 16K. Measured 2026-12-03 on an Intel Xeon with AVX512-FP16, 1 thread,
// 16M float32 in chunks as the engine cuts them (tools/bench/lse_streams_probe.cpp, medians of
// 11, GB/s, after a streaming copy of 128 MB): one stream 15.1, four streams in 16K chunks 22.0
// unprefetched and 24.8 prefetched, in 64K chunks 21.6 and 28.2 (kael's sum 28.6). In
// throughput.py, logsumexp(a, 0) of 16M float32 went from 14.8 to 27.8 GB/s at 1 thread (57% to
// 96% of the copy), 50.3 at 2 threads (94%).
constexpr std::int64_t kLseStreamsFrom = 4 * kLseBlock;
constexpr std::int64_t kLseStreamPrefetchBytes = 4096;

// The one pass over K blocks of n elements side by side (K = 1: one block), block s against the
// max m[s] of its state: its max and its sum of exp(x - m[s]), as lse_one_pass_f32 but with one
// vector of each stream a step and one accumulator of each kind per stream.
template <int K, bool kDirect>
inline void lse_one_pass_streams_f32(const float* const* x, std::int64_t n, const float* m, float* block_max,
                                     double* block_sum, bool prefetch) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  LseRef ref[K];
  V::V mv[K], mx[K], acc[K];
#pragma GCC unroll 4
  for (int s = 0; s < K; ++s) {
    ref[s] = kDirect ? lse_ref_near(m[s]) : lse_ref(0.0);
    mv[s] = V::set(m[s]);
    mx[s] = V::set(-kInf);
    acc[s] = V::set(0.0f);
  }
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
#pragma GCC unroll 4
    for (int s = 0; s < K; ++s) {
      // (prefetch_ahead_of: the address may lie past the end of the input)
      if (prefetch) prefetch_ahead_of(x[s] + i, kLseStreamPrefetchBytes);
      const V::V v = V::load(x[s] + i);
      mx[s] = V::max(v, mx[s]);  // skips NaN
      acc[s] = V::add(acc[s], kDirect ? lse_exp(v, ref[s]) : lse_exp(V::sub(v, mv[s]), ref[s]));
    }
  }
  for (int s = 0; s < K; ++s) {
    float bm = lse_hmax(mx[s]);
    double total = lse_hsum(acc[s]);
    if (kDirect) total *= lse_exp_small(ref[s].m - static_cast<double>(m[s]));  // relative to m
    for (std::int64_t j = i; j < n; ++j) {
      bm = x[s][j] > bm ? x[s][j] : bm;
      total += static_cast<double>(vmath::exp(x[s][j] - m[s]));
    }
    block_max[s] = bm;
    block_sum[s] = total;
  }
}

// Block b of each of four parts (x[s], n elements each) into its state st[s] (Note [logsumexp in
// four streams]).
inline void lse_four_blocks_f32(const float* const* x, std::int64_t n, LseState<float>* st, bool side_by_side) {
  bool one_pass[4], direct[4];
  float m[4], bm[4];
  double total[4];
  bool all = side_by_side;
  for (int s = 0; s < 4; ++s) {
    one_pass[s] = lse_one_pass_applies(st[s], n);
    direct[s] = one_pass[s] && std::fabs(st[s].m) <= kLseDirect;
    m[s] = st[s].m;
    all = all && direct[s];
  }
  if (all) {
    lse_one_pass_streams_f32<4, true>(x, n, m, bm, total, true);
  } else {
    for (int s = 0; s < 4; ++s) {
      if (direct[s]) {
        lse_one_pass_streams_f32<1, true>(x + s, n, m + s, bm + s, total + s, false);
      } else if (one_pass[s]) {
        lse_one_pass_streams_f32<1, false>(x + s, n, m + s, bm + s, total + s, false);
      }
    }
  }
  for (int s = 0; s < 4; ++s)
    if (!(one_pass[s] && lse_keep(st[s], bm[s], total[s]))) lse_two_pass_f32(x[s], n, st[s]);
}

// Seeds an empty state's max with the max of x's first 4 vectors (when finite), so that the
// first block of a row is summed in one pass too.
inline void lse_seed_f32(const float* x, std::int64_t n, LseState<float>& st) {
  using V = LseVec;
  constexpr int W = V::kWidth;
  if (n < 4 * W) return;  // short rows: two passes, the second from L1
  const float m = lse_hmax(V::max(V::max(V::load(x), V::load(x + W)), V::max(V::load(x + 2 * W), V::load(x + 3 * W))));
  if (m > -std::numeric_limits<float>::infinity() && m < std::numeric_limits<float>::infinity()) st.m = m;
}

// The state of a contiguous run of n >= kLseStreamsFrom float32 (Note [logsumexp in four streams]).
inline LseState<float> lse_four_parts_f32(const float* x, std::int64_t n) {
  constexpr int W = LseVec::kWidth;
  const std::int64_t part = n / (4 * W) * W;
  const float* const first[4] = {x, x + part, x + 2 * part, x + 3 * part};
  LseState<float> st[4];
  for (int s = 0; s < 4; ++s) {
    st[s] = {-std::numeric_limits<float>::infinity(), 0.0};
    lse_seed_f32(first[s], part, st[s]);
  }
  const bool side_by_side = prefetch_reads();
  for (std::int64_t b = 0; b < part; b += kLseBlock) {
    const float* const blocks[4] = {first[0] + b, first[1] + b, first[2] + b, first[3] + b};
    lse_four_blocks_f32(blocks, std::min(kLseBlock, part - b), st, side_by_side);
  }
  if (4 * part < n) lse_block_f32(x + 4 * part, n - 4 * part, st[3]);
  for (int s = 1; s < 4; ++s) lse_merge(st[0], st[s]);
  return st[0];
}
#endif

template <typename T>
struct LogSumExpOp {
  using C = opmath_t<T>;  // float for float16/bfloat16
  static constexpr std::int64_t kLongRowChunk = 4 * kRowChunk;  // Note [logsumexp in four streams]
  T* out;
  LseState<C> identity() const { return {-std::numeric_limits<C>::infinity(), 0.0}; }
  LseState<C> run(const T* x, std::int64_t n, std::int64_t) const {
    LseState<C> st = identity();
    if constexpr (std::is_same_v<T, C>) {
#ifdef KAEL_LSE_SIMD
      if constexpr (std::is_same_v<C, float>) {
        if (n >= kLseStreamsFrom) return lse_four_parts_f32(x, n);
        lse_seed_f32(x, n, st);
        for (std::int64_t b = 0; b < n; b += kLseBlock) lse_block_f32(x + b, std::min(kLseBlock, n - b), st);
        return st;
      }
#endif
      for (std::int64_t b = 0; b < n; b += kLseBlock) lse_block<C>(x + b, std::min(kLseBlock, n - b), st);
    } else {
      C buf[kLseBlock];
      for (std::int64_t b = 0; b < n; b += kLseBlock) {
        const std::int64_t len = std::min(kLseBlock, n - b);
        for (std::int64_t i = 0; i < len; ++i) buf[i] = static_cast<C>(x[b + i]);
#ifdef KAEL_LSE_SIMD
        if (b == 0) lse_seed_f32(buf, len, st);
        lse_block_f32(buf, len, st);
#else
        lse_block<C>(buf, len, st);
#endif
      }
    }
    return st;
  }
  void merge(LseState<C>& a, const LseState<C>& b) const { lse_merge(a, b); }
  void write(std::int64_t o, const LseState<C>& a) const {
    if (is_nan(a.m) || a.m == std::numeric_limits<C>::infinity() || a.m == -std::numeric_limits<C>::infinity()) {
      out[o] = convert<T>(a.m);
    } else {
      out[o] = convert<T>(static_cast<double>(a.m) + std::log(a.s));
    }
  }
};
// ---------------------------------------------------------------------------------- var, std

struct Moments {
  std::int64_t n;
  double mean;
  double m2;  // sum of squared deviations from mean
};

// Two passes over each contiguous run (mean, then squared deviations), in double; runs merge
// with Chan et al.'s formula.
template <typename T>
struct VarOp {
  T* out;
  double correction;
  bool take_sqrt;
  Moments identity() const { return {0, 0.0, 0.0}; }
  Moments run(const T* x, std::int64_t n, std::int64_t) const {
    double lanes[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<double>(static_cast<opmath_t<T>>(x[i + j]));
    double sum = 0;
    for (; i < n; ++i) sum += static_cast<double>(static_cast<opmath_t<T>>(x[i]));
    for (double l : lanes) sum += l;
    const double mean = sum / static_cast<double>(n);
    double sq[kLanes] = {};
    i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) {
        const double d = static_cast<double>(static_cast<opmath_t<T>>(x[i + j])) - mean;
        sq[j] += d * d;
      }
    double m2 = 0;
    for (; i < n; ++i) {
      const double d = static_cast<double>(static_cast<opmath_t<T>>(x[i])) - mean;
      m2 += d * d;
    }
    for (double l : sq) m2 += l;
    return {n, mean, m2};
  }
  void merge(Moments& a, const Moments& b) const {
    if (b.n == 0) return;
    if (a.n == 0) {
      a = b;
      return;
    }
    const double na = static_cast<double>(a.n), nb = static_cast<double>(b.n), n = na + nb;
    const double delta = b.mean - a.mean;
    a.mean += delta * nb / n;
    a.m2 += b.m2 + delta * delta * na * nb / n;
    a.n += b.n;
  }
  void write(std::int64_t o, const Moments& a) const {
    const double divisor = std::max(0.0, static_cast<double>(a.n) - correction);
    const double var = a.n == 0 ? std::numeric_limits<double>::quiet_NaN() : a.m2 / divisor;
    out[o] = convert<T>(take_sqrt ? std::sqrt(var) : var);
  }
};

// ---------------------------------------------------------------------------------- helpers

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

Tensor logical(const char* op, const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, bool all) {
  ReduceDims dims = dim && dim->empty() ? reduce_no_dims(self) : reduce_dims(op, self, dim, keepdim);
  const ScalarType out_dtype = self.dtype() == ScalarType::UInt8 ? ScalarType::UInt8 : ScalarType::Bool;
  ReduceSetup s = setup_reduction(self, std::move(dims), self.dtype(), out_dtype);
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      using O = std::conditional_t<std::is_same_v<T, std::uint8_t>, std::uint8_t, bool>;
      if (all) {
        reduce_rows<T>(x, p, LogicalOp<T, O, true>{s.out.data<O>()});
      } else {
        reduce_rows<T>(x, p, LogicalOp<T, O, false>{s.out.data<O>()});
      }
    });
  });
  return s.out;
}

// Visits the floating dtypes only (the others are refused before).
template <typename F>
void visit_floating(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float32:
      return f(TypeTag<float>{});
    case ScalarType::Float64:
      return f(TypeTag<double>{});
    case ScalarType::Float16:
      return f(TypeTag<Half>{});
    case ScalarType::BFloat16:
      return f(TypeTag<BFloat16>{});
    default:
      KAEL_INTERNAL_ASSERT(false);
  }
}

Tensor var_std(const char* op, const Tensor& self, std::optional<IntArrayRef> dim, double c, bool keepdim,
               bool take_sqrt) {
  KAEL_CHECK(is_floating(self.dtype()),
             op << ": std and var only support floating point and complex dtypes, got " << self.dtype());
  ReduceDims dims = reduce_dims(op, self, dim, keepdim);
  std::int64_t outputs = 1;
  for (std::int64_t size : dims.out_shape) outputs *= size;
  if (static_cast<double>(self.numel() / std::max<std::int64_t>(outputs, 1)) - c <= 0)
    warn(WarningKind::User, std::string(op) +
                                ": degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                                "factor (input numel divided by output numel).");
  ReduceSetup s = setup_reduction(self, std::move(dims), self.dtype(), self.dtype());
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_floating(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_rows<T>(x, p, VarOp<T>{s.out.data<T>(), c, take_sqrt});
    });
  });
  return s.out;
}

}  // namespace

namespace {
Tensor prod(const Tensor& self, std::optional<std::int64_t> dim, bool keepdim, std::optional<ScalarType> dtype) {
  const ScalarType out_dtype = integer_upcast_dtype(self, dtype);
  ReduceSetup s = setup_reduction(self, reduce_dim("prod", self, dim, keepdim), out_dtype, out_dtype);
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_rows<T>(x, p, ProdOp<T>{s.out.data<T>()});
    });
  });
  return s.out;
}
}  // namespace

Tensor prod_cpu(const Tensor& self, std::optional<ScalarType> dtype) { return prod(self, std::nullopt, false, dtype); }

Tensor prod_dim_cpu(const Tensor& self, std::int64_t dim, bool keepdim, std::optional<ScalarType> dtype) {
  return prod(self, dim, keepdim, dtype);
}

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

Tensor all_cpu(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return logical("all", self, dim, keepdim, true);
}

Tensor any_cpu(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim) {
  return logical("any", self, dim, keepdim, false);
}

Tensor norm_cpu(const Tensor& self, std::optional<double> p_or_none, std::optional<IntArrayRef> dim, bool keepdim,
                std::optional<ScalarType> dtype) {
  const double p = p_or_none.value_or(2.0);  // p=None is the 2-norm, as torch.norm(t, None)
  KAEL_CHECK(is_floating(self.dtype()),
             "norm: Expected a floating point or complex tensor as input. Got " << self.dtype());
  if (dtype) {
    KAEL_CHECK(is_floating(*dtype), "norm: dtype should be floating point or complex. Got " << *dtype);
    KAEL_CHECK(promote_types(self.dtype(), *dtype) == *dtype,
               "norm: the dtype of the input (" << self.dtype() << ") should be convertible without narrowing to "
                                                << "the specified dtype (" << *dtype << ")");
  }
  ReduceDims dims = reduce_dims("norm", self, dim, keepdim);
  const bool infinite = std::isinf(p);
  if ((infinite || p < 0) && self.numel() == 0) {
    // max |x| and the sums of |x|^p with p < 0 (sums of infinities for zeros) have no identity
    KAEL_CHECK(dim && !dim->empty(), "norm: cannot compute the " << p << " norm on an empty tensor because the "
                                                                 << "operation does not have an identity");
    for (std::int64_t d = 0; d < self.dim(); ++d)
      KAEL_CHECK(!dims.reduced[d] || self.sizes()[d] != 0,
                 "norm: cannot compute the " << p << " norm on the dimension " << d << " because this dimension "
                                             << "is empty and the operation does not have an identity");
  }
  const ScalarType t = dtype.value_or(self.dtype());
  // As PyTorch (linalg_vector_norm): where each output reduces a single element (every reduced
  // dim of size 1, a 0-d input), the p-norm is |x| exactly (x != 0 for p = 0), not
  // (|x|^p)^(1/p), which overflows for a large x (norm([[1e200]]) is 1e200, not inf). PyTorch's
  // test reads the size of each dim given, so a 0-d input with dim= takes the formula there.
  const bool single = dims.count == 1 && !(self.dim() == 0 && dim && !dim->empty());
  ReduceSetup s = setup_reduction(self, std::move(dims), t, t);
  run_reduction(s, [&](const Tensor& x, const RowPlan& plan) {
    visit_floating(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* out = s.out.data<T>();
      if (single && p != 0) {
        reduce_rows<T>(x, plan, SumNormOp<T, NormKind::Abs>{out, 1.0});
      } else if (infinite && p > 0) {
        reduce_rows<T>(x, plan, ExtremeAbsOp<T, true>{out});
      } else if (infinite) {
        reduce_rows<T>(x, plan, ExtremeAbsOp<T, false>{out});
      } else if (p == 0) {
        reduce_rows<T>(x, plan, SumNormOp<T, NormKind::Count>{out, p});
      } else if (p == 1) {
        reduce_rows<T>(x, plan, SumNormOp<T, NormKind::Abs>{out, p});
      } else if (p == 2) {
        reduce_rows<T>(x, plan, SumNormOp<T, NormKind::Square>{out, p});
      } else {
        reduce_rows<T>(x, plan, SumNormOp<T, NormKind::Power>{out, p});
      }
    });
  });
  return s.out;
}

namespace nn {
RowLogSumExp logsumexp_row(const float* x, std::int64_t n) {
  const LseState<float> st = LogSumExpOp<float>{nullptr}.run(x, n, 0);
  if (is_nan(st.m) || st.m == std::numeric_limits<float>::infinity() || st.m == -std::numeric_limits<float>::infinity())
    return {st.m, 0.0};
  return {st.m, std::log(st.s)};
}
}  // namespace nn

Tensor logsumexp_cpu(const Tensor& self, IntArrayRef dim, bool keepdim) {
  // Integral and bool inputs compute in the default floating dtype, as in PyTorch.
  const ScalarType t = is_floating(self.dtype()) ? self.dtype() : default_dtype();
  ReduceSetup s = setup_reduction(self, reduce_dims("logsumexp", self, dim, keepdim), t, t);
  run_reduction(s, [&](const Tensor& x, const RowPlan& p) {
    visit_floating(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      reduce_rows<T>(x, p, LogSumExpOp<T>{s.out.data<T>()});
    });
  });
  return s.out;
}

Tensor var_cpu(const Tensor& self, bool unbiased) {
  return var_std("var", self, std::nullopt, unbiased ? 1.0 : 0.0, false, false);
}

Tensor var_dim_cpu(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased, bool keepdim) {
  return var_std("var", self, dim, unbiased ? 1.0 : 0.0, keepdim, false);
}

Tensor var_correction_cpu(const Tensor& self, std::optional<IntArrayRef> dim, const std::optional<Scalar>& correction,
                          bool keepdim) {
  return var_std("var", self, dim, correction ? correction->to_double() : 1.0, keepdim, false);
}

Tensor std_cpu(const Tensor& self, bool unbiased) {
  return var_std("std", self, std::nullopt, unbiased ? 1.0 : 0.0, false, true);
}

Tensor std_dim_cpu(const Tensor& self, std::optional<IntArrayRef> dim, bool unbiased, bool keepdim) {
  return var_std("std", self, dim, unbiased ? 1.0 : 0.0, keepdim, true);
}

Tensor std_correction_cpu(const Tensor& self, std::optional<IntArrayRef> dim, const std::optional<Scalar>& correction,
                          bool keepdim) {
  return var_std("std", self, dim, correction ? correction->to_double() : 1.0, keepdim, true);
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
