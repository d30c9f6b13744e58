#pragma once
// The current device and the current stream, per device type, and the guards that set them for
// a scope (PyTorch's DeviceGuardImplInterface, c10::DeviceGuard and c10::StreamGuard).
//
// Note [Device guards]
// A backend whose devices are selected per thread (CUDA's cudaSetDevice, its current stream)
// registers one DeviceGuardImpl for its device type; code that runs work on a device sets the
// device (and the stream) for the scope of the work with DeviceGuard / StreamGuard, which
// restore the previous ones when the scope ends, exceptions included. The CPU's implementation
// is built in and has nothing to switch: one device, kCPU, and one stream, its default
// (Note [Streams]). A device type without a registered implementation (CUDA in a build without
// a CUDA backend) raises a RuntimeError naming the operation when a guard or a stream query
// asks for it.

#include "kael/core/device.h"
#include "kael/core/stream.h"

namespace kael {

// What a backend implements for its device type. Every call is made with a device or stream of
// that type.
class DeviceGuardImpl {
 public:
  virtual DeviceType type() const noexcept = 0;
  // The current device of the calling thread.
  virtual Device current_device() const = 0;
  // Makes d the current device of the calling thread and returns the previous one.
  virtual Device exchange_device(Device d) = 0;
  // The current stream of device d on the calling thread.
  virtual Stream current_stream(Device d) const = 0;
  // Makes s the current stream of its device on the calling thread and returns the previous one.
  virtual Stream exchange_stream(Stream s) = 0;
  // How many devices of this type there are.
  virtual int device_count() const noexcept = 0;

 protected:
  constexpr DeviceGuardImpl() = default;
  ~DeviceGuardImpl() = default;  // implementations live as long as the process
};

// Registers `impl` for its device type (a backend does this once at load time); nullptr
// unregisters. The CPU's is registered from the start.
void register_device_guard_impl(DeviceType type, DeviceGuardImpl* impl);
// The implementation of a device type, or nullptr.
DeviceGuardImpl* get_device_guard_impl(DeviceType type);
// The implementation of device's type; a RuntimeError naming `op` when none is registered.
DeviceGuardImpl& device_guard_impl_for(const char* op, Device device);

// The current stream of `device` on this thread (the CPU: its default stream).
Stream current_stream(Device device);

// Makes `device` current for the scope; restores the previous device of its type at the end.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  Device original_device() const { return original_; }
  Device current_device() const { return current_; }

 private:
  DeviceGuardImpl* impl_;
  Device original_;
  Device current_;
};

// Makes `stream` current on its device, and its device current, for the scope; restores both at
// the end.
class StreamGuard {
 public:
  explicit StreamGuard(Stream stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

  Stream original_stream() const { return original_stream_; }
  Stream current_stream() const { return current_; }

 private:
  DeviceGuard device_;
  DeviceGuardImpl* impl_;
  Stream original_stream_;
  Stream current_;
};

}  // namespace kael
