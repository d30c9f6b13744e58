#pragma once
// Storage: a reference-counted buffer shared by a tensor and all its views.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kael/core/device.h"
#include "kael/core/intrusive_ptr.h"

namespace kael {

class Storage : public RefCounted, public FreeListAllocated<Storage> {
 public:
  using ExternalDeleter = void (*)(void* context);

  // A new buffer of `nbytes` from the device's caching allocator.
  static IntrusivePtr<Storage> allocate(std::size_t nbytes, Device device);
  // Memory kael did not allocate: `deleter(context)` runs when the last view dies.
  static IntrusivePtr<Storage> external(void* data, std::size_t nbytes, Device device,
                                        ExternalDeleter deleter, void* context);
  static void release(Storage* s) noexcept;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Note [Version counter]
  // Every in-place write bumps the version of the storage it writes; views share the
  // storage and so share the counter. Autograd compares versions of saved tensors.
  std::uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage() = default;
  ~Storage();

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_{};
  ExternalDeleter external_deleter_ = nullptr;
  void* external_context_ = nullptr;
  std::atomic<std::uint32_t> version_{0};
};

}  // namespace kael
