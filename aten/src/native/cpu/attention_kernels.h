// The pieces shared by the fused attention kernels (attention.cpp, the forward pass;
// attention_backward.cpp, the backward pass): the score and accumulate tiles, the mask and
// dropout descriptions, and the layout helpers. See Note [Blocked attention] and Note
// [Attention backward].
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/expand.h"
#include "kael/runtime/philox.h"
#include "nn_kernels.h"

namespace kael::native::attention {

constexpr std::int64_t kBlockQ = 32;
constexpr std::int64_t kBlockK = 128;
constexpr int kTileRows = 4;
constexpr int kTileCols = 16;

// Whether any of x[0, n) is NaN (only asked of a row whose max is -inf: rare).
template <typename T>
bool any_nan(const T* x, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j)
    if (x[j] != x[j]) return true;
  return false;
}

// One kTileRows x kTileCols tile of scores: s[r][c] = scale * sum_e q[r][e] kt[e][c] (q with row
// stride qs, kt with row stride S, s with row stride kBlockK).
template <typename T>
void scores_tile(const T* q, std::int64_t qs, std::int64_t E, const T* kt, std::int64_t S, T scale, T* s) {
  T acc[kTileRows][kTileCols] = {};
  for (std::int64_t e = 0; e < E; ++e) {
    const T* kr = kt + e * S;
    for (int r = 0; r < kTileRows; ++r) {
      const T qv = q[r * qs + e];
      for (int c = 0; c < kTileCols; ++c) acc[r][c] += qv * kr[c];
    }
  }
  for (int r = 0; r < kTileRows; ++r)
    for (int c = 0; c < kTileCols; ++c) s[r * kBlockK + c] = acc[r][c] * scale;
}

// One tile of o += p v: o[r][c] += sum_j p[r][j] v[j][c] for j < cols (p[r][j] at p[r * prs +
// j * pcs]: a block of s, prs = kBlockK and pcs = 1, or a block's transpose, prs = 1 and pcs =
// kBlockK; v with row stride vs, o with row stride os).
template <typename T>
void accumulate_tile(const T* p, std::int64_t prs, std::int64_t pcs, const T* v, std::int64_t vs, std::int64_t cols,
                     T* o, std::int64_t os) {
  T acc[kTileRows][kTileCols];
  for (int r = 0; r < kTileRows; ++r)
    for (int c = 0; c < kTileCols; ++c) acc[r][c] = o[r * os + c];
  for (std::int64_t j = 0; j < cols; ++j) {
    const T* vr = v + j * vs;
    for (int r = 0; r < kTileRows; ++r) {
      const T pv = p[r * prs + j * pcs];
      for (int c = 0; c < kTileCols; ++c) acc[r][c] += pv * vr[c];
    }
  }
  for (int r = 0; r < kTileRows; ++r)
    for (int c = 0; c < kTileCols; ++c) o[r * os + c] = acc[r][c];
}

#ifdef KAEL_NN_AVX2
// The float tiles with explicit fused multiply-adds in 8 accumulator registers (the compiler
// does not keep the generic tiles in registers).
static_assert(kTileRows == 4 && kTileCols == 16);

template <>
inline void scores_tile<float>(const float* q, std::int64_t qs, std::int64_t E, const float* kt, std::int64_t S, float scale,
                        float* s) {
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  for (std::int64_t e = 0; e < E; ++e) {
    const __m256 k0 = _mm256_loadu_ps(kt + e * S), k1 = _mm256_loadu_ps(kt + e * S + 8);
    __m256 qv = _mm256_broadcast_ss(q + e);
    a00 = _mm256_fmadd_ps(qv, k0, a00);
    a01 = _mm256_fmadd_ps(qv, k1, a01);
    qv = _mm256_broadcast_ss(q + qs + e);
    a10 = _mm256_fmadd_ps(qv, k0, a10);
    a11 = _mm256_fmadd_ps(qv, k1, a11);
    qv = _mm256_broadcast_ss(q + 2 * qs + e);
    a20 = _mm256_fmadd_ps(qv, k0, a20);
    a21 = _mm256_fmadd_ps(qv, k1, a21);
    qv = _mm256_broadcast_ss(q + 3 * qs + e);
    a30 = _mm256_fmadd_ps(qv, k0, a30);
    a31 = _mm256_fmadd_ps(qv, k1, a31);
  }
  const __m256 sc = _mm256_set1_ps(scale);
  _mm256_storeu_ps(s, _mm256_mul_ps(a00, sc));
  _mm256_storeu_ps(s + 8, _mm256_mul_ps(a01, sc));
  _mm256_storeu_ps(s + kBlockK, _mm256_mul_ps(a10, sc));
  _mm256_storeu_ps(s + kBlockK + 8, _mm256_mul_ps(a11, sc));
  _mm256_storeu_ps(s + 2 * kBlockK, _mm256_mul_ps(a20, sc));
  _mm256_storeu_ps(s + 2 * kBlockK + 8, _mm256_mul_ps(a21, sc));
  _mm256_storeu_ps(s + 3 * kBlockK, _mm256_mul_ps(a30, sc));
  _mm256_storeu_ps(s + 3 * kBlockK + 8, _mm256_mul_ps(a31, sc));
}

template <>
inline void accumulate_tile<float>(const float* p, std::int64_t prs, std::int64_t pcs, const float* v, std::int64_t vs,
                            std::int64_t cols, float* o, std::int64_t os) {
  __m256 a00 = _mm256_loadu_ps(o), a01 = _mm256_loadu_ps(o + 8);
  __m256 a10 = _mm256_loadu_ps(o + os), a11 = _mm256_loadu_ps(o + os + 8);
  __m256 a20 = _mm256_loadu_ps(o + 2 * os), a21 = _mm256_loadu_ps(o + 2 * os + 8);
  __m256 a30 = _mm256_loadu_ps(o + 3 * os), a31 = _mm256_loadu_ps(o + 3 * os + 8);
  for (std::int64_t j = 0; j < cols; ++j) {
    const __m256 v0 = _mm256_loadu_ps(v + j * vs), v1 = _mm256_loadu_ps(v + j * vs + 8);
    const float* pj = p + j * pcs;
    __m256 pv = _mm256_broadcast_ss(pj);
    a00 = _mm256_fmadd_ps(pv, v0, a00);
    a01 = _mm256_fmadd_ps(pv, v1, a01);
    pv = _mm256_broadcast_ss(pj + prs);
    a10 = _mm256_fmadd_ps(pv, v0, a10);
    a11 = _mm256_fmadd_ps(pv, v1, a11);
    pv = _mm256_broadcast_ss(pj + 2 * prs);
    a20 = _mm256_fmadd_ps(pv, v0, a20);
    a21 = _mm256_fmadd_ps(pv, v1, a21);
    pv = _mm256_broadcast_ss(pj + 3 * prs);
    a30 = _mm256_fmadd_ps(pv, v0, a30);
    a31 = _mm256_fmadd_ps(pv, v1, a31);
  }
  _mm256_storeu_ps(o, a00);
  _mm256_storeu_ps(o + 8, a01);
  _mm256_storeu_ps(o + os, a10);
  _mm256_storeu_ps(o + os + 8, a11);
  _mm256_storeu_ps(o + 2 * os, a20);
  _mm256_storeu_ps(o + 2 * os + 8, a21);
  _mm256_storeu_ps(o + 3 * os, a30);
  _mm256_storeu_ps(o + 3 * os + 8, a31);
}
#endif

#if defined(__AVX512F__)
#define KAEL_ATTENTION_AVX512 1
static_assert(kTileRows == 4 && kTileCols == 16);
// With AVX-512: tiles of kTileRows x 2 kTileCols, two 16-float registers per row (8
// accumulators, 6 loads per 8 fused multiply-adds), about 1.7x the AVX2 tiles' rate; and of
// 2 kTileRows x 2 kTileCols where the rows allow (16 accumulators, 10 loads per 16): a core with
// two 512-bit FMA units needs more than 8 independent accumulators to keep both busy (7-9%
// faster: docs/performance.md, "Figures behind kernel constants"). Every output is the same bits
// either way (each is the same sequence of fused multiply-adds).

// Scores of R rows against two neighbouring packed key tiles kt0, kt1 (see scores):
// s[r][0..32) for r < R. R = 8 where there are 8 rows (16 accumulators, 10 loads per 16 fused
// multiply-adds), else 4; each score is the same sequence of fused multiply-adds either way.
template <int R>
inline void scores_tile_x2(const float* q, std::int64_t qs, std::int64_t E, const float* kt0, const float* kt1,
                           float scale, float* s) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (std::int64_t e = 0; e < E; ++e) {
    const __m512 k0 = _mm512_loadu_ps(kt0 + e * kTileCols), k1 = _mm512_loadu_ps(kt1 + e * kTileCols);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 qv = _mm512_set1_ps(q[r * qs + e]);
      acc[r][0] = _mm512_fmadd_ps(qv, k0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(qv, k1, acc[r][1]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(s + r * kBlockK, _mm512_mul_ps(acc[r][0], sc));
    _mm512_storeu_ps(s + r * kBlockK + 16, _mm512_mul_ps(acc[r][1], sc));
  }
}

// accumulate_tile over R rows (4 or 8, as scores_tile_x2) and 32 columns.
template <int R>
inline void accumulate_tile_x2(const float* p, std::int64_t prs, std::int64_t pcs, const float* v, std::int64_t vs,
                               std::int64_t cols, float* o, std::int64_t os) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm512_loadu_ps(o + r * os);
    acc[r][1] = _mm512_loadu_ps(o + r * os + 16);
  }
  for (std::int64_t j = 0; j < cols; ++j) {
    const __m512 v0 = _mm512_loadu_ps(v + j * vs), v1 = _mm512_loadu_ps(v + j * vs + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pv = _mm512_set1_ps(p[r * prs + j * pcs]);
      acc[r][0] = _mm512_fmadd_ps(pv, v0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(pv, v1, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(o + r * os, acc[r][0]);
    _mm512_storeu_ps(o + r * os + 16, acc[r][1]);
  }
}
#endif

// s[i][j] = scale * dot(q_i, k_j) for rows i < rows (<= kBlockQ) and keys j < cols, from
// q (rows x E, row stride qs) and kp, the block's keys packed in tiles of kTileCols keys: key j's
// element e at kp[(j / kTileCols) * E * kTileCols + e * kTileCols + j % kTileCols], zero-padded
// to whole tiles (so every tile is read with unit stride, and whole tiles may be computed).
template <typename T>
void scores(const T* q, std::int64_t qs, const T* kp, std::int64_t E, std::int64_t rows, std::int64_t cols, T scale,
            T* s) {
  const std::int64_t tile = E * kTileCols;
  std::int64_t i = 0;
#ifdef KAEL_ATTENTION_AVX512
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 2 * kTileRows <= rows; i += 2 * kTileRows) {  // 8 rows at a time, then 4
      std::int64_t j = 0;
      for (; j + kTileCols < cols; j += 2 * kTileCols)
        scores_tile_x2<2 * kTileRows>(q + i * qs, qs, E, kp + (j / kTileCols) * tile,
                                      kp + (j / kTileCols + 1) * tile, scale, s + i * kBlockK + j);
      for (; j < cols; j += kTileCols)
        for (std::int64_t h = i; h < i + 2 * kTileRows; h += kTileRows)
          scores_tile(q + h * qs, qs, E, kp + (j / kTileCols) * tile, kTileCols, scale, s + h * kBlockK + j);
    }
  }
#endif
  for (; i + kTileRows <= rows; i += kTileRows) {
    std::int64_t j = 0;
#ifdef KAEL_ATTENTION_AVX512
    if constexpr (std::is_same_v<T, float>)  // pairs of tiles whose second holds a key j < cols
      for (; j + kTileCols < cols; j += 2 * kTileCols)
        scores_tile_x2<kTileRows>(q + i * qs, qs, E, kp + (j / kTileCols) * tile, kp + (j / kTileCols + 1) * tile,
                                  scale, s + i * kBlockK + j);
#endif
    for (; j < cols; j += kTileCols)
      scores_tile(q + i * qs, qs, E, kp + (j / kTileCols) * tile, kTileCols, scale, s + i * kBlockK + j);
  }
  for (; i < rows; ++i) {
    T* sr = s + i * kBlockK;
    for (std::int64_t j = 0; j < cols; ++j) {
      const T* kj = kp + (j / kTileCols) * tile + j % kTileCols;
      T acc = 0;
      for (std::int64_t e = 0; e < E; ++e) acc += q[i * qs + e] * kj[e * kTileCols];
      sr[j] = acc * scale;
    }
  }
}

// o[i] += sum_j p[i][j] v[j] for rows i < rows, keys j < cols; p[i][j] at p[i * prs + j * pcs]
// (see accumulate_tile: the backward pass reads a block's transpose in place); v (cols x Ev) has
// row stride vs, o (rows x Ev) row stride os.
template <typename T>
void accumulate(const T* p, std::int64_t prs, std::int64_t pcs, const T* v, std::int64_t vs, std::int64_t Ev,
                std::int64_t rows, std::int64_t cols, T* o, std::int64_t os) {
  std::int64_t i = 0;
#ifdef KAEL_ATTENTION_AVX512
  if constexpr (std::is_same_v<T, float>)  // 8 rows at a time where the columns come in 32s
    if (Ev % (2 * kTileCols) == 0)
      for (; i + 2 * kTileRows <= rows; i += 2 * kTileRows)
        for (std::int64_t c0 = 0; c0 < Ev; c0 += 2 * kTileCols)
          accumulate_tile_x2<2 * kTileRows>(p + i * prs, prs, pcs, v + c0, vs, cols, o + i * os + c0, os);
#endif
  for (; i + kTileRows <= rows; i += kTileRows) {
    std::int64_t c0 = 0;
#ifdef KAEL_ATTENTION_AVX512
    if constexpr (std::is_same_v<T, float>)
      for (; c0 + 2 * kTileCols <= Ev; c0 += 2 * kTileCols)
        accumulate_tile_x2<kTileRows>(p + i * prs, prs, pcs, v + c0, vs, cols, o + i * os + c0, os);
#endif
    for (; c0 + kTileCols <= Ev; c0 += kTileCols)
      accumulate_tile(p + i * prs, prs, pcs, v + c0, vs, cols, o + i * os + c0, os);
    for (int r = 0; r < kTileRows; ++r)
      for (std::int64_t j = 0; j < cols; ++j) {
        const T pv = p[(i + r) * prs + j * pcs];
        for (std::int64_t c = c0; c < Ev; ++c) o[(i + r) * os + c] += pv * v[j * vs + c];
      }
  }
  for (; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const T pv = p[i * prs + j * pcs];
      for (std::int64_t c = 0; c < Ev; ++c) o[i * os + c] += pv * v[j * vs + c];
    }
}

struct Mask {
  enum Kind { None, Bool, Float } kind = None;
  const char* data = nullptr;  // at the batch's (0, 0)
  std::int64_t row_stride = 0, col_stride = 0;  // in elements
};

// Row `row` (a query) of a block of scores over keys [j0, j0 + cols), as the forward and the
// backward pass both mask it: -inf where a bool mask is false or, with causal, above the
// diagonal; a float mask added.
template <typename T>
inline void mask_scores_row(const Mask& mask, bool causal, std::int64_t row, std::int64_t j0, std::int64_t cols,
                            T* sr) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  if (mask.kind == Mask::Bool) {
    const bool* mr = reinterpret_cast<const bool*>(mask.data) + row * mask.row_stride + j0 * mask.col_stride;
    for (std::int64_t j = 0; j < cols; ++j) sr[j] = mr[j * mask.col_stride] ? sr[j] : kNegInf;
  } else if (mask.kind == Mask::Float) {
    const T* mr = reinterpret_cast<const T*>(mask.data) + row * mask.row_stride + j0 * mask.col_stride;
    for (std::int64_t j = 0; j < cols; ++j) sr[j] += mr[j * mask.col_stride];
  }
  if (causal)
    for (std::int64_t j = std::max<std::int64_t>(row + 1 - j0, 0); j < cols; ++j) sr[j] = kNegInf;
}

// Dropout of the attention weights (Note [Attention dropout]).
struct Dropout {
  bool active = false;
  double keep = 1.0;  // 1 - p
  PhiloxStream stream;

  // factor[j] = 1 / (1 - p) or 0 for the weights idx0 + j, j < n.
  template <typename T>
  void factors(std::int64_t idx0, std::int64_t n, T* factor) const {
    const T scale = keep > 0 ? static_cast<T>(1.0 / keep) : T(0);
    std::int64_t j = 0;
    while (j < n) {
      const std::int64_t idx = idx0 + j, b = idx / 4;
      const random::Block w = random::block(stream, static_cast<std::uint64_t>(b));
      for (int lane = static_cast<int>(idx - b * 4); lane < 4 && j < n; ++lane, ++j)
        factor[j] = static_cast<double>(random::uniform_float(w[static_cast<std::size_t>(lane)])) < keep ? scale : T(0);
    }
  }
};

// Element offsets of each of the `batches` broadcast batch indices into a tensor with batch
// strides `strides` (0 where it is broadcast), over the broadcast batch shape `batch`.
inline std::vector<std::int64_t> batch_offsets(IntArrayRef batch, IntArrayRef sizes, IntArrayRef strides) {
  std::int64_t batches = 1;
  for (std::int64_t s : batch) batches *= s;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(batches), 0);
  const auto nd = static_cast<std::int64_t>(batch.size());
  const std::int64_t lead = nd - static_cast<std::int64_t>(sizes.size()) + 2;  // dims sizes lacks
  for (std::int64_t b = 0; b < batches; ++b) {
    std::int64_t rem = b, off = 0;
    for (std::int64_t d = nd - 1; d >= 0; --d) {
      const std::int64_t idx = rem % batch[d];
      rem /= batch[d];
      const std::int64_t sd = d - lead;
      if (sd >= 0 && sizes[sd] != 1) off += idx * strides[sd];
    }
    offsets[static_cast<std::size_t>(b)] = off;
  }
  return offsets;
}

inline IntArrayRef batch_of(const Tensor& t) { return t.sizes().subspan(0, t.dim() - 2); }

// The row stride of a (..., rows, cols) tensor whose last dim is contiguous.
inline std::int64_t row_stride(const Tensor& t) { return t.strides()[t.dim() - 2]; }

// Whether the kernels read t in place: its dtype is `acc` and its last dim is contiguous (any
// other strides: the q, k and v that a split projection's view and transpose give).
inline bool readable_in_place(const Tensor& t, ScalarType acc) {
  return t.dtype() == acc && (t.sizes()[t.dim() - 1] <= 1 || t.strides()[t.dim() - 1] == 1);
}

// A new tensor of `shape` ((batch..., rows, cols)) laid out as `ref`, whose dims but the last
// have the same sizes, is: those dims in the order of ref's strides (largest first), the last
// dim contiguous. A gradient or output then has its input's layout: q of shape (B, H, L, E)
// that is a transposed (B, L, H, E) gives an output whose transpose back is contiguous, as
// PyTorch's CPU flash attention. Otherwise (broadcast batches) contiguous.
inline Tensor alloc_like_layout(const DimVector& shape, const Tensor& ref, ScalarType dtype) {
  const auto nd = static_cast<std::int64_t>(shape.size());
  if (nd < 3 || ref.dim() != nd || !std::equal(shape.begin(), shape.end() - 1, ref.sizes().begin()))
    return alloc_cpu(shape, dtype);
  std::vector<std::int64_t> order(static_cast<std::size_t>(nd - 1));
  for (std::int64_t d = 0; d < nd - 1; ++d) order[static_cast<std::size_t>(d)] = d;
  const IntArrayRef rs = ref.strides();
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return rs[x] > rs[y]; });
  DimVector strides(shape.size(), 1);
  std::int64_t st = shape[static_cast<std::size_t>(nd - 1)];
  for (std::int64_t k = nd - 2; k >= 0; --k) {
    const auto d = static_cast<std::size_t>(order[static_cast<std::size_t>(k)]);
    strides[d] = st;
    st *= shape[d];
  }
  return alloc_strided_cpu(shape, strides, dtype);
}

// Packs the rows of each of `batches` (S, E) matrices (batch b's at src + offsets[b], rows
// `rs` apart, each row contiguous) in tiles of kTileCols rows (the layout scores() reads: row
// j's element e at (j / kTileCols) * E * kTileCols + e * kTileCols + j % kTileCols of its
// batch's block, zero-padded to whole tiles).
template <typename T>
void pack_tiles(const T* src, const std::vector<std::int64_t>& offsets, std::int64_t rs, T* dst, std::int64_t batches,
                std::int64_t S, std::int64_t E) {
  const std::int64_t ntiles = (S + kTileCols - 1) / kTileCols;
  nn::parallel_for(batches * ntiles, E * kTileCols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t t = begin; t < end; ++t) {
      const std::int64_t b = t / ntiles, j0 = (t % ntiles) * kTileCols;
      T* d = dst + t * E * kTileCols;
      const T* base = src + offsets[static_cast<std::size_t>(b)];
      if (j0 + kTileCols <= S) {
        // a whole tile: each of d's rows (kTileCols keys' element e) written whole, which
        // vectorises (a loop over the keys' rows scatters single stores)
        const T* k0 = base + j0 * rs;
        for (std::int64_t e = 0; e < E; ++e)
          for (std::int64_t c = 0; c < kTileCols; ++c) d[e * kTileCols + c] = k0[c * rs + e];
        continue;
      }
      for (std::int64_t c = 0; c < kTileCols; ++c) {
        const std::int64_t j = j0 + c;
        for (std::int64_t e = 0; e < E; ++e) d[e * kTileCols + c] = j < S ? base[j * rs + e] : T(0);
      }
    }
  });
}

// The element offsets of each of t's own batches (of its shape's batch dims), from its strides.
inline std::vector<std::int64_t> own_batch_offsets(const Tensor& t) {
  return batch_offsets(batch_of(t), t.sizes(), t.strides());
}

// The element offset of each broadcast batch's block in t packed by pack_tiles (blocks of
// ceil(S / kTileCols) * E * kTileCols elements, one per batch of t's own batch shape).
inline std::vector<std::int64_t> packed_offsets(IntArrayRef batch, const Tensor& t) {
  const std::int64_t S = t.sizes()[t.dim() - 2], E = t.sizes()[t.dim() - 1];
  DimVector index_shape(batch_of(t));
  index_shape.push_back(1);
  index_shape.push_back(1);
  std::vector<std::int64_t> off = batch_offsets(batch, t.sizes(), contiguous_strides(index_shape));
  for (std::int64_t& o : off) o *= (S + kTileCols - 1) / kTileCols * E * kTileCols;
  return off;
}

}  // namespace kael::native::attention
