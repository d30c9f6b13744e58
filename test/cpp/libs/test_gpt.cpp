// Tests of kael_gpt's configuration, parameter table and forward pass (Note [GPT] in
// kael/gpt/gpt.h) without Python: Config::validate, parameter_names/shapes, Weights::from_list's
// errors, and forward against a plain composition written here with more elementary ops (explicit
// attention with a causal mask and softmax, the tanh GELU formula, log_softmax and gather for the
// loss), in float64, its loss and the gradient of every weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kael/autograd/autograd.h"
#include "kael/gpt/gpt.h"
#include "kael/ops.h"
#include "test_util.h"

namespace {

using kael::Tensor;
using kael::gpt::Config;
namespace ag = kael::autograd;
using kael::testing::error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Config small_config() {
  Config c;
  c.vocab_size = 23;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, kael::ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// The largest |a - b| relative to the largest |b|.
double rel_error(const Tensor& a, const Tensor& b) {
  const auto x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  double err = 0, scale = 1e-300;
  for (std::size_t i = 0; i < x.size(); ++i) {
    err = std::max(err, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return err / scale;
}

std::vector<Tensor> random_params(const Config& config, bool requires_grad) {
  std::vector<Tensor> params;
  const auto names = kael::gpt::parameter_names(config);
  const auto shapes = kael::gpt::parameter_shapes(config);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = kael::mul(kael::randn(shapes[i], std::nullopt, kael::ScalarType::Float64), 0.3);
    if (names[i].find("ln_") != std::string::npos && names[i].ends_with(".weight")) p = kael::add(p, 1.0);
    if (requires_grad) ag::set_requires_grad(p, true);
    params.push_back(p);
  }
  return params;
}

TEST(GptConfig, Validate) {
  EXPECT_NO_THROW(small_config().validate());
  EXPECT_NO_THROW(Config{}.validate());
  auto message = [](auto change) {
    Config c = small_config();
    change(c);
    return error_of([&] { c.validate(); });
  };
  EXPECT_TRUE(contains(message([](Config& c) { c.vocab_size = 0; }), "vocab_size must be at least 1, got 0"));
  EXPECT_TRUE(contains(message([](Config& c) { c.n_layer = -2; }), "n_layer must be at least 1, got -2"));
  EXPECT_TRUE(contains(message([](Config& c) { c.n_embd = 9; }), "n_embd (9) must be a multiple of n_head (2)"));
  EXPECT_TRUE(contains(message([](Config& c) { c.dropout = 1.0; }), "dropout must be in [0, 1), got 1"));
  EXPECT_TRUE(contains(message([](Config& c) { c.dropout = -0.1; }), "dropout must be in [0, 1), got -0.1"));
  EXPECT_TRUE(contains(message([](Config& c) { c.layer_norm_epsilon = 0; }), "layer_norm_epsilon must be positive"));
  EXPECT_TRUE(contains(message([](Config& c) { c.layer_norm_epsilon = INFINITY; }), "must be positive, got inf"));
  Config c = small_config();
  c.n_embd = 9;
  EXPECT_THROW(c.validate(), kael::ValueError);
}

TEST(GptConfig, ParameterNamesAndShapes) {
  Config c = small_config();
  const auto names = kael::gpt::parameter_names(c);
  const auto shapes = kael::gpt::parameter_shapes(c);
  ASSERT_EQ(names.size(), 2u + 12u * 2u + 2u);
  ASSERT_EQ(shapes.size(), names.size());
  EXPECT_EQ(names[0], "transformer.wte.weight");
  EXPECT_EQ(shapes[0], (std::vector<std::int64_t>{23, 8}));
  EXPECT_EQ(names[1], "transformer.wpe.weight");
  EXPECT_EQ(shapes[1], (std::vector<std::int64_t>{8, 8}));
  EXPECT_EQ(names[4], "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(shapes[4], (std::vector<std::int64_t>{8, 24}));
  EXPECT_EQ(names[12], "transformer.h.0.mlp.c_proj.weight");
  EXPECT_EQ(shapes[12], (std::vector<std::int64_t>{32, 8}));
  EXPECT_EQ(names[14], "transformer.h.1.ln_1.weight");
  EXPECT_EQ(names.back(), "transformer.ln_f.bias");
  c.bias = false;
  const auto no_bias = kael::gpt::parameter_names(c);
  const auto no_bias_shapes = kael::gpt::parameter_shapes(c);
  ASSERT_EQ(no_bias.size(), 2u + 6u * 2u + 1u);
  ASSERT_EQ(no_bias_shapes.size(), no_bias.size());
  for (const auto& n : no_bias) EXPECT_FALSE(n.ends_with(".bias")) << n;
  EXPECT_EQ(no_bias[3], "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(no_bias_shapes[3], (std::vector<std::int64_t>{8, 24}));
  EXPECT_EQ(no_bias.back(), "transformer.ln_f.weight");
}

TEST(GptWeights, FromListErrors) {
  const Config c = small_config();
  std::vector<Tensor> params = random_params(c, false);
  const kael::gpt::Weights w = kael::gpt::Weights::from_list(c, params);
  EXPECT_EQ(w.h.size(), 2u);
  EXPECT_TRUE(w.h[1].mlp_c_proj_bias.is_same(params[params.size() - 3]));
  EXPECT_EQ(w.dtype(), kael::ScalarType::Float64);

  auto message = [&](std::vector<Tensor> list) {
    return error_of([&] { kael::gpt::Weights::from_list(c, list); });
  };
  std::vector<Tensor> fewer(params.begin(), params.end() - 1);
  EXPECT_TRUE(contains(message(fewer), "expected 28 parameters for n_layer=2, got 27"));
  std::vector<Tensor> bad = params;
  bad[5] = Tensor();
  EXPECT_TRUE(contains(message(bad), "transformer.h.0.attn.c_attn.bias is missing"));
  bad = params;
  const std::int64_t wrong[] = {8, 8};
  bad[4] = kael::randn(wrong, std::nullopt, kael::ScalarType::Float64);
  EXPECT_TRUE(contains(message(bad), "transformer.h.0.attn.c_attn.weight has shape [8, 8], expected [8, 24]"));
  bad = params;
  bad[2] = kael::to(params[2], kael::ScalarType::Int64);
  EXPECT_TRUE(contains(message(bad), "transformer.h.0.ln_1.weight must be floating point"));
  bad[2] = kael::to(params[2], kael::ScalarType::Float32);
  EXPECT_TRUE(contains(message(bad), "transformer.h.0.ln_1.weight is float32"));
  EXPECT_THROW(kael::gpt::Weights::from_list(c, bad), kael::ValueError);
}

// ---------------------------------------------------------------- forward vs a plain composition

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return kael::add(kael::matmul(x, w), b); }

// x: (B, T, C); the attention spelled out: (B, nh, T, hd) heads, scores masked above the diagonal.
Tensor attention(const Config& c, const Tensor& x, const kael::gpt::Block& b) {
  const std::int64_t B = x.size(0), T = x.size(1), C = c.n_embd, nh = c.n_head, hd = C / nh;
  const Tensor qkv = linear(x, b.attn_c_attn_weight, b.attn_c_attn_bias);  // (B, T, 3C)
  const std::int64_t heads[] = {B, T, nh, hd};
  auto head = [&](std::int64_t i) {
    return kael::transpose(kael::reshape(kael::narrow(qkv, 2, i * C, C), heads), 1, 2);
  };
  const Tensor q = head(0), k = head(1), v = head(2);
  Tensor att = kael::mul(kael::matmul(q, kael::transpose(k, 2, 3)), 1.0 / std::sqrt(double(hd)));
  const std::int64_t square[] = {T, T};
  const Tensor above = kael::logical_not(kael::tril(kael::ones(square, kael::ScalarType::Bool)));
  att = kael::softmax(kael::masked_fill(att, above, -INFINITY), -1);
  const std::int64_t rows[] = {B, T, C};
  const Tensor y = kael::reshape(kael::transpose(kael::matmul(att, v), 1, 2), rows);
  return linear(y, b.attn_c_proj_weight, b.attn_c_proj_bias);
}

Tensor gelu_tanh(const Tensor& x) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  const Tensor inner = kael::mul(kael::add(x, kael::mul(kael::pow(x, 3.0), 0.044715)), std::sqrt(2.0 / M_PI));
  return kael::mul(kael::mul(x, 0.5), kael::add(kael::tanh(inner), 1.0));
}

struct Reference {
  Tensor logits, loss;
};

Reference reference_forward(const Config& c, const kael::gpt::Weights& w, const Tensor& idx, const Tensor& targets) {
  const std::int64_t T = idx.size(1);
  const std::int64_t shape_c[] = {c.n_embd};
  const double eps = c.layer_norm_epsilon;
  Tensor x = kael::add(kael::embedding(w.wte, idx), kael::narrow(w.wpe, 0, 0, T));
  for (const auto& b : w.h) {
    x = kael::add(x, attention(c, kael::layer_norm(x, shape_c, b.ln_1_weight, b.ln_1_bias, eps), b));
    const Tensor h = kael::layer_norm(x, shape_c, b.ln_2_weight, b.ln_2_bias, eps);
    x = kael::add(x, linear(gelu_tanh(linear(h, b.mlp_c_fc_weight, b.mlp_c_fc_bias)), b.mlp_c_proj_weight,
                            b.mlp_c_proj_bias));
  }
  x = kael::layer_norm(x, shape_c, w.ln_f_weight, w.ln_f_bias, eps);
  Reference r;
  r.logits = kael::matmul(x, kael::t(w.wte));
  // mean of -log p(target) over the targets that are not -100
  const std::int64_t flat[] = {idx.numel()}, column[] = {idx.numel(), 1}, rows[] = {idx.numel(), c.vocab_size};
  const Tensor y = kael::reshape(targets, flat);
  const Tensor kept = kael::ne(y, std::int64_t{-100});
  const Tensor safe = kael::masked_fill(y, kael::logical_not(kept), std::int64_t{0});
  const Tensor logp = kael::log_softmax(kael::reshape(r.logits, rows), 1);
  const Tensor picked = kael::reshape(kael::gather(logp, 1, kael::reshape(safe, column)), flat);
  const Tensor nll = kael::mul(kael::neg(picked), kael::to(kept, kael::ScalarType::Float64));
  r.loss = kael::div(kael::sum(nll, std::nullopt), kael::sum(kept, std::nullopt));
  return r;
}

TEST(GptForward, MatchesAPlainCompositionWithGradients) {
  kael::default_generator(kael::kCPU).manual_seed(3);
  const Config c = small_config();
  const std::vector<Tensor> params = random_params(c, true);
  const kael::gpt::Weights w = kael::gpt::Weights::from_list(c, params);
  const std::int64_t shape[] = {3, 7};
  const Tensor idx = kael::randint(0, c.vocab_size, shape);
  Tensor targets = kael::contiguous(kael::randint(0, c.vocab_size, shape));
  targets.data<std::int64_t>()[0] = -100;
  targets.data<std::int64_t>()[8] = -100;

  const kael::gpt::Output out = kael::gpt::forward(c, w, idx, targets, /*training=*/false);
  ASSERT_EQ(out.logits.dim(), 3);
  EXPECT_EQ(out.logits.size(0), 3);
  EXPECT_EQ(out.logits.size(1), 7);
  EXPECT_EQ(out.logits.size(2), c.vocab_size);
  ASSERT_TRUE(out.loss.defined());
  EXPECT_EQ(out.loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(values(out.loss)[0]));
  EXPECT_TRUE(ag::requires_grad(out.loss));

  const Reference ref = reference_forward(c, w, idx, targets);
  EXPECT_LT(rel_error(out.logits, ref.logits), 1e-12);
  EXPECT_NEAR(values(out.loss)[0], values(ref.loss)[0], 1e-12);

  const auto grads = ag::grad({out.loss}, params, {}, false, false, false);
  const auto ref_grads = ag::grad({ref.loss}, params, {}, false, false, false);
  const auto names = kael::gpt::parameter_names(c);
  ASSERT_EQ(grads.size(), params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(grads[i].defined()) << names[i];
    EXPECT_LT(rel_error(grads[i], ref_grads[i]), 1e-10) << names[i];
  }
}

TEST(GptForward, WithoutTargetsOrGradMode) {
  const Config c = small_config();
  const std::vector<Tensor> params = random_params(c, true);
  const kael::gpt::Weights w = kael::gpt::Weights::from_list(c, params);
  const std::int64_t shape[] = {2, 8};
  const Tensor idx = kael::randint(0, c.vocab_size, shape);
  const kael::gpt::Output out = kael::gpt::forward(c, w, idx, std::nullopt, false);
  EXPECT_FALSE(out.loss.defined());
  EXPECT_TRUE(ag::requires_grad(out.logits));
  ag::NoGradGuard no_grad;
  EXPECT_FALSE(ag::requires_grad(kael::gpt::forward(c, w, idx, idx, false).loss));
}

TEST(GptForward, InputErrors) {
  const Config c = small_config();
  const kael::gpt::Weights w = kael::gpt::Weights::from_list(c, random_params(c, false));
  auto message = [&](const Tensor& idx, std::optional<Tensor> targets) {
    return error_of([&] { kael::gpt::forward(c, w, idx, targets, false); });
  };
  const std::int64_t ok_shape[] = {2, 4}, long_shape[] = {1, 9}, flat[] = {4};
  const Tensor ok = kael::zeros(ok_shape, kael::ScalarType::Int64);
  EXPECT_TRUE(contains(message(kael::zeros(ok_shape, kael::ScalarType::Int32), std::nullopt),
                       "GPT.forward: idx must be int64, got int32"));
  EXPECT_TRUE(contains(message(kael::zeros(flat, kael::ScalarType::Int64), std::nullopt),
                       "GPT.forward: idx must be 2-d (batch, time), got shape [4]"));
  EXPECT_TRUE(contains(message(kael::zeros(long_shape, kael::ScalarType::Int64), std::nullopt),
                       "GPT.forward: sequence length 9 must be in [1, block_size=8]"));
  EXPECT_TRUE(contains(message(kael::full(ok_shape, 23, kael::ScalarType::Int64), std::nullopt),
                       "GPT.forward: idx holds token id 23, outside [0, vocab_size=23)"));
  EXPECT_TRUE(contains(message(ok, kael::full(ok_shape, -5, kael::ScalarType::Int64)),
                       "GPT.forward: targets holds -5"));
  EXPECT_TRUE(contains(message(ok, kael::zeros(long_shape, kael::ScalarType::Int64)),
                       "GPT.forward: targets has shape [1, 9], but idx has shape [2, 4]"));
  EXPECT_THROW(kael::gpt::forward(c, w, ok, kael::zeros(ok_shape), false), kael::ValueError);
  EXPECT_NO_THROW(kael::gpt::forward(c, w, ok, kael::full(ok_shape, -100, kael::ScalarType::Int64), false));
}

}  // namespace
