// The derivative formulas of the neural-network ops against central finite differences in
// float64: softmax, log_softmax, standardize, layer_norm, embedding, cross_entropy_losses,
// addmm, bmm, baddbmm and scaled_dot_product_attention.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <random>
#include <vector>

#define KAEL_FORMULA_HELPERS_VAR
#include "kael/autograd/formula_helpers.h"
#include "kael/autograd/formulas.h"
#include "kael/ops.h"

namespace {

using kael::IntArrayRef;
using kael::Tensor;
using kael::Var;
namespace formulas = kael::autograd::formulas;

Tensor random(std::vector<std::int64_t> shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d;
  Tensor t = kael::empty(IntArrayRef(shape), kael::ScalarType::Float64);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = d(gen);
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, kael::ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// d/dx of sum(grad * f(x)) by central differences, one element of x at a time.
std::vector<double> numeric(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& grad) {
  std::vector<double> out;
  const std::vector<double> gs = values(grad);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double h = 1e-6;
    Tensor lo = kael::clone(x), hi = kael::clone(x);
    lo.data<double>()[i] -= h;
    hi.data<double>()[i] += h;
    const std::vector<double> flo = values(f(lo)), fhi = values(f(hi));
    double d = 0;
    for (std::size_t j = 0; j < flo.size(); ++j) d += gs[j] * (fhi[j] - flo[j]) / (2 * h);
    out.push_back(d);
  }
  return out;
}

void expect_near(const Tensor& formula, const std::vector<double>& expected, double tol = 1e-5) {
  const std::vector<double> a = values(formula);
  ASSERT_EQ(a.size(), expected.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], expected[i], tol) << "at " << i;
}

TEST(NnFormulas, SoftmaxAndLogSoftmax) {
  const Tensor x = random({3, 4}, 1);
  for (std::int64_t dim : {0, 1, -1}) {
    const Tensor g = random({3, 4}, 2);
    const Var y = kael::softmax(x, dim);
    expect_near(formulas::softmax_self(g, x, dim, std::nullopt, y),
                numeric([&](const Tensor& v) { return kael::softmax(v, dim); }, x, g));
    const Var ly = kael::log_softmax(x, dim);
    expect_near(formulas::log_softmax_self(g, x, dim, std::nullopt, ly),
                numeric([&](const Tensor& v) { return kael::log_softmax(v, dim); }, x, g));
  }
}

TEST(NnFormulas, StandardizeAndLayerNorm) {
  const Tensor x = random({2, 3, 4}, 3), g = random({2, 3, 4}, 4);
  for (std::vector<std::int64_t> ns : {std::vector<std::int64_t>{4}, std::vector<std::int64_t>{3, 4}}) {
    const IntArrayRef n(ns);
    expect_near(formulas::standardize_self(g, x, n, 1e-5, kael::standardize(x, n, 1e-5)),
                numeric([&](const Tensor& v) { return kael::standardize(v, n, 1e-5); }, x, g));
    const Tensor w = random(ns, 5), b = random(ns, 6);
    const Var y = kael::layer_norm(x, n, w, b, 1e-5);
    expect_near(formulas::layer_norm_self(g, x, n, Var(w), Var(b), 1e-5, y),
                numeric([&](const Tensor& v) { return kael::layer_norm(v, n, w, b, 1e-5); }, x, g));
    expect_near(formulas::layer_norm_weight(g, x, n, Var(w), Var(b), 1e-5, y),
                numeric([&](const Tensor& v) { return kael::layer_norm(x, n, v, b, 1e-5); }, w, g));
    expect_near(formulas::layer_norm_bias(g, x, n, Var(w), Var(b), 1e-5, y),
                numeric([&](const Tensor& v) { return kael::layer_norm(x, n, w, v, 1e-5); }, b, g));
    expect_near(formulas::layer_norm_self(g, x, n, std::nullopt, std::nullopt, 1e-5, y),
                numeric([&](const Tensor& v) { return kael::layer_norm(v, n, std::nullopt, std::nullopt, 1e-5); }, x,
                        g));
  }
}

TEST(NnFormulas, EmbeddingAndCrossEntropy) {
  const Tensor w = random({5, 3}, 7);
  Tensor idx = kael::empty(std::vector<std::int64_t>{2, 2}, kael::ScalarType::Int64);
  const std::int64_t ids[] = {1, 4, 1, 0};
  for (int i = 0; i < 4; ++i) idx.data<std::int64_t>()[i] = ids[i];
  const Tensor g = random({2, 2, 3}, 8);
  expect_near(formulas::embedding_weight(g, w, idx, -1, kael::embedding(w, idx, -1)),
              numeric([&](const Tensor& v) { return kael::embedding(v, idx, -1); }, w, g));

  const Tensor x = random({3, 5, 2}, 9), gl = random({3, 2}, 10);
  Tensor t = kael::empty(std::vector<std::int64_t>{3, 2}, kael::ScalarType::Int64);
  const std::int64_t ts[] = {0, 4, -100, 2, 3, 1};
  for (int i = 0; i < 6; ++i) t.data<std::int64_t>()[i] = ts[i];
  for (double smoothing : {0.0, 0.25}) {
    const Var y = kael::cross_entropy_losses(x, t, -100, smoothing);
    expect_near(formulas::cross_entropy_losses_self(gl, x, t, -100, smoothing, y),
                numeric([&](const Tensor& v) { return kael::cross_entropy_losses(v, t, -100, smoothing); }, x, gl));
  }
}

TEST(NnFormulas, AddmmBmmBaddbmm) {
  const Tensor s = random({4}, 11), a = random({3, 2}, 12), b = random({2, 4}, 13), g = random({3, 4}, 14);
  const kael::Scalar beta(0.5), alpha(2.0);
  const Var y = kael::addmm(s, a, b, beta, alpha);
  expect_near(formulas::addmm_self(g, s, a, b, beta, alpha, y),
              numeric([&](const Tensor& v) { return kael::addmm(v, a, b, beta, alpha); }, s, g));
  expect_near(formulas::addmm_mat1(g, s, a, b, beta, alpha, y),
              numeric([&](const Tensor& v) { return kael::addmm(s, v, b, beta, alpha); }, a, g));
  expect_near(formulas::addmm_mat2(g, s, a, b, beta, alpha, y),
              numeric([&](const Tensor& v) { return kael::addmm(s, a, v, beta, alpha); }, b, g));
  const Tensor p = random({2, 3, 2}, 15), q = random({2, 2, 4}, 16), gb = random({2, 3, 4}, 17);
  const Tensor sb = random({1, 3, 1}, 18);
  const Var yb = kael::bmm(p, q);
  expect_near(formulas::bmm_self(gb, p, q, yb), numeric([&](const Tensor& v) { return kael::bmm(v, q); }, p, gb));
  expect_near(formulas::bmm_mat2(gb, p, q, yb), numeric([&](const Tensor& v) { return kael::bmm(p, v); }, q, gb));
  const Var yc = kael::baddbmm(sb, p, q, beta, alpha);
  expect_near(formulas::baddbmm_self(gb, sb, p, q, beta, alpha, yc),
              numeric([&](const Tensor& v) { return kael::baddbmm(v, p, q, beta, alpha); }, sb, gb));
  expect_near(formulas::baddbmm_batch1(gb, sb, p, q, beta, alpha, yc),
              numeric([&](const Tensor& v) { return kael::baddbmm(sb, v, q, beta, alpha); }, p, gb));
  expect_near(formulas::baddbmm_batch2(gb, sb, p, q, beta, alpha, yc),
              numeric([&](const Tensor& v) { return kael::baddbmm(sb, p, v, beta, alpha); }, q, gb));
}

TEST(NnFormulas, ScaledDotProductAttention) {
  const Tensor q = random({2, 3, 4}, 19), k = random({2, 5, 4}, 20), v = random({2, 5, 3}, 21);
  const Tensor g = random({2, 3, 3}, 22);
  Tensor fmask = random({3, 5}, 23);
  Tensor bmask = kael::gt(fmask, -0.5);
  for (int i = 0; i < 3; ++i) bmask.data<bool>()[i * 5] = true;  // no row fully masked
  struct Case {
    std::optional<Tensor> mask;
    bool causal;
  };
  for (const Case& c : {Case{std::nullopt, false}, Case{std::nullopt, true}, Case{fmask, false},
                        Case{bmask, false}}) {
    const std::optional<Var> m = c.mask ? std::optional<Var>(Var(*c.mask)) : std::nullopt;
    for (std::optional<double> scale : {std::optional<double>(), std::optional<double>(0.7)}) {
      auto f = [&](const Tensor& qq, const Tensor& kk, const Tensor& vv) {
        return kael::scaled_dot_product_attention(qq, kk, vv, c.mask, 0.0, c.causal, scale);
      };
      const Var y = f(q, k, v);
      expect_near(formulas::_scaled_dot_product_attention_query(g, q, k, v, m, 0.0, c.causal, scale, 0, 0, y),
                  numeric([&](const Tensor& x) { return f(x, k, v); }, q, g));
      expect_near(formulas::_scaled_dot_product_attention_key(g, q, k, v, m, 0.0, c.causal, scale, 0, 0, y),
                  numeric([&](const Tensor& x) { return f(q, x, v); }, k, g));
      expect_near(formulas::_scaled_dot_product_attention_value(g, q, k, v, m, 0.0, c.causal, scale, 0, 0, y),
                  numeric([&](const Tensor& x) { return f(q, k, x); }, v, g));
    }
  }
}

}  // namespace
