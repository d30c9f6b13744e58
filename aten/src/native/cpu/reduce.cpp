// Reductions over dims: sum and mean.
//
// x: any shape and strides; out: x's shape with the reduced dims removed (or kept as 1).
// Accumulation is in double for float32/float64 inputs (every value is added in double: the
// documented rule of docs/decisions.md), float32 for float16/bfloat16 ones and
// wrapping int64 (uint64 arithmetic) for integral ones, into a
// contiguous buffer of the output's size that the loop engine walks with stride 0 along the
// reduced dims (see Note [Loop geometry]); the walk follows x's memory order.
#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"
#include "kael/runtime/threads.h"

namespace kael::native {

namespace {

// Sum of a contiguous run; independent lanes so the compiler vectorises it.
template <typename Acc, typename T>
Acc sum_contiguous(const T* x, std::int64_t n) {
  // float32 values are converted and added in
  // double (docs/decisions.md, "float32 sums"): memory-bound sums keep their speed, sums of
  // data in cache are bound by the conversion (about half PyTorch's float32 rate).
  constexpr int kLanes = 16;
  Acc lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] += static_cast<Acc>(x[i + j]);
  Acc tail = 0;
  for (; i < n; ++i) tail += static_cast<Acc>(x[i]);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0] + tail;
}

#if defined(__AVX512F__)
// float32 into double with AVX-512: each 8 floats converted straight from memory (no 512-bit
// load and extract), four independent double accumulators of 8 lanes. The compiler's version of
// the generic loop loads every vector twice and extracts its upper half. (The masked forms of
// the conversion, with every lane set, and a store for the horizontal sum: GCC 12's unmasked
// forms start from an "undefined" vector that -Wmaybe-uninitialized reports.)
inline __m512d load_as_double(const float* p) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p)); }

template <>
double sum_contiguous<double, float>(const float* x, std::int64_t n) {
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), a2 = _mm512_setzero_pd(), a3 = _mm512_setzero_pd();
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_pd(a0, load_as_double(x + i));
    a1 = _mm512_add_pd(a1, load_as_double(x + i + 8));
    a2 = _mm512_add_pd(a2, load_as_double(x + i + 16));
    a3 = _mm512_add_pd(a3, load_as_double(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) a0 = _mm512_add_pd(a0, load_as_double(x + i));
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
  double total = 0;
  for (; i < n; ++i) total += static_cast<double>(x[i]);
  for (const double l : lanes) total += l;
  return total;
}
#endif

// Note [Deterministic sums]
// A contiguous sum is cut into blocks of kSumBlock elements at fixed offsets; each block is
// summed on its own and the block sums are added in order. Which thread sums a block changes
// nothing, so the result is the same bits for every thread count (and whether the pool was busy).
constexpr std::int64_t kSumBlock = kParallelGrain;

template <typename Acc, typename T>
Acc sum_all_contiguous(const T* x, std::int64_t n) {
  if (n <= kSumBlock) return sum_contiguous<Acc>(x, n);
  const std::int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<Acc> partial(static_cast<std::size_t>(blocks), Acc(0));
  parallel_for(0, blocks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int64_t first = b * kSumBlock;
      partial[static_cast<std::size_t>(b)] = sum_contiguous<Acc>(x + first, std::min(kSumBlock, n - first));
    }
  });
  Acc total = 0;
  for (Acc p : partial) total += p;
  return total;
}

// Note [Column sums]
// A sum whose innermost dim is kept and contiguous and whose next dim is reduced (x.sum(0) of a
// matrix, x.mean(1) of (B, T, C)) adds columns: for each output slab, acc[k] += x[r, k] over the
// rows r. The loop engine would run its inner loop once per row, over the K columns, and on one
// thread (every row writes the same outputs); here:
//   - K >= kWideColumns: the pool's chunks take runs of columns (whole groups of kColumnGroup),
//     each adding its columns down all the rows in row order, one row or four rows a sweep (the
//     same additions); no partial sums, so the same bits on any number of threads;
//   - narrower: the rows are cut into blocks of kSumBlock / K rows at fixed offsets, each block's
//     column sums go into a partial buffer and the partials are added in block order (Note
//     [Deterministic sums]). A block of rows that lie next to each other in memory is one run:
//     its elements are added into P = K ceil(64 / K) lane sums (element i into lane i mod P, a
//     loop the compiler vectorises), and lane j counts for column j mod K.
// Either way the blocks depend on the shape alone.
constexpr std::int64_t kWideColumns = 256;
constexpr std::int64_t kColumnGroup = 16;
constexpr std::int64_t kColumnsInL1 = 2048;  // 16 KB of double sums

// out[k] += the sum over `rows` rows (byte stride rs) of x[r, k], k < K < kWideColumns.
template <typename Acc, typename T>
void add_column_block(const char* x, std::int64_t rows, std::int64_t K, std::int64_t rs, Acc* out) {
  Acc lanes[kWideColumns] = {};
  if (rs == K * static_cast<std::int64_t>(sizeof(T))) {
    const T* __restrict p = reinterpret_cast<const T*>(x);
    const std::int64_t n = rows * K;
    const std::int64_t P = K * ((64 + K - 1) / K);  // below 64 + K for K < 64, else K: < kWideColumns
    std::int64_t i = 0;
    for (; i + P <= n; i += P)
      for (std::int64_t j = 0; j < P; ++j) lanes[j] += static_cast<Acc>(p[i + j]);
    for (std::int64_t j = 0; i + j < n; ++j) lanes[j] += static_cast<Acc>(p[i + j]);  // whole rows
    for (std::int64_t j = 0; j < P; ++j) out[j % K] += lanes[j];
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* __restrict p = reinterpret_cast<const T*>(x + r * rs);
    for (std::int64_t k = 0; k < K; ++k) lanes[k] += static_cast<Acc>(p[k]);
  }
  for (std::int64_t k = 0; k < K; ++k) out[k] += lanes[k];
}

// o[c] = o[c] + x0[c] + x1[c] + x2[c] + x3[c], c < n, for the four rows at x (byte stride rs): in
// tiles of kTile sums in a local array, so that the compiler vectorises the additions without
// checking whether the rows and the sums overlap.
template <typename Acc, typename T>
void add_four_rows(const char* x, std::int64_t rs, std::int64_t n, Acc* o) {
  constexpr std::int64_t kTile = 64;
  const T* p0 = reinterpret_cast<const T*>(x);
  const T* p1 = reinterpret_cast<const T*>(x + rs);
  const T* p2 = reinterpret_cast<const T*>(x + 2 * rs);
  const T* p3 = reinterpret_cast<const T*>(x + 3 * rs);
  std::int64_t c = 0;
  Acc t[kTile];
  for (; c + kTile <= n; c += kTile) {
    for (std::int64_t j = 0; j < kTile; ++j) t[j] = o[c + j];
    for (std::int64_t j = 0; j < kTile; ++j)
      t[j] = t[j] + static_cast<Acc>(p0[c + j]) + static_cast<Acc>(p1[c + j]) + static_cast<Acc>(p2[c + j]) +
             static_cast<Acc>(p3[c + j]);
    for (std::int64_t j = 0; j < kTile; ++j) o[c + j] = t[j];
  }
  for (; c < n; ++c)
    o[c] = o[c] + static_cast<Acc>(p0[c]) + static_cast<Acc>(p1[c]) + static_cast<Acc>(p2[c]) + static_cast<Acc>(p3[c]);
}

// Note [Column sums]: takes the geometry when it is a column sum (and returns true).
template <typename Acc, typename T>
bool sum_columns(const LoopGeometry<2>& g) {
  const int nd = g.ndim();
  if (nd < 2 || nd > 3) return false;
  if (g.strides[0][0] != static_cast<std::int64_t>(sizeof(Acc)) || g.strides[1][0] != static_cast<std::int64_t>(sizeof(T)) ||
      g.strides[0][1] != 0 || (nd == 3 && g.strides[0][2] == 0))
    return false;
  const std::int64_t K = g.shape[0], R = g.shape[1], B = nd == 3 ? g.shape[2] : 1;
  const std::int64_t rs = g.strides[1][1];
  const std::int64_t slab_x = nd == 3 ? g.strides[1][2] : 0, slab_out = nd == 3 ? g.strides[0][2] : 0;
  char* const out = g.data[0];
  const char* const x = g.data[1];
  if (K >= kWideColumns) {
    // groups of kColumnGroup columns; a chunk of the pool takes a run of them, one sweep down
    // the rows for each slab (with one thread: whole rows, in memory order)
    const std::int64_t groups = (K + kColumnGroup - 1) / kColumnGroup;
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / (R * kColumnGroup));
    parallel_for(0, B * groups, grain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin / groups; b * groups < end; ++b) {
        const std::int64_t c0 = std::max(begin - b * groups, std::int64_t{0}) * kColumnGroup;
        const std::int64_t c1 = std::min({(end - b * groups) * kColumnGroup, K});
        Acc* __restrict o = reinterpret_cast<Acc*>(out + b * slab_out) + c0;
        const char* xb = x + b * slab_x + c0 * static_cast<std::int64_t>(sizeof(T));
        // A run of whole rows whose sums stay in L1 (up to kColumnsInL1) goes one row at a time,
        // reading memory in order. Others go four rows a sweep: each column's additions in row
        // order, as one row at a time makes them, with a quarter of the loads and stores of the
        // sums, which no longer stay in L1 (or, for part of a row, would be read and written
        // once per piece). On AMD Zen 4 (tools/bench/reductions.py): 64 slabs of (1024, 256)
        // one row at a time 2.6 ms, four rows 6.5 (four short streams at once, which the
        // prefetchers follow worse); (4096, 4096) one row at a time 6.1 ms, four rows 3.2.
        std::int64_t r = 0;
        if (c1 - c0 < K || K > kColumnsInL1)
          for (; r + 4 <= R; r += 4) add_four_rows<Acc, T>(xb + r * rs, rs, c1 - c0, o);
        for (; r < R; ++r) {
          const T* __restrict p = reinterpret_cast<const T*>(xb + r * rs);
          for (std::int64_t c = 0; c < c1 - c0; ++c) o[c] += static_cast<Acc>(p[c]);
        }
      }
    });
    return true;
  }
  const std::int64_t block_rows = std::max<std::int64_t>(1, kSumBlock / K);
  const std::int64_t blocks = (R + block_rows - 1) / block_rows;
  if (blocks == 1) {
    parallel_for(0, B, std::max<std::int64_t>(1, kParallelGrain / (R * K)), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b)
        add_column_block<Acc, T>(x + b * slab_x, R, K, rs, reinterpret_cast<Acc*>(out + b * slab_out));
    });
    return true;
  }
  std::vector<Acc> partial(static_cast<std::size_t>(B * blocks * K), Acc(0));
  parallel_for(0, B * blocks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t b = i / blocks, first = (i % blocks) * block_rows;
      add_column_block<Acc, T>(x + b * slab_x + first * rs, std::min(block_rows, R - first), K, rs,
                               partial.data() + i * K);
    }
  });
  for (std::int64_t b = 0; b < B; ++b) {
    Acc* o = reinterpret_cast<Acc*>(out + b * slab_out);
    for (std::int64_t blk = 0; blk < blocks; ++blk)
      for (std::int64_t k = 0; k < K; ++k) o[k] += partial[static_cast<std::size_t>((b * blocks + blk) * K + k)];
  }
  return true;
}

// acc[out] += x over the reduction; acc is contiguous with kept_shape's non-reduced dims.
template <typename Acc, typename T>
void sum_into(const Tensor& self, const ReduceDims& r, Acc* acc) {
  if (r.all && self.is_contiguous()) {
    acc[0] = sum_all_contiguous<Acc>(self.data<T>(), self.numel());
    return;
  }
  const DimVector acc_strides = contiguous_strides(r.kept_shape);
  DimVector out_strides(acc_strides);
  for (std::size_t i = 0; i < out_strides.size(); ++i)
    if (r.reduced[i]) out_strides[i] = 0;
  OperandView out{reinterpret_cast<char*>(acc), self.sizes(), out_strides, sizeof(Acc)};
  // The broadcast rule of make_geometry would treat size-1 dims as stride 0 anyway.
  const LoopGeometry<2> g = make_geometry<2>(self.sizes(), {out, view_of(self)});
  if (sum_columns<Acc, T>(g)) return;
  // Rows may go to different threads only if no two rows write the same output: every outer
  // dim moves the output, and a single row is not split while it reduces into one element.
  bool parallel = g.ndim() > 1 || g.strides[0][0] != 0;
  for (int d = 1; d < g.ndim() && parallel; ++d) parallel = g.strides[0][d] != 0;
  run_loop<2>(
      g,
      [](char* const* ptrs, const std::int64_t* strides, std::int64_t n) {
        if (strides[0] == 0) {
          Acc local = 0;
          if (strides[1] == sizeof(T)) {
            local = sum_contiguous<Acc>(reinterpret_cast<const T*>(ptrs[1]), n);
          } else {
            for (std::int64_t i = 0; i < n; ++i)
              local += static_cast<Acc>(*reinterpret_cast<const T*>(ptrs[1] + i * strides[1]));
          }
          *reinterpret_cast<Acc*>(ptrs[0]) += local;
          return;
        }
        if (strides[0] == sizeof(Acc) && strides[1] == sizeof(T)) {
          Acc* __restrict o = reinterpret_cast<Acc*>(ptrs[0]);
          const T* __restrict x = reinterpret_cast<const T*>(ptrs[1]);
          for (std::int64_t i = 0; i < n; ++i) o[i] += static_cast<Acc>(x[i]);
          return;
        }
        for (std::int64_t i = 0; i < n; ++i)
          *reinterpret_cast<Acc*>(ptrs[0] + i * strides[0]) +=
              static_cast<Acc>(*reinterpret_cast<const T*>(ptrs[1] + i * strides[1]));
      },
      parallel);
}

// Sums the set-up's input over its dims into its output (dividing by the count for mean).
void reduce_sum(const SumSetup& setup, bool mean) {
  const Tensor& self = setup.input;
  const ReduceDims& r = setup.dims;
  const ScalarType out_dtype = setup.out_dtype;
  const Tensor& out = setup.out;
  KAEL_CHECK(self.device().is_cpu(), (mean ? "mean" : "sum") << ": expected a cpu tensor");
  const std::int64_t out_numel = out.numel();
  const bool floating = is_floating(self.dtype()) || is_floating(out_dtype);
  auto finish = [&](auto* acc) {
    using Acc = std::remove_pointer_t<decltype(acc)>;
    visit_dtype(out_dtype, [&](auto tag) {
      using O = typename decltype(tag)::type;
      O* o = out.data<O>();
      for (std::int64_t i = 0; i < out_numel; ++i) {
        Acc v = acc[i];
        if constexpr (std::is_floating_point_v<Acc>) {
          if (mean) v /= static_cast<Acc>(r.count);
        }
        o[i] = convert<O>(v);
      }
    });
  };
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_reduced_floating_v<T>) {
      // float16/bfloat16 accumulate in float32 and round once into the output.
      std::vector<float> acc(out_numel, 0.0f);
      sum_into<float, T>(self, r, acc.data());
      finish(acc.data());
    } else if (floating) {
      std::vector<double> acc(out_numel, 0.0);
      sum_into<double, T>(self, r, acc.data());
      finish(acc.data());
    } else {
      // integers wrap around on overflow, as in PyTorch (unsigned arithmetic: never undefined)
      std::vector<std::uint64_t> acc(out_numel, 0);
      sum_into<std::uint64_t, T>(self, r, acc.data());
      finish(acc.data());
    }
  });
}

}  // namespace

namespace {
// The loop runs on the call's own input (Note [Concurrency] in kael/core/concurrency.h); the
// output is new, no other thread sees it yet.
void reduce_sum_unlocked(SumSetup& setup, bool mean) {
  UnlockedSection section;
  if (section.active()) setup.input = section.own(setup.input);
  section.unlock();
  reduce_sum(setup, mean);
}
}  // namespace

Tensor sum_cpu(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  SumSetup setup = setup_sum(self, dim, keepdim, dtype, /*mean=*/false);
  reduce_sum_unlocked(setup, /*mean=*/false);
  return setup.out;
}

Tensor mean_cpu(const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim, std::optional<ScalarType> dtype) {
  SumSetup setup = setup_sum(self, dim, keepdim, dtype, /*mean=*/true);
  reduce_sum_unlocked(setup, /*mean=*/true);
  return setup.out;
}

}  // namespace kael::native
