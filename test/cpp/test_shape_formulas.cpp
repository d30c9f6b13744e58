// The derivative formulas of the shape and indexing ops (native_functions.yaml, "shape and
// indexing") against finite differences: each op is linear in the input differentiated, so the
// gradient of sum(grad * f(x)) is exact up to rounding.
#include <gtest/gtest.h>

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

// A float64 tensor of `shape` holding 0.5, 1.5, -0.25, ... (distinct values).
Var arange_like(IntArrayRef shape, double scale = 1.0) {
  Tensor t = kael::empty(shape, kael::ScalarType::Float64);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = scale * (0.5 + static_cast<double>(i % 7) - 0.75 * static_cast<double>(i % 3));
  return t;
}

Var longs(IntArrayRef shape, std::vector<std::int64_t> v) {
  Tensor t = kael::empty(shape, kael::ScalarType::Int64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int64_t>()[i] = v[i];
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, kael::ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// Central differences of sum(grad * f(x)) with respect to each element of x.
template <typename F>
std::vector<double> numeric(F f, const Var& x, const Var& grad) {
  std::vector<double> out;
  const std::vector<double> gs = values(grad);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double h = 1e-3;
    Tensor lo = kael::clone(x), hi = kael::clone(x);
    lo.data<double>()[i] -= h;
    hi.data<double>()[i] += h;
    const std::vector<double> flo = values(f(Var(lo))), fhi = values(f(Var(hi)));
    double d = 0;
    for (std::size_t j = 0; j < flo.size(); ++j) d += gs[j] * (fhi[j] - flo[j]) / (2 * h);
    out.push_back(d);
  }
  return out;
}

void expect_near(const Tensor& analytic, const std::vector<double>& b, IntArrayRef shape) {
  ASSERT_TRUE(std::ranges::equal(analytic.sizes(), shape));
  const std::vector<double> a = values(analytic);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-8) << "at " << i;
}

TEST(ShapeFormulas, RepeatFlipRollDiagonalTril) {
  const std::int64_t s[] = {2, 3};
  const Var x = arange_like(s);
  {
    const std::int64_t reps[] = {2, 1, 2};
    auto f = [&](const Var& v) { return kael::repeat(v, reps); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::repeat_self(g, x, reps, r), numeric(f, x, g), s);
  }
  {
    const std::int64_t dims[] = {0, 1};
    auto f = [&](const Var& v) { return kael::flip(v, dims); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::flip_self(g, x, dims, r), numeric(f, x, g), s);
  }
  {
    const std::int64_t shifts[] = {1, -4}, dims[] = {0, 1};
    auto f = [&](const Var& v) { return kael::roll(v, shifts, dims); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::roll_self(g, x, shifts, dims, r), numeric(f, x, g), s);
    const std::int64_t flat[] = {2};
    auto f2 = [&](const Var& v) { return kael::roll(v, flat, IntArrayRef{}); };
    const Var r2 = f2(x);
    expect_near(formulas::roll_self(g, x, flat, IntArrayRef{}, r2), numeric(f2, x, g), s);
  }
  for (const std::int64_t offset : {-1, 0, 1, 5}) {
    auto f = [&](const Var& v) { return kael::diagonal(v, offset, 1, 0); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::diagonal_self(g, x, offset, 1, 0, r), numeric(f, x, g), s);
    auto t = [&](const Var& v) { return kael::tril(v, offset); };
    const Var rt = t(x), gt = arange_like(rt.sizes(), 0.5);
    expect_near(formulas::tril_self(gt, x, offset, rt), numeric(t, x, gt), s);
    auto e = [&](const Var& v) { return kael::diag_embed(v, offset, 0, 2); };
    const Var re = e(x), ge = arange_like(re.sizes(), 0.5);
    expect_near(formulas::diag_embed_self(ge, x, offset, 0, 2, re), numeric(e, x, ge), s);
  }
}

TEST(ShapeFormulas, IndexingOpsWithDuplicateIndices) {
  const std::int64_t s[] = {3, 4};
  const Var x = arange_like(s);
  {
    const std::int64_t n[] = {5};
    const Var index = longs(n, {2, 0, 2, 3, 2});
    auto f = [&](const Var& v) { return kael::index_select(v, 1, index); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::index_select_self(g, x, 1, index, r), numeric(f, x, g), s);
  }
  {
    const std::int64_t is[] = {2, 4};
    const Var index = longs(is, {0, 2, 2, 1, 1, 1, 0, 2});
    auto f = [&](const Var& v) { return kael::gather(v, 0, index, false); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::gather_self(g, x, 0, index, false, r), numeric(f, x, g), s);
    // scatter and scatter_add: self and src (distinct positions per column for scatter)
    const Var index2 = longs(is, {0, 2, 1, 1, 2, 0, 0, 2});
    const Var src = arange_like(is, 2.0);
    auto fs = [&](const Var& v) { return kael::scatter(v, 0, index2, src); };
    const Var rs = fs(x), gs = arange_like(rs.sizes(), 0.5);
    expect_near(formulas::scatter_src_self(gs, x, 0, index2, src, rs), numeric(fs, x, gs), s);
    auto fsrc = [&](const Var& v) { return kael::scatter(x, 0, index2, v); };
    expect_near(formulas::scatter_src_src(gs, x, 0, index2, src, rs), numeric(fsrc, src, gs), is);
    auto fa = [&](const Var& v) { return kael::scatter_add(x, 0, index, v); };
    const Var ra = fa(src);
    expect_near(formulas::scatter_add_src(gs, x, 0, index, src, ra), numeric(fa, src, gs), is);
  }
  {
    const std::int64_t n[] = {3}, ss[] = {3, 3};
    const Var index = longs(n, {1, 3, 1});
    const Var source = arange_like(ss, 1.5);
    const kael::Scalar alpha(2.5);
    auto f = [&](const Var& v) { return kael::index_add(x, 1, index, v, alpha); };
    const Var r = f(source), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::index_add_source(g, x, 1, index, source, alpha, r), numeric(f, source, g), ss);
  }
  {
    const std::int64_t ms[] = {4};
    Tensor mask = kael::empty(ms, kael::ScalarType::Bool);
    const bool m[] = {true, false, true, true};
    for (int i = 0; i < 4; ++i) mask.data<bool>()[i] = m[i];
    auto f = [&](const Var& v) { return kael::masked_select(v, mask); };
    const Var r = f(x), g = arange_like(r.sizes(), 0.5);
    expect_near(formulas::masked_select_self(g, x, Var(mask), r), numeric(f, x, g), s);
    // a mask that broadcasts the input: the gradient sums over the broadcast dim
    const std::int64_t xs1[] = {1, 4}, ms2[] = {3, 4};
    const Var x1 = arange_like(xs1);
    Tensor mask2 = kael::empty(ms2, kael::ScalarType::Bool);
    for (int i = 0; i < 12; ++i) mask2.data<bool>()[i] = (i % 5) != 1;
    auto f2 = [&](const Var& v) { return kael::masked_select(v, mask2); };
    const Var r2 = f2(x1), g2 = arange_like(r2.sizes(), 0.5);
    expect_near(formulas::masked_select_self(g2, x1, Var(mask2), r2), numeric(f2, x1, g2), xs1);
  }
}

}  // namespace
