// See Note [Device guards] and Note [Streams].
#include "kael/core/device_guard.h"

#include <atomic>

#include "kael/core/error.h"

namespace kael {

namespace {

// The CPU: one device and its default stream; nothing to switch.
class CpuGuardImpl final : public DeviceGuardImpl {
 public:
  constexpr CpuGuardImpl() = default;
  DeviceType type() const noexcept override { return DeviceType::CPU; }
  Device current_device() const override { return kCPU; }
  Device exchange_device(Device d) override {
    KAEL_INTERNAL_ASSERT(d.is_cpu());
    return kCPU;
  }
  Stream current_stream(Device d) const override { return Stream::default_stream(d); }
  Stream exchange_stream(Stream s) override {
    KAEL_CHECK(s.device().is_cpu() && s.is_default(), "StreamGuard: " << s << " does not exist: the CPU has only "
                                                                      << "its default stream (id 0)");
    return s;
  }
  int device_count() const noexcept override { return 1; }
};

constinit CpuGuardImpl cpu_impl;
// Indexed by DeviceType; CPU is there from the start, other backends register at load time.
constinit std::atomic<DeviceGuardImpl*> registry[kNumDeviceTypes] = {&cpu_impl, nullptr};

}  // namespace

void register_device_guard_impl(DeviceType type, DeviceGuardImpl* impl) {
  KAEL_CHECK(impl == nullptr || impl->type() == type, "register_device_guard_impl: the implementation is for another "
                                                      "device type");
  registry[static_cast<int>(type)].store(impl, std::memory_order_release);
}

DeviceGuardImpl* get_device_guard_impl(DeviceType type) {
  return registry[static_cast<int>(type)].load(std::memory_order_acquire);
}

DeviceGuardImpl& device_guard_impl_for(const char* op, Device device) {
  DeviceGuardImpl* impl = get_device_guard_impl(device.type);
  if (impl != nullptr) return *impl;
  check_device_available(op, device);
  KAEL_CHECK(false, op << ": no device guard is registered for device '" << device.str() << "'");
  __builtin_unreachable();
}

Stream current_stream(Device device) { return device_guard_impl_for("current_stream", device).current_stream(device); }

DeviceGuard::DeviceGuard(Device device)
    : impl_(&device_guard_impl_for("DeviceGuard", device)),
      original_(impl_->exchange_device(device)),
      current_(device) {}

DeviceGuard::~DeviceGuard() { impl_->exchange_device(original_); }

StreamGuard::StreamGuard(Stream stream)
    : device_(stream.device()),
      impl_(&device_guard_impl_for("StreamGuard", stream.device())),
      original_stream_(impl_->exchange_stream(stream)),
      current_(stream) {}

StreamGuard::~StreamGuard() { impl_->exchange_stream(original_stream_); }

}  // namespace kael
