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

#include "attention_kernels.h"

namespace kael::native {

using namespace attention;

namespace {

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
      mask_scores_row(mask, a.causal, i0 + i, j0, cols, sr);
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

}  // namespace


Tensor sdpa_dropout_mask_cpu(const Tensor& query, IntArrayRef size, double dropout_p, std::int64_t seed,
                             std::int64_t offset) {
  constexpr const char* op = "_sdpa_dropout_mask";
  KAEL_CHECK(size.size() >= 2, op << ": expected a size of at least 2 dims, got " << shape_str(size));
  KAEL_CHECK(!(dropout_p > 0.0) || dropout_p <= 1.0,
             op << ": dropout probability has to be between 0 and 1, but got " << dropout_p);
  KAEL_CHECK_IMPLEMENTED(is_floating(query.dtype()), op << ": not implemented for dtype " << query.dtype());
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
  KAEL_CHECK_IMPLEMENTED(is_floating(query.dtype()), op << ": not implemented for dtype " << query.dtype());
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
    KAEL_CHECK(std::equal(shape.begin(), shape.end(), full.begin(), full.end()),
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
}  // namespace kael::native
