#include "kael/core/storage.h"

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

Storage::~Storage() {
  if (allocator_ == &cpu_allocator::instance) {
    cpu_allocator::instance.free(data_, nbytes_);
  } else if (allocator_ != nullptr) {
    allocator_->free(data_, nbytes_);
  } else if (external_deleter_ != nullptr) {
    external_deleter_(external_context_);
  }
}

void Storage::release(Storage* s) noexcept { delete s; }

}  // namespace kael
