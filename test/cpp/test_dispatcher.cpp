// Tests of dispatch key sets, key selection, the op table and calls through the C++ API
// (see Note [Dispatch]).
#include <gtest/gtest.h>

#include "test_util.h"

#include <algorithm>
#include <functional>
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
  // Priority order is the enum order: CPU < CUDA < Python < Autograd < Autocast.
  EXPECT_EQ((DispatchKeySet(DispatchKey::CPU) | DispatchKeySet(DispatchKey::Autograd)).highest(),
            DispatchKey::Autograd);
  EXPECT_EQ((DispatchKeySet(DispatchKey::Python) | DispatchKeySet(DispatchKey::CPU)).highest(), DispatchKey::Python);
  EXPECT_EQ((DispatchKeySet(DispatchKey::Python) | DispatchKeySet(DispatchKey::Autograd)).highest(),
            DispatchKey::Autograd);
  EXPECT_EQ((DispatchKeySet(DispatchKey::CPU) | DispatchKeySet(DispatchKey::CUDA)).highest(), DispatchKey::CUDA);
  EXPECT_EQ(DispatchKeySet::all().highest(), DispatchKey::Autocast);
  EXPECT_EQ((DispatchKeySet(DispatchKey::Autocast) | DispatchKeySet(DispatchKey::Autograd)).highest(),
            DispatchKey::Autocast);
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
  EXPECT_EQ(DispatchKeySet::from_bits(0b101), cpu | DispatchKeySet(DispatchKey::Python));
  // below(k): the keys a kernel at k redispatches to.
  EXPECT_EQ(DispatchKeySet::all().below(DispatchKey::Autocast), DispatchKeySet::all().remove(DispatchKey::Autocast));
  EXPECT_EQ(DispatchKeySet::all().below(DispatchKey::Autograd),
            DispatchKeySet::all().remove(DispatchKey::Autocast).remove(DispatchKey::Autograd));
  EXPECT_EQ(u.below(DispatchKey::Autograd), cpu);
  EXPECT_EQ((cpu | py).below(DispatchKey::Python), cpu);
  EXPECT_TRUE(u.below(DispatchKey::CPU).empty());
}

TEST(DispatchKeySet, KeyNames) {
  EXPECT_STREQ(dispatch::key_name(DispatchKey::CPU), "CPU");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::CUDA), "CUDA");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::Autograd), "Autograd");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::Python), "Python");
  EXPECT_STREQ(dispatch::key_name(DispatchKey::Autocast), "Autocast");
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
  dispatch::tls_excluded = DispatchKeySet(DispatchKey::Autograd);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Python);
  dispatch::tls_excluded = DispatchKeySet(DispatchKey::Python).add(DispatchKey::Autograd);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::CPU);
  dispatch::tls_excluded = saved;
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Autograd);
}

TEST(SelectKey, ExcludeGuardRestoresOnScopeExit) {
  const DispatchKeySet keys = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Autograd).add(DispatchKey::Python);
  const DispatchKeySet before = dispatch::tls_excluded;
  {
    dispatch::ExcludeGuard g1(DispatchKeySet(DispatchKey::Autograd));
    EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Autograd));
    EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Python);
    {
      dispatch::ExcludeGuard g2(DispatchKeySet(DispatchKey::Python));
      EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Python));  // nested guards accumulate
      EXPECT_TRUE(dispatch::tls_excluded.has(DispatchKey::Autograd));
      EXPECT_EQ(dispatch::select_key(keys), DispatchKey::CPU);
    }
    EXPECT_FALSE(dispatch::tls_excluded.has(DispatchKey::Python));
    EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Python);
  }
  EXPECT_EQ(dispatch::tls_excluded, before);
  EXPECT_EQ(dispatch::select_key(keys), DispatchKey::Autograd);
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

TEST(KeySetOf, ADeviceArgumentPicksTheBackend) {
  const DispatchKeySet cpu(DispatchKey::CPU);
  const DispatchKeySet cpu_autograd = cpu.add(DispatchKey::Autograd);
  // Given: the device's backend replaces the tensors' backend; other keys stay.
  EXPECT_EQ(dispatch::on_device(cpu, kCuda), DispatchKeySet(DispatchKey::CUDA));
  EXPECT_EQ(dispatch::on_device(cpu_autograd, kCuda), DispatchKeySet(DispatchKey::CUDA).add(DispatchKey::Autograd));
  EXPECT_EQ(dispatch::on_device(DispatchKeySet(DispatchKey::CUDA), kael::kCPU), cpu);
  EXPECT_EQ(dispatch::on_device(cpu, std::optional<kael::Device>(kCuda)), DispatchKeySet(DispatchKey::CUDA));
  // Not given: the tensors decide.
  EXPECT_EQ(dispatch::on_device(cpu_autograd, std::optional<kael::Device>()), cpu_autograd);
  EXPECT_EQ(dispatch::on_device(DispatchKeySet(DispatchKey::CUDA), std::optional<kael::Device>()),
            DispatchKeySet(DispatchKey::CUDA));
}

TEST(OpTable, DeviceArgumentsChooseTheKernelOfTheTargetDevice) {
  if (kael::cuda_backend_built()) GTEST_SKIP() << "this build has a CUDA backend";
  const std::int64_t shape[] = {2};
  const kael::Tensor t = kael::zeros(shape);
  // The CUDA stub answers, not the CPU kernel's device check.
  for (auto [op, call] : std::initializer_list<std::pair<const char*, std::function<void()>>>{
           {"to", [&] { kael::to(t, kCuda); }},
           {"zeros_like", [&] { kael::zeros_like(t, std::nullopt, kCuda); }},
           {"empty_like", [&] { kael::empty_like(t, std::nullopt, kCuda); }},
           {"empty", [&] { kael::empty(shape, std::nullopt, kCuda); }}}) {
    const std::string msg = error_of(call);
    EXPECT_NE(msg.find(std::string(op) + " is not implemented for CUDA: this build of kael has no CUDA backend"),
              std::string::npos)
        << msg;
  }
  EXPECT_TRUE(kael::to(t, kael::kCPU).is_same(t));
  EXPECT_EQ(kael::zeros_like(t, std::nullopt, kael::kCPU).device(), kael::kCPU);
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

using AddFn = kael::Tensor (*)(DispatchKeySet, const kael::Operand&, const kael::Operand&, const kael::Scalar&);
const DispatchKeySet kCpuKeys(DispatchKey::CPU);

TEST(Call, CallingTheCpuKernelFromTheTable) {
  const dispatch::OpEntry* add = dispatch::find_op("add");
  ASSERT_NE(add, nullptr);
  const kael::Tensor a = kael::arange(3);
  const kael::Tensor c = add->kernel<AddFn>(DispatchKey::CPU)(kCpuKeys, a, a, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.data<std::int64_t>()[i], 2 * i);
}

TEST(Call, OnlyNumbersIsATypeError) {
  EXPECT_THROW(kael::add(1, 2), kael::TypeError);
  EXPECT_THROW(kael::eq(1.0, 2.0), kael::TypeError);
}

TEST(Call, CudaSlotWithoutKernelRaisesNamingCuda) {
  const dispatch::OpEntry* add = dispatch::find_op("add");
  ASSERT_NE(add, nullptr);
  const kael::Tensor a = kael::arange(3);
  const std::string msg =
      error_of([&] { add->kernel<AddFn>(DispatchKey::CUDA)(DispatchKeySet(DispatchKey::CUDA), a, a, 1); });
  EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  EXPECT_NE(msg.find("add is not implemented for CUDA"), std::string::npos) << msg;
}

TEST(Call, PythonWithoutKernelFallsThroughAndAutogradRecordsNothingForPlainTensors) {
  // add has no Python kernel: a tensor carrying that key reaches the kernels below. Its Autograd
  // kernel (generated from its derivatives) runs for a tensor carrying the Autograd key, and
  // records nothing when no input requires grad.
  const dispatch::OpEntry* add = dispatch::find_op("add");
  EXPECT_TRUE(add->has_kernel(DispatchKey::Autograd));
  EXPECT_FALSE(add->has_kernel(DispatchKey::Python));
  EXPECT_TRUE(add->has_kernel(DispatchKey::CPU));
  kael::Tensor a = kael::arange(3);
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Python));
  EXPECT_EQ(dispatch::effective_keys(*add, a.key_set()), kCpuKeys);
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
  EXPECT_EQ(dispatch::effective_keys(*add, a.key_set()), kCpuKeys.add(DispatchKey::Autograd));
  const kael::Tensor c = kael::add(a, a);
  EXPECT_EQ(c.data<std::int64_t>()[2], 4);
  EXPECT_FALSE(c.key_set().has(DispatchKey::Autograd));
  // A backend key without a kernel does not fall through.
  EXPECT_TRUE(dispatch::effective_keys(*add, DispatchKeySet(DispatchKey::CUDA)).has(DispatchKey::CUDA));
}

TEST(Call, InPlaceStubNamesOpWithoutOverload) {
  using fn = const kael::Tensor& (*)(DispatchKeySet, const kael::Tensor&, const kael::Operand&, const kael::Scalar&);
  const kael::Tensor a = kael::arange(3);
  const std::string msg = error_of(
      [&] { dispatch::find_op("add_")->kernel<fn>(DispatchKey::CUDA)(DispatchKeySet(DispatchKey::CUDA), a, 1, 1); });
  EXPECT_NE(msg.find("add_ is not implemented for CUDA"), std::string::npos) << msg;
}

// ---------------------------------------------------------------- redispatch, boxed calls

// A test kernel for add at the Autograd key: records the keys it saw, then redispatches below.
std::vector<DispatchKeySet> g_seen;
kael::Tensor add_autograd_test(DispatchKeySet ks, const kael::Operand& a, const kael::Operand& b,
                               const kael::Scalar& alpha) {
  g_seen.push_back(ks);
  return kael::redispatch::add(ks.below(DispatchKey::Autograd), a, b, alpha);
}

struct KernelScope {  // installs a kernel for one test and restores the slot afterwards
  KernelScope(const char* op, DispatchKey key, dispatch::KernelFn fn) : op_(op), key_(key) {
    old_ = dispatch::set_kernel(op, key, fn);
  }
  ~KernelScope() { dispatch::set_kernel(op_, key_, old_); }
  const char* op_;
  DispatchKey key_;
  dispatch::KernelFn old_;
};

TEST(Redispatch, KernelAtAutogradRedispatchesToTheBackend) {
  g_seen.clear();
  KernelScope scope("add", DispatchKey::Autograd, reinterpret_cast<dispatch::KernelFn>(&add_autograd_test));
  EXPECT_TRUE(dispatch::find_op("add")->has_kernel(DispatchKey::Autograd));
  kael::Tensor a = kael::arange(3);
  EXPECT_EQ(kael::add(a, a).data<std::int64_t>()[1], 2);  // no Autograd key on a: the kernel is not called
  EXPECT_TRUE(g_seen.empty());
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
  const kael::Tensor c = kael::add(a, 10, 2);
  ASSERT_EQ(g_seen.size(), 1u);
  EXPECT_EQ(g_seen[0], kCpuKeys.add(DispatchKey::Autograd));
  EXPECT_EQ(c.data<std::int64_t>()[2], 22);
  {
    dispatch::ExcludeGuard below(DispatchKeySet(DispatchKey::Autograd));
    kael::add(a, a);
  }
  EXPECT_EQ(g_seen.size(), 1u);  // excluded on this thread
}

TEST(Redispatch, RemovingTheKernelRestoresThePreviousOne) {
  const dispatch::KernelFn generated = dispatch::find_op("add")->kernels[static_cast<int>(DispatchKey::Autograd)];
  {
    KernelScope scope("add", DispatchKey::Autograd, reinterpret_cast<dispatch::KernelFn>(&add_autograd_test));
  }
  EXPECT_TRUE(dispatch::find_op("add")->has_kernel(DispatchKey::Autograd));
  EXPECT_EQ(dispatch::find_op("add")->kernels[static_cast<int>(DispatchKey::Autograd)], generated);
  g_seen.clear();
  kael::Tensor a = kael::arange(3);
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
  kael::add(a, a);
  EXPECT_TRUE(g_seen.empty());
  EXPECT_THROW(dispatch::set_kernel("no_such_op", DispatchKey::CPU, nullptr), kael::ValueError);
}

TEST(Boxed, CallTakesArgumentsFromTheStackAndLeavesTheResult) {
  const dispatch::OpEntry* add = dispatch::find_op("add");
  EXPECT_EQ(add->num_args, 3);
  dispatch::Stack stack;
  stack.emplace_back(kael::arange(4));
  stack.emplace_back(kael::Scalar(std::int64_t{5}));  // a number where the schema has a Tensor
  stack.emplace_back(kael::Scalar(std::int64_t{2}));
  dispatch::call_boxed(*add, stack);
  ASSERT_EQ(stack.size(), 1u);
  const kael::Tensor r = stack[0].to_tensor();
  EXPECT_EQ(r.data<std::int64_t>()[3], 13);
  // Factories: optional arguments as None, the key set from the device argument.
  dispatch::Stack f;
  f.emplace_back(kael::IntArrayRef(std::vector<std::int64_t>{2, 3}));
  f.emplace_back(kael::Scalar(1.5));
  f.emplace_back(dispatch::IValue());
  f.emplace_back(dispatch::IValue());
  dispatch::call_boxed(*dispatch::find_op("full"), f);
  EXPECT_EQ(f.back().to_tensor().numel(), 6);
  EXPECT_EQ(f.back().to_tensor().dtype(), kael::ScalarType::Float32);
  // A wrong argument type is a TypeError naming the op's expectation, not a crash.
  dispatch::Stack bad;
  bad.emplace_back(1.5);
  bad.emplace_back(kael::arange(2));
  bad.emplace_back(kael::Scalar(std::int64_t{1}));
  EXPECT_THROW(dispatch::call_boxed(*add, bad), kael::TypeError);
  dispatch::Stack few;
  EXPECT_THROW(dispatch::call_boxed(*add, few), kael::ValueError);
}

// A boxed Python-key fallback that records op names and redispatches below Python.
std::vector<std::string> g_log;
void logging_fallback(const dispatch::OpEntry& op, DispatchKeySet ks, dispatch::Stack& stack) {
  g_log.emplace_back(op.name);
  dispatch::ExcludeGuard below(DispatchKeySet(DispatchKey::Python));
  dispatch::redispatch_boxed(op, ks.below(DispatchKey::Python), stack);
}

struct FallbackScope {
  explicit FallbackScope(dispatch::BoxedKernel fn) { old_ = dispatch::set_fallback(DispatchKey::Python, fn); }
  ~FallbackScope() { dispatch::set_fallback(DispatchKey::Python, old_); }
  dispatch::BoxedKernel old_;
};

TEST(Boxed, PythonFallbackServesEveryOpWithoutPerOpCode) {
  g_log.clear();
  FallbackScope scope(&logging_fallback);
  kael::Tensor a = kael::arange(6);
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Python));
  const kael::Tensor b = kael::mul(a, a);                  // pointwise, unboxed -> boxed -> unboxed
  const std::int64_t shape[] = {2, 3};
  const kael::Tensor v = kael::view(a, shape);               // a view op
  const kael::Tensor& r = kael::add_(a, 1);                  // in place: returns self
  EXPECT_TRUE(r.is_same(a));
  EXPECT_EQ((std::vector<std::string>{"mul", "view", "add_"}), g_log);
  EXPECT_EQ(b.data<std::int64_t>()[5], 25);
  EXPECT_EQ(a.data<std::int64_t>()[5], 6);
  EXPECT_EQ(v.sizes()[0], 2);
  EXPECT_TRUE(v.key_set().has(DispatchKey::Python));  // views keep their base's keys
  // The same through IncludeGuard, for tensors that do not carry the key (a dispatch mode).
  g_log.clear();
  {
    dispatch::IncludeGuard mode(DispatchKeySet(DispatchKey::Python));
    kael::neg(kael::arange(2));
  }
  EXPECT_EQ((std::vector<std::string>{"arange.start", "neg"}), g_log);
}

TEST(Boxed, SeveralResultsAndTensorListsCrossTheBoxedPath) {
  // Boxed calls: a tuple result is one IValue per result, a Tensor[] one IValue holding a list.
  dispatch::Stack stack;
  stack.emplace_back(kael::full(std::vector<std::int64_t>{2}, kael::Scalar(6.0)));
  dispatch::call_boxed(*dispatch::find_op("frexp"), stack);
  ASSERT_EQ(stack.size(), 2u);
  EXPECT_EQ(stack[0].to_tensor().data<float>()[0], 0.75f);
  EXPECT_EQ(stack[1].to_tensor().data<std::int32_t>()[1], 3);
  dispatch::Stack lists;
  const std::vector<kael::Tensor> inputs{kael::arange(3), kael::zeros(std::vector<std::int64_t>{2, 1})};
  lists.emplace_back(kael::TensorList(inputs));
  dispatch::call_boxed(*dispatch::find_op("broadcast_tensors"), lists);
  ASSERT_EQ(lists.size(), 1u);
  ASSERT_EQ(lists[0].to_tensor_list().size(), 2u);
  EXPECT_EQ(lists[0].to_tensor_list()[1].sizes()[1], 3);
  // Through the Python key's boxed fallback and back to the unboxed caller.
  g_log.clear();
  FallbackScope scope(&logging_fallback);
  dispatch::IncludeGuard mode(DispatchKeySet(DispatchKey::Python));
  const auto [mantissa, exponent] = kael::frexp(kael::full(std::vector<std::int64_t>{1}, kael::Scalar(-3.0)));
  EXPECT_EQ(mantissa.data<float>()[0], -0.75f);
  EXPECT_EQ(exponent.data<std::int32_t>()[0], 2);
  const std::vector<kael::Tensor> out = kael::broadcast_tensors(inputs);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].sizes()[0], 2);
  EXPECT_NE(std::find(g_log.begin(), g_log.end(), "frexp"), g_log.end());
  EXPECT_NE(std::find(g_log.begin(), g_log.end(), "expand"), g_log.end());  // a composite: its ops
  // An empty list dispatches to the CPU kernel.
  EXPECT_TRUE(kael::broadcast_tensors(std::vector<kael::Tensor>{}).empty());
}

TEST(Boxed, CompositeImplicitOpsDecomposeAboveThePythonKey) {
  g_log.clear();
  FallbackScope scope(&logging_fallback);
  dispatch::IncludeGuard mode(DispatchKeySet(DispatchKey::Python));
  const kael::Tensor t = kael::transpose(kael::empty(std::vector<std::int64_t>{2, 3}), 0, 1);
  g_log.clear();
  const kael::Tensor r = kael::reshape(t, std::vector<std::int64_t>{6});  // not viewable: empty + view + copy_
  EXPECT_EQ((std::vector<std::string>{"empty", "view", "copy_"}), g_log);
  EXPECT_FALSE(r.impl()->is_view());
}

TEST(Boxed, WithoutAFallbackThePythonKeyFallsThrough) {
  EXPECT_EQ(dispatch::fallback(DispatchKey::Python), nullptr);
  kael::Tensor a = kael::arange(3);
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Python));
  EXPECT_EQ(kael::add(a, a).data<std::int64_t>()[2], 4);
  EXPECT_THROW(dispatch::set_fallback(DispatchKey::CPU, &logging_fallback), kael::ValueError);
}

void boxed_logging_kernel(const dispatch::OpEntry& op, DispatchKeySet, dispatch::Stack& stack) {
  g_log.emplace_back(std::string("boxed ") + op.name);
  dispatch::ExcludeGuard below(DispatchKeySet(DispatchKey::Autocast));
  dispatch::call_boxed(op, stack);
}

TEST(Boxed, ABoxedKernelServesItsOpWhileOtherOpsFallThrough) {
  const dispatch::OpEntry& neg = *dispatch::find_op("neg");
  const dispatch::OpEntry& abs = *dispatch::find_op("abs");
  EXPECT_EQ(dispatch::set_boxed_kernel(neg, DispatchKey::Autocast, &boxed_logging_kernel), nullptr);
  EXPECT_TRUE(neg.has_kernel(DispatchKey::Autocast));
  EXPECT_FALSE(abs.has_kernel(DispatchKey::Autocast));
  g_log.clear();
  {
    dispatch::IncludeGuard on(DispatchKeySet(DispatchKey::Autocast));
    EXPECT_EQ(kael::neg(kael::arange(3)).data<std::int64_t>()[2], -2);
    EXPECT_EQ(kael::abs(kael::arange(3)).data<std::int64_t>()[2], 2);  // no kernel: falls through
  }
  kael::neg(kael::arange(3));  // the key is not on the thread
  EXPECT_EQ((std::vector<std::string>{"boxed neg"}), g_log);
  EXPECT_EQ(dispatch::set_boxed_kernel(neg, DispatchKey::Autocast, nullptr), &boxed_logging_kernel);
  EXPECT_FALSE(neg.has_kernel(DispatchKey::Autocast));
  g_log.clear();
  {
    dispatch::IncludeGuard on(DispatchKeySet(DispatchKey::Autocast));
    kael::neg(kael::arange(3));
  }
  EXPECT_TRUE(g_log.empty());
  EXPECT_THROW(dispatch::set_boxed_kernel(neg, DispatchKey::CPU, &boxed_logging_kernel), kael::ValueError);
}

// ---------------------------------------------------------------- owning arguments

TEST(Operand, CopiesOwnTheirTensorSoTheyCanBeSaved) {
  kael::Tensor t = kael::arange(3);
  const auto count = [&] { return t.impl()->use_count(); };
  const kael::Operand arg(t);  // an argument: refers to t for the call
  EXPECT_FALSE(arg.owns_tensor());
  EXPECT_EQ(count(), 1);
  std::vector<kael::Operand> saved;
  saved.push_back(arg);  // what autograd or a container keeps: owns
  EXPECT_TRUE(saved[0].owns_tensor());
  EXPECT_EQ(count(), 2);
  kael::Operand moved(std::move(saved[0]));
  EXPECT_TRUE(moved.owns_tensor());
  dispatch::Stack stack;
  stack.emplace_back(arg);  // a boxed stack holds a reference too
  EXPECT_GE(count(), 3);
  t = kael::Tensor();  // the caller lets go: the saved copies keep the data
  EXPECT_EQ(moved.tensor().data<std::int64_t>()[2], 2);
  EXPECT_EQ(stack[0].to_tensor().data<std::int64_t>()[2], 2);
  const kael::Operand number(2.5);
  const kael::Operand number_copy(number);
  EXPECT_FALSE(number_copy.is_tensor());
  EXPECT_EQ(number_copy.scalar().to_double(), 2.5);
}

// ---------------------------------------------------------------- key sets belong to tensors

TEST(KeySets, SurviveGeometryAndStorageChanges) {
  kael::Tensor a = kael::arange(6);
  a.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
  const std::int64_t sizes[] = {3, 2}, strides[] = {2, 1};
  a.impl()->set_geometry(kael::DimVector(sizes), kael::DimVector(strides), 0);
  EXPECT_TRUE(a.key_set().has(DispatchKey::Autograd));
  kael::add_out(a, kael::arange(4), 1);  // resizes a: new storage
  EXPECT_EQ(a.numel(), 4);
  EXPECT_TRUE(a.key_set().has(DispatchKey::Autograd));
  EXPECT_TRUE(a.key_set().has(DispatchKey::CPU));
  a.impl()->remove_keys(DispatchKeySet(DispatchKey::Autograd));
  EXPECT_EQ(a.key_set(), kCpuKeys);
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
  // PyTorch's grammar: a CPU index is accepted and dropped; anything else malformed raises
  // RuntimeError (kael::Error), as torch.device does
  EXPECT_EQ(kael::parse_device("cpu:0"), kael::kCPU);
  EXPECT_EQ(kael::parse_device("cpu:7"), kael::kCPU);
  using namespace std::string_view_literals;
  for (std::string_view bad : {"gpu"sv, "cuda:"sv, "cuda:x"sv, "cuda:-1"sv, "cuda:01"sv, "cpu:00"sv, "cuda:128"sv,
                               "cpu\0junk"sv, " cpu"sv, "CPU"sv, ""sv, "cuda:1x"sv, "cpu:0:0"sv}) {
    EXPECT_THROW(kael::parse_device(bad), kael::Error) << bad;
    try {
      kael::parse_device(bad);
    } catch (const kael::ValueError&) {
      ADD_FAILURE() << "ValueError for " << bad;
    } catch (const kael::Error& e) {
      EXPECT_EQ(e.message().rfind("device: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
