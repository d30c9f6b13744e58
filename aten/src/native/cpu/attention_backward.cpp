// scaled_dot_product_attention's backward pass on the CPU, fused (Note [Attention backward]).
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
  scores(a.q + i0 * a.qs, a.qs, a.kp + (j0 / kTileCols) * a.E * kTileCols, a.E, rows, cols, a.scale, s);
  for (std::int64_t i = 0; i < rows; ++i) mask_scores_row(mask, a.causal, i0 + i, j0, cols, s + i * kBlockK);
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
