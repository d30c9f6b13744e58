// scaled_dot_product_attention on the CPU, fused: softmax(q k^T * scale + mask) v without
// storing the (L, S) attention matrix.
//
// Note [Blocked attention]
// Queries are processed in blocks of kBlockQ rows, one task per (batch, query block). The
// threads claim tasks one at a time from a shared counter rather than taking fixed halves: a
// thread slowed by other work on its core (another runtime's threads spinning after their own
// parallel region, such as OpenMP's in the same process, or another process) then takes fewer
// tasks instead of holding up the call. Each task writes its own rows, so which thread runs it
// does not change the result. For each block of kBlockK keys the task computes the block's scores
// (kBlockQ x kBlockK, in a buffer of the task's own), applies the mask, and folds them into
// running per-row state with the online softmax of flash attention: the row maximum m, the
// sum l of exp(s - m) and the output accumulator o = sum exp(s - m) v, each rescaled by
// exp(m_old - m_new) when the maximum grows; a block's part of o is summed on its own and then
// added, so rounding errors grow with the block length rather than with S. The result is o / l. So the extra memory is
// O(threads * kBlockQ * (kBlockK + 2 Ev)) plus one copy of k packed in tiles, whatever L and S are;
// with is_causal the key blocks entirely above the diagonal are skipped. A row whose every key
// is masked out has l = 0 and gives 0, as in PyTorch (its "safe softmax"), and so does S = 0.
// float16/bfloat16 compute in float32; float64 in double.
//
// Note [Attention dropout]
// With dropout_p > 0 each attention weight P[b][i][j] (b the flattened broadcast batch) is kept
// with probability 1 - p and then scaled by 1 / (1 - p), or dropped, as torch's math kernel
// applies dropout to softmax's result: the row sums l use every weight, the accumulator o only
// the kept ones. Whether a weight is kept is a pure function of the call's Philox stream
// (seed, offset) and of its index (b * L + i) * S + j (lane idx % 4 of block idx / 4 as a float
// uniform u; kept when u < 1 - p), so the result does not depend on the thread count or the
// block sizes, and the backward pass rebuilds the same factors (_sdpa_dropout_mask). The
// composite scaled_dot_product_attention draws the stream from the default generator (one
// draw per call with dropout_p > 0; none without) and calls _scaled_dot_product_attention,
// whose derivatives take the stream.
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

namespace kael::native {

namespace {

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
void scores_tile<float>(const float* q, std::int64_t qs, std::int64_t E, const float* kt, std::int64_t S, float scale,
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
void accumulate_tile<float>(const float* p, std::int64_t prs, std::int64_t pcs, const float* v, std::int64_t vs,
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

template <typename T>
struct AttentionArgs {
  const T *q, *kp, *v;  // kp: the keys packed (see scores)
  T* out;
  std::int64_t L, S, E, Ev;
  std::int64_t qs, vs, os;  // the row strides of q, v and out (their last dims are contiguous)
  T scale;
  bool causal;
  std::int64_t batch;  // the flattened broadcast batch index (dropout's element indices)
  const Dropout* dropout;
};

// One (batch, query block) task; see Note [Blocked attention].
template <typename T>
void attend_block(const AttentionArgs<T>& a, const Mask& mask, std::int64_t i0, std::vector<T>& buf) {
  const std::int64_t rows = std::min(kBlockQ, a.L - i0);
  buf.resize(kBlockQ * kBlockK + 2 * kBlockQ * a.Ev + 3 * kBlockQ + kBlockK);
  T* s = buf.data();
  T* o = s + kBlockQ * kBlockK;
  T* ob = o + kBlockQ * a.Ev;  // this key block's part of o, added to o after the block
  T* m = ob + kBlockQ * a.Ev;
  T* l = m + kBlockQ;
  T* correction = l + kBlockQ;
  T* keep = correction + kBlockQ;  // dropout's factors of one row of the block
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (std::int64_t i = 0; i < rows; ++i) {
    m[i] = kNegInf;
    l[i] = 0;
  }
  std::fill(o, o + rows * a.Ev, T(0));
  const T* q = a.q + i0 * a.qs;
  // With is_causal, query i sees keys j <= i: the blocks starting after the last row's i end.
  const std::int64_t key_end = a.causal ? std::min(a.S, i0 + rows) : a.S;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kBlockK) {
    const std::int64_t cols = std::min(kBlockK, key_end - j0);
    scores(q, a.qs, a.kp + (j0 / kTileCols) * a.E * kTileCols, a.E, rows, cols, a.scale, s);
    for (std::int64_t i = 0; i < rows; ++i) {
      T* sr = s + i * kBlockK;
      if (mask.kind == Mask::Bool) {
        const bool* mr = reinterpret_cast<const bool*>(mask.data) + (i0 + i) * mask.row_stride + j0 * mask.col_stride;
        for (std::int64_t j = 0; j < cols; ++j) sr[j] = mr[j * mask.col_stride] ? sr[j] : kNegInf;
      } else if (mask.kind == Mask::Float) {
        const T* mr = reinterpret_cast<const T*>(mask.data) + (i0 + i) * mask.row_stride + j0 * mask.col_stride;
        for (std::int64_t j = 0; j < cols; ++j) sr[j] += mr[j * mask.col_stride];
      }
      if (a.causal)
        for (std::int64_t j = std::max<std::int64_t>(i0 + i + 1 - j0, 0); j < cols; ++j) sr[j] = kNegInf;
      const T mb = nn::max_of(sr, cols);
      const T m_new = mb > m[i] ? mb : m[i];
      if (m_new == kNegInf) {  // every key so far masked (or NaN): nothing to add
        // a row of NaN scores (NaN in q, k or a float mask; max_of skips NaN) is NaN as in
        // PyTorch, not the 0 of a masked row: l = NaN stays NaN through every later block
        if (any_nan(sr, cols)) l[i] = std::numeric_limits<T>::quiet_NaN();
        for (std::int64_t j = 0; j < cols; ++j) sr[j] = 0;
        correction[i] = 1;
        continue;
      }
      correction[i] = nn::exp_vec(m[i] - m_new);  // 0 when m was -inf
      l[i] = l[i] * correction[i] + nn::sum_exp(sr, m_new, sr, cols);
      m[i] = m_new;
      if (a.dropout->active) {  // l counts every weight, o only the kept ones
        a.dropout->factors((a.batch * a.L + i0 + i) * a.S + j0, cols, keep);
        for (std::int64_t j = 0; j < cols; ++j) sr[j] *= keep[j];
      }
    }
    // Summed per block, then added: rounding errors grow with the block length, not with S.
    std::fill(ob, ob + rows * a.Ev, T(0));
    accumulate(s, kBlockK, 1, a.v + j0 * a.vs, a.vs, a.Ev, rows, cols, ob, a.Ev);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t c = 0; c < a.Ev; ++c) o[i * a.Ev + c] = o[i * a.Ev + c] * correction[i] + ob[i * a.Ev + c];
  }
  T* out = a.out + i0 * a.os;
  for (std::int64_t i = 0; i < rows; ++i) {
    // l == 0: every key masked; the row is 0, as in PyTorch.
    const T inv = l[i] == T(0) ? T(0) : T(1) / l[i];
    for (std::int64_t c = 0; c < a.Ev; ++c) out[i * a.os + c] = o[i * a.Ev + c] * inv;
  }
}

// Element offsets of each of the `batches` broadcast batch indices into a tensor with batch
// strides `strides` (0 where it is broadcast), over the broadcast batch shape `batch`.
std::vector<std::int64_t> batch_offsets(IntArrayRef batch, IntArrayRef sizes, IntArrayRef strides) {
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

IntArrayRef batch_of(const Tensor& t) { return t.sizes().subspan(0, t.dim() - 2); }

// The row stride of a (..., rows, cols) tensor whose last dim is contiguous.
std::int64_t row_stride(const Tensor& t) { return t.strides()[t.dim() - 2]; }

// Whether the kernels read t in place: its dtype is `acc` and its last dim is contiguous (any
// other strides: the q, k and v that a split projection's view and transpose give).
bool readable_in_place(const Tensor& t, ScalarType acc) {
  return t.dtype() == acc && (t.sizes()[t.dim() - 1] <= 1 || t.strides()[t.dim() - 1] == 1);
}

// A new tensor of `shape` ((batch..., rows, cols)) laid out as `ref`, whose dims but the last
// have the same sizes, is: those dims in the order of ref's strides (largest first), the last
// dim contiguous. A gradient or output then has its input's layout: q of shape (B, H, L, E)
// that is a transposed (B, L, H, E) gives an output whose transpose back is contiguous, as
// PyTorch's CPU flash attention. Otherwise (broadcast batches) contiguous.
Tensor alloc_like_layout(const DimVector& shape, const Tensor& ref, ScalarType dtype) {
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
std::vector<std::int64_t> own_batch_offsets(const Tensor& t) {
  return batch_offsets(batch_of(t), t.sizes(), t.strides());
}

// The element offset of each broadcast batch's block in t packed by pack_tiles (blocks of
// ceil(S / kTileCols) * E * kTileCols elements, one per batch of t's own batch shape).
std::vector<std::int64_t> packed_offsets(IntArrayRef batch, const Tensor& t) {
  const std::int64_t S = t.sizes()[t.dim() - 2], E = t.sizes()[t.dim() - 1];
  DimVector index_shape(batch_of(t));
  index_shape.push_back(1);
  index_shape.push_back(1);
  std::vector<std::int64_t> off = batch_offsets(batch, t.sizes(), contiguous_strides(index_shape));
  for (std::int64_t& o : off) o *= (S + kTileCols - 1) / kTileCols * E * kTileCols;
  return off;
}

}  // namespace

Tensor sdpa_dropout_mask_cpu(const Tensor& query, IntArrayRef size, double dropout_p, std::int64_t seed,
                             std::int64_t offset) {
  constexpr const char* op = "_sdpa_dropout_mask";
  KAEL_CHECK(size.size() >= 2, op << ": expected a size of at least 2 dims, got " << shape_str(size));
  KAEL_CHECK(!(dropout_p > 0.0) || dropout_p <= 1.0,
             op << ": dropout probability has to be between 0 and 1, but got " << dropout_p);
  KAEL_CHECK(is_floating(query.dtype()), op << ": not implemented for dtype " << query.dtype());
  const ScalarType acc = query.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  Tensor f = alloc_cpu(size, acc);
  const std::int64_t n = f.numel();
  const Dropout d{dropout_p > 0.0, 1.0 - dropout_p,
                  PhiloxStream{std::bit_cast<std::uint64_t>(seed), std::bit_cast<std::uint64_t>(offset)}};
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      T* out = f.data<T>();
      if (!d.active) {
        std::fill(out, out + n, T(1));
        return;
      }
      nn::parallel_for(n, 1, [&](std::int64_t begin, std::int64_t end) { d.factors(begin, end - begin, out + begin); });
    }
  });
  return acc == query.dtype() ? f : to_dtype_cpu(f, query.dtype());
}

Tensor scaled_dot_product_attention_cpu(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                                        std::optional<double> scale, std::int64_t seed, std::int64_t offset) {
  constexpr const char* op = "scaled_dot_product_attention";
  for (const Tensor* t : {&query, &key, &value}) check_same_device(op, kCPU, t->device());
  KAEL_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2,
             op << ": expected query, key and value of at least 2 dims, got " << query.dim() << ", " << key.dim()
                << " and " << value.dim());
  KAEL_CHECK(query.dtype() == key.dtype() && query.dtype() == value.dtype(),
             op << ": Expected query, key, and value to have the same dtype, but got query.dtype: " << query.dtype()
                << " key.dtype: " << key.dtype() << " and value.dtype: " << value.dtype() << " instead.");
  KAEL_CHECK(is_floating(query.dtype()), op << ": not implemented for dtype " << query.dtype());
  const std::int64_t L = query.sizes()[query.dim() - 2], E = query.sizes()[query.dim() - 1];
  const std::int64_t S = key.sizes()[key.dim() - 2], Ek = key.sizes()[key.dim() - 1];
  const std::int64_t Sv = value.sizes()[value.dim() - 2], Ev = value.sizes()[value.dim() - 1];
  KAEL_CHECK(!(dropout_p > 0.0) || dropout_p <= 1.0,
             op << ": dropout probability has to be between 0 and 1, but got " << dropout_p);
  KAEL_CHECK(!(is_causal && attn_mask.has_value()),
             op << ": Explicit attn_mask should not be set when is_causal=True");
  if (attn_mask) {
    const ScalarType mt = attn_mask->dtype();
    KAEL_CHECK(mt == ScalarType::Bool || mt == ScalarType::Float32 || mt == query.dtype(),
               op << ": Expected attn_mask dtype to be bool or float or to match query dtype, got " << mt
                  << " for a query of " << query.dtype());
  }
  if (L == 0 || value.numel() == 0) {
    // As PyTorch: no queries, or a value without elements, gives zeros of the query's batch
    // and length and the value's width, whatever the other shapes (no key, value or mask shape
    // is checked then).
    DimVector empty_shape(query.sizes());
    empty_shape.back() = Ev;
    Tensor zeros = alloc_cpu(empty_shape, query.dtype());
    if (zeros.numel() > 0) fill_cpu(zeros, Scalar(0.0));
    return zeros;
  }
  KAEL_CHECK(Ek == E, op << ": query and key must have the same last dim (embedding size), got " << E << " and " << Ek);
  KAEL_CHECK(Sv == S, op << ": key and value must have the same number of positions (dim -2), got " << S << " and "
                         << Sv);
  DimVector batch = broadcast_shapes(op, batch_of(query), batch_of(key));
  batch = broadcast_shapes(op, batch, batch_of(value));
  Mask mask;
  Tensor mask_t;
  if (attn_mask) {
    const Tensor& am = *attn_mask;
    check_same_device(op, kCPU, am.device());
    // (as PyTorch: bool, float32 or the query's dtype; a float mask is read in the accumulation type)
    KAEL_CHECK(am.dtype() == ScalarType::Bool || am.dtype() == ScalarType::Float32 || am.dtype() == query.dtype(),
               op << ": Expected attn_mask dtype to be bool or float or to match query dtype, got " << am.dtype()
                  << " for a query of " << query.dtype());
    DimVector full = batch;
    full.push_back(L);
    full.push_back(S);
    const DimVector shape = broadcast_shapes(op, am.sizes(), full);
    KAEL_CHECK_VALUE(std::equal(shape.begin(), shape.end(), full.begin(), full.end()),
                     op << ": attn_mask of shape " << shape_str(am.sizes()) << " does not broadcast to the attention "
                        << "shape " << shape_str(full));
    mask.kind = am.dtype() == ScalarType::Bool ? Mask::Bool : Mask::Float;
    mask_t = am;
  }
  if (scale) KAEL_CHECK(std::isfinite(*scale), op << ": scale must be finite, got " << *scale);
  DimVector out_shape = batch;
  out_shape.push_back(L);
  out_shape.push_back(Ev);
  Tensor result = alloc_like_layout(out_shape, query, query.dtype());
  if (result.numel() == 0) return result;
  if (S == 0) {  // no keys: 0, as in PyTorch
    fill_cpu(result, Scalar(0.0));
    return result;
  }
  const ScalarType acc = is_reduced_floating(query.dtype()) ? ScalarType::Float32 : query.dtype();
  auto as_acc = [&](const Tensor& t) {
    return t.dtype() == acc && t.is_contiguous() ? t : to_dtype_cpu(kael::contiguous(t), acc);
  };
  auto rows_of = [&](const Tensor& t) { return readable_in_place(t, acc) ? t : as_acc(t); };
  Tensor q = rows_of(query), v = rows_of(value);
  Tensor k = rows_of(key);
  if (mask_t.defined()) {
    DimVector full = batch;
    full.push_back(L);
    full.push_back(S);
    mask_t = kael::expand(mask.kind == Mask::Float ? as_acc(mask_t) : mask_t, full);
  }
  Tensor out = acc == query.dtype() ? result : alloc_like_layout(out_shape, query, acc);
  const std::vector<std::int64_t> o_off = batch_offsets(batch, out.sizes(), out.strides());
  const std::vector<std::int64_t> q_off = batch_offsets(batch, q.sizes(), q.strides());
  // The keys of each of k's own batches packed in tiles of kTileCols (see scores).
  const std::int64_t ntiles = (S + kTileCols - 1) / kTileCols;
  std::int64_t k_batches = 1;
  for (std::int64_t d : batch_of(k)) k_batches *= d;
  const DimVector packed_shape{k_batches, ntiles * E * kTileCols};
  Tensor kp = alloc_cpu(packed_shape, acc);
  const std::vector<std::int64_t> k_off = packed_offsets(batch, k);
  const std::vector<std::int64_t> v_off = batch_offsets(batch, v.sizes(), v.strides());
  std::vector<std::int64_t> m_off;
  if (mask_t.defined()) {
    m_off = batch_offsets(batch, mask_t.sizes(), mask_t.strides());
    mask.row_stride = mask_t.strides()[mask_t.dim() - 2];
    mask.col_stride = mask_t.strides()[mask_t.dim() - 1];
  }
  // With E = 0 every score is 0 (PyTorch then averages value), whatever the scale.
  const double scale_value = scale ? *scale : E == 0 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(E));
  UnlockedSection section;
  q = section.own(q);
  k = section.own(k);
  v = section.own(v);
  if (mask_t.defined()) mask_t = section.own(mask_t);
  section.unlock();
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      pack_tiles(k.data<T>(), own_batch_offsets(k), row_stride(k), kp.data<T>(), k_batches, S, E);
  });
  const Dropout dropout{dropout_p > 0.0, 1.0 - dropout_p,
                        PhiloxStream{std::bit_cast<std::uint64_t>(seed), std::bit_cast<std::uint64_t>(offset)}};
  const std::int64_t batches = static_cast<std::int64_t>(q_off.size());
  const std::int64_t qblocks = (L + kBlockQ - 1) / kBlockQ;
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      // Tasks are claimed one at a time by the threads (Note [Blocked attention]).
      const std::int64_t tasks = batches * qblocks;
      std::atomic<std::int64_t> next{0};
      const std::int64_t runners = std::min<std::int64_t>(tasks, intra_op_threads());
      nn::parallel_for(runners, kBlockQ * S * (E + Ev) * (tasks / runners), [&](std::int64_t, std::int64_t) {
        std::vector<T> buf;
        for (std::int64_t task = next.fetch_add(1, std::memory_order_relaxed); task < tasks;
             task = next.fetch_add(1, std::memory_order_relaxed)) {
          const std::int64_t b = task / qblocks, i0 = (task % qblocks) * kBlockQ;
          AttentionArgs<T> a{q.data<T>() + q_off[b], kp.data<T>() + k_off[b], v.data<T>() + v_off[b],
                             out.data<T>() + o_off[b], L, S, E, Ev, row_stride(q), row_stride(v), row_stride(out),
                             static_cast<T>(scale_value), is_causal, b, &dropout};
          Mask mb = mask;
          if (mask_t.defined())
            mb.data = static_cast<const char*>(mask_t.data_ptr()) + m_off[b] * static_cast<std::int64_t>(mask_t.element_size());
          attend_block(a, mb, i0, buf);
        }
      });
    }
  });
  if (!out.is_same(result)) copy_cpu(result, out);
  return result;
}


// Note [Attention backward]
// sdpa_backward_cpu computes the three gradients of _scaled_dot_product_attention in one pass,
// without storing the (L, S) attention matrix either. With W = P * K (P the softmax of the
// masked, scaled scores, K the dropout factors, 1 without dropout; the forward pass returned
// O = W v and 0 for a row whose every key is masked):
//   dv_j = sum_i W_ij dO_i,   dP_ij = K_ij dO_i . v_j,   D_i = sum_j P_ij dP_ij,
//   dS_ij = P_ij (dP_ij - D_i),   dq_i = scale sum_j dS_ij k_j,   dk_j = scale sum_i dS_ij q_i,
// and, when a float mask needs a gradient, dmask_ij = dS_ij (the mask is added to the scaled
// scores), written whole (batch..., L, S): the one gradient that is as large as the matrix.
// One task per broadcast batch (its dk and dv are its own, so no two tasks write one element)
// walks the queries in blocks of kBlockQ rows. When a block's keys fit one block of kBlockK
// (S <= kBlockK, or a causal block near the start), its scores and dO v^T are computed once and
// the softmax is exact; otherwise a first pass over the key blocks gathers each row's maximum m,
// sum l and D (online, rescaled as the maximum grows, as the forward pass; l and D in double, so
// that dP - D cancels exactly where a row's dP are equal), and a second pass
// recomputes each block's scores and accumulates the gradients. The products run on the forward
// pass's tiles (scores, accumulate; the keys and the values packed in tiles of kTileCols); where a
// sum runs over queries, accumulate reads the block transposed in place (a copied transpose cost
// a tenth of the pass in scattered stores). A row whose every key is masked has P = 0
// and adds nothing (PyTorch's safe softmax gives such rows zero gradients too).

namespace {

template <typename T>
struct BackwardArgs {
  const T *q, *k, *kp, *vp, *go;  // the batch's q (L, E), k (S, E), k and v packed, dO (L, Ev)
  T *dq, *dk, *dv;                // the batch's gradients: (L, E), (S, E), (S, Ev)
  T* dm;                          // the batch's mask gradient (L, S); null when not wanted
  std::int64_t L, S, E, Ev;
  std::int64_t qs, ks, gs, dqs, dks, dvs;  // row strides (each row contiguous)
  T scale;
  bool causal;
  std::int64_t batch;  // the flattened broadcast batch index (dropout's element indices)
  const Dropout* dropout;
};

// The masked, scaled scores of rows [i0, i0 + rows) and keys [j0, j0 + cols) in s (row
// stride kBlockK), -inf where masked, as the forward pass computes them.
template <typename T>
void masked_scores(const BackwardArgs<T>& a, const Mask& mask, std::int64_t i0, std::int64_t rows, std::int64_t j0,
                   std::int64_t cols, T* s) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  scores(a.q + i0 * a.qs, a.qs, a.kp + (j0 / kTileCols) * a.E * kTileCols, a.E, rows, cols, a.scale, s);
  for (std::int64_t i = 0; i < rows; ++i) {
    T* sr = s + i * kBlockK;
    if (mask.kind == Mask::Bool) {
      const bool* mr = reinterpret_cast<const bool*>(mask.data) + (i0 + i) * mask.row_stride + j0 * mask.col_stride;
      for (std::int64_t j = 0; j < cols; ++j) sr[j] = mr[j * mask.col_stride] ? sr[j] : kNegInf;
    } else if (mask.kind == Mask::Float) {
      const T* mr = reinterpret_cast<const T*>(mask.data) + (i0 + i) * mask.row_stride + j0 * mask.col_stride;
      for (std::int64_t j = 0; j < cols; ++j) sr[j] += mr[j * mask.col_stride];
    }
    if (a.causal)
      for (std::int64_t j = std::max<std::int64_t>(i0 + i + 1 - j0, 0); j < cols; ++j) sr[j] = kNegInf;
  }
}

// sum_j e_j and sum_j e_j dP_j (dP_j = d_j times keep_j with dropout, keep null without) of a
// row of exp(s - m), in double, in independent lanes (so that the loop vectorises).
template <typename T>
void sum_and_dot(const T* e, const T* d, const T* keep, std::int64_t cols, double& sum, double& dot) {
  constexpr int kLanes = 8;
  double sum_lanes[kLanes] = {}, dot_lanes[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= cols; j += kLanes)
    for (int c = 0; c < kLanes; ++c) {
      const double ej = static_cast<double>(e[j + c]);
      sum_lanes[c] += ej;
      dot_lanes[c] += ej * static_cast<double>(d[j + c] * (keep != nullptr ? keep[j + c] : T(1)));
    }
  for (; j < cols; ++j) {
    const double ej = static_cast<double>(e[j]);
    sum += ej;
    dot += ej * static_cast<double>(d[j] * (keep != nullptr ? keep[j] : T(1)));
  }
  for (int c = 0; c < kLanes; ++c) {
    sum += sum_lanes[c];
    dot += dot_lanes[c];
  }
}

// The gradients of one broadcast batch (Note [Attention backward]); a.dq, a.dk, a.dv are zero.
template <typename T>
void attend_backward(const BackwardArgs<T>& a, const Mask& mask, std::vector<T>& buf) {
  constexpr std::int64_t kb = kBlockQ * kBlockK;
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  buf.resize(3 * kb + 3 * kBlockQ);
  T* s = buf.data();          // scores, then exp(s - m), then W
  T* dw = s + kb;             // dO v^T, then dS * scale
  T* keep = dw + kb;          // dropout factors
  T* m = keep + kb;
  T* l = m + kBlockQ;
  T* d = l + kBlockQ;         // D of each row
  // each row's sum l and D accumulated in double: D_i is then the weighted mean of the row's dP
  // to within one rounding, so dP_ij - D_i cancels exactly where the dP are equal (a constant v)
  double l_acc[kBlockQ], d_acc[kBlockQ];
  const bool drop = a.dropout->active;
  auto block_products = [&](std::int64_t i0, std::int64_t rows, std::int64_t j0, std::int64_t cols) {
    masked_scores(a, mask, i0, rows, j0, cols, s);
    scores(a.go + i0 * a.gs, a.gs, a.vp + (j0 / kTileCols) * a.Ev * kTileCols, a.Ev, rows, cols, T(1), dw);
    if (drop)
      for (std::int64_t i = 0; i < rows; ++i)
        a.dropout->factors((a.batch * a.L + i0 + i) * a.S + j0, cols, keep + i * kBlockK);
  };
  for (std::int64_t i0 = 0; i0 < a.L; i0 += kBlockQ) {
    const std::int64_t rows = std::min(kBlockQ, a.L - i0);
    const std::int64_t key_end = a.causal ? std::min(a.S, i0 + rows) : a.S;
    const bool single = key_end <= kBlockK;
    for (std::int64_t i = 0; i < rows; ++i) {
      m[i] = kNegInf;
      l[i] = 0;
      d[i] = 0;
      l_acc[i] = 0;
      d_acc[i] = 0;
    }
    // pass 1: each row's maximum m, sum l of exp(s - m) and D (s holds exp(s - m) afterwards)
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kBlockK) {
      const std::int64_t cols = std::min(kBlockK, key_end - j0);
      block_products(i0, rows, j0, cols);
      for (std::int64_t i = 0; i < rows; ++i) {
        T* sr = s + i * kBlockK;
        const T* dr = dw + i * kBlockK;
        const T* kr = keep + i * kBlockK;
        const T mb = nn::max_of(sr, cols);
        const T m_new = mb > m[i] ? mb : m[i];
        if (m_new == kNegInf) {  // every key so far masked (or NaN: the forward pass's NaN row)
          if (any_nan(sr, cols)) {
            l[i] = std::numeric_limits<T>::quiet_NaN();
            l_acc[i] = std::numeric_limits<double>::quiet_NaN();
          }
          std::fill(sr, sr + cols, l[i] != l[i] ? std::numeric_limits<T>::quiet_NaN() : T(0));
          continue;
        }
        const double correction = static_cast<double>(nn::exp_vec(m[i] - m_new));  // 0 when m was -inf
        nn::sum_exp(sr, m_new, sr, cols);
        double sum = 0, dot = 0;
        sum_and_dot(sr, dr, drop ? kr : nullptr, cols, sum, dot);
        l_acc[i] = l_acc[i] * correction + sum;
        d_acc[i] = d_acc[i] * correction + dot;
        l[i] = static_cast<T>(l_acc[i]);
        m[i] = m_new;
      }
    }
    for (std::int64_t i = 0; i < rows; ++i) {
      if (l[i] != l[i]) continue;  // a NaN row (l NaN): P is NaN, D unused
      d[i] = l_acc[i] > 0 ? static_cast<T>(d_acc[i] / l_acc[i]) : T(0);
    }
    // pass 2: P, W and dS of each block, and their products
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kBlockK) {
      const std::int64_t cols = std::min(kBlockK, key_end - j0);
      if (!single) {
        block_products(i0, rows, j0, cols);
        for (std::int64_t i = 0; i < rows; ++i) {
          T* sr = s + i * kBlockK;
          if (l[i] > T(0)) nn::sum_exp(sr, m[i], sr, cols);
          else std::fill(sr, sr + cols, l[i] != l[i] ? std::numeric_limits<T>::quiet_NaN() : T(0));
        }
      }
      for (std::int64_t i = 0; i < rows; ++i) {
        T* sr = s + i * kBlockK;
        T* dr = dw + i * kBlockK;
        const T* kr = keep + i * kBlockK;
        // l = 0: every key masked, P = 0; l NaN: a NaN row, P NaN (as the forward pass's)
        const T inv = l[i] > T(0) ? static_cast<T>(1.0 / l_acc[i]) : l[i] != l[i] ? l[i] : T(0);
        const T di = d[i];
        if (drop) {
          for (std::int64_t j = 0; j < cols; ++j) {
            const T p = sr[j] * inv;
            sr[j] = p * kr[j];
            dr[j] = p * (dr[j] * kr[j] - di);
          }
        } else {
          for (std::int64_t j = 0; j < cols; ++j) {
            const T p = sr[j] * inv;
            sr[j] = p;
            dr[j] = p * (dr[j] - di);
          }
        }
        if (a.dm != nullptr) std::copy(dr, dr + cols, a.dm + (i0 + i) * a.S + j0);
        for (std::int64_t j = 0; j < cols; ++j) dr[j] *= a.scale;
      }
      // dv_j += sum_i W_ij dO_i and dk_j += sum_i dS_ij q_i read the blocks transposed in place
      accumulate(s, 1, kBlockK, a.go + i0 * a.gs, a.gs, a.Ev, cols, rows, a.dv + j0 * a.dvs, a.dvs);
      // dq_i += sum_j dS_ij k_j
      accumulate(dw, kBlockK, 1, a.k + j0 * a.ks, a.ks, a.E, rows, cols, a.dq + i0 * a.dqs, a.dqs);
      accumulate(dw, 1, kBlockK, a.q + i0 * a.qs, a.qs, a.E, cols, rows, a.dk + j0 * a.dks, a.dks);
    }
  }
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_backward_cpu(const Tensor& grad, const Tensor& query,
                                                             const Tensor& key, const Tensor& value,
                                                             const std::optional<Tensor>& attn_mask, bool is_causal,
                                                             std::optional<double> scale, double dropout_p,
                                                             std::int64_t seed, std::int64_t offset, bool mask_grad) {
  constexpr const char* op = "scaled_dot_product_attention_backward";
  for (const Tensor* t : {&grad, &query, &key, &value}) check_same_device(op, kCPU, t->device());
  const std::int64_t L = query.sizes()[query.dim() - 2], E = query.sizes()[query.dim() - 1];
  const std::int64_t S = key.sizes()[key.dim() - 2], Ev = value.sizes()[value.dim() - 1];
  if (L == 0 || value.numel() == 0) {
    // the forward's zeros (no queries, or a value without elements): no input moved them
    const ScalarType acc = is_reduced_floating(query.dtype()) ? ScalarType::Float32 : query.dtype();
    std::array<Tensor, 4> zeros;
    const Tensor* inputs[4] = {&query, &key, &value, mask_grad && attn_mask ? &*attn_mask : nullptr};
    for (int i = 0; i < 4; ++i) {
      if (inputs[i] == nullptr) continue;
      zeros[i] = alloc_cpu(inputs[i]->sizes(), acc);
      if (zeros[i].numel() > 0) fill_cpu(zeros[i], Scalar(0.0));
    }
    return {zeros[0], zeros[1], zeros[2], zeros[3]};
  }
  DimVector batch = broadcast_shapes(op, batch_of(query), batch_of(key));
  batch = broadcast_shapes(op, batch, batch_of(value));
  auto shaped = [&](std::int64_t rows, std::int64_t cols) {
    DimVector shape = batch;
    shape.push_back(rows);
    shape.push_back(cols);
    return shape;
  };
  const DimVector grad_shape = shaped(L, Ev);
  KAEL_CHECK(std::equal(grad.sizes().begin(), grad.sizes().end(), grad_shape.begin(), grad_shape.end()),
             op << ": expected grad of shape " << shape_str(grad_shape) << ", got " << shape_str(grad.sizes()));
  const ScalarType acc = is_reduced_floating(query.dtype()) ? ScalarType::Float32 : query.dtype();
  // each gradient laid out as its input (see alloc_like_layout)
  Tensor dq = alloc_like_layout(shaped(L, E), query, acc), dk = alloc_like_layout(shaped(S, E), key, acc),
         dv = alloc_like_layout(shaped(S, Ev), value, acc);
  KAEL_CHECK(!mask_grad || (attn_mask && attn_mask->dtype() != ScalarType::Bool),
             op << ": a mask gradient needs a floating attn_mask");
  // every element written (a mask excludes is_causal, so each row visits every key)
  const Tensor dm = mask_grad ? alloc_cpu(shaped(L, S), acc) : Tensor();
  std::int64_t batches = 1;
  for (std::int64_t b : batch) batches *= b;
  if (batches == 0 || L == 0 || S == 0) {
    for (const Tensor* t : {&dq, &dk, &dv}) fill_cpu(*t, Scalar(0.0));
    return {dq, dk, dv, dm};
  }
  auto as_acc = [&](const Tensor& t) {
    return t.dtype() == acc && t.is_contiguous() ? t : to_dtype_cpu(kael::contiguous(t), acc);
  };
  auto rows_of = [&](const Tensor& t) { return readable_in_place(t, acc) ? t : as_acc(t); };
  const Tensor q = rows_of(query), k = rows_of(key), v = rows_of(value), g = rows_of(grad);
  Mask mask;
  Tensor mask_t;
  std::vector<std::int64_t> m_off;
  if (attn_mask) {
    mask.kind = attn_mask->dtype() == ScalarType::Bool ? Mask::Bool : Mask::Float;
    mask_t = kael::expand(mask.kind == Mask::Float ? as_acc(*attn_mask) : *attn_mask, shaped(L, S));
    m_off = batch_offsets(batch, mask_t.sizes(), mask_t.strides());
    mask.row_stride = mask_t.strides()[mask_t.dim() - 2];
    mask.col_stride = mask_t.strides()[mask_t.dim() - 1];
  }
  const std::vector<std::int64_t> q_off = batch_offsets(batch, q.sizes(), q.strides());
  const std::vector<std::int64_t> k_off = batch_offsets(batch, k.sizes(), k.strides());
  const std::vector<std::int64_t> kp_off = packed_offsets(batch, k), vp_off = packed_offsets(batch, v);
  const std::vector<std::int64_t> g_off = batch_offsets(batch, g.sizes(), g.strides());
  const std::vector<std::int64_t> dq_off = batch_offsets(batch, dq.sizes(), dq.strides());
  const std::vector<std::int64_t> dk_off = batch_offsets(batch, dk.sizes(), dk.strides());
  const std::vector<std::int64_t> dv_off = batch_offsets(batch, dv.sizes(), dv.strides());
  std::int64_t k_batches = 1, v_batches = 1;
  for (std::int64_t b : batch_of(k)) k_batches *= b;
  for (std::int64_t b : batch_of(v)) v_batches *= b;
  const std::int64_t ntiles = (S + kTileCols - 1) / kTileCols;
  const Tensor kp = alloc_cpu(DimVector{k_batches, ntiles * E * kTileCols}, acc);
  const Tensor vp = alloc_cpu(DimVector{v_batches, ntiles * Ev * kTileCols}, acc);
  const double scale_value = scale ? *scale : E == 0 ? 1.0 : 1.0 / std::sqrt(static_cast<double>(E));
  const Dropout dropout{dropout_p > 0.0, 1.0 - dropout_p,
                        PhiloxStream{std::bit_cast<std::uint64_t>(seed), std::bit_cast<std::uint64_t>(offset)}};
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      pack_tiles(k.data<T>(), own_batch_offsets(k), row_stride(k), kp.data<T>(), k_batches, S, E);
      pack_tiles(v.data<T>(), own_batch_offsets(v), row_stride(v), vp.data<T>(), v_batches, S, Ev);
      const std::int64_t dqs = row_stride(dq), dks = row_stride(dk), dvs = row_stride(dv);
      auto zero_rows = [](T* p, std::int64_t rows, std::int64_t stride, std::int64_t width) {
        for (std::int64_t i = 0; i < rows; ++i) std::fill(p + i * stride, p + i * stride + width, T(0));
      };
      nn::parallel_for(batches, L * S * (E + Ev) * 3, [&](std::int64_t begin, std::int64_t end) {
        std::vector<T> buf;
        for (std::int64_t b = begin; b < end; ++b) {
          const auto bi = static_cast<std::size_t>(b);
          BackwardArgs<T> a{q.data<T>() + q_off[bi],
                            k.data<T>() + k_off[bi],
                            kp.data<T>() + kp_off[bi],
                            vp.data<T>() + vp_off[bi],
                            g.data<T>() + g_off[bi],
                            dq.data<T>() + dq_off[bi],
                            dk.data<T>() + dk_off[bi],
                            dv.data<T>() + dv_off[bi],
                            dm.defined() ? dm.data<T>() + b * L * S : nullptr,
                            L, S, E, Ev, row_stride(q), row_stride(k), row_stride(g), dqs, dks, dvs,
                            static_cast<T>(scale_value), is_causal, b, &dropout};
          zero_rows(a.dq, L, dqs, E);
          zero_rows(a.dk, S, dks, E);
          zero_rows(a.dv, S, dvs, Ev);
          Mask mb = mask;
          if (mask_t.defined())
            mb.data = static_cast<const char*>(mask_t.data_ptr()) +
                      m_off[static_cast<std::size_t>(b)] * static_cast<std::int64_t>(mask_t.element_size());
          attend_backward(a, mb, buf);
        }
      });
    }
  });
  return {dq, dk, dv, dm};
}

}  // namespace kael::native
