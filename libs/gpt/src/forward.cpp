// The GPT's forward pass for training and evaluation (Note [GPT] in kael/gpt/gpt.h): Hugging
// Face's GPT2LMHeadModel written with the core's ops, so autograd records it through the
// dispatcher like any other composition.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "kael/core/error.h"
#include "kael/gpt/gpt.h"
#include "kael/ops/add.h"
#include "kael/ops/addmm.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/cross_entropy_losses.h"
#include "kael/ops/div.h"
#include "kael/ops/dropout.h"
#include "kael/ops/embedding.h"
#include "kael/ops/gelu.h"
#include "kael/ops/layer_norm.h"
#include "kael/ops/matmul.h"
#include "kael/ops/narrow.h"
#include "kael/ops/ne.h"
#include "kael/ops/reshape.h"
#include "kael/ops/scaled_dot_product_attention.h"
#include "kael/ops/sum.h"
#include "kael/ops/t.h"
#include "kael/ops/to.h"
#include "kael/ops/transpose.h"
#include "kael/ops/view.h"

namespace kael::gpt {

namespace {

// t as a contiguous CPU tensor (the checks read its values).
Tensor cpu_contiguous(const Tensor& t) { return kael::contiguous(t.device().is_cpu() ? t : kael::to(t, kCPU)); }

void check_inputs(const Config& config, const Tensor& idx, const std::optional<Tensor>& targets) {
  KAEL_CHECK_VALUE(idx.defined(), "GPT.forward: idx is undefined");
  KAEL_CHECK_VALUE(idx.dtype() == ScalarType::Int64, "GPT.forward: idx must be int64, got " << idx.dtype());
  KAEL_CHECK_VALUE(idx.dim() == 2, "GPT.forward: idx must be 2-d (batch, time), got shape " << shape_str(idx.sizes()));
  const std::int64_t t = idx.size(1);
  KAEL_CHECK_VALUE(t >= 1 && t <= config.block_size, "GPT.forward: sequence length "
                                                         << t << " must be in [1, block_size=" << config.block_size
                                                         << "], idx has shape " << shape_str(idx.sizes()));
  {
    const Tensor c = cpu_contiguous(idx);
    const std::int64_t* p = c.data<std::int64_t>();
    for (std::int64_t i = 0, n = c.numel(); i < n; ++i) {
      KAEL_CHECK_VALUE(p[i] >= 0 && p[i] < config.vocab_size, "GPT.forward: idx holds token id "
                                                                  << p[i] << ", outside [0, vocab_size="
                                                                  << config.vocab_size << ")");
    }
  }
  if (!targets) return;
  const Tensor& y = *targets;
  KAEL_CHECK_VALUE(y.defined(), "GPT.forward: targets is undefined");
  KAEL_CHECK_VALUE(y.dtype() == ScalarType::Int64, "GPT.forward: targets must be int64, got " << y.dtype());
  KAEL_CHECK_VALUE(std::ranges::equal(y.sizes(), idx.sizes()), "GPT.forward: targets has shape "
                                                 << shape_str(y.sizes()) << ", but idx has shape "
                                                 << shape_str(idx.sizes()));
  KAEL_CHECK_VALUE(y.device() == idx.device(),
                   "GPT.forward: targets is on " << y.device() << ", but idx is on " << idx.device());
  const Tensor c = cpu_contiguous(y);
  const std::int64_t* p = c.data<std::int64_t>();
  for (std::int64_t i = 0, n = c.numel(); i < n; ++i) {
    KAEL_CHECK_VALUE(p[i] == -100 || (p[i] >= 0 && p[i] < config.vocab_size),
                     "GPT.forward: targets holds " << p[i] << ", outside [0, vocab_size=" << config.vocab_size
                                                   << ") and not -100 (ignored)");
  }
}

// Hugging Face's Conv1D on the rows of x2d (N, in): x2d @ weight + bias, weight (in, out).
Tensor conv1d(const Tensor& x2d, const Tensor& weight, const Tensor& bias) {
  return bias.defined() ? kael::addmm(bias, x2d, weight) : kael::matmul(x2d, weight);
}

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

}  // namespace

// x: (B, T, C) is carried as (B*T, C) rows through the block; the attention views it as
// (B, n_head, T, head_dim).
//
// Note [GPT q, k and v]
// c_attn is one (C, 3C) weight, but q, k and v are computed as three products with its column
// blocks rather than one product split afterwards: the backward pass of a split (select or
// narrow of the (B*T, 3C) result) writes each gradient into zeros of the whole result and adds
// the three, which costs more than the extra products' set-up. Each product's gradient then
// goes to its column block of the weight (a small (C, C) block) and the three gradients of h
// add as (B*T, C) rows.
Output forward(const Config& config, const Weights& weights, const Tensor& idx, const std::optional<Tensor>& targets,
               bool training) {
  config.validate();
  check_inputs(config, idx, targets);
  const std::int64_t B = idx.size(0), T = idx.size(1), C = config.n_embd, nh = config.n_head,
                     hd = config.head_dim();
  const double p = training ? config.dropout : 0.0;
  const bool drop = p > 0.0;
  const double eps = config.layer_norm_epsilon;
  const std::int64_t shape_c[] = {C}, rows[] = {B * T, C}, heads[] = {B, T, nh, hd}, logits_shape[] = {B, T, config.vocab_size}, flat[] = {B * T};

  // (B*T, C): token rows plus the first T position rows
  Tensor x = kael::view(kael::add(kael::embedding(weights.wte, idx), kael::narrow(weights.wpe, 0, 0, T)), rows);
  if (drop) x = kael::dropout(x, p, true);

  for (const Block& b : weights.h) {
    // attention: q, k, v each (B*T, C) -> (B, nh, T, hd). See Note [GPT q, k and v].
    Tensor h = kael::layer_norm(x, shape_c, opt(b.ln_1_weight), opt(b.ln_1_bias), eps);
    Tensor qkv[3];
    for (std::int64_t i = 0; i < 3; ++i) {
      const Tensor w = kael::narrow(b.attn_c_attn_weight, 1, i * C, C);
      const Tensor bias = b.attn_c_attn_bias.defined() ? kael::narrow(b.attn_c_attn_bias, 0, i * C, C) : Tensor();
      qkv[i] = kael::transpose(kael::view(conv1d(h, w, bias), heads), 1, 2);
    }
    Tensor y = kael::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], std::nullopt, p, /*is_causal=*/true);
    y = kael::reshape(kael::transpose(y, 1, 2), rows);
    y = conv1d(y, b.attn_c_proj_weight, b.attn_c_proj_bias);
    if (drop) y = kael::dropout(y, p, true);
    x = kael::add(x, y);

    // MLP
    h = kael::layer_norm(x, shape_c, opt(b.ln_2_weight), opt(b.ln_2_bias), eps);
    h = kael::gelu(conv1d(h, b.mlp_c_fc_weight, b.mlp_c_fc_bias), "tanh");
    h = conv1d(h, b.mlp_c_proj_weight, b.mlp_c_proj_bias);
    if (drop) h = kael::dropout(h, p, true);
    x = kael::add(x, h);
  }
  x = kael::layer_norm(x, shape_c, opt(weights.ln_f_weight), opt(weights.ln_f_bias), eps);

  Output out;
  const Tensor logits2d = kael::matmul(x, kael::t(weights.wte));  // (B*T, vocab_size)
  out.logits = kael::view(logits2d, logits_shape);
  if (targets) {
    const Tensor y = kael::reshape(*targets, flat);
    const Tensor losses = kael::cross_entropy_losses(logits2d, y, -100);
    // the mean over the targets that are not ignored (NaN when all are, as in torch)
    const Tensor count = kael::sum(kael::ne(y, std::int64_t{-100}), std::nullopt);
    out.loss = kael::div(kael::sum(losses, std::nullopt), count);
  }
  return out;
}

}  // namespace kael::gpt
