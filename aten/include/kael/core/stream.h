#pragma once
// kael::Stream: a queue of work on one device (PyTorch's c10::Stream).
//
// Note [Streams]
// A backend with asynchronous kernels (CUDA) runs each op on a stream of its device: work on
// one stream runs in order, work on two streams may overlap. A Stream is a value: the device
// and an id, id 0 being the device's default stream. The CPU has only its default stream:
// its kernels run on the calling thread, in call order, so everything kael does on the CPU is
// on Stream(kCPU, 0). Which stream is current on a device is the business of the device's
// DeviceGuardImpl (kael/core/device_guard.h); memory that a stream other than the one that
// allocated it uses is told to the allocator (Allocator::record_stream).

#include <cstdint>
#include <ostream>
#include <string>

#include "kael/core/device.h"

namespace kael {

class Stream {
 public:
  using Id = std::int64_t;
  static constexpr Id kDefaultId = 0;

  // The CPU's stream.
  constexpr Stream() = default;
  constexpr Stream(Device device, Id id) : device_(device), id_(id) {}
  // The default stream of a device.
  static constexpr Stream default_stream(Device device) { return Stream(device, kDefaultId); }

  constexpr Device device() const { return device_; }
  constexpr Id id() const { return id_; }
  constexpr bool is_default() const { return id_ == kDefaultId; }
  constexpr bool operator==(const Stream&) const = default;
  // "Stream(device=cpu, id=0)".
  std::string str() const { return "Stream(device=" + device_.str() + ", id=" + std::to_string(id_) + ")"; }

 private:
  Device device_ = kCPU;
  Id id_ = kDefaultId;
};

inline std::ostream& operator<<(std::ostream& os, const Stream& s) { return os << s.str(); }

}  // namespace kael
