// The GPT's KV-cache decoder and its sampling (Note [Decoder] and Note [GPT] in kael/gpt/gpt.h).
//
// Note [Sampling]
// From a row of float32 logits, as transformers' generate with do_sample and its warpers:
//   - temperature 0: the argmax, the lowest id on ties (torch.argmax); no draw;
//   - logits / temperature (TemperatureLogitsWarper);
//   - top_k: every logit below the k-th largest is dropped (TopKLogitsWarper: ties with the
//     k-th are kept);
//   - top_p: over the softmax of what is left, sorted by probability (ties by id), a token is
//     kept when the tokens before it sum to less than p: the smallest set reaching p
//     (TopPLogitsWarper; p = 1 keeps everything);
//   - one draw: u uniform in [0, 1) from block n of the sequence's Philox stream (seed,
//     stream) for its n-th token; the token is the first id, in id order, at which the running
//     sum of the kept weights exceeds u times their total.
// Everything is a function of the logits, the settings and (seed, stream, n): not of the global
// generator, the thread count or the other sequences of the batch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/half.h"
#include "kael/core/storage.h"
#include "kael/core/tensor_impl.h"
#include "kael/gpt/gpt.h"
#include "kael/native/gemm.h"
#include "kael/native/vec_math.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/to.h"
#include "kael/runtime/philox.h"
#include "kael/runtime/threads.h"

namespace kael::gpt {

namespace {

using i64 = std::int64_t;

// A matrix the products read: its memory in place (float32, bfloat16 or float16).
struct Matrix {
  const void* data = nullptr;
  ScalarType dtype = ScalarType::Float32;
  i64 rows = 0, cols = 0;  // row-major, contiguous
};

// A block's weights as the decoder reads them: the matrices in place, the vectors as float32
// (zeros for the biases of a model without them).
struct LayerWeights {
  Matrix c_attn, c_proj, c_fc, mlp_proj;
  std::vector<float> ln_1_w, ln_1_b, c_attn_b, c_proj_b, ln_2_w, ln_2_b, c_fc_b, mlp_proj_b;
};

struct Sequence {
  bool used = false;
  std::vector<i64> tokens;  // the context: prompt, then every token drawn
  i64 base = 0;             // tokens[base + t] is at position t of the cache (base > 0 once cropped)
  i64 cached = 0;           // tokens in the cache
  i64 generated = 0;
  i64 max_new_tokens = 0;
  Sampling sampling;
  std::vector<i64> stop_tokens;
  i64 capacity = 0;          // positions the cache holds
  std::vector<float> cache;  // (n_layer, 2, n_head, capacity, head_dim)
  std::uint64_t arrival = 0;  // the order of add() calls: prefills run first come, first served
};

// One token that a forward pass runs: the sequence's slot, its position, its id; `logits` marks
// the rows whose logits are wanted.
struct Row {
  i64 slot, position, token;
  bool logits;
};

float to_float(const void* data, ScalarType dtype, i64 i) {
  switch (dtype) {
    case ScalarType::Float32: return static_cast<const float*>(data)[i];
    case ScalarType::BFloat16: return detail::bf16_to_float(static_cast<const std::uint16_t*>(data)[i]);
    case ScalarType::Float16: return detail::fp16_to_float(static_cast<const std::uint16_t*>(data)[i]);
    default: KAEL_INTERNAL_ASSERT(false); return 0.0f;
  }
}

// Sixteen partial sums, added in a fixed order at the end: vectorised, and the same bits on
// every call.
float dot(const float* a, const float* b, i64 n) {
  float acc[16] = {};
  i64 j = 0;
  for (; j + 16 <= n; j += 16)
    for (int u = 0; u < 16; ++u) acc[u] += a[j + u] * b[j + u];
  float s = 0.0f;
  for (int u = 0; u < 16; ++u) s += acc[u];
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

// x: (rows, C) -> out: LayerNorm over C with weight w and bias b (float32, two passes).
void layer_norm(const float* x, i64 rows, i64 c, const float* w, const float* b, double eps, float* out) {
  for (i64 r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    float* o = out + r * c;
    float mean = 0.0f;
    for (i64 j = 0; j < c; ++j) mean += xr[j];
    mean /= static_cast<float>(c);
    float var = 0.0f;
    for (i64 j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<float>(c);
    const float rstd = 1.0f / std::sqrt(var + static_cast<float>(eps));
    for (i64 j = 0; j < c; ++j) o[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

}  // namespace

struct Decoder::State {
  Config config;
  i64 max_batch = 0;
  std::uint64_t arrivals = 0;  // add() calls so far
  // The weights' memory, pinned while the decoder lives (Note [Decoder]).
  std::vector<IntrusivePtr<Storage>> pinned;
  std::vector<Tensor> owned;  // private tensors over that memory, and converted copies
  Matrix wte, wpe;            // (V, C), (block_size, C)
  std::vector<LayerWeights> layers;
  std::vector<float> ln_f_w, ln_f_b;
  std::vector<Sequence> slots;
  // Scratch of one forward pass, kept between steps.
  std::vector<float> x, h, qkv, y, f, last, logits, wide;

  ~State() {
    owned.clear();
    for (auto& s : pinned) s->unpin();
  }

  // t as the decoder's own contiguous tensor over t's current memory, pinned.
  Tensor own(const Tensor& t) {
    KAEL_CHECK_VALUE(t.device().is_cpu(), "GPT decoder: the weights must be on the CPU, got " << t.device());
    const IntrusivePtr<Storage>& storage = t.impl()->storage_ptr();
    storage->pin();
    pinned.push_back(storage);
    auto view = Storage::external(storage->data(), storage->nbytes(), storage->device(), nullptr, nullptr);
    Tensor mine(TensorImpl::make(std::move(view), t.dtype(), DimVector(t.sizes()), DimVector(t.strides()),
                                 t.impl()->offset()));
    const ScalarType dt = t.dtype();
    if (dt != ScalarType::Float32 && dt != ScalarType::BFloat16 && dt != ScalarType::Float16)
      mine = kael::to(mine, ScalarType::Float32);
    mine = kael::contiguous(mine);
    owned.push_back(mine);
    return mine;
  }
  Matrix matrix(const Tensor& t) {
    const Tensor m = own(t);
    return Matrix{m.data_ptr(), m.dtype(), m.size(0), m.dim() > 1 ? m.size(1) : 1};
  }
  std::vector<float> vec(const Tensor& t, i64 n) {
    std::vector<float> v(static_cast<std::size_t>(n), 0.0f);
    if (!t.defined()) return v;
    const Tensor m = own(t);
    for (i64 i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = to_float(m.data_ptr(), m.dtype(), i);
    return v;
  }

  i64 c() const { return config.n_embd; }

  // out (m, n) = bias + x (m, k) @ w, w (k, n) row-major (Conv1D) or, transposed, w (n, k) (the
  // LM head: bias nullptr).
  void product(const float* x, i64 m, const Matrix& w, bool transposed, const float* bias, float* out) {
    const i64 k = transposed ? w.cols : w.rows, n = transposed ? w.rows : w.cols;
    const i64 b_rs = transposed ? 1 : n, b_cs = transposed ? k : 1;
    if (bias != nullptr)
      for (i64 i = 0; i < m; ++i) std::copy(bias, bias + n, out + i * n);
    const bool acc = bias != nullptr;
    for (i64 i0 = 0; i0 < m;) {
      const i64 rows = m - i0;
      if (rows <= native::kSmallM) {
        KAEL_INTERNAL_ASSERT(native::gemm_small_m(rows, n, k, x + i0 * k, k, 1, w.data, w.dtype, b_rs, b_cs,
                                                  out + i0 * n, n, acc));
        return;
      }
      if (w.dtype == ScalarType::Float32 && native::gemm_f32_available()) {
        native::gemm_f32(rows, n, k, x + i0 * k, k, 1, static_cast<const float*>(w.data), b_rs, b_cs, out + i0 * n, n,
                         acc);
        return;
      }
      if (rows > 4 * native::kSmallM && native::gemm_f32_available()) {
        // Many rows of a half-precision weight (a prefill): widened once, then the GEMM, which
        // sums as gemm_small_m does.
        wide.resize(static_cast<std::size_t>(k * n));
        float* wd = wide.data();
        parallel_for(0, k * n, 1 << 16, [&](i64 b, i64 e) {
          for (i64 i = b; i < e; ++i) wd[i] = to_float(w.data, w.dtype, i);
        });
        native::gemm_f32(rows, n, k, x + i0 * k, k, 1, wd, b_rs, b_cs, out + i0 * n, n, acc);
        return;
      }
      if (!native::gemm_small_m(native::kSmallM, n, k, x + i0 * k, k, 1, w.data, w.dtype, b_rs, b_cs, out + i0 * n,
                                n, acc)) {
        // No AVX-512: the plain sums.
        for (i64 i = i0; i < m; ++i)
          for (i64 j = 0; j < n; ++j) {
            float s = acc ? out[i * n + j] : 0.0f;
            for (i64 p = 0; p < k; ++p) s += x[i * k + p] * to_float(w.data, w.dtype, p * b_rs + j * b_cs);
            out[i * n + j] = s;
          }
        return;
      }
      i0 += native::kSmallM;
    }
  }

  float* cache_at(Sequence& s, i64 layer, i64 kv, i64 head, i64 pos) {
    const i64 hd = config.head_dim();
    return s.cache.data() + (((layer * 2 + kv) * config.n_head + head) * s.capacity + pos) * hd;
  }

  // The forward pass of `rows` (in order: a sequence's rows ascend in position); the final
  // LayerNorm of the rows marked `logits` is appended to `last`.
  void forward(const std::vector<Row>& rows) {
    const i64 m = static_cast<i64>(rows.size()), C = c(), H = config.n_head, hd = config.head_dim();
    const auto size = [](i64 n) { return static_cast<std::size_t>(n); };
    x.resize(size(m * C));
    h.resize(size(m * C));
    qkv.resize(size(m * 3 * C));
    y.resize(size(m * C));
    f.resize(size(m * 4 * C));
    for (i64 r = 0; r < m; ++r) {
      const Row& row = rows[size(r)];
      for (i64 j = 0; j < C; ++j)
        x[size(r * C + j)] = to_float(wte.data, wte.dtype, row.token * C + j) +
                             to_float(wpe.data, wpe.dtype, row.position * C + j);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const i64 row_grain = std::max<i64>(1, 16384 / C);
    for (i64 l = 0; l < config.n_layer; ++l) {
      LayerWeights& lw = layers[size(l)];
      parallel_for(0, m, row_grain, [&](i64 b, i64 e) {
        layer_norm(x.data() + b * C, e - b, C, lw.ln_1_w.data(), lw.ln_1_b.data(), config.layer_norm_epsilon,
                   h.data() + b * C);
      });
      product(h.data(), m, lw.c_attn, false, lw.c_attn_b.data(), qkv.data());
      for (i64 r = 0; r < m; ++r) {
        const Row& row = rows[size(r)];
        Sequence& s = slots[size(row.slot)];
        for (i64 head = 0; head < H; ++head) {
          const float* k = qkv.data() + r * 3 * C + C + head * hd;
          std::copy(k, k + hd, cache_at(s, l, 0, head, row.position));
          std::copy(k + C, k + C + hd, cache_at(s, l, 1, head, row.position));
        }
      }
      // Attention of each (row, head) over its sequence's cache up to its position.
      const i64 work = m * H * (rows.back().position + 1) * hd;
      parallel_for(0, m * H, work > (1 << 16) ? 1 : m * H, [&](i64 b, i64 e) {
        std::vector<float> p;
        for (i64 rh = b; rh < e; ++rh) {
          const i64 r = rh / H, head = rh % H;
          const Row& row = rows[size(r)];
          Sequence& s = slots[size(row.slot)];
          const i64 len = row.position + 1;
          const float* q = qkv.data() + r * 3 * C + head * hd;
          const float* keys = cache_at(s, l, 0, head, 0);
          const float* values = cache_at(s, l, 1, head, 0);
          p.resize(size(len));
          float mx = -std::numeric_limits<float>::infinity();
          for (i64 t = 0; t < len; ++t) {
            p[size(t)] = dot(q, keys + t * hd, hd) * scale;
            mx = std::max(mx, p[size(t)]);
          }
          float sum = 0.0f;
          for (i64 t = 0; t < len; ++t) {
            p[size(t)] = native::vmath::exp(p[size(t)] - mx);
            sum += p[size(t)];
          }
          const float inv = 1.0f / sum;
          float* out = y.data() + r * C + head * hd;
          std::fill(out, out + hd, 0.0f);
          for (i64 t = 0; t < len; ++t) {
            const float w = p[size(t)] * inv;
            const float* v = values + t * hd;
            for (i64 j = 0; j < hd; ++j) out[j] += w * v[j];
          }
        }
      });
      product(y.data(), m, lw.c_proj, false, lw.c_proj_b.data(), h.data());
      for (i64 i = 0; i < m * C; ++i) x[size(i)] += h[size(i)];
      parallel_for(0, m, row_grain, [&](i64 b, i64 e) {
        layer_norm(x.data() + b * C, e - b, C, lw.ln_2_w.data(), lw.ln_2_b.data(), config.layer_norm_epsilon,
                   h.data() + b * C);
      });
      product(h.data(), m, lw.c_fc, false, lw.c_fc_b.data(), f.data());
      parallel_for(0, m * 4 * C, 1 << 15, [&](i64 b, i64 e) {
        for (i64 i = b; i < e; ++i) f[size(i)] = native::vmath::gelu_tanh(f[size(i)]);
      });
      product(f.data(), m, lw.mlp_proj, false, lw.mlp_proj_b.data(), h.data());
      for (i64 i = 0; i < m * C; ++i) x[size(i)] += h[size(i)];
    }
    for (i64 r = 0; r < m; ++r) {
      if (!rows[size(r)].logits) continue;
      const std::size_t at = last.size();
      last.resize(at + size(C));
      layer_norm(x.data() + r * C, 1, C, ln_f_w.data(), ln_f_b.data(), config.layer_norm_epsilon, last.data() + at);
    }
  }
};

namespace {

// Note [Sampling]: the token drawn from `logits` (modified in place) with u in [0, 1).
i64 sample(float* logits, i64 vocab, const Sampling& s, double u) {
  if (s.temperature == 0.0) {
    i64 best = 0;
    for (i64 i = 1; i < vocab; ++i)
      if (logits[i] > logits[best]) best = i;
    return best;
  }
  const float t = static_cast<float>(s.temperature);
  for (i64 i = 0; i < vocab; ++i) logits[i] /= t;
  if (s.top_k && *s.top_k < vocab) {
    std::vector<float> copy(logits, logits + vocab);
    const auto kth = copy.begin() + (*s.top_k - 1);
    std::nth_element(copy.begin(), kth, copy.end(), std::greater<float>());
    const float threshold = *kth;
    for (i64 i = 0; i < vocab; ++i)
      if (logits[i] < threshold) logits[i] = -std::numeric_limits<float>::infinity();
  }
  float mx = -std::numeric_limits<float>::infinity();
  for (i64 i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  std::vector<double> w(static_cast<std::size_t>(vocab));
  double total = 0.0;
  for (i64 i = 0; i < vocab; ++i) {
    w[static_cast<std::size_t>(i)] = std::isinf(logits[i]) && logits[i] < 0 ? 0.0 : std::exp(double(logits[i]) - mx);
    total += w[static_cast<std::size_t>(i)];
  }
  if (s.top_p && *s.top_p < 1.0) {
    std::vector<i64> order;
    for (i64 i = 0; i < vocab; ++i)
      if (w[static_cast<std::size_t>(i)] > 0.0) order.push_back(i);
    const auto higher = [&](i64 a, i64 b) {
      const double wa = w[static_cast<std::size_t>(a)], wb = w[static_cast<std::size_t>(b)];
      return wa > wb || (wa == wb && a < b);
    };
    // The nucleus is usually small: sort the head first, all of it only when needed.
    std::size_t sorted = std::min<std::size_t>(order.size(), 64);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(sorted), order.end(), higher);
    const double target = *s.top_p * total;
    double before = 0.0;
    std::size_t keep = 0;
    for (;;) {
      while (keep < sorted && before < target) before += w[static_cast<std::size_t>(order[keep++])];
      if (before >= target || sorted == order.size()) break;
      std::sort(order.begin() + static_cast<std::ptrdiff_t>(sorted), order.end(), higher);
      sorted = order.size();
    }
    // Every token after the first `keep` is dropped.
    for (std::size_t i = keep; i < order.size(); ++i) w[static_cast<std::size_t>(order[i])] = 0.0;
    total = 0.0;
    for (i64 i = 0; i < vocab; ++i) total += w[static_cast<std::size_t>(i)];
  }
  const double target = u * total;
  double run = 0.0;
  i64 last_kept = 0;
  for (i64 i = 0; i < vocab; ++i) {
    const double wi = w[static_cast<std::size_t>(i)];
    if (wi <= 0.0) continue;
    run += wi;
    last_kept = i;
    if (run > target) return i;
  }
  return last_kept;  // rounding left u * total at the very end
}

}  // namespace

Decoder::Decoder(Config config, Weights weights, std::int64_t max_batch) : state_(new State()) {
  State& s = *state_;
  try {
    config.validate();
    KAEL_CHECK_VALUE(max_batch >= 1, "GPT decoder: max_batch must be at least 1, got " << max_batch);
    KAEL_CHECK_VALUE(static_cast<i64>(weights.h.size()) == config.n_layer,
                     "GPT decoder: expected " << config.n_layer << " blocks, got " << weights.h.size());
    s.config = config;
    s.max_batch = max_batch;
    const i64 c = config.n_embd;
    s.wte = s.matrix(weights.wte);
    s.wpe = s.matrix(weights.wpe);
    for (const Block& b : weights.h) {
      LayerWeights lw;
      lw.c_attn = s.matrix(b.attn_c_attn_weight);
      lw.c_proj = s.matrix(b.attn_c_proj_weight);
      lw.c_fc = s.matrix(b.mlp_c_fc_weight);
      lw.mlp_proj = s.matrix(b.mlp_c_proj_weight);
      lw.ln_1_w = s.vec(b.ln_1_weight, c);
      lw.ln_1_b = s.vec(b.ln_1_bias, c);
      lw.c_attn_b = s.vec(b.attn_c_attn_bias, 3 * c);
      lw.c_proj_b = s.vec(b.attn_c_proj_bias, c);
      lw.ln_2_w = s.vec(b.ln_2_weight, c);
      lw.ln_2_b = s.vec(b.ln_2_bias, c);
      lw.c_fc_b = s.vec(b.mlp_c_fc_bias, 4 * c);
      lw.mlp_proj_b = s.vec(b.mlp_c_proj_bias, c);
      s.layers.push_back(std::move(lw));
    }
    s.ln_f_w = s.vec(weights.ln_f_weight, c);
    s.ln_f_b = s.vec(weights.ln_f_bias, c);
    s.slots.resize(static_cast<std::size_t>(max_batch));
  } catch (...) {
    delete state_;
    throw;
  }
}

Decoder::~Decoder() { delete state_; }

std::int64_t Decoder::add(std::vector<std::int64_t> prompt, const Sampling& sampling,
                          std::vector<std::int64_t> stop_tokens, std::int64_t max_new_tokens) {
  State& s = *state_;
  KAEL_CHECK_VALUE(!prompt.empty(), "generate: a prompt must have at least one token, got an empty one");
  for (i64 t : prompt)
    KAEL_CHECK_VALUE(t >= 0 && t < s.config.vocab_size,
                     "generate: token id " << t << " is outside the vocabulary [0, " << s.config.vocab_size << ")");
  KAEL_CHECK_VALUE(max_new_tokens >= 0, "generate: max_new_tokens must be non-negative, got " << max_new_tokens);
  sampling.validate();
  i64 slot = -1;
  for (i64 i = 0; i < s.max_batch; ++i)
    if (!s.slots[static_cast<std::size_t>(i)].used) {
      slot = i;
      break;
    }
  KAEL_CHECK_VALUE(slot >= 0, "GPT decoder: no free slot, all " << s.max_batch << " are in use");
  Sequence& q = s.slots[static_cast<std::size_t>(slot)];
  // The cache holds every token the sequence can run: all but its last, at most block_size.
  const i64 reach = std::min<i64>(s.config.block_size, static_cast<i64>(prompt.size()) + max_new_tokens);
  if (q.capacity < reach) {
    q.capacity = reach;
    q.cache.assign(static_cast<std::size_t>(s.config.n_layer * 2 * s.config.n_embd * reach), 0.0f);
  }
  q.used = true;
  q.tokens = std::move(prompt);
  q.base = 0;
  q.cached = 0;
  q.generated = 0;
  q.max_new_tokens = max_new_tokens;
  q.sampling = sampling;
  q.stop_tokens = std::move(stop_tokens);
  q.arrival = s.arrivals++;
  return slot;
}

void Decoder::remove(std::int64_t slot) {
  State& s = *state_;
  KAEL_CHECK_VALUE(slot >= 0 && slot < s.max_batch && s.slots[static_cast<std::size_t>(slot)].used,
                   "GPT decoder: slot " << slot << " holds no sequence");
  s.slots[static_cast<std::size_t>(slot)].used = false;
}

std::vector<Decoder::Event> Decoder::step(std::int64_t max_rows) {
  KAEL_CHECK_VALUE(max_rows >= 1, "GPT decoder: step's max_rows must be at least 1, got " << max_rows);
  State& s = *state_;
  const i64 block = s.config.block_size, vocab = s.config.vocab_size;
  std::vector<Event> events;
  std::vector<Row> rows;
  std::vector<i64> order;    // the slots whose logits come out, in the order of `last`
  std::vector<i64> filling;  // the slots with more than one token to run (Note [Prefill budget])
  for (i64 slot = 0; slot < s.max_batch; ++slot) {
    Sequence& q = s.slots[static_cast<std::size_t>(slot)];
    if (!q.used) continue;
    if (q.generated >= q.max_new_tokens) {  // nothing to draw (max_new_tokens = 0)
      q.used = false;
      events.push_back({slot, -1, true});
      continue;
    }
    const i64 len = static_cast<i64>(q.tokens.size());
    if (len - q.base > block) {
      // Note [Decoder]: the context is cropped to its last block_size tokens, the cache recomputed.
      q.base = len - block;
      q.cached = 0;
    }
    if (len - q.base - q.cached > 1) {
      filling.push_back(slot);
      continue;
    }
    rows.push_back({slot, len - 1 - q.base, q.tokens[static_cast<std::size_t>(len - 1)], true});
    q.cached = len - q.base;
    order.push_back(slot);
  }
  // Note [Prefill budget]: the sequences with one token to run (decoding) all run; the rest of
  // max_rows, at least one row, goes to the prefills, oldest first. A prefill that does not fit
  // runs its next rows now and the others at the coming steps; its logits come with its last row.
  std::stable_sort(filling.begin(), filling.end(), [&](i64 a, i64 b) {
    return s.slots[static_cast<std::size_t>(a)].arrival < s.slots[static_cast<std::size_t>(b)].arrival;
  });
  i64 budget = std::max<i64>(1, max_rows - static_cast<i64>(rows.size()));
  for (i64 slot : filling) {
    if (budget == 0) break;
    Sequence& q = s.slots[static_cast<std::size_t>(slot)];
    const i64 len = static_cast<i64>(q.tokens.size());
    const i64 take = std::min(budget, len - q.base - q.cached);
    for (i64 t = q.base + q.cached; t < q.base + q.cached + take; ++t)
      rows.push_back({slot, t - q.base, q.tokens[static_cast<std::size_t>(t)], t == len - 1});
    q.cached += take;
    budget -= take;
    if (q.cached == len - q.base) order.push_back(slot);
  }
  if (rows.empty()) return events;
  s.last.clear();
  // Rows in chunks: a sequence's rows ascend, so each chunk's attention finds the earlier
  // chunks' keys and values in the cache.
  for (std::size_t b = 0; b < rows.size(); b += static_cast<std::size_t>(kChunkRows)) {
    const std::size_t e = std::min(rows.size(), b + static_cast<std::size_t>(kChunkRows));
    s.forward(std::vector<Row>(rows.begin() + static_cast<std::ptrdiff_t>(b),
                               rows.begin() + static_cast<std::ptrdiff_t>(e)));
  }
  const i64 n = static_cast<i64>(order.size());
  s.logits.resize(static_cast<std::size_t>(n * vocab));
  s.product(s.last.data(), n, s.wte, true, nullptr, s.logits.data());
  for (i64 i = 0; i < n; ++i) {
    const i64 slot = order[static_cast<std::size_t>(i)];
    Sequence& q = s.slots[static_cast<std::size_t>(slot)];
    const random::Block bits =
        random::block(PhiloxStream{q.sampling.seed, q.sampling.stream}, static_cast<std::uint64_t>(q.generated));
    const double u = random::uniform_double(random::u64(bits[0], bits[1]));
    const i64 token = sample(s.logits.data() + i * vocab, vocab, q.sampling, u);
    q.tokens.push_back(token);
    ++q.generated;
    const bool stop = std::find(q.stop_tokens.begin(), q.stop_tokens.end(), token) != q.stop_tokens.end();
    const bool finished = stop || q.generated >= q.max_new_tokens;
    if (finished) q.used = false;
    events.push_back({slot, token, finished});
  }
  return events;
}

std::int64_t Decoder::active() const {
  i64 n = 0;
  for (const Sequence& q : state_->slots) n += q.used ? 1 : 0;
  return n;
}

std::int64_t Decoder::max_batch() const { return state_->max_batch; }

const Config& Decoder::config() const { return state_->config; }

}  // namespace kael::gpt
