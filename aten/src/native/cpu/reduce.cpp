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

#include "kael/core/allocator.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/loops.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"
#include "kael/runtime/threads.h"

namespace kael::native {

namespace {

// Note [Sums in four streams]
// The float32 sum (into double, with AVX-512) of a contiguous run of kSumStreamsFrom elements or
// more adds four equal parts of it (whole multiples of 32 floats), each into accumulators of its
// own, then the rest; the parts are summed in one of two orders, which give the same bits (each
// accumulator adds the same values in the same order either way):
//   - one after another, one stream (the loop of a short run, over each part in turn);
//   - side by side, four streams at once, where prefetch_reads() (Note [Prefetching reductions'
//     reads] in kael/native/loops.h), each stream also prefetching the lines kSumPrefetchBytes
//     ahead of those it reads, interleaved with the loads (prefetches issued a kilobyte at a
//     time, as the pointwise loops do, block the loads behind them there).
// One core's read rate is bound by the lines it keeps in flight, and some cores' prefetchers
// follow one sequential stream too shallowly. Measured 2026-12-03 on an Intel Xeon with
// AVX512-FP16, 1 thread, `a.sum()` of 16M float32 in tools/bench/throughput.py, forms
// alternated (GB/s; torch's sum in the same runs in brackets): this loop 14.5-14.7 one part
// after another and 25.0-25.9 side by side [16.1-19.0]; in earlier forms with two accumulators
// per stream, one stream 14.1-16.1 [14.5-25.2], four streams unprefetched 15.9-23.1
// [16.4-26.3] and prefetched 25.8-27.3 [17.0-25.0], one stream prefetched a kilobyte at a time
// 8 KB ahead 9.9-13.1, once 27.3 [16.8-23.7]; the bare loops in
// tools/bench/sum_prefetch_probe.cpp. On AMD Zen 4 several streams read slower than one
// (docs/decisions.md, "Reading several streams at once"), hence one stream elsewhere. The order
// of the additions depends on n alone, so a sum is the same bits on any thread count (Note
// [Deterministic sums]) and in either form.
constexpr std::int64_t kSumStreamsFrom = 1024;
constexpr std::int64_t kSumPrefetchBytes = 4096;

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
// load and extract), four double accumulators of 8 lanes per part. The compiler's version of
// the generic loop loads every vector twice and extracts its upper half. (The masked forms of
// the conversion, with every lane set, and a store for the horizontal sum: GCC 12's unmasked
// forms start from an "undefined" vector that -Wmaybe-uninitialized reports.)
inline __m512d load_as_double(const float* p) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p)); }

using SumAcc = __m512d[4];  // four accumulators of 8 doubles

// a += the 32 floats at p, 8 into each accumulator.
[[gnu::always_inline]] inline void add_32_floats(SumAcc& a, const float* p) {
  a[0] = _mm512_add_pd(a[0], load_as_double(p));
  a[1] = _mm512_add_pd(a[1], load_as_double(p + 8));
  a[2] = _mm512_add_pd(a[2], load_as_double(p + 16));
  a[3] = _mm512_add_pd(a[3], load_as_double(p + 24));
}

template <>
double sum_contiguous<double, float>(const float* x, std::int64_t n) {
  SumAcc a[4];  // one set per part (Note [Sums in four streams])
  for (auto& acc : a)
    for (auto& v : acc) v = _mm512_setzero_pd();
  const std::int64_t part = n >= kSumStreamsFrom ? n / (4 * 32) * 32 : 0;
  if (part > 0 && prefetch_reads()) {
    for (std::int64_t i = 0; i < part; i += 32) {
      for (int s = 0; s < 4; ++s) {
        const float* p = x + s * part + i;
        prefetch_ahead_of(p, kSumPrefetchBytes);
        prefetch_ahead_of(p, kSumPrefetchBytes + 64);
        add_32_floats(a[s], p);
      }
    }
  } else {
    for (int s = 0; s < 4; ++s)
      for (std::int64_t i = s * part; i < (s + 1) * part; i += 32) add_32_floats(a[s], x + i);
  }
  std::int64_t i = 4 * part;
  for (; i + 32 <= n; i += 32) add_32_floats(a[0], x + i);
  for (; i + 8 <= n; i += 8) a[0][0] = _mm512_add_pd(a[0][0], load_as_double(x + i));
  __m512d v = _mm512_setzero_pd();
  for (auto& acc : a) v = _mm512_add_pd(v, _mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, v);
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
//   - K >= kWideColumns: tasks of kWideBlockRows rows (by up to kWideRunColumns columns) add
//     their rows in order, each into the partial sums of its block (a slab of one block: into
//     the output), read in memory order; the partials are added in block order after;
//   - narrower: the rows are cut into blocks of kSumBlock / K rows at fixed offsets, each block's
//     column sums go into a partial buffer and the partials are added in block order (Note
//     [Deterministic sums]). A block of rows that lie next to each other in memory is one run:
//     its elements are added into P = K ceil(64 / K) lane sums (element i into lane i mod P, a
//     loop the compiler vectorises), and lane j counts for column j mod K.
// Either way the blocks depend on the shape alone.
constexpr std::int64_t kWideColumns = 256;
constexpr std::int64_t kWideBlockRows = 256;
constexpr std::int64_t kWideRunColumns = 65536;
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

// o[c] += the sum over `rows` rows (byte stride rs) of x[r, c], c < n, each column's additions in
// row order. Sums that stay in L1 (n up to kColumnsInL1) take one row at a time, reading memory in
// order; wider ones four rows a sweep (add_four_rows: the same additions, with a quarter of the
// loads and stores of the sums, which no longer stay in L1). Narrow sums are slower four rows at
// a time: four short streams at once, which the prefetchers follow worse (docs/performance.md,
// "Figures behind kernel constants").
template <typename Acc, typename T>
void add_rows(const char* x, std::int64_t rows, std::int64_t rs, std::int64_t n, Acc* __restrict o) {
  std::int64_t r = 0;
  if (n > kColumnsInL1)
    for (; r + 4 <= rows; r += 4) add_four_rows<Acc, T>(x + r * rs, rs, n, o);
  for (; r < rows; ++r) {
    const T* __restrict p = reinterpret_cast<const T*>(x + r * rs);
    for (std::int64_t c = 0; c < n; ++c) o[c] += static_cast<Acc>(p[c]);
  }
}

// Adds the partial sums of each slab's blocks (partial: B x blocks x K, block order) into its
// K outputs (out + b * slab_out), block by block.
template <typename Acc>
void add_block_partials(const std::vector<Acc>& partial, std::int64_t B, std::int64_t blocks, std::int64_t K,
                        char* out, std::int64_t slab_out) {
  for (std::int64_t b = 0; b < B; ++b) {
    Acc* o = reinterpret_cast<Acc*>(out + b * slab_out);
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const Acc* p = partial.data() + (b * blocks + blk) * K;
      for (std::int64_t k = 0; k < K; ++k) o[k] += p[k];
    }
  }
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
    // tasks of up to kWideBlockRows rows by kWideRunColumns columns of one slab; a slab of more
    // rows than one block gives each block its own partial sums, added in block order after
    const std::int64_t nblocks = (R + kWideBlockRows - 1) / kWideBlockRows;
    const std::int64_t nruns = (K + kWideRunColumns - 1) / kWideRunColumns;
    std::vector<Acc> partial(nblocks > 1 ? static_cast<std::size_t>(B * nblocks * K) : 0, Acc(0));
    const std::int64_t grain =
        std::max<std::int64_t>(1, kParallelGrain / (std::min(R, kWideBlockRows) * std::min(K, kWideRunColumns)));
    parallel_for(0, B * nblocks * nruns, grain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) {
        const std::int64_t run = t % nruns, blk = (t / nruns) % nblocks, b = t / (nruns * nblocks);
        const std::int64_t c0 = run * kWideRunColumns, r0 = blk * kWideBlockRows;
        Acc* o = nblocks > 1 ? partial.data() + (b * nblocks + blk) * K : reinterpret_cast<Acc*>(out + b * slab_out);
        add_rows<Acc, T>(x + b * slab_x + r0 * rs + c0 * static_cast<std::int64_t>(sizeof(T)),
                         std::min(kWideBlockRows, R - r0), rs, std::min(kWideRunColumns, K - c0), o + c0);
      }
    });
    if (nblocks > 1) add_block_partials(partial, B, nblocks, K, out, slab_out);
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
  add_block_partials(partial, B, blocks, K, out, slab_out);
  return true;
}

// Short rows: the innermost dim reduced and contiguous, of fewer than kShortRow elements, the
// next dim kept (x.sum(1) of an (n, 2) matrix). The loop engine would call its inner loop once per
// row; here a task adds whole rows, each in order, as sum_contiguous adds a row that short (its
// lanes take 16 elements at a time), so the bits are the loop engine's.
constexpr std::int64_t kShortRow = 16;

template <typename Acc, typename T>
bool sum_short_rows(const LoopGeometry<2>& g) {
  if (g.ndim() != 2 || g.strides[0][0] != 0 || g.strides[1][0] != static_cast<std::int64_t>(sizeof(T)) ||
      g.strides[0][1] == 0 || g.shape[0] >= kShortRow)
    return false;
  const std::int64_t K = g.shape[0], R = g.shape[1], rs = g.strides[1][1], os = g.strides[0][1];
  char* const out = g.data[0];
  const char* const x = g.data[1];
  parallel_for(0, R, std::max<std::int64_t>(1, kParallelGrain / K), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* p = reinterpret_cast<const T*>(x + r * rs);
      Acc s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += static_cast<Acc>(p[k]);
      *reinterpret_cast<Acc*>(out + r * os) += s;
    }
  });
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
  if (sum_columns<Acc, T>(g) || sum_short_rows<Acc, T>(g)) return;
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

// The sums of a reduction, zeroed, in a block of the caching allocator (Note [Caching CPU
// allocator]): a reduction with many outputs (x.sum(1) of an (n, 2) matrix: 8M doubles) would
// otherwise map fresh pages and fault each one in on every call.
template <typename Acc>
class SumBuffer {
 public:
  explicit SumBuffer(std::int64_t n)
      : bytes_(static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(Acc)),
        data_(static_cast<Acc*>(cpu_allocator::allocate(bytes_))) {
    std::fill(data_, data_ + n, Acc(0));
  }
  ~SumBuffer() { cpu_allocator::deallocate(data_, bytes_); }
  SumBuffer(const SumBuffer&) = delete;
  SumBuffer& operator=(const SumBuffer&) = delete;
  Acc* data() const { return data_; }

 private:
  std::size_t bytes_;
  Acc* data_;
};

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
      const SumBuffer<float> acc(out_numel);
      sum_into<float, T>(self, r, acc.data());
      finish(acc.data());
    } else if (floating) {
      const SumBuffer<double> acc(out_numel);
      sum_into<double, T>(self, r, acc.data());
      finish(acc.data());
    } else {
      // integers wrap around on overflow, as in PyTorch (unsigned arithmetic: never undefined)
      const SumBuffer<std::uint64_t> acc(out_numel);
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
