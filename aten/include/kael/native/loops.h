#pragma once
// The strided loop engine shared by pointwise ops, copies and reductions.
//
// Note [Loop geometry]
// An op over N operands (outputs first) iterates one shape. Each operand is broadcast to
// that shape (stride 0 where it repeats), then the dims are reordered fastest-first the way
// PyTorch's TensorIterator does (by the operands' strides, so transposed inputs are walked
// in memory order) and adjacent dims that are contiguous for every operand are merged.
// Contiguous operands of one shape collapse to a single dim: the inner loop is then a plain
// indexed loop the compiler vectorises. Strides here are in bytes.

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#if (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

#include "kael/core/small_vector.h"
#include "kael/runtime/threads.h"

namespace kael::native {

// Up to this many elements a loop runs on the calling thread; above, it splits into at most one
// piece per kParallelGrain elements, at most 8 per thread (parallel_for's grain, Note [Thread
// pool] and Note [Pieces and stealing] in kael/runtime/threads.h).
inline constexpr std::int64_t kParallelGrain = 32768;

// The length of the long row whose piece this thread runs (Note [Streaming stores]), else 0.
inline thread_local std::int64_t tls_run_elements = 0;

struct OperandView {
  char* data = nullptr;
  IntArrayRef sizes;    // broadcastable to the iteration shape (right-aligned)
  IntArrayRef strides;  // in elements
  int itemsize = 1;
};

template <int N>
struct LoopGeometry {
  DimVector shape;           // fastest dim first
  DimVector strides[N];      // bytes, same order as shape
  std::array<char*, N> data{};
  std::int64_t numel = 1;
  int ndim() const { return static_cast<int>(shape.size()); }
};

// Broadcast strides of an operand over `shape` (right-aligned; 0 where it repeats), in units
// of `scale` (1 for elements, the item size for bytes).
DimVector broadcast_strides(IntArrayRef shape, const OperandView& op, std::int64_t scale);

// The dims of `shape` fastest first, ordered by the strides of `count` operands the way
// PyTorch's TensorIterator orders them (see Note [Loop geometry]).
DimVector iteration_order(IntArrayRef shape, const DimVector* strides, int count);

// Builds the geometry of N operands iterated over `shape`; `reorder` sorts dims by strides.
template <int N>
LoopGeometry<N> make_geometry(IntArrayRef shape, const std::array<OperandView, N>& ops, bool reorder = true) {
  const std::int64_t nd = static_cast<std::int64_t>(shape.size());
  LoopGeometry<N> g;
  for (int k = 0; k < N; ++k) g.data[k] = ops[k].data;
  if (std::find(shape.begin(), shape.end(), std::int64_t{0}) != shape.end()) {
    // No element: nothing moves. The other dims' product, and an empty operand's strides in
    // bytes, may not fit in int64 (shape (0, 2^62)), so they are not computed.
    g.numel = 0;
    g.shape.push_back(0);
    for (int k = 0; k < N; ++k) g.strides[k].push_back(0);
    return g;
  }
  DimVector bstrides[N];  // broadcast strides in bytes, natural dim order
  for (int k = 0; k < N; ++k) bstrides[k] = broadcast_strides(shape, ops[k], ops[k].itemsize);
  DimVector perm = reorder ? iteration_order(shape, bstrides, N) : DimVector(nd);
  if (!reorder)
    for (std::int64_t i = 0; i < nd; ++i) perm[i] = nd - 1 - i;
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t d = perm[i];
    g.numel *= shape[d];
    if (shape[d] == 1) continue;  // size-1 dims do not move any pointer
    const int last = g.ndim() - 1;
    bool merge = last >= 0;
    for (int k = 0; k < N && merge; ++k)
      merge = bstrides[k][d] == g.shape[last] * g.strides[k][last];
    if (merge) {
      g.shape[last] *= shape[d];
      continue;
    }
    g.shape.push_back(shape[d]);
    for (int k = 0; k < N; ++k) g.strides[k].push_back(bstrides[k][d]);
  }
  if (g.shape.empty()) {  // 0-d or all size-1: one element
    g.shape.push_back(1);
    for (int k = 0; k < N; ++k) g.strides[k].push_back(0);
  }
  return g;
}

// Note [Repeating inputs]
// Broadcasting can leave a geometry whose rows are short and whose inputs repeat: x * w with x a
// channels-last (N, C, H, W) tensor and w of shape (1, C, 1, 1) iterates rows of C elements (w
// contiguous along them, stride 0 everywhere else), and where(mask, x, zero) with a 0-d `zero`
// reads one element everywhere. The inner loop then runs C elements at a time (8 in a small
// U-Net), or a strided loop for the 0-d input, far from its rate. So, for pointwise loops, such
// an input is copied into a small buffer that repeats it: C elements m times (m rows merged into
// one, the others' strides scaled by m), or one element a row's length (at most
// kRepeatElements; a longer row is split first). Every operand of the new inner dim is then
// contiguous and the loop is the vectorised one. Each element is still computed once from the
// same values. Only inputs (operands first_input.. N-1) are copied; a written operand never
// repeats (an output with a stride of 0 would overlap itself and is refused before this).
inline constexpr std::int64_t kRepeatElements = 1024;

// Rewrites g as described in Note [Repeating inputs] when it pays, with the buffers in `storage`
// (which must outlive the loop); itemsize is the inputs' element size. Returns whether it did.
template <int N>
bool widen_repeating_inputs(LoopGeometry<N>& g, int first_input, std::int64_t itemsize, std::vector<char>& storage) {
  const int nd = g.ndim();
  if (g.numel < 2 * 64) return false;
  // An input that reads one value per row everywhere (stride 0 in every dim): a constant.
  // An input contiguous along dim 0 and stride 0 in every other dim: a pattern repeated per row.
  enum Kind : char { kOther, kConstant, kPattern };
  std::array<Kind, N> kind{};
  bool any = false;
  for (int k = first_input; k < N; ++k) {
    bool rest_zero = true;
    for (int d = 1; d < nd; ++d) rest_zero = rest_zero && g.strides[k][d] == 0;
    if (!rest_zero) continue;
    if (g.strides[k][0] == 0) kind[k] = kConstant;
    else if (g.strides[k][0] == itemsize && nd >= 2) kind[k] = kPattern;
    any = any || kind[k] != kOther;
  }
  if (!any) return false;
  const std::int64_t n0 = g.shape[0];
  bool has_pattern = false;
  for (int k = 0; k < N; ++k) has_pattern = has_pattern || kind[k] == kPattern;
  if (has_pattern) {
    // Merge m rows: every operand that is not repeating must continue from one row to the next.
    if (n0 >= 64 || nd < 2) return false;
    for (int k = 0; k < N; ++k)
      if (kind[k] == kOther && g.strides[k][1] != n0 * g.strides[k][0]) return false;
    const std::int64_t n1 = g.shape[1];
    std::int64_t m = std::min<std::int64_t>(n1, kRepeatElements / n0);
    while (m > 1 && n1 % m != 0) --m;
    if (m < 2) return false;
    std::size_t bytes = 0;
    for (int k = 0; k < N; ++k)
      if (kind[k] != kOther) bytes += static_cast<std::size_t>(n0 * m * itemsize) + 64;
    storage.assign(bytes, 0);
    char* buf = storage.data();
    for (int k = 0; k < N; ++k) {
      if (kind[k] == kOther) {
        g.strides[k][1] *= m;  // (dim 0 unchanged: contiguous across the merged rows)
        continue;
      }
      const std::int64_t row_bytes = n0 * itemsize;
      for (std::int64_t r = 0; r < m; ++r) {
        if (kind[k] == kPattern) {
          std::memcpy(buf + r * row_bytes, g.data[k], static_cast<std::size_t>(row_bytes));
        } else {
          for (std::int64_t i = 0; i < n0; ++i) std::memcpy(buf + (r * n0 + i) * itemsize, g.data[k], itemsize);
        }
      }
      g.data[k] = buf;
      g.strides[k][0] = itemsize;
      g.strides[k][1] = 0;
      buf += n0 * m * itemsize + 64;
    }
    g.shape[0] = n0 * m;
    g.shape[1] = n1 / m;
    return true;
  }
  // Constants only: rows of at most kRepeatElements (a longer row split by a divisor of it).
  std::int64_t len = n0;
  if (n0 > kRepeatElements) {
    len = kRepeatElements;
    while (len >= 64 && n0 % len != 0) --len;
    if (len < 64) return false;
  }
  std::size_t bytes = 0;
  for (int k = 0; k < N; ++k)
    if (kind[k] == kConstant) bytes += static_cast<std::size_t>(len * itemsize) + 64;
  storage.assign(bytes, 0);
  char* buf = storage.data();
  if (len != n0) {  // dim 0 becomes (len, n0 / len)
    g.shape.insert(1, n0 / len);
    for (int k = 0; k < N; ++k) g.strides[k].insert(1, g.strides[k][0] * len);
    g.shape[0] = len;
  }
  for (int k = 0; k < N; ++k) {
    if (kind[k] != kConstant) continue;
    for (std::int64_t i = 0; i < len; ++i) std::memcpy(buf + i * itemsize, g.data[k], itemsize);
    g.data[k] = buf;
    g.strides[k][0] = itemsize;
    for (std::size_t d = 1; d < g.strides[k].size(); ++d) g.strides[k][d] = 0;
    buf += len * itemsize + 64;
  }
  return true;
}

// The strides of a fresh output laid out in the memory order of the inputs (PyTorch's rule:
// contiguous inputs give a contiguous output, transposed inputs a transposed one).
DimVector output_strides_like(IntArrayRef shape, const OperandView* inputs, int count);

// Runs inner(ptrs, inner_strides, n) over every row of the geometry, rows (or the one row) split
// among the pool's threads when the loop is large. ptrs/inner_strides have N entries.
template <int N, typename Inner>
void run_loop(const LoopGeometry<N>& g, Inner&& inner, bool parallel = true) {
  if (g.numel == 0) return;
  const std::int64_t n0 = g.shape[0];
  std::array<std::int64_t, N> s0;
  for (int k = 0; k < N; ++k) s0[k] = g.strides[k][0];
  const std::int64_t rows = g.numel / n0;
  // Serial walk over rows [begin, end).
  auto walk = [&](std::int64_t begin, std::int64_t end) {
    const int nd = g.ndim();
    DimVector counter(nd, 0);
    std::array<char*, N> ptr = g.data;
    std::int64_t rem = begin;
    for (int d = 1; d < nd; ++d) {
      counter[d] = rem % g.shape[d];
      rem /= g.shape[d];
      for (int k = 0; k < N; ++k) ptr[k] += counter[d] * g.strides[k][d];
    }
    for (std::int64_t r = begin; r < end; ++r) {
      inner(ptr.data(), s0.data(), n0);
      for (int d = 1; d < nd; ++d) {
        for (int k = 0; k < N; ++k) ptr[k] += g.strides[k][d];
        if (++counter[d] < g.shape[d]) break;
        for (int k = 0; k < N; ++k) ptr[k] -= counter[d] * g.strides[k][d];
        counter[d] = 0;
      }
    }
  };
  if (!parallel || g.numel <= kParallelGrain) {
    walk(0, rows);
  } else if (rows == 1) {
    // One long row: split it.
    parallel_for(0, n0, kParallelGrain, [&](std::int64_t begin, std::int64_t end) {
      std::array<char*, N> ptr = g.data;
      for (int k = 0; k < N; ++k) ptr[k] += begin * s0[k];
      // (pieces run one at a time on a thread: nested loops run inline, after this one's)
      struct RunExtent {
        std::int64_t saved = tls_run_elements;
        ~RunExtent() { tls_run_elements = saved; }
      } extent;
      tls_run_elements = n0;
      inner(ptr.data(), s0.data(), end - begin);
    });
  } else {
    // Whole rows per piece.
    parallel_for(0, rows, (kParallelGrain + n0 - 1) / n0, walk);
  }
}

// run_loop over rows computed by one function behind a pointer, row(context, ptrs, strides, n):
// compiled once per operand count (src/native/cpu/loops.cpp), not once per kernel, dtype and
// operand form (Note [One copy of the loops]); so are make_geometry and widen_repeating_inputs.
using RowFn = void (*)(const void* context, char* const* ptrs, const std::int64_t* strides, std::int64_t n);
template <int N>
void run_rows(const LoopGeometry<N>& g, RowFn row, const void* context);

#define KAEL_LOOPS_EXTERN(N)                                                                                 \
  extern template LoopGeometry<N> make_geometry<N>(IntArrayRef, const std::array<OperandView, N>&, bool);   \
  extern template bool widen_repeating_inputs<N>(LoopGeometry<N>&, int, std::int64_t, std::vector<char>&); \
  extern template void run_rows<N>(const LoopGeometry<N>&, RowFn, const void*);
KAEL_LOOPS_EXTERN(1)
KAEL_LOOPS_EXTERN(2)
KAEL_LOOPS_EXTERN(3)
KAEL_LOOPS_EXTERN(4)
#undef KAEL_LOOPS_EXTERN

// Note [Prefetching pointwise loops]
// On CPUs that gain from it (prefetch_streams()), a contiguous run of at least
// kPrefetchMinElements is computed in blocks of kPrefetchBlockBytes of each input, and before each
// block the block kPrefetchBytes ahead is prefetched. Whether it gains depends on the core's own
// prefetchers, so it is decided per CPU family: on for AMD Zen 5 (family 0x1a), where without it
// the compute-heavy kernels ran below their in-cache rate on data from memory; off on AMD Zen 4
// (family 0x19), where it costs, and on every CPU it has not been measured on
// (docs/performance.md, "Measurements moved out of decisions and comments").
// Addresses past the end are only prefetched, never read (a prefetch does not fault).
inline constexpr std::int64_t kPrefetchBytes = 8192;
inline constexpr std::int64_t kPrefetchBlockBytes = 1024;
inline constexpr std::int64_t kPrefetchMinElements = 16384;

// Whether this CPU is one that gains from software prefetching of long contiguous runs (Note
// [Prefetching pointwise loops]): AMD family 0x1a (Zen 5) and later. Decided once.
bool detect_prefetch_streams() noexcept;
inline bool prefetch_streams() noexcept {
  static const bool enabled = detect_prefetch_streams();
  return enabled;
}

// Note [Prefetching reductions' reads]
// The contiguous sums (Note [Sums in four streams] in reduce.cpp), which read a long run and write
// almost nothing, prefetch their reads on CPUs where that gains (prefetch_reads()), decided apart
// from the pointwise loops' prefetching (prefetch_streams()) because the two gain on different
// CPUs. On for Intel cores with AVX512-FP16 (Sapphire Rapids and later), where the float32 sum
// read four prefetched streams much faster than one while the pointwise loops' and logsumexp's
// prefetching cost, so prefetch_streams() stays off there. Off on AMD Zen 4, where a prefetched
// sum lost, and on every CPU it has not been measured on (Zen 5 included): docs/performance.md,
// "Four streams, prefetched, for the float32 sum on Intel" and "Prefetching the sums' reads".
// The prefetches change no value.
// KAEL_PREFETCH_STREAMS=1 or 0 decides both this and prefetch_streams() (measuring, tests).
bool detect_prefetch_reads() noexcept;
inline bool prefetch_reads() noexcept {
  static const bool enabled = detect_prefetch_reads();
  return enabled;
}

#ifndef __CUDACC__
// Prefetches the line `bytes` past p (an address that may lie past the end of its buffer: a
// prefetch does not fault), into every level of cache.
[[gnu::always_inline]] inline void prefetch_ahead_of(const void* p, std::int64_t bytes) noexcept {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(bytes)));
}
#endif

// Note [Streaming stores]
// A contiguous output of at least streaming_store_min_bytes() is written with streaming
// (non-temporal) stores: each 64-byte line is computed into a buffer on the stack, which stays in
// L1, then stored with vmovntdq (or its narrower forms) straight to memory. A plain store first
// reads each line of the output from memory (to own it in cache), so a + b moves 16 bytes per
// element where 12 are needed, and an output that large would leave the caches anyway. The
// threshold is half the last-level cache (an output and an input of that size do not fit in it
// together), at most 64 MB; below it a result stays in cache for the op that reads it next. The
// cap is for the large caches of server sockets, shared by dozens of cores and, on a shared
// host, by other tenants: the Intel Xeon virtual machine of docs/performance.md reports a 480 MB
// L3 (a 240 MB threshold), yet a sum reads 64 MB at the cache's rate and 128 MB at memory's:
// at 64 MB streaming gains there, also when a sum reads the output next; at 32 MB such chains
// lose, the output having stayed in cache. One line per buffer: with 1 KB buffers the
// compute-bound kernels lost, with one line they keep their rate. (The figures, with their
// commits: docs/performance.md, "Measurements moved out of decisions and comments".)
// The stores are ordered (an sfence) before the loop returns, so the thread pool's hand-over
// publishes them.
// KAEL_STREAMING_STORES=1 makes every output of a line or more stream, =0 none (the tests run
// both on every machine).
// The decision is the whole run's, not a piece's: a long row split among threads (run_loop)
// sets tls_run_elements to the row's length around each piece, so that pieces of a 64 MB output
// stream however many pieces the pool cuts (Note [Pieces and stealing] in
// kael/runtime/threads.h); elsewhere it is 0 and the run is the inner loop's own.
//
// Note [The line loop stays a loop]
// The formula's loop runs once per 64-byte line on the streaming path (count = kLine after
// inlining). Left to itself GCC unrolls those 16 iterations completely before it vectorises, and
// its SLP pass then keeps the loads and the arithmetic one lane at a time and builds the line's
// vector from 16 scalars, slower than the plain loop. `#pragma GCC unroll 1` keeps it a loop,
// which the vectoriser turns into one 64-byte load per input, one operation and one vmovntdq.
// The plain path's loop is the same loop with a run-time count, vectorised either way (its
// in-cache rates did not change).
//
// Note [Prefetching streamed runs]
// The streaming path prefetches its inputs (as in Note [Prefetching pointwise loops]) where either
// prefetching choice is on: also on the Intel cores with AVX512-FP16 that prefetch the sums' reads
// (prefetch_reads()), where the plain path does not. There, with streaming stores and without the
// prefetches, a kernel that computes much per element ran at a third of its rate on data in
// cache: the hardware's prefetchers do not keep ahead of a slow reader whose stores bypass the
// cache.
// The streaming path prefetches each line's inputs as it computes the line, kPrefetchBytes
// ahead, not a block of 16 lines at a time as the plain path does (Note [Prefetching pointwise
// loops]): a burst of 16 prefetches holds the core's line-fill buffers that the streaming stores
// need too (tools/bench/stream_store_probe.cpp measures both).
std::int64_t detect_streaming_store_min_bytes() noexcept;
inline std::int64_t streaming_store_min_bytes() noexcept {
  static const std::int64_t bytes = detect_streaming_store_min_bytes();
  return bytes;
}

#ifndef __CUDACC__
// dst[0, 64) <- src[0, 64) with streaming stores; both 64-byte aligned.
[[gnu::always_inline]] inline void stream_store_line(void* dst, const void* src) noexcept {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#if defined(__AVX512F__)
  _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_load_si512(reinterpret_cast<const __m512i*>(s)));
#elif defined(__AVX__)
  for (int b = 0; b < 64; b += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + b), _mm256_load_si256(reinterpret_cast<const __m256i*>(s + b)));
#elif defined(__SSE2__)
  for (int b = 0; b < 64; b += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + b), _mm_load_si128(reinterpret_cast<const __m128i*>(s + b)));
#else
  std::memcpy(d, s, 64);
#endif
}

[[gnu::always_inline]] inline void stream_store_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}
#endif  // __CUDACC__

// Inner loop of a pointwise function of K inputs of type T writing Out: ptrs[0] is the
// output, ptrs[1..K] the inputs. The all-contiguous case is a separate indexed loop so the
// compiler vectorises it.
//
// Note [One copy of the loops]
// A generated kernel instantiates this loop for every dtype of its entry and every operand form
// (a binary op: tensor-tensor, tensor-number, number-tensor), so how many copies of the
// vectorised loop each instantiation holds sets the build's time: the kernels were half the CPU
// time of a clean build when every call site inlined the whole of it (the tiny-tensor path,
// run_loop's row walk and its split row, and within each the plain, streaming and prefetching
// forms of the contiguous loop: about a dozen vectorised loops per dtype and form). Now each
// instantiation holds one out-of-line row function (`row`: the contiguous loop, the two
// broadcast-row loops, the strided loop), one out-of-line contiguous span (`span`) and one
// out-of-line long run (`long_run`: streaming stores, whose line loop stays inlined, and the
// prefetching blocks); run_loop's geometry walk and thread split are compiled once per operand
// count (run_rows, src/native/cpu/loops.cpp) and call `row` through a pointer. What that costs
// at run time is a direct call on the tiny-tensor path and an indirect call per row or piece,
// each far cheaper than the row (docs/build.md, "Clean build", has the figures).
#if defined(__AVX512F__) && !defined(__CUDACC__)
// A formula with a SIMD form (Note [SIMD forms] in kael/native/vec_math.h): a static
// F::simd(__m512) -> __m512 of 16 float lanes that computes the bits of f, lane for lane. The
// generated kernel of an op marked `simd: true` in native_functions.yaml passes one; the loop runs
// it for one input of float, float16 or bfloat16 (computing in float) written to the same type.
void takes_m512(__m512);  // (declared only: a requirement below)
template <typename F, typename Out, typename T, int K>
concept SimdFormula = K == 1 && std::is_same_v<Out, T> && requires(__m512 v) { takes_m512(F::simd(v)); } &&
                      std::is_same_v<std::invoke_result_t<const F&, const T&>, float>;

// dst[0, n) <- F::simd(src[0, n)), both contiguous: float in registers straight from memory (a
// masked load and store for the last partial vector), float16 and bfloat16 converted through a
// buffer with the same conversions as the scalar loop.
template <typename F, typename T>
[[gnu::always_inline]] inline void simd_contiguous(T* __restrict dst, const T* __restrict src, std::int64_t n) {
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(dst + j, F::simd(_mm512_loadu_ps(src + j)));
    if (j < n) {
      const auto mask = static_cast<__mmask16>((1u << (n - j)) - 1u);
      _mm512_mask_storeu_ps(dst + j, mask, F::simd(_mm512_maskz_loadu_ps(mask, src + j)));
    }
  } else {
    alignas(64) float buf[16] = {};
    for (; j < n; j += 16) {
      const std::int64_t c = n - j < 16 ? n - j : 16;
      for (std::int64_t l = 0; l < c; ++l) buf[l] = static_cast<float>(src[j + l]);
      _mm512_store_ps(buf, F::simd(_mm512_load_ps(buf)));
      for (std::int64_t l = 0; l < c; ++l) dst[j + l] = static_cast<T>(buf[l]);
    }
  }
}

// The same over strided operands (byte strides), 16 elements at a time through a buffer.
template <typename F, typename T>
[[gnu::always_inline]] inline void simd_strided(char* dst, std::int64_t dst_stride, const char* src,
                                                std::int64_t src_stride, std::int64_t n) {
  alignas(64) float buf[16] = {};
  for (std::int64_t j = 0; j < n; j += 16) {
    const std::int64_t c = n - j < 16 ? n - j : 16;
    for (std::int64_t l = 0; l < c; ++l)
      buf[l] = static_cast<float>(*reinterpret_cast<const T*>(src + (j + l) * src_stride));
    _mm512_store_ps(buf, F::simd(_mm512_load_ps(buf)));
    for (std::int64_t l = 0; l < c; ++l) *reinterpret_cast<T*>(dst + (j + l) * dst_stride) = static_cast<T>(buf[l]);
  }
}
#define KAEL_LOOPS_SIMD 1
#endif

#ifdef __CUDACC__
#define KAEL_INNER_INLINE
#define KAEL_OUT_OF_LINE
#else
#define KAEL_INNER_INLINE [[gnu::always_inline]]
#define KAEL_OUT_OF_LINE [[gnu::noinline]]
#endif
template <typename Out, typename T, int K, typename F>
struct PointwiseInner {
  F f;
  KAEL_INNER_INLINE void operator()(char* const* ptrs, const std::int64_t* strides, std::int64_t n) const {
    call(ptrs, strides, n, std::make_index_sequence<K>{});
  }
  // The same, one out-of-line copy behind a RowFn: what the tiny-tensor path and run_rows call
  // (Note [One copy of the loops]).
  KAEL_OUT_OF_LINE static void row(const void* self, char* const* ptrs, const std::int64_t* strides, std::int64_t n) {
    static_cast<const PointwiseInner*>(self)->call(ptrs, strides, n, std::make_index_sequence<K>{});
  }
  // Every operand contiguous (ptrs[0] the output, n > 0): the tiny-tensor path, inlined.
  KAEL_INNER_INLINE void contiguous(char* const* ptrs, std::int64_t n) const {
    contiguous_run(ptrs, n, std::make_index_sequence<K>{});
  }

 private:
  template <std::size_t... I>
  KAEL_INNER_INLINE void contiguous_run(char* const* ptrs, std::int64_t n, std::index_sequence<I...> seq) const {
    Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
    const std::array<const T*, K> in{reinterpret_cast<const T*>(ptrs[I + 1])...};
#ifndef __CUDACC__
    if (n >= kPrefetchMinElements || std::max(n, tls_run_elements) * static_cast<std::int64_t>(sizeof(Out)) >=
                                         streaming_store_min_bytes()) {
      long_run(out, in, n, seq);
      return;
    }
#endif
    body(out, in, 0, n);
  }

  // body, one out-of-line copy.
  KAEL_OUT_OF_LINE void span(Out* __restrict dst, const std::array<const T*, K>& in, std::int64_t begin,
                             std::int64_t count) const {
    body(dst, in, begin, count);
  }

  // dst[0, count) <- f(in[begin, begin + count)): the one vectorised loop.
  KAEL_INNER_INLINE void body(Out* __restrict dst, const std::array<const T*, K>& in, std::int64_t begin,
                              std::int64_t count) const {
    body_of(dst, in, begin, count, std::make_index_sequence<K>{});
  }
  template <std::size_t... I>
  KAEL_INNER_INLINE void body_of(Out* __restrict dst, const std::array<const T*, K>& in, std::int64_t begin,
                                 std::int64_t count, std::index_sequence<I...>) const {
#ifdef KAEL_LOOPS_SIMD
    if constexpr (SimdFormula<F, Out, T, K>) {
      simd_contiguous<F>(dst, in[0] + begin, count);
      return;
    }
#endif
#ifndef __CUDACC__
    // Kept a loop (Note [The line loop stays a loop]).
#pragma GCC unroll 1
#endif
    for (std::int64_t j = 0; j < count; ++j) dst[j] = static_cast<Out>(f(in[I][begin + j]...));
  }

#ifndef __CUDACC__
  // A long contiguous run: streaming stores or blocks with prefetches, out of line (Note [One
  // copy of the loops]).
  template <std::size_t... I>
  KAEL_OUT_OF_LINE void long_run(Out* __restrict out, const std::array<const T*, K>& in, std::int64_t n,
                                 std::index_sequence<I...>) const {
    constexpr std::int64_t kBlock =
        kPrefetchBlockBytes / static_cast<std::int64_t>(sizeof(T) > sizeof(Out) ? sizeof(T) : sizeof(Out));
    if (std::max(n, tls_run_elements) * static_cast<std::int64_t>(sizeof(Out)) >= streaming_store_min_bytes()) {
      // A large output: written with streaming stores, a cache line at a time from a buffer
      // in L1 (Note [Streaming stores]). The first elements up to a 64-byte boundary and the
      // last partial line are plain.
      constexpr std::int64_t kLine = 64 / static_cast<std::int64_t>(sizeof(Out));
      const bool prefetch = prefetch_streams() || prefetch_reads();  // Note [Prefetching streamed runs]
      const auto misalign = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(out) % 64);
      std::int64_t i = misalign == 0 ? 0 : (64 - misalign) / static_cast<std::int64_t>(sizeof(Out));
      if (misalign % static_cast<std::int64_t>(sizeof(Out)) == 0 && i + kLine <= n) {
        span(out, in, 0, i);
        alignas(64) Out line[kLine];
        for (; i + kLine <= n; i += kLine) {
          if (prefetch) {
            // the inputs of this line, kPrefetchBytes ahead (a line or more of each input)
            for (std::int64_t b = 0; b < kLine * static_cast<std::int64_t>(sizeof(T)); b += 64)
              (prefetch_ahead_of(in[I] + i, kPrefetchBytes + b), ...);
          }
          body(line, in, i, kLine);
          stream_store_line(out + i, line);
        }
        stream_store_fence();
        span(out + i, in, i, n - i);
        return;
      }
    } else if (prefetch_streams()) {
      // Long runs: the inputs are prefetched kPrefetchBytes ahead, a block at a time. The
      // hardware's stream prefetcher alone leaves a kernel that computes much per element
      // (erf, gelu) short of its rate on data in cache (Note [Prefetching pointwise loops]).
      std::int64_t i = 0;
      for (; i + kBlock <= n; i += kBlock) {
        // (the block ahead may lie past the end of the input: prefetch_ahead_of)
        for (std::int64_t b = 0; b < kBlock * static_cast<std::int64_t>(sizeof(T)); b += 64)
          (prefetch_ahead_of(in[I] + i, kPrefetchBytes + b), ...);
        span(out + i, in, i, kBlock);
      }
      span(out + i, in, i, n - i);
      return;
    }
    span(out, in, 0, n);
  }
#endif

  template <std::size_t... I>
  KAEL_INNER_INLINE void call(char* const* ptrs, const std::int64_t* strides, std::int64_t n,
                              std::index_sequence<I...> seq) const {
    if (strides[0] == sizeof(Out) && ((strides[I + 1] == sizeof(T)) && ...)) {
      contiguous_run(ptrs, n, seq);
      return;
    }
    if constexpr (K == 2) {
      // One input broadcast along the row (stride 0): keep it in a register.
      if (strides[0] == sizeof(Out) && strides[1] == sizeof(T) && strides[2] == 0) {
        Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
        const T* __restrict a = reinterpret_cast<const T*>(ptrs[1]);
        const T b = *reinterpret_cast<const T*>(ptrs[2]);
        for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(f(a[i], b));
        return;
      }
      if (strides[0] == sizeof(Out) && strides[1] == 0 && strides[2] == sizeof(T)) {
        Out* __restrict out = reinterpret_cast<Out*>(ptrs[0]);
        const T a = *reinterpret_cast<const T*>(ptrs[1]);
        const T* __restrict b = reinterpret_cast<const T*>(ptrs[2]);
        for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(f(a, b[i]));
        return;
      }
    }
#ifdef KAEL_LOOPS_SIMD
    if constexpr (SimdFormula<F, Out, T, K>) {
      simd_strided<F, T>(ptrs[0], strides[0], ptrs[1], strides[1], n);
      return;
    }
#endif
    for (std::int64_t i = 0; i < n; ++i) {
      *reinterpret_cast<Out*>(ptrs[0] + i * strides[0]) =
          static_cast<Out>(f(*reinterpret_cast<const T*>(ptrs[I + 1] + i * strides[I + 1])...));
    }
  }
};

}  // namespace kael::native
