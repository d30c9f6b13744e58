// The seams a device backend plugs into, with their CPU implementations: streams and device
// guards (Note [Streams], Note [Device guards]), frees that wait for streams (Note [Frees that
// wait for streams]) and a generator per device (Note [A generator per device]). A stand-in
// implementation for the CUDA device type shows what a backend sees; no CUDA is needed.
#include <gtest/gtest.h>

#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/allocator.h"
#include "kael/core/device_guard.h"
#include "kael/core/error.h"
#include "kael/core/storage.h"
#include "kael/core/stream.h"
#include "kael/runtime/generator.h"
#include "test_util.h"

namespace {

using kael::Device;
using kael::DeviceType;
using kael::Stream;
using kael::testing::error_of;

const Device kCuda0{DeviceType::CUDA, 0};
const Device kCuda1{DeviceType::CUDA, 1};

// Two devices, each with a current stream per thread (one thread in these tests).
class FakeGuardImpl final : public kael::DeviceGuardImpl {
 public:
  DeviceType type() const noexcept override { return DeviceType::CUDA; }
  Device current_device() const override { return current_; }
  Device exchange_device(Device d) override { return std::exchange(current_, d); }
  Stream current_stream(Device d) const override { return streams_[d.index]; }
  Stream exchange_stream(Stream s) override { return std::exchange(streams_[s.device().index], s); }
  int device_count() const noexcept override { return 2; }

 private:
  Device current_ = kCuda0;
  Stream streams_[2] = {Stream::default_stream(kCuda0), Stream::default_stream(kCuda1)};
};

class FakeGuard : public ::testing::Test {
 protected:
  void SetUp() override { kael::register_device_guard_impl(DeviceType::CUDA, &fake_); }
  void TearDown() override { kael::register_device_guard_impl(DeviceType::CUDA, nullptr); }
  FakeGuardImpl fake_;
};

TEST(Stream, IsADeviceAndAnIdWithTheDefaultStreamFirst) {
  const Stream cpu;
  EXPECT_EQ(cpu.device(), kael::kCPU);
  EXPECT_EQ(cpu.id(), 0);
  EXPECT_TRUE(cpu.is_default());
  EXPECT_EQ(cpu, Stream::default_stream(kael::kCPU));
  EXPECT_NE(Stream(kCuda0, 3), Stream(kCuda1, 3));
  EXPECT_FALSE(Stream(kCuda0, 3).is_default());
  EXPECT_EQ(Stream(kCuda1, 3).str(), "Stream(device=cuda:1, id=3)");
}

TEST(DeviceGuard, TheCpuHasOneDeviceAndOneStream) {
  EXPECT_EQ(kael::current_stream(kael::kCPU), Stream());
  EXPECT_EQ(kael::get_device_guard_impl(DeviceType::CPU)->device_count(), 1);
  {
    const kael::DeviceGuard guard(kael::kCPU);
    EXPECT_EQ(guard.original_device(), kael::kCPU);
    const kael::StreamGuard stream(Stream{});
    EXPECT_EQ(stream.original_stream(), Stream());
    EXPECT_EQ(kael::current_stream(kael::kCPU), Stream());
  }
  const std::string msg = error_of([] { const kael::StreamGuard s(Stream(kael::kCPU, 1)); });
  EXPECT_NE(msg.find("StreamGuard: Stream(device=cpu, id=1) does not exist: the CPU has only its default stream"),
            std::string::npos)
      << msg;
}

TEST(DeviceGuard, ADeviceWithoutABackendRaisesNamingTheCaller) {
  if (kael::cuda_backend_built()) GTEST_SKIP() << "this build has a CUDA backend";
  std::string msg = error_of([] { const kael::DeviceGuard g(kCuda0); });
  EXPECT_NE(msg.find("DeviceGuard: device 'cuda' requested, but this build of kael has no CUDA backend"),
            std::string::npos)
      << msg;
  msg = error_of([] { kael::current_stream(kCuda1); });
  EXPECT_NE(msg.find("current_stream: device 'cuda:1' requested, but this build of kael has no CUDA backend"),
            std::string::npos)
      << msg;
}

TEST_F(FakeGuard, GuardsSetTheDeviceAndRestoreItNested) {
  EXPECT_EQ(fake_.current_device(), kCuda0);
  {
    const kael::DeviceGuard outer(kCuda1);
    EXPECT_EQ(outer.original_device(), kCuda0);
    EXPECT_EQ(fake_.current_device(), kCuda1);
    {
      const kael::DeviceGuard inner(kCuda0);
      EXPECT_EQ(inner.original_device(), kCuda1);
      EXPECT_EQ(fake_.current_device(), kCuda0);
    }
    EXPECT_EQ(fake_.current_device(), kCuda1);
  }
  EXPECT_EQ(fake_.current_device(), kCuda0);
}

TEST_F(FakeGuard, StreamGuardsSetTheStreamAndItsDeviceAndRestoreBothOnAnException) {
  const Stream side(kCuda1, 7);
  try {
    const kael::StreamGuard guard(side);
    EXPECT_EQ(guard.original_stream(), Stream::default_stream(kCuda1));
    EXPECT_EQ(kael::current_stream(kCuda1), side);
    EXPECT_EQ(kael::current_stream(kCuda0), Stream::default_stream(kCuda0));  // per device
    EXPECT_EQ(fake_.current_device(), kCuda1);
    throw std::runtime_error("work failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(kael::current_stream(kCuda1), Stream::default_stream(kCuda1));
  EXPECT_EQ(fake_.current_device(), kCuda0);
}

// Records the streams it is told about, per block.
class RecordingAllocator final : public kael::Allocator {
 public:
  void* allocate(std::size_t nbytes) override { return nbytes == 0 ? nullptr : ::operator new(nbytes); }
  void free(void* ptr, std::size_t) noexcept override {
    freed.push_back(ptr);
    ::operator delete(ptr);
  }
  void record_stream(void* ptr, Stream stream) noexcept override { recorded.emplace_back(ptr, stream); }
  kael::AllocatorStats stats() const override { return {}; }
  void empty_cache() override {}
  std::vector<std::pair<void*, Stream>> recorded;
  std::vector<void*> freed;
};

TEST(RecordStream, ReachesTheAllocatorOfTheStoragesDevice) {
  RecordingAllocator fake;
  kael::register_allocator(DeviceType::CUDA, &fake);
  {
    const auto s = kael::Storage::allocate(64, kCuda0);
    void* const block = s->data();
    s->record_stream(Stream(kCuda0, 2));
    ASSERT_EQ(fake.recorded.size(), 1u);
    EXPECT_EQ(fake.recorded[0].first, block);
    EXPECT_EQ(fake.recorded[0].second, Stream(kCuda0, 2));
    EXPECT_TRUE(fake.freed.empty());
  }
  EXPECT_EQ(fake.freed.size(), 1u);  // the allocator decides when the block is reused
  kael::register_allocator(DeviceType::CUDA, nullptr);
}

TEST(RecordStream, TheCpuAllocatorAndExternalMemoryIgnoreIt) {
  const auto s = kael::Storage::allocate(64, kael::kCPU);
  s->record_stream(Stream());
  EXPECT_NE(s->data(), nullptr);
  int value = 0;
  const auto e = kael::Storage::external(&value, sizeof value, kael::kCPU, nullptr, nullptr);
  e->record_stream(Stream());  // no allocator: nothing to tell
  EXPECT_EQ(e->allocator(), nullptr);
}

TEST(GeneratorPerDevice, EachDeviceHasItsOwnDefaultGenerator) {
  const kael::Generator& cpu = kael::default_generator();
  EXPECT_TRUE(kael::default_generator(kael::kCPU).is_same(cpu));
  EXPECT_EQ(cpu.device(), kael::kCPU);
  const kael::Generator& cuda0 = kael::default_generator(kCuda0);
  const kael::Generator& cuda1 = kael::default_generator(kCuda1);
  EXPECT_TRUE(kael::default_generator(kCuda0).is_same(cuda0));  // made once
  EXPECT_FALSE(cuda0.is_same(cpu));
  EXPECT_FALSE(cuda0.is_same(cuda1));
  EXPECT_EQ(cuda1.device(), kCuda1);
  EXPECT_EQ(cuda0.initial_seed(), kael::kDefaultSeed);
  // Streams of one device advance its generator alone.
  const kael::PhiloxStream before_cpu = cpu.get_state(), before_cuda = cuda0.get_state();
  const kael::PhiloxStream drawn = kael::next_stream(std::nullopt, kCuda0);
  EXPECT_EQ(drawn.offset, before_cuda.offset);
  EXPECT_EQ(cuda0.get_state().offset, before_cuda.offset + 1);
  EXPECT_EQ(cpu.get_state().offset, before_cpu.offset);
}

TEST(GeneratorPerDevice, AGeneratorOfAnotherDeviceRaises) {
  const kael::Generator cuda(kCuda0);
  EXPECT_EQ(cuda.device(), kCuda0);
  const std::optional<kael::Generator> g(cuda);
  const std::string msg = error_of([&] { kael::next_stream(g, kael::kCPU, "normal_"); });
  EXPECT_NE(msg.find("normal_: Expected a 'cpu' device type for generator but found 'cuda'"), std::string::npos) << msg;
  const kael::Generator cpu(42);
  EXPECT_EQ(kael::next_stream(std::optional<kael::Generator>(cpu)).seed, 42u);
}

}  // namespace
