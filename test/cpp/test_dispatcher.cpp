// Tests of dispatch key sets, key selection, the op table and calls through the C++ API
// (see Note [Dispatch]).
#include <gtest/gtest.h>

#include "test_util.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "kael/core/dispatch_key_set.h"
#include "kael/core/error.h"
#include "kael/dispatch/dispatcher.h"
#include "kael/dispatch/keys.h"
#include "kael/ops.h"

namespace {

using kael::DispatchKey;
using kael::DispatchKeySet;
namespace dispatch = kael::dispatch;

const kael::Device kCuda{kael::DeviceType::CUDA, 0};

using kael::testing::error_of;

// ---------------------------------------------------------------- DispatchKeySet

TEST(DispatchKeySet, EmptyByDefault) {
  constexpr DispatchKeySet s;
  static_assert(s.empty());
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.bits(), 0u);
  for (int k = 0; k < kael::kNumDispatchKeys; ++k) EXPECT_FALSE(s.has(static_cast<DispatchKey>(k)));
}

TEST(DispatchKeySet, SingleKey) {
  for (int k = 0; k < kael::kNumDispatchKeys; ++k) {
    const auto key = static_cast<DispatchKey>(k);
    const DispatchKeySet s(key);
    EXPECT_FALSE(s.empty());
    EXPECT_EQ(s.bits(), 1u << k);
    EXPECT_EQ(s.highest(), key);
    for (int j = 0; j < kael::kNumDispatchKeys; ++j) EXPECT_EQ(s.has(static_cast<DispatchKey>(j)), j == k);
  }
}

TEST(DispatchKeySet, HighestIsHighestPriorityKey) {
  // Priority order is the enum order: CPU < CUDA < Autograd < Python.
  EXPECT_EQ((DispatchKeySet(DispatchKey::CPU) | DispatchKeySet(DispatchKey::Autograd)).highest(),
            DispatchKey::Autograd);
  EXPECT_EQ((DispatchKeySet(DispatchKey::Python) | DispatchKeySet(DispatchKey::CPU)).highest(), DispatchKey::Python);
  EXPECT_EQ((DispatchKeySet(DispatchKey::CPU) | DispatchKeySet(DispatchKey::CUDA)).highest(), DispatchKey::CUDA);
  EXPECT_EQ(DispatchKeySet::all().highest(), DispatchKey::Python);
  static_assert(DispatchKeySet(DispatchKey::Autograd).add(DispatchKey::CPU).highest() == DispatchKey::Autograd);
}

TEST(DispatchKeySet, UnionIntersectionDifference) {
  const DispatchKeySet cpu(DispatchKey::CPU), ag(DispatchKey::Autograd), py(DispatchKey::Python);
  const DispatchKeySet u = cpu | ag;
  EXPECT_TRUE(u.has(DispatchKey::CPU));
  EXPECT_TRUE(u.has(DispatchKey::Autograd));
  EXPECT_FALSE(u.has(DispatchKey::CUDA));
  EXPECT_FALSE(u.has(DispatchKey::Python));
  EXPECT_EQ(u, cpu.add(DispatchKey::Autograd));
  EXPECT_EQ(u | u, u);
  EXPECT_EQ(u | cpu, u);

  EXPECT_EQ(u & cpu, cpu);
  EXPECT_TRUE((u & py).empty());

  EXPECT_EQ(u - ag, cpu);
  EXPECT_EQ(u - py, u);
  EXPECT_TRUE((u - u).empty());
  EXPECT_EQ(u.remove(DispatchKey::Autograd), cpu);
  EXPECT_EQ(u.remove(DispatchKey::Python), u);  // removing an absent key is a no-op
  EXPECT_EQ(u.remove(DispatchKey::CPU).remove(DispatchKey::Autograd), DispatchKeySet());

  EXPECT_EQ(DispatchKeySet::all().bits(), (1u << kael::kNumDispatchKeys) - 1);
  for (int k = 0; k < kael::kNumDispatchKeys; ++k) EXPECT_TRUE(DispatchKeySet::all().has(static_cast<DispatchKey>(k)));
  EXPECT_EQ(DispatchKeySet::from_bits(0b101), cpu | DispatchKeySet(DispatchKey::Autograd));
}

TEST(DispatchKeySet, KeyNames) {
  EXPECT_STREQ(dispatch::key_name(DispatchKey::CPU), "CPU");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::CUDA), "CUDA");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::Autograd), "Autograd");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::Python), "Python");
}

// ---------------------------------------------------------------- select_key

TEST(SelectKey, PicksHighestOfCallKeys) {
  ASSERT_TRUE(dispatch::tls_excluded.empty());
  const DispatchKeySet keys = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Autograd);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Autograd);
  EXPECT_EQ(dispatch::select_key(DispatchKeySet(DispatchKey::CPU)), DispatchKey::CPU);
}

TEST(SelectKey, TlsExcludedKeysAreSkipped) {
  const DispatchKeySet keys = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Autograd).add(DispatchKey::Python);
  const DispatchKeySet saved = dispatch::tls_excluded;
  dispatch::tls_excluded = DispatchKeySet(DispatchKey::Python);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Autograd);
  dispatch::tls_excluded = DispatchKeySet(DispatchKey::Python).add(DispatchKey::Autograd);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::CPU);
  dispatch::tls_excluded = saved;
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Python);
}

TEST(SelectKey, ExcludeGuardRestoresOnScopeExit) {
  const DispatchKeySet keys = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Autograd).add(DispatchKey::Python);
  const DispatchKeySet before = dispatch::tls_excluded;
  {
    dispatch::ExcludeGuard g1(DispatchKeySet(DispatchKey::Python));
    EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Python));
    EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Autograd);
    {
      dispatch::ExcludeGuard g2(DispatchKeySet(DispatchKey::Autograd));
      EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Python));  // nested guards accumulate
      EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Autograd));
      EXPECT_EQ(dispatch::select_key(keys), DispatchKey::CPU);
    }
    EXPECT_FALSE(dispatch::tls_excluded.has(DispatchKey::Autograd));
    EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Autograd);
  }
  EXPECT_EQ(dispatch::tls_excluded, before);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Python);
}

TEST(SelectKey, ExcludeGuardRestoresOnException) {
  const DispatchKeySet before = dispatch::tls_excluded;
  try {
    dispatch::ExcludeGuard g(DispatchKeySet(DispatchKey::Autograd));
    throw kael::Error("boom");
  } catch (const kael::Error&) {
  }
  EXPECT_EQ(dispatch::tls_excluded, before);
}

TEST(SelectKey, ExcludedKeysAreThreadLocal) {
  dispatch::ExcludeGuard g(DispatchKeySet(DispatchKey::Autograd));
  DispatchKeySet seen_on_other_thread = DispatchKeySet::all();
  std::thread([&] { seen_on_other_thread = dispatch::tls_excluded; }).join();
  EXPECT_TRUE(seen_on_other_thread.empty());
  EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Autograd));
}

TEST(KeySetOf, TensorsNumbersAndDevices) {
  const std::int64_t shape[] = {2};
  const kael::Tensor t = kael::zeros(shape);
  EXPECT_EQ(t.key_set(), DispatchKeySet(DispatchKey::CPU));
  EXPECT_EQ(dispatch::key_set_of(t), DispatchKeySet(DispatchKey::CPU));
  EXPECT_EQ(dispatch::key_set_of(kael::Operand(t)), DispatchKeySet(DispatchKey::CPU));
  EXPECT_TRUE(dispatch::key_set_of(kael::Operand(2.5)).empty());
  EXPECT_TRUE(dispatch::key_set_of(std::optional<kael::Tensor>()).empty());
  EXPECT_EQ(dispatch::key_set_of(kCuda), DispatchKeySet(DispatchKey::CUDA));
  EXPECT_EQ(dispatch::key_set_of(std::optional<kael::Device>()), DispatchKeySet(DispatchKey::CPU));
}

// ---------------------------------------------------------------- the op table

TEST(OpTable, FindAddHasCpuKernel) {
  const dispatch::OpEntry* add = dispatch::find_op("add");
  ASSERT_NE(add, nullptr);
  EXPECT_STREQ(add->name, "add");
  EXPECT_NE(add->kernels[static_cast<int>(DispatchKey::CPU)], nullptr);
  // Every slot holds a kernel or a generated stub, never null.
  for (int k = 0; k < kael::kNumDispatchKeys; ++k) EXPECT_NE(add->kernels[k], nullptr) << k;
  // The CUDA slot is a stub, not the CPU kernel.
  EXPECT_NE(add->kernels[static_cast<int>(DispatchKey::CUDA)], add->kernels[static_cast<int>(DispatchKey::CPU)]);
}

TEST(OpTable, FindUnknownOpIsNull) {
  EXPECT_EQ(dispatch::find_op("no_such_op"), nullptr);
  EXPECT_EQ(dispatch::find_op(""), nullptr);
  EXPECT_EQ(dispatch::find_op("ad"), nullptr);  // no prefix matching
}

TEST(OpTable, FindOpWithOverloadName) {
  const dispatch::OpEntry* a = dispatch::find_op("arange.start");
  ASSERT_NE(a, nullptr);
  EXPECT_STREQ(a->name, "arange.start");
  EXPECT_NE(dispatch::find_op("arange"), a);
}

TEST(OpTable, AllOpsHaveUniqueNamesFoundByLookup) {
  const auto ops = dispatch::all_ops();
  ASSERT_FALSE(ops.empty());
  std::map<std::string, int> count;
  for (const dispatch::OpEntry* op : ops) {
    ASSERT_NE(op, nullptr);
    ASSERT_NE(op->name, nullptr);
    ++count[op->name];
    EXPECT_EQ(dispatch::find_op(op->name), op) << op->name;
    for (int k = 0; k < kael::kNumDispatchKeys; ++k) EXPECT_NE(op->kernels[k], nullptr) << op->name << " key " << k;
  }
  for (const auto& [name, n] : count) EXPECT_EQ(n, 1) << name << " is listed " << n << " times";
  EXPECT_EQ(count.size(), ops.size());
}

TEST(OpTable, AllOpsContainsEveryRegisteredNameOnce) {
  // The operators of native_functions.yaml (schema name with overload; in-place variants end in '_').
  const char* const registered[] = {
      "empty", "zeros", "ones", "full", "arange", "arange.start", "eye", "empty_like", "zeros_like",
      "ones_like", "full_like", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "neg_",
      "abs", "abs_", "exp", "exp_", "log", "log_", "sqrt", "sqrt_", "rsqrt", "rsqrt_", "sin", "sin_", "cos",
      "cos_", "tanh", "tanh_", "sigmoid", "sigmoid_", "relu", "relu_", "pow", "pow_", "maximum", "maximum_",
      "minimum", "minimum_", "eq", "ne", "lt", "le", "gt", "ge", "sum", "mean", "view", "reshape", "permute",
      "transpose", "expand", "squeeze", "unsqueeze", "flatten", "narrow", "select", "contiguous", "clone",
      "detach", "to.device", "to.dtype", "to.other", "matmul",
  };
  for (const char* name : registered) {
    int n = 0;
    for (const dispatch::OpEntry* op : dispatch::all_ops()) n += std::string_view(op->name) == name;
    EXPECT_EQ(n, 1) << name;
  }
}

// ---------------------------------------------------------------- calls

TEST(Call, AddThroughPublicApi) {
  const std::int64_t shape[] = {2, 3};
  const kael::Tensor a = kael::arange(6, kael::ScalarType::Float32);
  const kael::Tensor b = kael::full(shape, 10.0);
  const kael::Tensor c = kael::add(kael::view(a, shape), b, 2);
  ASSERT_EQ(c.dim(), 2);
  EXPECT_EQ(c.size(0), 2);
  EXPECT_EQ(c.size(1), 3);
  EXPECT_EQ(c.dtype(), kael::ScalarType::Float32);
  const float* p = c.data<float>();
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(p[i], static_cast<float>(i) + 20.0f) << i;
}

TEST(Call, AddWithNumberOnEitherSide) {
  const kael::Tensor a = kael::arange(4);  // int64
  const kael::Tensor l = kael::add(a, 1);
  const kael::Tensor r = kael::add(1, a);
  ASSERT_EQ(l.dtype(), kael::ScalarType::Int64);
  ASSERT_EQ(r.dtype(), kael::ScalarType::Int64);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(l.data<std::int64_t>()[i], i + 1);
    EXPECT_EQ(r.data<std::int64_t>()[i], i + 1);
  }
}

TEST(Call, AddInPlaceReturnsSelf) {
  const std::int64_t shape[] = {3};
  const kael::Tensor a = kael::ones(shape);
  const kael::Tensor& r = kael::add_(a, 2.0);
  EXPECT_TRUE(r.is_same(a));
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(a.data<float>()[i], 3.0f);
}

TEST(Call, CallingTheCpuKernelFromTheTable) {
  using add_fn = kael::Tensor (*)(const kael::Operand&, const kael::Operand&, const kael::Scalar&);
  const dispatch::OpEntry* add = dispatch::find_op("add");
  ASSERT_NE(add, nullptr);
  const kael::Tensor a = kael::arange(3);
  const kael::Tensor c = add->kernel<add_fn>(DispatchKey::CPU)(a, a, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.data<std::int64_t>()[i], 2 * i);
}

TEST(Call, OnlyNumbersIsATypeError) {
  EXPECT_THROW(kael::add(1, 2), kael::TypeError);
  EXPECT_THROW(kael::eq(1.0, 2.0), kael::TypeError);
}

TEST(Call, CudaSlotWithoutKernelRaisesNamingCuda) {
  using add_fn = kael::Tensor (*)(const kael::Operand&, const kael::Operand&, const kael::Scalar&);
  const dispatch::OpEntry* add = dispatch::find_op("add");
  ASSERT_NE(add, nullptr);
  const kael::Tensor a = kael::arange(3);
  const std::string msg = error_of([&] { add->kernel<add_fn>(DispatchKey::CUDA)(a, a, 1); });
  EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  EXPECT_NE(msg.find("add is not implemented for CUDA"), std::string::npos) << msg;
}

TEST(Call, AutogradSlotWithoutKernelRaises) {
  using add_fn = kael::Tensor (*)(const kael::Operand&, const kael::Operand&, const kael::Scalar&);
  const kael::Tensor a = kael::arange(3);
  const std::string msg =
      error_of([&] { dispatch::find_op("add")->kernel<add_fn>(DispatchKey::Autograd)(a, a, 1); });
  EXPECT_NE(msg.find("add is not implemented for Autograd"), std::string::npos) << msg;
}

TEST(Call, InPlaceStubNamesOpWithoutOverload) {
  using fn = const kael::Tensor& (*)(const kael::Tensor&, const kael::Operand&, const kael::Scalar&);
  const kael::Tensor a = kael::arange(3);
  const std::string msg = error_of([&] { dispatch::find_op("add_")->kernel<fn>(DispatchKey::CUDA)(a, 1, 1); });
  EXPECT_NE(msg.find("add_ is not implemented for CUDA"), std::string::npos) << msg;
}

TEST(Call, NotImplementedStripsOverloadName) {
  const std::string msg = error_of([] { dispatch::not_implemented("arange.start", DispatchKey::CUDA); });
  EXPECT_NE(msg.find("arange is not implemented for CUDA"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("arange.start"), std::string::npos) << msg;
}

TEST(Call, FactoryOnCudaDeviceRaisesNamingCuda) {
  const std::int64_t shape[] = {2, 2};
  for (auto make : {+[](kael::IntArrayRef s, kael::Device d) { return kael::empty(s, std::nullopt, d); },
                    +[](kael::IntArrayRef s, kael::Device d) { return kael::zeros(s, std::nullopt, d); },
                    +[](kael::IntArrayRef s, kael::Device d) { return kael::ones(s, kael::ScalarType::Int64, d); }}) {
    const std::string msg = error_of([&] { make(kael::IntArrayRef(shape), kCuda); });
    EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  }
  const std::string msg = error_of([] { kael::arange(5, std::nullopt, kCuda); });
  EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  // Explicit CPU device works.
  const kael::Tensor t = kael::zeros(shape, std::nullopt, kael::kCPU);
  EXPECT_TRUE(t.device().is_cpu());
}

TEST(Call, ExcludedHigherKeysStillReachCpuKernel) {
  // With Python and Autograd excluded the CPU kernel still runs.
  const kael::Tensor a = kael::arange(3);
  dispatch::ExcludeGuard g(DispatchKeySet(DispatchKey::Python).add(DispatchKey::Autograd));
  const kael::Tensor c = kael::add(a, a);
  EXPECT_EQ(c.data<std::int64_t>()[2], 4);
}

TEST(Device, ParseAndPrint) {
  EXPECT_EQ(kael::parse_device("cpu"), kael::kCPU);
  EXPECT_EQ(kael::parse_device("cuda"), kCuda);
  EXPECT_EQ(kael::parse_device("cuda:3"), (kael::Device{kael::DeviceType::CUDA, 3}));
  EXPECT_EQ(kael::parse_device("cuda:3").str(), "cuda:3");
  EXPECT_EQ(kCuda.str(), "cuda");
  EXPECT_EQ(kCuda.backend_key(), DispatchKey::CUDA);
  EXPECT_EQ(kael::kCPU.backend_key(), DispatchKey::CPU);
  EXPECT_THROW(kael::parse_device("gpu"), kael::ValueError);
  EXPECT_THROW(kael::parse_device("cuda:"), kael::ValueError);
  EXPECT_THROW(kael::parse_device("cuda:x"), kael::ValueError);
  EXPECT_THROW(kael::parse_device("cuda:-1"), kael::ValueError);
}

}  // namespace
