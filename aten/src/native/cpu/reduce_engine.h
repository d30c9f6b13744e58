#pragma once
// The CPU loop of reductions over dims (prod, amax, all, norm, logsumexp, var, argmax, max.dim)
// and of ops along one dim (cumsum, sort, topk). See Note [Reduction rows].
//
// Note [Reduction rows]
// x: any shape and strides (broadcast strides of 0 included). A reduction maps each combination
// of the kept dims (one output, numbered in row-major order of the kept dims: the order of a
// fresh contiguous output) to its "row": the K elements that differ only in the reduced dims,
// in row-major order of those dims. That order is the index argmax reports (for dim=None, the
// index into the flattened input). An op supplies
//   Acc  identity()                          the reduction of no elements
//   Acc  run(const T* x, int64 n, int64 k0)  the reduction of n contiguous row elements, the
//                                            first of which is element k0 of its row (n >= 1)
//   void merge(Acc& a, const Acc& b)         a, then b: b's elements follow a's in the row
//   void write(int64 o, const Acc& a)        stores output o
// Rows whose elements are not contiguous in memory are gathered into a buffer, at most
// kRowChunk elements at a time, before `run` (in tiles of neighbouring rows where the innermost
// kept dim is contiguous: Note [Reduction tiles]).
//
// Work is cut into tasks whose boundaries depend only on the shape, never on the thread count:
// ranges of whole rows of about kRowChunk elements, or, when a few rows are long, chunks of
// kRowChunk elements (or the op's kLongRowChunk: long_row_chunk) of one row whose partial
// results are merged in row order afterwards. So a result is the same bits with 1 thread or
// many. Tasks run through run_loop (loops.h), which owns the threading.
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "kael/core/tensor.h"
#include "kael/native/loops.h"

namespace kael::native {

inline constexpr std::int64_t kRowChunk = 16384;

// Whether v is NaN (false for every type without one).
template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return v != v;
  } else {
    return false;
  }
}

// A multi-index over dims in row-major order (the last dim moves fastest) that tracks its offset
// in elements.
struct StridedWalk {
  const DimVector* sizes = nullptr;
  const DimVector* strides = nullptr;
  DimVector index;
  std::int64_t offset = 0;

  StridedWalk(const DimVector& sizes_, const DimVector& strides_) : sizes(&sizes_), strides(&strides_) {}
  // Moves to the element of row-major position `linear`.
  void seek(std::int64_t linear) {
    const int nd = static_cast<int>(sizes->size());
    index.assign(nd, 0);
    offset = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const std::int64_t s = (*sizes)[d];
      index[d] = linear % s;
      linear /= s;
      offset += index[d] * (*strides)[d];
    }
  }
  void next() {
    for (int d = static_cast<int>(sizes->size()) - 1; d >= 0; --d) {
      offset += (*strides)[d];
      if (++index[d] < (*sizes)[d]) return;
      offset -= index[d] * (*strides)[d];
      index[d] = 0;
    }
  }
};

// The rows of a reduction (Note [Reduction rows]): strides are x's, in elements.
struct RowPlan {
  std::int64_t outputs = 1;  // M
  std::int64_t length = 1;   // K, elements per row
  DimVector kept_sizes, kept_strides;  // kept dims, row-major, merged where contiguous
  DimVector red_sizes, red_strides;    // reduced dims, row-major, merged where contiguous
  bool contiguous = true;              // each row is contiguous in memory
};

// Drops size-1 dims and merges neighbours that are contiguous with each other (row-major).
inline void coalesce_dims(DimVector& sizes, DimVector& strides) {
  DimVector s, t;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!s.empty() && t.back() == strides[i] * sizes[i]) {
      s.back() *= sizes[i];
      t.back() = strides[i];
      continue;
    }
    s.push_back(sizes[i]);
    t.push_back(strides[i]);
  }
  sizes = s;
  strides = t;
}

inline RowPlan make_row_plan(const Tensor& x, const std::vector<bool>& reduced) {
  RowPlan p;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    const std::int64_t size = x.sizes()[d], stride = x.strides()[d];
    if (reduced[d]) {
      p.length *= size;
      p.red_sizes.push_back(size);
      p.red_strides.push_back(stride);
    } else {
      p.outputs *= size;
      p.kept_sizes.push_back(size);
      p.kept_strides.push_back(stride);
    }
  }
  coalesce_dims(p.kept_sizes, p.kept_strides);
  coalesce_dims(p.red_sizes, p.red_strides);
  p.contiguous = p.red_sizes.empty() || (p.red_sizes.size() == 1 && p.red_strides[0] == 1);
  return p;
}

// Runs task(i) for every i in [0, n); the tasks go to several threads when n * work (the
// elements a task touches) reaches the loop engine's grain. Expressed as a run_loop over n rows
// of `work` elements of a buffer of n bytes (the row's address is its task number), so that the
// loop engine alone decides about threads. The task is compiled once, out of line, and the walk
// is run_rows's (Note [One copy of the loops] in kael/native/loops.h).
template <typename F>
void parallel_tasks(std::int64_t n, std::int64_t work, F&& task) {
  if (n <= 0) return;
  work = std::max<std::int64_t>(work, 1);
  struct Context {
    std::remove_reference_t<F>* task;
    const char* base;
    [[gnu::noinline]] void run(std::int64_t i) const { (*task)(i); }
    static void row(const void* c, char* const* ptrs, const std::int64_t*, std::int64_t) {
      const Context& self = *static_cast<const Context*>(c);
      self.run(ptrs[0] - self.base);
    }
  };
  if (n == 1 || n * work < kParallelGrain) {
    const Context context{&task, nullptr};
    for (std::int64_t i = 0; i < n; ++i) context.run(i);
    return;
  }
  std::vector<char> ids(static_cast<std::size_t>(n));
  char* const base = ids.data();
  LoopGeometry<1> g;
  g.shape = {work, n};
  g.strides[0] = {0, 1};
  g.data = {base};
  g.numel = work * n;
  const Context context{&task, base};
  run_rows<1>(g, &Context::row, &context);
}

// Note [Reduction tiles]
// When the innermost kept dim is contiguous in memory (stride 1) and the rows are not (a
// reduction over outer dims: x.amax(0) of a matrix, x.prod(0) of an (n, 2) tensor), the rows of
// neighbouring outputs lie side by side: element k of rows o .. o + B - 1 is B consecutive
// elements. Gathering one row at a time would read a cache line for each element; instead a task
// copies a tile, row position by row position (B consecutive elements at a time), into B row
// buffers and runs each. A task is a group of B outputs (within one run of the innermost kept dim)
// and one chunk of kRowChunk row positions: the segments are those of the gather (chunks at fixed
// offsets, merged in order), so the results are the same bits, on any number of threads.
inline constexpr std::int64_t kTileAhead = 16;  // positions (Note [Reduction tiles])

// Merges each output's chunk results (partial[o * chunks + c]) in chunk order and writes it.
template <typename Op, typename Acc>
void merge_partials(const Op& op, const Acc* partial, std::int64_t outputs, std::int64_t chunks) {
  for (std::int64_t o = 0; o < outputs; ++o) {
    Acc acc = partial[o * chunks];
    for (std::int64_t c = 1; c < chunks; ++c) op.merge(acc, partial[o * chunks + c]);
    op.write(o, acc);
  }
}

#if defined(__AVX512F__)
// Copies a 16 x 16 block of 4-byte elements transposed: element b0 + c of row r (src[r] + b0 +
// c) goes to out[c * ld + r]. Four steps of unpacks and lane shuffles in 512-bit registers.
namespace tile_detail {
// (the masked forms with every lane set: GCC 12's unmasked ones start from an undefined vector
// and warn where inlined)
inline __m512i unpack_lo32(__m512i a, __m512i b) { return _mm512_mask_unpacklo_epi32(a, 0xffff, a, b); }
inline __m512i unpack_hi32(__m512i a, __m512i b) { return _mm512_mask_unpackhi_epi32(a, 0xffff, a, b); }
inline __m512i unpack_lo64(__m512i a, __m512i b) { return _mm512_mask_unpacklo_epi64(a, 0xff, a, b); }
inline __m512i unpack_hi64(__m512i a, __m512i b) { return _mm512_mask_unpackhi_epi64(a, 0xff, a, b); }
template <int kImm>
inline __m512i lanes(__m512i a, __m512i b) { return _mm512_mask_shuffle_i32x4(a, 0xffff, a, b, kImm); }
}  // namespace tile_detail

template <typename T>
inline void transpose_16x16_4bytes(const T* const src[16], std::int64_t b0, T* out, std::int64_t ld) {
  static_assert(sizeof(T) == 4);
  using namespace tile_detail;
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src[i] + b0);
  for (int i = 0; i < 8; ++i) {  // 32-bit pairs of rows 2i and 2i + 1
    t[2 * i] = unpack_lo32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = unpack_hi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // 64-bit pairs: each 128-bit lane L of r[4i + j] is column 4L + j of rows 4i .. 4i + 3
    r[4 * i] = unpack_lo64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = unpack_hi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = unpack_lo64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = unpack_hi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {  // 128-bit lanes, then again: column c gathers its four lanes
    t[j] = lanes<0x88>(r[j], r[4 + j]);
    t[4 + j] = lanes<0xdd>(r[j], r[4 + j]);
    t[8 + j] = lanes<0x88>(r[8 + j], r[12 + j]);
    t[12 + j] = lanes<0xdd>(r[8 + j], r[12 + j]);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = lanes<0x88>(t[j], t[8 + j]);
    r[8 + j] = lanes<0xdd>(t[j], t[8 + j]);
    r[4 + j] = lanes<0x88>(t[4 + j], t[12 + j]);
    r[12 + j] = lanes<0xdd>(t[4 + j], t[12 + j]);
  }
  for (int c = 0; c < 16; ++c) _mm512_storeu_si512(out + c * ld, r[c]);
}
#endif

template <typename T, typename Op>
void reduce_tiles(const T* base, const RowPlan& p, const Op& op) {
  using Acc = decltype(op.identity());
  const std::int64_t M = p.outputs, K = p.length;
  const std::int64_t run = p.kept_sizes.back();  // outputs whose rows lie side by side
  const std::int64_t chunk = std::min(K, kRowChunk), chunks = (K + kRowChunk - 1) / kRowChunk;
  // B: a tile within 1 MB (one core's L2 on AMD Zen 4), but at least a cache line of outputs (16
  // floats), so that each position's line is read once; at most 64 (larger tiles, past L2, were
  // no faster: docs/performance.md, "Measurements moved out of decisions and comments").
  const std::int64_t group = std::clamp<std::int64_t>(
      (std::int64_t{1024} << 10) / (chunk * static_cast<std::int64_t>(sizeof(T))),
      std::min<std::int64_t>(run, 64 / static_cast<std::int64_t>(sizeof(T))), std::min<std::int64_t>(run, 64));
  const std::int64_t groups_per_run = (run + group - 1) / group;
  const std::int64_t groups = M / run * groups_per_run;
  // The chunks' results when a row has several (then M <= numel / kRowChunk); else each task
  // writes its outputs. (Not std::vector: Acc may be bool, whose packed bits threads cannot
  // write concurrently.)
  const std::unique_ptr<Acc[]> partial =
      chunks > 1 ? std::make_unique<Acc[]>(static_cast<std::size_t>(M * chunks)) : nullptr;
  parallel_tasks(groups * chunks, group * chunk, [&](std::int64_t t) {
    const std::int64_t g = t / chunks, c = t % chunks;
    const std::int64_t first = g / groups_per_run * run + g % groups_per_run * group;  // output
    const std::int64_t b_count = std::min(group, run - g % groups_per_run * group);
    const std::int64_t k0 = c * kRowChunk, n = std::min(kRowChunk, K - k0);
    StridedWalk kept(p.kept_sizes, p.kept_strides);
    kept.seek(first);
    const T* const rows = base + kept.offset;
    // The tile's rows lie ld elements apart: n rounded up to a cache line, plus one line, so that
    // the B stores of one position fall in different cache sets (rows a power of two apart
    // would share one set). (std::unique_ptr<T[]>, not std::vector: T may be bool.)
    constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(T));
    const std::int64_t ld = (n + kLine - 1) / kLine * kLine + kLine;
    const std::unique_ptr<T[]> tile = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(b_count * ld));
    // Positions in blocks of 16: their addresses, then the copy (a 16 x 16 transpose in registers
    // where it applies). With one reduced dim (the common case) positions lie a stride apart, each
    // on lines of its own, and the lines kTileAhead positions ahead are fetched early, so that
    // many are in flight (on every CPU, unlike the streaming loops' prefetch).
    StridedWalk w(p.red_sizes, p.red_strides);
    const bool one_dim = p.red_sizes.size() == 1;
    const std::int64_t stride = one_dim ? p.red_strides[0] : 0;
    if (!one_dim) w.seek(k0);
    const T* src[16];
    for (std::int64_t i = 0; i < n; i += 16) {
      const std::int64_t count = std::min<std::int64_t>(16, n - i);
      for (std::int64_t j = 0; j < count; ++j) {
        if (one_dim) {
          src[j] = rows + (k0 + i + j) * stride;
          // (the address in integers: it may lie past the end of the input)
          __builtin_prefetch(reinterpret_cast<const void*>(
              reinterpret_cast<std::uintptr_t>(src[j]) +
              static_cast<std::uintptr_t>(kTileAhead * stride * static_cast<std::int64_t>(sizeof(T)))));
        } else {
          src[j] = rows + w.offset;
          w.next();
        }
      }
      std::int64_t b = 0;
#if defined(__AVX512F__)
      if constexpr (sizeof(T) == 4) {
        if (count == 16)
          for (; b + 16 <= b_count; b += 16) transpose_16x16_4bytes(src, b, tile.get() + b * ld + i, ld);
      }
#endif
      for (std::int64_t j = 0; j < count; ++j)
        for (std::int64_t bb = b; bb < b_count; ++bb) tile[bb * ld + i + j] = src[j][bb];
    }
    for (std::int64_t b = 0; b < b_count; ++b) {
      if (chunks == 1) {
        op.write(first + b, op.run(tile.get() + b * ld, n, k0));
      } else {
        partial[(first + b) * chunks + c] = op.run(tile.get() + b * ld, n, k0);
      }
    }
  });
  if (chunks > 1) merge_partials(op, partial.get(), M, chunks);
}

// Note [Columns in blocks]
// One reduced dim outside contiguous outputs (x.prod(0) of a matrix, x.norm(dim=1) of (B, T, C),
// x.all(0) of an (n, 2) tensor): the rows of neighbouring outputs lie side by side, so rather than
// copy tiles of them (Note [Reduction tiles]) a task walks a block of input rows in memory order
// with one accumulator per output column: kColumnBlockRows rows, or about kParallelGrain elements
// of narrow rows. A slab of more rows than one block gives each block its own accumulators,
// merged in block order after, so the results are the same bits on any number of threads.
// Ops that give step(a, v) (a, then the element v) go this way from reduce_rows; amax/amin use
// the same walk (Note [Extremes down columns]).
inline constexpr std::int64_t kColumnBlockRows = 256;

// Whether the plan is one of Note [Columns in blocks].
inline bool columns_apply(const RowPlan& p) {
  return !p.contiguous && p.red_sizes.size() == 1 && !p.kept_sizes.empty() && p.kept_strides.back() == 1 &&
         p.red_strides[0] != 0 && p.length > 1;
}

// The walk of Note [Columns in blocks]: block(first, rows, rs, run, acc) reduces `rows` rows of
// `run` columns from `first` (rows rs elements apart) into acc[0, run); then, per slab of `run`
// outputs, finish(slab, part, nblocks, block_rows) gets its blocks' accumulators (part: nblocks x
// run, block order) and writes its outputs.
template <typename Acc, typename T, typename Block, typename Finish>
void walk_column_blocks(const T* base, const RowPlan& p, Block&& block, Finish&& finish) {
  const std::int64_t R = p.length, rs = p.red_strides[0], run = p.kept_sizes.back();
  const std::int64_t slabs = p.outputs / run;
  const std::int64_t block_rows = std::max(kColumnBlockRows, kParallelGrain / run);
  const std::int64_t nblocks = (R + block_rows - 1) / block_rows;
  // the accumulators of each (slab, block) (not std::vector: Acc may be bool, whose packed bits
  // threads cannot write concurrently)
  const std::unique_ptr<Acc[]> part = std::make_unique<Acc[]>(static_cast<std::size_t>(p.outputs * nblocks));
  parallel_tasks(slabs * nblocks, std::min(R, block_rows) * run, [&](std::int64_t t) {
    const std::int64_t slab = t / nblocks, blk = t % nblocks;
    StridedWalk kept(p.kept_sizes, p.kept_strides);
    kept.seek(slab * run);
    const std::int64_t r0 = blk * block_rows;
    block(base + kept.offset + r0 * rs, std::min(R - r0, block_rows), rs, run, part.get() + t * run);
  });
  parallel_tasks(slabs, nblocks * run, [&](std::int64_t slab) {
    finish(slab, part.get() + slab * nblocks * run, nblocks, block_rows);
  });
}

// The finish of walk_column_blocks for ops whose blocks merge in order: merge(into, from, run)
// merges a later block's accumulators, write(o, a) stores output o.
template <typename Acc, typename Merge, typename Write>
auto merge_blocks_in_order(std::int64_t run, Merge merge, Write write) {
  return [run, merge, write](std::int64_t slab, Acc* part, std::int64_t nblocks, std::int64_t) {
    for (std::int64_t b = 1; b < nblocks; ++b) merge(part, part + b * run, run);
    for (std::int64_t c = 0; c < run; ++c) write(slab * run + c, part[c]);
  };
}

// Lanes for narrow rows that lie side by side (one run of rows * run elements): element i goes
// into lane i mod P, P = run ceil(kColumnLanes / run), a loop the compiler vectorises, and lane j
// counts for column j mod run.
inline constexpr std::int64_t kColumnLanes = 64;

// a[c] = op.step(a[c], row[c]), c < n (the parameters' __restrict lets the compiler vectorise the
// loop without a run-time overlap check).
template <typename Op, typename T, typename Acc>
void step_row(const Op& op, Acc* __restrict a, const T* __restrict row, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) a[c] = op.step(a[c], row[c]);
}

// Note [Four rows a sweep]
// A walk down columns keeps one accumulator per column and steps it by each row in turn. Where
// the accumulators of a block's columns take more than kSweepAccBytes, a sweep of one row loads
// and stores each of them from L2 again (they share L1 with the rows streaming through), and
// that traffic, not the rows', bounds the walk: AMD Zen 4, x.prod(0) of (4096, 4096) float32
// (double accumulators, 32 KB) ran at half the rate of (16384, 1024) (8 KB). Such blocks are
// swept four rows at a time: each accumulator is loaded once, stepped by the four rows' elements
// in row order, and stored once, in tiles of kSweepTile columns in a local array (so that the
// compiler vectorises the steps without checking whether the rows and the accumulators overlap).
// The steps per column are the same as one row at a time, in the same order: the same bits.
// Narrower blocks keep one row a sweep (four short streams at once are followed worse by the
// prefetchers: Note [Column sums]).
inline constexpr std::int64_t kSweepAccBytes = 8192;
inline constexpr std::int64_t kSweepTile = 64;

// Whether a block whose columns' accumulators take bytes_per_column each, run columns, sweeps
// four rows at a time.
constexpr bool sweep_four_rows(std::int64_t run, std::size_t bytes_per_column, std::int64_t above = kSweepAccBytes) {
  return run * static_cast<std::int64_t>(bytes_per_column) > above;
}

// a[c] = step(step(step(step(a[c], x0[c]), x1[c]), x2[c]), x3[c]), c < n, for the four rows from
// x (rs elements apart): each row over a tile in turn (loops the compiler vectorises; a chain of
// four steps per column in one loop was not, for the extremes' selects).
template <typename T, typename Acc, typename Step>
void sweep_four(Acc* a, const T* x, std::int64_t rs, std::int64_t n, Step step) {
  const T* __restrict x0 = x;
  const T* __restrict x1 = x + rs;
  const T* __restrict x2 = x + 2 * rs;
  const T* __restrict x3 = x + 3 * rs;
  Acc t[kSweepTile];
  std::int64_t c = 0;
  for (; c + kSweepTile <= n; c += kSweepTile) {
    for (std::int64_t j = 0; j < kSweepTile; ++j) t[j] = a[c + j];
    for (std::int64_t j = 0; j < kSweepTile; ++j) t[j] = step(t[j], x0[c + j]);
    for (std::int64_t j = 0; j < kSweepTile; ++j) t[j] = step(t[j], x1[c + j]);
    for (std::int64_t j = 0; j < kSweepTile; ++j) t[j] = step(t[j], x2[c + j]);
    for (std::int64_t j = 0; j < kSweepTile; ++j) t[j] = step(t[j], x3[c + j]);
    for (std::int64_t j = 0; j < kSweepTile; ++j) a[c + j] = t[j];
  }
  for (; c < n; ++c) a[c] = step(step(step(step(a[c], x0[c]), x1[c]), x2[c]), x3[c]);
}

// A block of Note [Columns in blocks] by op.step: each column's elements in row order, or, for
// narrow rows side by side, in lanes merged into the columns after (the same elements, in
// another order).
template <typename Op, typename T, typename Acc>
void step_column_block(const Op& op, const T* x, std::int64_t rows, std::int64_t rs, std::int64_t run, Acc* acc) {
  for (std::int64_t c = 0; c < run; ++c) acc[c] = op.identity();
  if (rs == run && run < kColumnLanes) {
    const std::int64_t n = rows * run, P = run * ((kColumnLanes + run - 1) / run);
    std::int64_t i = 0;
    if (n >= 2 * P) {
      Acc lanes[2 * kColumnLanes];
      for (std::int64_t j = 0; j < P; ++j) lanes[j] = op.identity();
      for (; i + P <= n; i += P)
        for (std::int64_t j = 0; j < P; ++j) lanes[j] = op.step(lanes[j], x[i + j]);
      for (std::int64_t j = 0; j < P; ++j) op.merge(acc[j % run], lanes[j]);
    }
    for (; i < n; i += run)
      for (std::int64_t c = 0; c < run; ++c) acc[c] = op.step(acc[c], x[i + c]);
    return;
  }
  std::int64_t r = 0;
  if (sweep_four_rows(run, sizeof(Acc)))  // Note [Four rows a sweep]
    for (; r + 4 <= rows; r += 4)
      sweep_four(acc, x + r * rs, rs, run, [&](Acc a, T v) { return op.step(a, v); });
  for (; r < rows; ++r) step_row(op, acc, x + r * rs, run);
}

// The chunk of a long row that one task reduces (Note [Reduction rows]): kRowChunk elements, or
// an op's own kLongRowChunk (a multiple of kRowChunk; logsumexp reads four streams of a chunk side
// by side, Note [logsumexp in four streams] in logsumexp.cpp).
template <typename Op>
constexpr std::int64_t long_row_chunk() {
  if constexpr (requires { Op::kLongRowChunk; }) {
    static_assert(Op::kLongRowChunk % kRowChunk == 0);
    return Op::kLongRowChunk;
  } else {
    return kRowChunk;
  }
}

// Reduces the rows of x (element type T) with op (Note [Reduction rows]).
template <typename T, typename Op>
void reduce_rows(const Tensor& x, const RowPlan& p, const Op& op) {
  using Acc = decltype(op.identity());
  const std::int64_t M = p.outputs, K = p.length;
  if (M == 0) return;
  if (K == 0) {
    for (std::int64_t o = 0; o < M; ++o) op.write(o, op.identity());
    return;
  }
  const T* const base = x.data<T>();
  // The reduction of row elements [k0, k0 + n) of the row that starts at base + row.
  // A gather buffer per task (std::unique_ptr<T[]>, not std::vector: T may be bool).
  struct Buffer {
    std::unique_ptr<T[]> data;
    T* get(std::int64_t n) {
      if (!data) data = std::make_unique<T[]>(static_cast<std::size_t>(std::min(n, kRowChunk)));
      return data.get();
    }
  };
  // (out of line: the two task kinds below share one copy of op.run's loop)
  auto segment = [&](std::int64_t row, std::int64_t k0, std::int64_t n, Buffer& buffer) __attribute__((noinline)) -> Acc {
    if (p.contiguous) return op.run(base + row + k0, n, k0);
    T* const buf = buffer.get(K);
    StridedWalk w(p.red_sizes, p.red_strides);
    w.seek(k0);
    Acc acc{};
    for (std::int64_t s = 0; s < n; s += kRowChunk) {
      const std::int64_t m = std::min(kRowChunk, n - s);
      for (std::int64_t i = 0; i < m; ++i, w.next()) buf[i] = base[row + w.offset];
      const Acc a = op.run(buf, m, k0 + s);
      if (s == 0) {
        acc = a;
      } else {
        op.merge(acc, a);
      }
    }
    return acc;
  };
  if constexpr (requires(Acc a, T v) { a = op.step(a, v); }) {
    if (columns_apply(p)) {  // Note [Columns in blocks]
      walk_column_blocks<Acc>(
          base, p,
          [&](const T* first, std::int64_t rows, std::int64_t rs, std::int64_t run, Acc* acc) {
            step_column_block(op, first, rows, rs, run, acc);
          },
          merge_blocks_in_order<Acc>(
              p.kept_sizes.back(),
              [&](Acc* into, const Acc* from, std::int64_t run) {
                for (std::int64_t c = 0; c < run; ++c) op.merge(into[c], from[c]);
              },
              [&](std::int64_t o, const Acc& a) { op.write(o, a); }));
      return;
    }
  }
  if (!p.contiguous && !p.kept_sizes.empty() && p.kept_strides.back() == 1) {
    reduce_tiles<T>(base, p, op);
    return;
  }
  constexpr std::int64_t chunk = long_row_chunk<Op>();
  if (M < 32 && K > 2 * chunk) {
    // Few long rows: chunks of rows, merged in order.
    const std::int64_t chunks = (K + chunk - 1) / chunk;
    // (not std::vector: Acc may be bool, whose packed bits threads cannot write concurrently)
    const std::unique_ptr<Acc[]> partial = std::make_unique<Acc[]>(static_cast<std::size_t>(M * chunks));
    parallel_tasks(M * chunks, chunk, [&](std::int64_t t) {
      const std::int64_t o = t / chunks, c = t % chunks;
      StridedWalk kept(p.kept_sizes, p.kept_strides);
      kept.seek(o);
      Buffer buf;
      const std::int64_t k0 = c * chunk;
      partial[t] = segment(kept.offset, k0, std::min(chunk, K - k0), buf);
    });
    merge_partials(op, partial.get(), M, chunks);
    return;
  }
  const std::int64_t rows_per_task = std::max<std::int64_t>(1, kRowChunk / K);
  const std::int64_t tasks = (M + rows_per_task - 1) / rows_per_task;
  parallel_tasks(tasks, rows_per_task * K, [&](std::int64_t t) {
    const std::int64_t begin = t * rows_per_task, end = std::min(M, begin + rows_per_task);
    StridedWalk kept(p.kept_sizes, p.kept_strides);
    kept.seek(begin);
    Buffer buf;
    for (std::int64_t o = begin; o < end; ++o, kept.next()) op.write(o, segment(kept.offset, 0, K, buf));
  });
}

// The lines of an op along one dim of x (cumsum, sort, topk): one line per combination of the
// other dims, in row-major order (the order of a fresh contiguous output). Strides in elements.
struct LinePlan {
  std::int64_t lines = 1;
  std::int64_t length = 1;  // x's size along dim (1 for a 0-d x)
  std::int64_t stride = 0;  // x's stride along dim
  DimVector other_sizes, other_strides;  // x's other dims, merged where contiguous
};

inline LinePlan make_line_plan(const Tensor& x, std::int64_t dim) {
  LinePlan p;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim) {
      p.length = x.sizes()[d];
      p.stride = x.strides()[d];
      continue;
    }
    p.lines *= x.sizes()[d];
    p.other_sizes.push_back(x.sizes()[d]);
    p.other_strides.push_back(x.strides()[d]);
  }
  coalesce_dims(p.other_sizes, p.other_strides);
  return p;
}

// Calls line(i, a_offset, b_offset) for every line i of two tensors of the same line structure
// (an input and its output: offsets of line i's first element in each), spread over threads in
// tasks of about kRowChunk elements (cost: elements touched per line). A line of a's with no
// element is not visited (the callers' lines only visit elements): an empty tensor such as
// (2^61, 0) scanned along its empty dim has 2^61 such lines.
template <typename F>
void for_each_line(const LinePlan& a, const LinePlan& b, std::int64_t cost, F&& line) {
  if (a.lines == 0 || a.length == 0) return;
  cost = std::max<std::int64_t>(cost, 1);
  const std::int64_t per_task = std::max<std::int64_t>(1, kRowChunk / cost);
  const std::int64_t tasks = (a.lines + per_task - 1) / per_task;
  parallel_tasks(tasks, per_task * cost, [&](std::int64_t t) {
    const std::int64_t begin = t * per_task, end = std::min(a.lines, begin + per_task);
    StridedWalk wa(a.other_sizes, a.other_strides), wb(b.other_sizes, b.other_strides);
    wa.seek(begin);
    wb.seek(begin);
    for (std::int64_t i = begin; i < end; ++i, wa.next(), wb.next()) line(i, wa.offset, wb.offset);
  });
}

}  // namespace kael::native
