#pragma once
// Intrusive reference counting for TensorImpl and Storage.
//
// Note [Intrusive refcounts]
// The count lives in the object, so a Tensor handle is one pointer, copying it is one
// atomic increment, and a raw pointer (from Python, or from a kernel) can be turned back
// into an owning handle without a control block. Increments are relaxed; the decrement
// that reaches zero synchronises with acq_rel so the deleting thread sees all writes.

#include <atomic>
#include <cstdint>
#include <utility>

namespace kael {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  void incref() const noexcept { refcount_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference.
  bool decref() const noexcept { return refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  std::int64_t use_count() const noexcept { return refcount_.load(std::memory_order_relaxed); }

 protected:
  ~RefCounted() = default;

 private:
  mutable std::atomic<std::int64_t> refcount_{1};
};

// T must derive from RefCounted and provide a static `release(T*)` that destroys it
// (so types may return objects to a free list instead of deleting them).
template <typename T>
class IntrusivePtr {
 public:
  IntrusivePtr() noexcept = default;
  // Adopts a reference the caller already holds (a fresh object starts at 1).
  static IntrusivePtr adopt(T* p) noexcept {
    IntrusivePtr r;
    r.p_ = p;
    return r;
  }
  // Takes a new reference to an object someone else owns.
  static IntrusivePtr borrow(T* p) noexcept {
    if (p) p->incref();
    return adopt(p);
  }
  IntrusivePtr(const IntrusivePtr& o) noexcept : p_(o.p_) {
    if (p_) p_->incref();
  }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  IntrusivePtr& operator=(const IntrusivePtr& o) noexcept {
    IntrusivePtr(o).swap(*this);
    return *this;
  }
  IntrusivePtr& operator=(IntrusivePtr&& o) noexcept {
    IntrusivePtr(std::move(o)).swap(*this);
    return *this;
  }
  ~IntrusivePtr() { reset(); }

  void reset() noexcept {
    if (p_ && p_->decref()) T::release(p_);
    p_ = nullptr;
  }
  // Gives up ownership without decrementing.
  T* detach() noexcept { return std::exchange(p_, nullptr); }
  void swap(IntrusivePtr& o) noexcept { std::swap(p_, o.p_); }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  bool operator==(const IntrusivePtr& o) const noexcept { return p_ == o.p_; }

 private:
  T* p_ = nullptr;
};

}  // namespace kael
