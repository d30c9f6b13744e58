#pragma once
// Storage: a reference-counted buffer shared by a tensor and all its views. It knows its
// device and who frees its bytes: its device's allocator or an external deleter
// (Note [Allocators and storage] in kael/core/allocator.h).

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kael/core/allocator.h"
#include "kael/core/device.h"
#include "kael/core/intrusive_ptr.h"

namespace kael {

namespace detail {
// Whether inference mode is on on this thread (kael.inference_mode; see Note [Inference tensors]).
inline thread_local bool tls_inference_mode KAEL_FAST_TLS = false;
}  // namespace detail

class Storage : public RefCounted, public FreeListAllocated<Storage> {
 public:
  // Called with the context when the last view of external memory dies; may run on any
  // thread, with or without the GIL, and must not throw.
  using ExternalDeleter = void (*)(void* context);

  // A new buffer of `nbytes` from the device's caching allocator; raises a RuntimeError
  // naming `op` when the device has no backend or allocator in this build.
  static IntrusivePtr<Storage> allocate(std::size_t nbytes, Device device, const char* op = "empty");
  // Memory kael did not allocate: `deleter(context)` runs when the last view dies (a null
  // deleter borrows the memory without ever releasing it). Bool data in it must be normalised first
  // (Note [Bool bytes] in kael/core/convert.h).
  static IntrusivePtr<Storage> external(void* data, std::size_t nbytes, Device device,
                                        ExternalDeleter deleter, void* context);
  static void release(Storage* s) noexcept;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // The allocator the bytes came from; nullptr for external memory.
  Allocator* allocator() const { return allocator_; }
  // Work queued on `stream` uses these bytes: their free waits for it (Note [Frees that wait
  // for streams]). Nothing to do for external memory, whose owner decides when it goes.
  void record_stream(Stream stream) const noexcept {
    if (allocator_ != nullptr && data_ != nullptr) allocator_->record_stream(data_, stream);
  }

  // Note [Version counter]
  // Every in-place write bumps the version of the storage it writes; views share the
  // storage and so share the counter. Autograd compares versions of saved tensors.
  std::uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() {
    if (inference_) [[unlikely]] {
      check_inference_write();
      return;
    }
    version_.fetch_add(1, std::memory_order_relaxed);
  }

  // Note [Inference tensors]
  // A storage allocated while inference mode is on holds inference tensors (PyTorch's): its
  // writes bump no version counter, and outside inference mode they raise; views of it record
  // no base; autograd refuses to save it for backward. A view made in inference mode of a
  // normal tensor shares its normal storage and stays a normal tensor, as in PyTorch.
  bool is_inference() const { return inference_; }
  // Before an in-place write: RuntimeError for an inference tensor outside inference mode.
  void check_write() const {
    if (inference_) [[unlikely]] check_inference_write();
  }

  // Note [Growing a storage in place]
  // Makes the storage at least `nbytes` long, keeping its contents (PyTorch's resize_ of a
  // tensor whose storage is too small): every tensor sharing the storage sees the new memory.
  // Memory kael did not allocate cannot grow (RuntimeError naming `op`, PyTorch's message).
  // The old memory is freed at once, or, while a loop running without the caller's lock
  // has the storage pinned, when the last pin goes (Note [Concurrency] in
  // kael/core/concurrency.h). pin/unpin/grow run with the caller's lock held.
  void grow(std::size_t nbytes, const char* op);
  void pin() { ++pins_; }
  void unpin();

 private:
  Storage() = default;
  ~Storage();

  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_{};
  Allocator* allocator_ = nullptr;
  ExternalDeleter external_deleter_ = nullptr;
  void* external_context_ = nullptr;
  std::atomic<std::uint32_t> version_{0};
  std::uint32_t pins_ = 0;
  bool inference_ = detail::tls_inference_mode;
  void check_inference_write() const;
  struct Retired;
  Retired* retired_ = nullptr;  // memory replaced by grow() while pinned
  void free_retired() noexcept;
};

}  // namespace kael
