#include "kael/core/storage.h"

#include <cstring>
#include <utility>
#include <vector>

#include "kael/core/allocator.h"
#include "kael/core/error.h"

namespace kael {

IntrusivePtr<Storage> Storage::allocate(std::size_t nbytes, Device device, const char* op) {
  // The CPU allocator is final: calls through it are direct (no registry lookup, no virtual call).
  Allocator& a = device.is_cpu() ? cpu_allocator::instance : allocator_for(op, device);
  auto s = IntrusivePtr<Storage>::adopt(new Storage());
  s->data_ = device.is_cpu() ? cpu_allocator::instance.allocate(nbytes) : a.allocate(nbytes);
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->allocator_ = &a;  // set last: a failed allocate leaves nothing to free
  return s;
}

IntrusivePtr<Storage> Storage::external(void* data, std::size_t nbytes, Device device, ExternalDeleter deleter,
                                        void* context) {
  auto s = IntrusivePtr<Storage>::adopt(new Storage());
  s->data_ = data;
  s->nbytes_ = nbytes;
  s->device_ = device;
  s->external_deleter_ = deleter;
  s->external_context_ = context;
  return s;
}

void Storage::check_inference_write() const {
  KAEL_CHECK(detail::tls_inference_mode,
             "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to get a "
             "normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for more details.");
}

struct Storage::Retired {
  std::vector<std::pair<void*, std::size_t>> blocks;
};

Storage::~Storage() {
  if (retired_ != nullptr) [[unlikely]] free_retired();
  if (allocator_ == &cpu_allocator::instance) {
    cpu_allocator::instance.free(data_, nbytes_);
  } else if (allocator_ != nullptr) {
    allocator_->free(data_, nbytes_);
  } else if (external_deleter_ != nullptr) {
    external_deleter_(external_context_);
  }
}

void Storage::release(Storage* s) noexcept { delete s; }

void Storage::grow(std::size_t nbytes, const char* op) {
  if (nbytes <= nbytes_) return;
  KAEL_CHECK(allocator_ != nullptr, op << ": Trying to resize storage that is not resizable");
  KAEL_CHECK(device_.is_cpu(), op << ": growing a storage in place is not supported on " << device_);
  void* fresh = cpu_allocator::instance.allocate(nbytes);
  if (nbytes_ > 0) std::memcpy(fresh, data_, nbytes_);
  void* old = std::exchange(data_, fresh);
  const std::size_t old_nbytes = std::exchange(nbytes_, nbytes);
  if (pins_ == 0) {
    cpu_allocator::instance.free(old, old_nbytes);
    return;
  }
  if (retired_ == nullptr) retired_ = new Retired();
  retired_->blocks.emplace_back(old, old_nbytes);
}

void Storage::unpin() {
  if (--pins_ == 0) free_retired();
}

void Storage::free_retired() noexcept {
  if (retired_ == nullptr) return;
  for (auto [p, n] : retired_->blocks) cpu_allocator::instance.free(p, n);
  delete retired_;
  retired_ = nullptr;
}

}  // namespace kael
