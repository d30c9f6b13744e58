// The autograd engine without Python: recording through the Autograd key, dependency counting,
// accumulation into leaves, retain_graph, versions, in-place rebasing, grad mode, hooks.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "kael/autograd/autograd.h"
#include "kael/ops.h"
#include "test_util.h"

namespace {

using kael::Tensor;
namespace ag = kael::autograd;
using kael::testing::error_of;

Tensor vec(std::vector<double> v) {
  const std::int64_t n[] = {static_cast<std::int64_t>(v.size())};
  Tensor t = kael::empty(n, kael::ScalarType::Float64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return t;
}

std::vector<double> values(const Tensor& t) {
  const Tensor c = kael::contiguous(kael::to(t, kael::ScalarType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

Tensor leaf(std::vector<double> v) {
  Tensor t = vec(std::move(v));
  ag::set_requires_grad(t, true);
  return t;
}

Tensor grad_of(const Tensor& t) { return ag::meta_of(t)->grad; }

TEST(Autograd, PlainTensorsRecordNothing) {
  const Tensor a = vec({1, 2}), b = vec({3, 4});
  const Tensor c = kael::mul(a, b);
  EXPECT_FALSE(c.key_set().has(kael::DispatchKey::Autograd));
  EXPECT_EQ(ag::meta_of(c), nullptr);
}

TEST(Autograd, ProductRuleAndAccumulation) {
  const Tensor x = leaf({1, 2, 3});
  const Tensor y = kael::mul(x, x);  // x used twice: two edges into one accumulator
  ASSERT_TRUE(ag::requires_grad(y));
  EXPECT_EQ(ag::grad_fn(y)->name(), "MulBackward0");
  ag::backward({kael::sum(y, std::nullopt)}, {}, false, false);
  EXPECT_EQ(values(grad_of(x)), (std::vector<double>{2, 4, 6}));
  ag::backward({kael::sum(kael::mul(x, 2.0), std::nullopt)}, {}, false, false);
  EXPECT_EQ(values(grad_of(x)), (std::vector<double>{4, 6, 8}));
}

TEST(Autograd, DiamondGraphRunsEachNodeOnce) {
  const Tensor x = leaf({0.5, -1.0});
  const Tensor h = kael::exp(x);
  const Tensor y = kael::add(kael::mul(h, 2.0), kael::sin(h));
  ag::backward({kael::sum(y, std::nullopt)}, {}, false, false);
  const std::vector<double> g = values(grad_of(x));
  for (int i = 0; i < 2; ++i) {
    const double xv = i == 0 ? 0.5 : -1.0, hv = std::exp(xv);
    EXPECT_NEAR(g[i], (2 + std::cos(hv)) * hv, 1e-12);
  }
}

TEST(Autograd, ScalarOutputsOnlyForImplicitGrad) {
  const Tensor x = leaf({1, 2});
  const std::string msg = error_of([&] { ag::backward({kael::mul(x, 2.0)}, {}, false, false); });
  EXPECT_NE(msg.find("grad can be implicitly created only for scalar outputs"), std::string::npos) << msg;
}

TEST(Autograd, RetainGraph) {
  const Tensor x = leaf({1, 2});
  const Tensor y = kael::sum(kael::mul(x, x), std::nullopt);
  ag::backward({y}, {}, true, false);
  ag::backward({y}, {}, false, false);
  EXPECT_EQ(values(grad_of(x)), (std::vector<double>{4, 8}));
  const std::string msg = error_of([&] { ag::backward({y}, {}, false, false); });
  EXPECT_NE(msg.find("retain_graph=True"), std::string::npos) << msg;
}

TEST(Autograd, VersionCounterMismatchNamesTheNode) {
  const Tensor x = leaf({1, 2});
  const Tensor a = kael::mul(x, 1.0);
  const Tensor y = kael::sin(a);
  kael::add_(a, 1.0);
  const std::string msg = error_of([&] { ag::backward({kael::sum(y, std::nullopt)}, {}, false, false); });
  EXPECT_NE(msg.find("SinBackward0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is at version 1; expected version 0"), std::string::npos) << msg;
}

TEST(Autograd, LeafInPlaceRaisesAndNonLeafRebases) {
  const Tensor x = leaf({1, 2});
  EXPECT_NE(error_of([&] { kael::add_(x, 1.0); }).find("leaf Variable"), std::string::npos);
  const Tensor y = kael::mul(x, 2.0);
  kael::mul_(y, x);  // y = 2x * x
  EXPECT_EQ(ag::grad_fn(y)->name(), "MulBackward0");
  ag::backward({kael::sum(y, std::nullopt)}, {}, false, false);
  EXPECT_EQ(values(grad_of(x)), (std::vector<double>{4, 8}));
  // mul_(z, z) saved z, then wrote it: the version check catches it, as in PyTorch.
  const Tensor z = kael::mul(x, 2.0);
  kael::mul_(z, z);
  EXPECT_NE(error_of([&] { ag::backward({kael::sum(z, std::nullopt)}, {}, false, false); }).find("version"),
            std::string::npos);
}

TEST(Autograd, GradModeOffRecordsNothing) {
  const Tensor x = leaf({1, 2});
  {
    ag::NoGradGuard guard;
    EXPECT_FALSE(ag::requires_grad(kael::mul(x, 2.0)));
    kael::add_(x, 1.0);  // allowed without grad mode
  }
  EXPECT_TRUE(ag::requires_grad(kael::mul(x, 2.0)));
}

TEST(Autograd, GradCapturesWithoutAccumulating) {
  const Tensor x = leaf({1, 2}), w = leaf({3, 4});
  const Tensor y = kael::sum(kael::mul(x, w), std::nullopt);
  const auto g = ag::grad({y}, {x}, {}, false, false, false);
  EXPECT_EQ(values(g[0]), (std::vector<double>{3, 4}));
  EXPECT_FALSE(grad_of(x).defined());
  EXPECT_FALSE(grad_of(w).defined());
}

TEST(Autograd, HooksReplaceGradients) {
  const Tensor x = leaf({1, 2});
  const Tensor y = kael::mul(x, 3.0);
  ag::register_hook(y, [](const Tensor& g) { return kael::mul(g, 2.0); });
  ag::backward({kael::sum(y, std::nullopt)}, {}, false, false);
  EXPECT_EQ(values(grad_of(x)), (std::vector<double>{6, 6}));
}

TEST(Autograd, IndependentGraphsOnTwoThreads) {
  std::vector<std::vector<double>> out(2);
  auto work = [&](int i) {
    for (int r = 0; r < 50; ++r) {
      const Tensor x = leaf({1.0 + i, 2.0});
      ag::backward({kael::sum(kael::mul(kael::exp(x), x), std::nullopt)}, {}, false, false);
      out[i] = values(grad_of(x));
    }
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  EXPECT_NEAR(out[0][0], std::exp(1.0) * 2, 1e-12);
  EXPECT_NEAR(out[1][0], std::exp(2.0) * 3, 1e-12);
}

TEST(Autograd, ValuesAndIndicesShareOneNode) {
  // max along a dim: the values get the node (output 0), the int64 indices no history; the
  // gradient goes to the selected positions.
  const Tensor x = leaf({1, 5, 2, 4});
  const std::int64_t shape[] = {2, 2};
  const Tensor m = kael::reshape(x, shape);
  const auto [values_, indices] = kael::max(m, 1, false);
  ASSERT_TRUE(ag::requires_grad(values_));
  EXPECT_FALSE(ag::requires_grad(indices));
  EXPECT_EQ(ag::grad_fn(values_)->num_inputs(), 2u);  // numbered as the results
  ag::backward({kael::sum(kael::mul(values_, vec({2, 3})), std::nullopt)}, {}, false, false);
  EXPECT_EQ(values(grad_of(x)), (std::vector<double>{0, 2, 0, 3}));
}

TEST(Autograd, BackwardIntoListedInputsOnly) {
  const Tensor a = leaf({1, 2}), b = leaf({3, 4});
  const Tensor y = kael::mul(a, b);
  ag::backward({kael::sum(y, std::nullopt)}, {}, true, false, {b});
  EXPECT_FALSE(grad_of(a).defined());
  EXPECT_EQ(values(grad_of(b)), (std::vector<double>{1, 2}));
  ag::backward({kael::sum(kael::mul(y, y), std::nullopt)}, {}, false, false, {y});  // a non-leaf
  EXPECT_EQ(values(grad_of(y)), (std::vector<double>{6, 16}));
  EXPECT_FALSE(grad_of(a).defined());
}

TEST(Autograd, InferenceTensors) {
  Tensor x;
  {
    ag::AutoInferenceMode mode(true);
    x = vec({1, 2});
    EXPECT_TRUE(x.impl()->storage()->is_inference());
    kael::add_(x, 1.0);  // no version bump
    EXPECT_EQ(x.impl()->storage()->version(), 0u);
    EXPECT_FALSE(kael::slice(x, 0, 0, 1).impl()->is_view());  // no view tracking
    EXPECT_FALSE(ag::GradMode::is_enabled());
  }
  EXPECT_TRUE(ag::GradMode::is_enabled());
  EXPECT_FALSE(vec({1}).impl()->storage()->is_inference());
  EXPECT_NE(error_of([&] { kael::add_(x, 1.0); }).find("Inplace update to inference tensor outside InferenceMode"),
            std::string::npos);
  const Tensor w = leaf({3, 4});
  EXPECT_NE(error_of([&] { kael::mul(w, x); }).find("Inference tensors cannot be saved for backward"),
            std::string::npos);
  ag::backward({kael::sum(kael::add(w, x), std::nullopt)}, {}, false, false);  // add saves nothing
  EXPECT_EQ(values(grad_of(w)), (std::vector<double>{1, 1}));
}

}  // namespace
