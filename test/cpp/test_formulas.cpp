// The derivative formulas of native_functions.yaml compile (they are generated into every
// build) and compute the gradients they claim: checked here against finite differences and
// closed forms, with the helpers they call (maybe_multiply, sum_to_size, sum_backward, ...).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

#define KAEL_FORMULA_HELPERS_VAR
#include "kael/autograd/formula_helpers.h"
#include "kael/autograd/formulas.h"
#include "kael/core/error.h"
#include "kael/ops.h"

namespace {

using kael::Tensor;
using kael::Var;
namespace formulas = kael::autograd::formulas;

Var vec(std::vector<double> v) {
  const std::int64_t n[] = {static_cast<std::int64_t>(v.size())};
  Tensor t = kael::empty(n, kael::ScalarType::Float64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, kael::ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// Central differences of sum(grad * f(x)) with respect to x, elementwise.
template <typename F>
std::vector<double> numeric(F f, const Var& x, const Var& grad) {
  std::vector<double> out;
  const std::vector<double> xs = values(x), gs = values(grad);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double h = 1e-6;
    std::vector<double> lo = xs, hi = xs;
    lo[i] -= h;
    hi[i] += h;
    const std::vector<double> flo = values(f(vec(lo))), fhi = values(f(vec(hi)));
    double d = 0;
    for (std::size_t j = 0; j < flo.size(); ++j) d += gs[j] * (fhi[j] - flo[j]) / (2 * h);
    out.push_back(d);
  }
  return out;
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-5) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "at " << i;
}

TEST(Formulas, UnaryOpsMatchFiniteDifferences) {
  const Var x = vec({0.3, 1.2, 2.5});
  const Var g = vec({1.0, -2.0, 0.5});
  expect_near(values(formulas::exp_self(g, x, kael::exp(x))), numeric([](const Var& v) { return kael::exp(v); }, x, g));
  expect_near(values(formulas::log_self(g, x, kael::log(x))), numeric([](const Var& v) { return kael::log(v); }, x, g));
  expect_near(values(formulas::sin_self(g, x, kael::sin(x))), numeric([](const Var& v) { return kael::sin(v); }, x, g));
  expect_near(values(formulas::cos_self(g, x, kael::cos(x))), numeric([](const Var& v) { return kael::cos(v); }, x, g));
  expect_near(values(formulas::tanh_self(g, x, kael::tanh(x))),
              numeric([](const Var& v) { return kael::tanh(v); }, x, g));
  expect_near(values(formulas::sigmoid_self(g, x, kael::sigmoid(x))),
              numeric([](const Var& v) { return kael::sigmoid(v); }, x, g));
  expect_near(values(formulas::sqrt_self(g, x, kael::sqrt(x))),
              numeric([](const Var& v) { return kael::sqrt(v); }, x, g));
  expect_near(values(formulas::rsqrt_self(g, x, kael::rsqrt(x))),
              numeric([](const Var& v) { return kael::rsqrt(v); }, x, g));
  expect_near(values(formulas::reciprocal_self(g, x, kael::reciprocal(x))),
              numeric([](const Var& v) { return kael::reciprocal(v); }, x, g));
  expect_near(values(formulas::log1p_self(g, x, kael::log1p(x))),
              numeric([](const Var& v) { return kael::log1p(v); }, x, g));
  const Var y = vec({-1.5, 0.7, 2.0});
  expect_near(values(formulas::abs_self(g, y, kael::abs(y))), {-1.0, -2.0, 0.5});
  expect_near(values(formulas::neg_self(g, y, kael::neg(y))), {-1.0, 2.0, -0.5});
  expect_near(values(formulas::relu_self(g, y, kael::relu(y))), {0.0, -2.0, 0.5});
  expect_near(values(formulas::sgn_self(g, y, kael::sgn(y))), {0.0, 0.0, 0.0});
}

TEST(Formulas, BinaryOpsMatchFiniteDifferences) {
  const Var a = vec({0.5, 1.5, 2.0}), b = vec({2.0, -1.0, 3.0}), g = vec({1.0, 0.5, -1.0});
  expect_near(values(formulas::mul_self(g, a, b, kael::mul(a, b))), values(g * b));
  expect_near(values(formulas::div_self(g, a, b, kael::div(a, b))),
              numeric([&](const Var& v) { return kael::div(v, b); }, a, g));
  expect_near(values(formulas::div_other(g, a, b, kael::div(a, b))),
              numeric([&](const Var& v) { return kael::div(a, v); }, b, g));
  const Var base = vec({0.5, 1.5, 2.0}), e = vec({2.0, 0.5, 3.0});
  expect_near(values(formulas::pow_self(g, base, e, kael::pow(base, e))),
              numeric([&](const Var& v) { return kael::pow(v, e); }, base, g));
  expect_near(values(formulas::pow_exponent(g, base, e, kael::pow(base, e))),
              numeric([&](const Var& v) { return kael::pow(base, v); }, e, g));
  // alpha scales the other input's gradient and only it; 1 returns grad itself
  expect_near(values(formulas::add_other(g, a, b, 3, kael::add(a, b, 3))), {3.0, 1.5, -3.0});
  expect_near(values(formulas::sub_other(g, a, b, 2, kael::sub(a, b, 2))), {-2.0, -1.0, 2.0});
  EXPECT_TRUE(formulas::add_other(g, a, b, 1, a).is_same(g));
  // ties split the gradient between maximum's inputs, as torch does
  const Var p = vec({1.0, 2.0, 3.0}), q = vec({1.0, 5.0, 0.0});
  expect_near(values(formulas::maximum_self(g, p, q, kael::maximum(p, q))), {0.5, 0.0, -1.0});
  expect_near(values(formulas::maximum_other(g, p, q, kael::maximum(p, q))), {0.5, 0.5, 0.0});
}

TEST(Formulas, MatmulGradientsHaveTheOperandsShapes) {
  const std::int64_t sa[] = {2, 3}, sb[] = {3, 4};
  const Var a = kael::reshape(kael::arange(6, kael::ScalarType::Float64), sa);
  const Var b = kael::reshape(kael::arange(12, kael::ScalarType::Float64), sb);
  const Var g = kael::ones(std::vector<std::int64_t>{2, 4}, kael::ScalarType::Float64);
  const Tensor ga = formulas::matmul_self(g, a, b, kael::matmul(a, b));
  const Tensor gb = formulas::matmul_other(g, a, b, kael::matmul(a, b));
  EXPECT_EQ(std::vector<std::int64_t>(ga.sizes().begin(), ga.sizes().end()), (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(std::vector<std::int64_t>(gb.sizes().begin(), gb.sizes().end()), (std::vector<std::int64_t>{3, 4}));
  // d/da sum(a @ b) = row sums of b, for every row of a
  expect_near(values(ga), {6, 22, 38, 6, 22, 38});
  expect_near(values(gb), {3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7});  // column sums of a
}

TEST(FormulaHelpers, SumBackwardRestoresReducedDims) {
  const std::int64_t sizes[] = {2, 3};
  const Var g = vec({1.0, 2.0});  // sum over dim 1 without keepdim
  const std::int64_t dim1[] = {1};
  const Tensor r = kael::autograd::sum_backward(g, sizes, kael::IntArrayRef(dim1), false);
  expect_near(values(r), {1, 1, 1, 2, 2, 2});
  const std::int64_t dim0[] = {-2};
  const Tensor c = kael::autograd::sum_backward(vec({1.0, 2.0, 3.0}), sizes, kael::IntArrayRef(dim0), false);
  expect_near(values(c), {1, 2, 3, 1, 2, 3});
  const Var scalar = kael::full({}, 4.0);
  expect_near(values(kael::autograd::sum_backward(scalar, sizes, std::nullopt, false)), {4, 4, 4, 4, 4, 4});
  expect_near(values(kael::autograd::mean_backward(scalar, sizes, std::nullopt, false)),
              {4 / 6.0, 4 / 6.0, 4 / 6.0, 4 / 6.0, 4 / 6.0, 4 / 6.0});
  expect_near(values(formulas::mean_self(g, kael::ones(sizes), kael::IntArrayRef(dim1), false, std::nullopt, g)),
              {1 / 3.0, 1 / 3.0, 1 / 3.0, 2 / 3.0, 2 / 3.0, 2 / 3.0});
}

TEST(FormulaHelpers, SumToSizeUndoesBroadcasting) {
  const std::int64_t s23[] = {2, 3}, s13[] = {1, 3}, s3[] = {3};
  const Var g = kael::reshape(kael::arange(6, kael::ScalarType::Float64), s23);
  expect_near(values(kael::autograd::sum_to_size(g, s3)), {3, 5, 7});
  const Tensor k = kael::autograd::sum_to_size(g, s13);
  EXPECT_EQ(k.dim(), 2);
  expect_near(values(k), {3, 5, 7});
  EXPECT_TRUE(kael::autograd::sum_to_size(g, s23).is_same(g));
  // torch raises RuntimeError here (kael::Error itself, not one of its subclasses).
  try {
    kael::autograd::sum_to_size(g, std::vector<std::int64_t>{4});
    ADD_FAILURE() << "sum_to_size to {4} from {2, 3} did not throw";
  } catch (const kael::Error& e) {
    EXPECT_EQ(typeid(e), typeid(kael::Error));
    EXPECT_NE(std::string(e.what()).find("sum_to_size: size {4} is not expandable to size {2, 3}"), std::string::npos)
        << e.what();
  }
}

// Var has the methods of the ops the derivative formulas call (rsqrt and pow among them).
TEST(Var, MethodsAndOperatorsCallTheRegistryOps) {
  const Var x = vec({1.0, 4.0, 9.0});
  expect_near(values(x.rsqrt()), {1, 0.5, 1.0 / 3});
  expect_near(values(x.pow(2) - 1), {0, 15, 80});
  expect_near(values(2.0 / x * x), {2, 2, 2});
  expect_near(values(x > 3.0), {0, 1, 1});
  expect_near(values(-x + (x == 4.0)), {-1, -3, -9});
}

}  // namespace

namespace {

// x (flattened values) as a (2, 3) float64 tensor.
Var mat23(const std::vector<double>& v) {
  const std::int64_t s[] = {2, 3};
  return kael::reshape(vec(v), s);
}

// Checks formula(grad, x, result) against central differences of f at x (a (2, 3) matrix).
template <typename F, typename Formula>
void expect_gradient(const std::vector<double>& xs, F f, Formula formula, double tol = 1e-5) {
  const Var x = mat23(xs);
  const Var result = f(x);
  std::vector<double> gs;
  for (std::int64_t i = 0; i < result.numel(); ++i) gs.push_back(0.5 + 0.25 * static_cast<double>(i));
  Var g = vec(gs);
  g = kael::reshape(g, result.sizes());
  const auto flat = [&](const Var& v) { return f(mat23(values(v))); };
  expect_near(values(formula(g, x, result)), numeric(flat, vec(xs), g), tol);
}

}  // namespace

TEST(FormulaHelpers, ProdBackwardIsExactWithZeros) {
  const std::int64_t d1 = 1;
  for (const std::vector<double>& xs : {std::vector<double>{0.5, 1.5, -2.0, 3.0, 0.25, 1.25},
                                        std::vector<double>{0.5, 0.0, -2.0, 0.0, 0.0, 1.25},
                                        std::vector<double>{0.0, 1.5, -2.0, 3.0, 0.25, 0.0}}) {
    expect_gradient(
        xs, [&](const Var& v) -> Var { return kael::prod(v, d1, false, std::nullopt); },
        [&](const Var& g, const Var& x, const Var& r) {
          return formulas::prod_dim_int_self(g, x, d1, false, std::nullopt, r);
        });
    expect_gradient(
        xs, [&](const Var& v) -> Var { return kael::prod(v, std::nullopt); },
        [&](const Var& g, const Var& x, const Var& r) { return formulas::prod_self(g, x, std::nullopt, r); });
    expect_gradient(
        xs, [&](const Var& v) -> Var { return kael::prod(v, std::int64_t{0}, true, std::nullopt); },
        [&](const Var& g, const Var& x, const Var& r) {
          return formulas::prod_dim_int_self(g, x, std::int64_t{0}, true, std::nullopt, r);
        });
  }
}

TEST(FormulaHelpers, ExtremeBackwardSplitsTies) {
  const std::vector<double> xs{0.5, 2.5, -2.0, 3.0, 0.25, 1.25};
  const std::int64_t d1[] = {1};
  expect_gradient(
      xs, [&](const Var& v) -> Var { return kael::amax(v, kael::IntArrayRef(d1), false); },
      [&](const Var& g, const Var& x, const Var& r) { return formulas::amax_self(g, x, kael::IntArrayRef(d1), false, r); });
  expect_gradient(
      xs, [&](const Var& v) -> Var { return kael::amin(v, kael::IntArrayRef(d1), true); },
      [&](const Var& g, const Var& x, const Var& r) { return formulas::amin_self(g, x, kael::IntArrayRef(d1), true, r); });
  expect_gradient(
      xs, [&](const Var& v) -> Var { return kael::max(v); },
      [&](const Var& g, const Var& x, const Var& r) { return formulas::max_self(g, x, r); });
  // two maxima share the gradient, as in torch
  const Var tie = mat23({1.0, 3.0, 3.0, 0.0, 0.0, 0.0});
  expect_near(values(formulas::max_self(kael::full({}, 2.0), tie, kael::max(tie))), {0, 1, 1, 0, 0, 0});
}

TEST(FormulaHelpers, NormBackwardMatchesFiniteDifferences) {
  const std::vector<double> xs{0.5, 2.5, -2.0, 3.0, -0.25, 1.25};
  const double inf = std::numeric_limits<double>::infinity();
  for (double p : {2.0, 1.0, 3.0, 0.5, -1.5, inf, -inf}) {
    for (bool all : {false, true}) {
      const std::int64_t d1[] = {1};
      const std::optional<kael::IntArrayRef> dim = all ? std::nullopt : std::optional<kael::IntArrayRef>(d1);
      expect_gradient(
          xs, [&](const Var& v) -> Var { return kael::norm(v, p, dim, false, std::nullopt); },
          [&](const Var& g, const Var& x, const Var& r) { return formulas::norm_self(g, x, p, dim, false, std::nullopt, r); });
    }
  }
  // the 2-norm of zeros has gradient 0, not NaN
  const Var zeros = mat23({0, 0, 0, 0, 0, 0});
  expect_near(values(formulas::norm_self(kael::full({}, 1.0), zeros, 2.0, std::nullopt, false, std::nullopt,
                                         kael::norm(zeros, 2.0, std::nullopt, false, std::nullopt))),
              {0, 0, 0, 0, 0, 0});
}

TEST(FormulaHelpers, LogsumexpVarStdBackwardMatchFiniteDifferences) {
  const std::vector<double> xs{0.5, 2.5, -2.0, 3.0, -0.25, 1.25};
  const std::int64_t d1[] = {1}, d0[] = {0};
  expect_gradient(
      xs, [&](const Var& v) -> Var { return kael::logsumexp(v, kael::IntArrayRef(d1), false); },
      [&](const Var& g, const Var& x, const Var& r) {
        return formulas::logsumexp_self(g, x, kael::IntArrayRef(d1), false, r);
      });
  for (const std::optional<kael::Scalar>& c : {std::optional<kael::Scalar>(), std::optional<kael::Scalar>(0),
                                              std::optional<kael::Scalar>(0.5)}) {
    for (const std::optional<kael::IntArrayRef>& dim :
         {std::optional<kael::IntArrayRef>(), std::optional<kael::IntArrayRef>(kael::IntArrayRef(d0)),
          std::optional<kael::IntArrayRef>(kael::IntArrayRef(d1))}) {
      expect_gradient(
          xs, [&](const Var& v) -> Var { return kael::var(v, dim, c, false); },
          [&](const Var& g, const Var& x, const Var& r) { return formulas::var_correction_self(g, x, dim, c, false, r); });
      expect_gradient(
          xs, [&](const Var& v) -> Var { return kael::std(v, dim, c, true); },
          [&](const Var& g, const Var& x, const Var& r) { return formulas::std_correction_self(g, x, dim, c, true, r); });
    }
  }
  expect_gradient(
      xs, [&](const Var& v) -> Var { return kael::var(v, false); },
      [&](const Var& g, const Var& x, const Var& r) { return formulas::var_self(g, x, false, r); });
  expect_gradient(
      xs, [&](const Var& v) -> Var { return kael::std(v, kael::IntArrayRef(d1), true, true); },
      [&](const Var& g, const Var& x, const Var& r) {
        return formulas::std_dim_self(g, x, kael::IntArrayRef(d1), true, true, r);
      });
}

TEST(FormulaHelpers, CumsumCumprodBackwardMatchFiniteDifferences) {
  for (const std::vector<double>& xs : {std::vector<double>{0.5, 2.5, -2.0, 3.0, -0.25, 1.25},
                                        std::vector<double>{0.5, 0.0, -2.0, 0.0, 0.0, 1.25},
                                        std::vector<double>{0.0, 1.5, 0.0, 3.0, 2.0, 0.0}}) {
    for (std::int64_t dim : {0, 1, -1}) {
      expect_gradient(
          xs, [&](const Var& v) -> Var { return kael::cumsum(v, dim, std::nullopt); },
          [&](const Var& g, const Var& x, const Var& r) { return formulas::cumsum_self(g, x, dim, std::nullopt, r); });
      expect_gradient(
          xs, [&](const Var& v) -> Var { return kael::cumprod(v, dim, std::nullopt); },
          [&](const Var& g, const Var& x, const Var& r) { return formulas::cumprod_self(g, x, dim, std::nullopt, r); });
    }
  }
}

// ---- ops returning values and indices along one dim, and scatter_reduce

TEST(FormulaHelpers, ValueSelectingBackwardMatchesFiniteDifferences) {
  const std::vector<double> xs{0.5, 2.5, -2.0, 3.0, -0.25, 1.25};
  for (bool keepdim : {false, true}) {
    for (std::int64_t d : {0, 1, -1}) {
      expect_gradient(
          xs, [&](const Var& v) -> Var { return std::get<0>(kael::max(v, d, keepdim)); },
          [&](const Var& g, const Var& x, const Var&) {
            auto [values, indices] = kael::max(x, d, keepdim);
            return formulas::max_dim_self(g, x, d, keepdim, {}, values, indices);
          });
      expect_gradient(
          xs, [&](const Var& v) -> Var { return std::get<0>(kael::min(v, d, keepdim)); },
          [&](const Var& g, const Var& x, const Var&) {
            auto [values, indices] = kael::min(x, d, keepdim);
            return formulas::min_dim_self(g, x, d, keepdim, {}, values, indices);
          });
    }
  }
  for (bool descending : {false, true}) {
    expect_gradient(
        xs, [&](const Var& v) -> Var { return std::get<0>(kael::sort(v, 1, descending, false)); },
        [&](const Var& g, const Var& x, const Var&) {
          auto [values, indices] = kael::sort(x, 1, descending, false);
          return formulas::sort_self(g, x, 1, descending, false, {}, values, indices);
        });
  }
  for (std::int64_t k : {0, 1, 2}) {
    expect_gradient(
        xs, [&](const Var& v) -> Var { return std::get<0>(kael::topk(v, k, 0, k != 1, true)); },
        [&](const Var& g, const Var& x, const Var&) {
          auto [values, indices] = kael::topk(x, k, 0, k != 1, true);
          return formulas::topk_self(g, x, k, 0, k != 1, true, {}, values, indices);
        });
  }
  // a 0-d input: the gradient passes through
  const Var s = kael::full({}, 2.0);
  auto [v, i] = kael::max(s, 0, false);
  expect_near(values(formulas::max_dim_self(kael::full({}, 3.0), s, 0, false, {}, v, i)), {3.0});
}

TEST(FormulaHelpers, ScatterReduceBackwardMatchesFiniteDifferences) {
  // index (2, 3) into self (2, 3) along dim 0, positions hit 0, 1 or 2 times
  const std::int64_t isz[] = {2, 3};
  Tensor index = kael::empty(isz, kael::ScalarType::Int64);
  const std::int64_t iv[] = {0, 0, 1, 0, 1, 1};
  for (int j = 0; j < 6; ++j) index.data<std::int64_t>()[j] = iv[j];
  const std::vector<double> self_values{0.5, 2.5, -2.0, 3.0, -0.25, 1.25};
  for (const std::vector<double>& src_values : {std::vector<double>{1.5, -0.75, 2.0, 0.5, 1.25, -1.5},
                                                std::vector<double>{0.0, -0.75, 2.0, 0.0, 1.25, 0.0},
                                                std::vector<double>{3.0, 2.5, -2.0, 3.0, 1.25, 1.25}}) {
    const Var src = mat23(src_values);
    for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"}) {
      for (bool include_self : {true, false}) {
        SCOPED_TRACE(std::string(reduce) + (include_self ? " include_self" : ""));
        expect_gradient(
            self_values, [&](const Var& v) -> Var { return kael::scatter_reduce(v, 0, index, src, reduce, include_self); },
            [&](const Var& g, const Var& x, const Var& r) {
              return formulas::scatter_reduce_self(g, x, 0, index, src, reduce, include_self, r);
            });
        expect_gradient(
            src_values,
            [&](const Var& v) -> Var { return kael::scatter_reduce(mat23(self_values), 0, index, v, reduce, include_self); },
            [&](const Var& g, const Var& s2, const Var& r) {
              return formulas::scatter_reduce_src(g, mat23(self_values), 0, index, s2, reduce, include_self, r);
            });
      }
    }
  }
}

TEST(FormulaHelpers, SdpaBackwardWithDropoutMatchesFiniteDifferences) {
  // the kernel with a fixed dropout stream is a deterministic function of q, k and v
  const std::int64_t qs[] = {1, 3, 4}, ks[] = {1, 5, 4}, vs[] = {1, 5, 2};
  auto filled = [](std::int64_t n, double start) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(std::sin(start + 0.7 * static_cast<double>(i)));
    return v;
  };
  const std::vector<double> qv = filled(12, 0.1), kv = filled(20, 1.3), vv = filled(10, 2.9);
  const std::int64_t seed = 42, offset = 3;
  for (double p : {0.0, 0.4}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE("p " + std::to_string(p) + (causal ? " causal" : ""));
      auto run = [&](const Var& q, const Var& k, const Var& v) -> Var {
        return kael::_scaled_dot_product_attention(q, k, v, std::nullopt, p, causal, std::nullopt, seed, offset);
      };
      const Var q = kael::reshape(vec(qv), qs), k = kael::reshape(vec(kv), ks), v = kael::reshape(vec(vv), vs);
      const Var out = run(q, k, v);
      if (p > 0) {  // some weights are dropped: the result differs from the undropped one
        const std::vector<double> a = values(out), b = values(run(q, k, v)), c = values(
            kael::_scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, std::nullopt, seed, offset));
        EXPECT_EQ(a, b);
        EXPECT_NE(a, c);
      }
      std::vector<double> gs;
      for (std::int64_t i = 0; i < out.numel(); ++i) gs.push_back(0.5 + 0.25 * static_cast<double>(i));
      const Var g = kael::reshape(vec(gs), out.sizes());
      expect_near(values(formulas::_scaled_dot_product_attention_query(g, q, k, v, std::nullopt, p, causal, std::nullopt,
                                                                       seed, offset, out)),
                  numeric([&](const Var& x) { return run(kael::reshape(x, qs), k, v); }, vec(qv), g));
      expect_near(values(formulas::_scaled_dot_product_attention_key(g, q, k, v, std::nullopt, p, causal, std::nullopt,
                                                                     seed, offset, out)),
                  numeric([&](const Var& x) { return run(q, kael::reshape(x, ks), v); }, vec(kv), g));
      expect_near(values(formulas::_scaled_dot_product_attention_value(g, q, k, v, std::nullopt, p, causal, std::nullopt,
                                                                       seed, offset, out)),
                  numeric([&](const Var& x) { return run(q, k, kael::reshape(x, vs)); }, vec(vv), g));
    }
  }
}
