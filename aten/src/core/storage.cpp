#include "kael/core/storage.h"

#include "kael/core/allocator.h"
#include "kael/core/error.h"

namespace kael {

IntrusivePtr<Storage> Storage::allocate(std::size_t nbytes, Device device) {
  check_device_available("empty", device);
  auto s = IntrusivePtr<Storage>::adopt(new Storage());
  s->data_ = cpu_allocator::allocate(nbytes);
  s->nbytes_ = nbytes;
  s->device_ = device;
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
  if (external_deleter_ != nullptr) {
    external_deleter_(external_context_);
  } else {
    cpu_allocator::deallocate(data_, nbytes_);
  }
}

void Storage::release(Storage* s) noexcept { delete s; }

}  // namespace kael
