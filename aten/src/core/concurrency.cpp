// Loops without the caller's lock; see Note [Concurrency] in kael/core/concurrency.h.
#include "kael/core/concurrency.h"

#include <deque>
#include <vector>

#include "kael/core/error.h"

namespace kael {

namespace {
CallerLock caller_lock;
}  // namespace

void set_caller_lock(CallerLock lock) { caller_lock = lock; }

struct UnlockedSection::State {
  void* token = nullptr;  // set while the caller's lock is dropped
  std::deque<Tensor> owned;  // a deque: own() hands out references that stay valid as it grows
  std::vector<IntrusivePtr<Storage>> pinned;
};

const Tensor& UnlockedSection::own_slow(const Tensor& t) {
  if (state_ == nullptr) state_ = new State();
  State& s = *state_;
  KAEL_INTERNAL_ASSERT(s.token == nullptr);
  const IntrusivePtr<Storage>& storage = t.impl()->storage_ptr();
  // The private storage borrows the current memory; the pin keeps that memory alive even if a
  // resize grows the storage in place meanwhile, and the reference keeps the storage.
  storage->pin();
  s.pinned.push_back(storage);
  auto view = Storage::external(storage->data(), storage->nbytes(), storage->device(), nullptr, nullptr);
  return s.owned.emplace_back(TensorImpl::make(std::move(view), t.dtype(), DimVector(t.sizes()),
                                               DimVector(t.strides()), t.impl()->offset()));
}

void UnlockedSection::unlock_slow() {
  if (caller_lock.release == nullptr) return;  // nothing to drop
  if (state_ == nullptr) state_ = new State();
  KAEL_INTERNAL_ASSERT(state_->token == nullptr);
  detail::tls_may_unlock = false;  // nested sections stay inactive
  state_->token = caller_lock.release();
}

void UnlockedSection::end() noexcept {
  if (state_ == nullptr) return;
  State& s = *state_;
  if (s.token != nullptr) {
    caller_lock.reacquire(s.token);
    detail::tls_may_unlock = true;
  }
  // With the lock held again: the private tensors go, then the pins.
  s.owned.clear();
  for (const IntrusivePtr<Storage>& storage : s.pinned) storage->unpin();
  delete state_;
  state_ = nullptr;
}

}  // namespace kael
