// Device-independent set-up of pointwise calls (Note [Pointwise backends]): allocation
// through the device's allocator and the same-device checks, shown with a second device
// whose allocator is a stand-in (no CUDA needed; no loop runs on it).
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "kael/core/allocator.h"
#include "kael/core/error.h"
#include "kael/dispatch/dispatcher.h"
#include "kael/native/pointwise.h"
#include "kael/native/declarations.h"
#include "kael/native/reduce.h"
#include "kael/ops.h"
#include "test_util.h"

namespace {

using kael::native::PointwiseCall;
using kael::testing::error_of;
using kael::native::PointwiseSpec;
using kael::native::Promotion;

const kael::Device kCuda0{kael::DeviceType::CUDA, 0};

class FakeDeviceAllocator final : public kael::Allocator {
 public:
  void* allocate(std::size_t nbytes) override {
    ++allocations;
    return nbytes == 0 ? nullptr : ::operator new(nbytes);
  }
  void free(void* ptr, std::size_t) noexcept override { ::operator delete(ptr); }
  kael::AllocatorStats stats() const override { return {}; }
  void empty_cache() override {}
  int allocations = 0;
};

class FakeDevice : public ::testing::Test {
 protected:
  void SetUp() override { kael::register_allocator(kael::DeviceType::CUDA, &fake_); }
  void TearDown() override { kael::register_allocator(kael::DeviceType::CUDA, nullptr); }

  kael::Tensor on_fake(kael::IntArrayRef sizes, kael::ScalarType dtype = kael::ScalarType::Float32) {
    return kael::native::empty_on(sizes, dtype, kCuda0);
  }
  FakeDeviceAllocator fake_;
};

constexpr PointwiseSpec kSpec{"add", Promotion::Default, ~0u};
const std::int64_t kShape[] = {2, 3};

TEST_F(FakeDevice, EmptyOnADeviceUsesItsAllocatorAndKeys) {
  const kael::Tensor t = on_fake(kShape);
  EXPECT_EQ(fake_.allocations, 1);
  EXPECT_EQ(t.device(), kCuda0);
  EXPECT_EQ(t.key_set(), kael::DispatchKeySet(kael::DispatchKey::CUDA));
  EXPECT_EQ(t.impl()->storage()->allocator(), &fake_);
  const std::int64_t strides[] = {1, 2};
  const kael::Tensor s = kael::native::empty_strided_on(kShape, strides, kael::ScalarType::Float64, kCuda0);
  EXPECT_EQ(fake_.allocations, 2);
  EXPECT_EQ(s.impl()->storage()->nbytes(), 6 * sizeof(double));
}

TEST_F(FakeDevice, PointwiseSetUpAllocatesTheOutputOnTheInputsDevice) {
  const kael::Tensor a = on_fake(kShape), b = on_fake(kShape);
  const kael::Operand oa(a), ob(b);
  PointwiseCall call(kSpec, {&oa, &ob});
  EXPECT_EQ(fake_.allocations, 3);
  EXPECT_EQ(call.output().device(), kCuda0);
  EXPECT_EQ(call.shape().size(), 2u);
  EXPECT_EQ(call.compute_dtype(), kael::ScalarType::Float32);
  // A transposed input gives an output in its layout, on the device, as on the CPU.
  const kael::Tensor base = on_fake(kShape);
  const kael::Tensor t(kael::TensorImpl::make(base.impl()->storage_ptr(), base.dtype(), kael::DimVector{3, 2},
                                              kael::DimVector{1, 3}, 0));  // base.T
  const kael::Operand ot(t), two(2.0);
  PointwiseCall call_t(kSpec, {&ot, &two});
  EXPECT_EQ(call_t.output().device(), kCuda0);
  EXPECT_EQ(call_t.output().strides()[0], 1);
  EXPECT_EQ(call_t.output().strides()[1], 3);
  EXPECT_EQ(fake_.allocations, 5);
}

TEST_F(FakeDevice, MixedDevicesRaiseLikeTorch) {
  const kael::Tensor cpu = kael::zeros(kShape), dev = on_fake(kShape);
  const kael::Operand oc(cpu), od(dev);
  std::string msg = error_of([&] { PointwiseCall call(kSpec, {&oc, &od}); });
  EXPECT_NE(msg.find("add: expected all tensors to be on the same device, but found at least two devices, cpu and "
                     "cuda:0"),
            std::string::npos)
      << msg;
  msg = error_of([&] { PointwiseCall call(kSpec, {&od, &oc}); });
  EXPECT_NE(msg.find("found at least two devices, cuda:0 and cpu"), std::string::npos) << msg;
  // out= on another device than the inputs: raised before out is touched.
  const kael::Tensor out = on_fake(kShape);
  msg = error_of([&] { PointwiseCall call(kSpec, out, {&oc, &oc}, PointwiseCall::OutArgument{}); });
  EXPECT_NE(msg.find("add: expected all tensors to be on the same device, but found at least two devices, cpu and "
                     "cuda:0"),
            std::string::npos)
      << msg;
  // In-place on a CPU tensor with a device operand.
  msg = error_of([&] { PointwiseCall call(kSpec, cpu, {&oc, &od}); });
  EXPECT_NE(msg.find("cpu and cuda:0"), std::string::npos) << msg;
}

TEST_F(FakeDevice, ConversionsOnADeviceRunThatDevicesKernels) {
  // int64 + float32 converts the int64 input: on the fake device that is the `to` op's CUDA
  // kernel, which this build does not have (no CPU loop runs over device memory).
  const kael::Tensor a = on_fake(kShape, kael::ScalarType::Int64), b = on_fake(kShape);
  const kael::Operand oa(a), ob(b);
  const std::string msg = error_of([&] { PointwiseCall call(kSpec, {&oa, &ob}); });
  EXPECT_NE(msg.find("to is not implemented for CUDA"), std::string::npos) << msg;
}

TEST_F(FakeDevice, CopySetUpIsDeviceIndependentAndItsLoopIsTheDevices) {
  const kael::Tensor dst = on_fake(kShape);
  const std::int64_t row[] = {3}, bad[] = {2};
  kael::native::check_copy_shapes(dst, on_fake(row));  // broadcasts: no error
  const std::string shape_msg = error_of([&] { kael::native::check_copy_shapes(dst, on_fake(bad)); });
  EXPECT_NE(shape_msg.find("copy_: shapes [2, 3] and [2] are not broadcastable"), std::string::npos)
      << shape_msg;
  std::string msg = error_of([&] { kael::native::copy_on_device(dst, kael::zeros(kShape)); });
  EXPECT_NE(msg.find("copy_: expected all tensors to be on the same device, but found at least two devices, "
                     "cuda:0 and cpu"),
            std::string::npos)
      << msg;
  msg = error_of([&] { kael::native::copy_on_device(dst, on_fake(kShape)); });
  EXPECT_NE(msg.find("copy_ is not implemented for CUDA"), std::string::npos) << msg;
}

// Kernels installed for one test (restored afterwards).
struct KernelScope {
  KernelScope(const char* op, kael::DispatchKey key, kael::dispatch::KernelFn fn) : op_(op), key_(key) {
    old_ = kael::dispatch::set_kernel(op, key, fn);
  }
  ~KernelScope() { kael::dispatch::set_kernel(op_, key_, old_); }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;
  const char* op_;
  kael::DispatchKey key_;
  kael::dispatch::KernelFn old_;
};

std::vector<kael::DispatchKeySet> g_to_calls, g_copy_calls;
kael::dispatch::KernelFn g_cpu_copy = nullptr;

// The device's `to` and copy_: record the keys they are called with; no loop runs.
kael::Tensor fake_to(kael::DispatchKeySet ks, const kael::Tensor& self, kael::Device device,
                     std::optional<kael::ScalarType> dtype, bool, bool) {
  g_to_calls.push_back(ks);
  return kael::native::empty_on(self.sizes(), dtype.value_or(self.dtype()), device);
}
const kael::Tensor& fake_copy(kael::DispatchKeySet ks, const kael::Tensor& self, const kael::Tensor&, bool) {
  g_copy_calls.push_back(ks);
  return self;
}
// The CPU's copy_, watched: records the keys, then runs the kernel it replaced.
const kael::Tensor& watched_cpu_copy(kael::DispatchKeySet ks, const kael::Tensor& self, const kael::Tensor& src,
                                     bool non_blocking) {
  g_copy_calls.push_back(ks);
  using Fn = const kael::Tensor& (*)(kael::DispatchKeySet, const kael::Tensor&, const kael::Tensor&, bool);
  return reinterpret_cast<Fn>(g_cpu_copy)(ks, self, src, non_blocking);
}

TEST_F(FakeDevice, SetUpConvertsAndCopiesThroughTheDispatcherWithTheBackendsKeys) {
  g_to_calls.clear();
  g_copy_calls.clear();
  const KernelScope to("to.device", kael::DispatchKey::CUDA, reinterpret_cast<kael::dispatch::KernelFn>(&fake_to));
  const KernelScope copy("copy_", kael::DispatchKey::CUDA, reinterpret_cast<kael::dispatch::KernelFn>(&fake_copy));
  const kael::Tensor a = on_fake(kShape, kael::ScalarType::Int64), b = on_fake(kShape);
  // Autograd and the Python key see the op whose set-up this is, not its conversions.
  a.impl()->add_keys(kael::DispatchKeySet(kael::DispatchKey::Autograd) |
                     kael::DispatchKeySet(kael::DispatchKey::Python));
  const kael::Operand oa(a), ob(b);
  PointwiseCall call(kSpec, {&oa, &ob});
  ASSERT_EQ(g_to_calls.size(), 1u);
  EXPECT_EQ(g_to_calls[0], kael::DispatchKeySet(kael::DispatchKey::CUDA));
  EXPECT_EQ(call.output().device(), kCuda0);
  kael::native::copy_on_device(on_fake(kShape), b);
  ASSERT_EQ(g_copy_calls.size(), 1u);
  EXPECT_EQ(g_copy_calls[0], kael::DispatchKeySet(kael::DispatchKey::CUDA));
}

TEST(Device, SetUpOnCpuTensorsRunsTheCpuKernelsThroughTheDispatcher) {
  g_copy_calls.clear();
  g_cpu_copy = kael::dispatch::find_op("copy_")->kernels[static_cast<int>(kael::DispatchKey::CPU)];
  const KernelScope copy("copy_", kael::DispatchKey::CPU,
                         reinterpret_cast<kael::dispatch::KernelFn>(&watched_cpu_copy));
  const kael::Tensor i = kael::view(kael::arange(6), kShape);  // int64
  const kael::Tensor f = kael::ones(kShape);
  const kael::Tensor r = kael::add(i, f);  // i is converted to float32 by the set-up
  ASSERT_EQ(g_copy_calls.size(), 1u);
  EXPECT_EQ(g_copy_calls[0], kael::DispatchKeySet(kael::DispatchKey::CPU));
  EXPECT_EQ(r.dtype(), kael::ScalarType::Float32);
  EXPECT_EQ(r.data<float>()[5], 6.0f);
  // In place with a result of another dtype: f is converted to float64 (a copy_), the result is
  // computed aside, then copied into f by copy_ (a second), which bumps f's version once, as
  // PyTorch's in-place ops do.
  const kael::Tensor d = kael::ones(kShape, kael::ScalarType::Float64);
  const std::uint32_t before = f.impl()->version();
  kael::add_(f, d);
  EXPECT_EQ(f.impl()->version(), before + 1);
  EXPECT_EQ(g_copy_calls.size(), 3u);
  EXPECT_EQ(f.data<float>()[0], 2.0f);
}

TEST_F(FakeDevice, ReductionSetUpAllocatesTheOutputOnTheInputsDevice) {
  const kael::Tensor x = on_fake(kShape, kael::ScalarType::Int32);
  const std::int64_t dim1[] = {-1};
  const kael::native::SumSetup s = kael::native::setup_sum(x, kael::IntArrayRef(dim1), false, std::nullopt, false);
  EXPECT_EQ(s.out.device(), kCuda0);
  EXPECT_EQ(s.out.impl()->storage()->allocator(), &fake_);
  EXPECT_EQ(s.out_dtype, kael::ScalarType::Int64);  // integer sums give int64
  EXPECT_EQ(s.out.sizes().size(), 1u);
  EXPECT_EQ(s.out.sizes()[0], 2);
  EXPECT_EQ(s.dims.count, 3);
  EXPECT_TRUE(s.input.is_same(x));
  const kael::native::SumSetup k = kael::native::setup_sum(x, std::nullopt, true, std::nullopt, false);
  EXPECT_EQ(k.out.sizes().size(), 2u);
  EXPECT_EQ(k.dims.count, 6);
  // mean checks its dtype before anything is allocated
  const int before = fake_.allocations;
  const std::string msg = error_of([&] { kael::native::setup_sum(x, std::nullopt, false, std::nullopt, true); });
  EXPECT_NE(msg.find("mean: could not infer output dtype"), std::string::npos) << msg;
  EXPECT_EQ(fake_.allocations, before);
  // and the CPU kernels refuse to run on another device's memory
  const std::string sum_msg = error_of([&] { kael::native::sum_cpu(x, std::nullopt, false, std::nullopt); });
  EXPECT_NE(sum_msg.find("sum: expected a cpu tensor"), std::string::npos) << sum_msg;
}

TEST(Device, OpsOnCpuTensorsStillAllocateOnTheCpu) {
  const kael::Tensor a = kael::ones(kShape);
  const kael::Tensor r = kael::add(a, a);
  EXPECT_EQ(r.device(), kael::kCPU);
  EXPECT_EQ(r.impl()->storage()->allocator(), &kael::cpu_allocator::instance);
  EXPECT_EQ(r.data<float>()[5], 2.0f);
}

}  // namespace
