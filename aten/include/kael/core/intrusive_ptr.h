#pragma once
// Intrusive reference counting for TensorImpl and Storage.
//
// Note [Intrusive refcounts]
// The count lives in the object, so a Tensor handle is one pointer, copying it is one
// atomic increment, and a raw pointer (from Python, or from a kernel) can be turned back
// into an owning handle without a control block. Increments are relaxed; the decrement
// that reaches zero synchronises with acq_rel so the deleting thread sees all writes.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
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
  // Whether the caller holds the only reference, with the writes of the owners that let go (on
  // other threads) visible, as the last decref's acquire would make them: the caller may then
  // destroy the object without a decrement. (An acquire load, not a fence after a relaxed one:
  // the same code on x86, and ThreadSanitizer models it.)
  bool unique_for_destruction() const noexcept { return refcount_.load(std::memory_order_acquire) == 1; }

 protected:
  ~RefCounted() = default;

 private:
  mutable std::atomic<std::int64_t> refcount_{1};
};

// T must derive from RefCounted and provide a static `release(T*)` that destroys it
// (so types may return objects to a free list instead of deleting them).
// Thread-local state reached without __tls_get_addr: the initial-exec model reads it at a
// fixed offset from the thread pointer. Keep such variables few and small (a module loaded
// with dlopen gets them from glibc's small static-TLS reserve).
#ifdef __CUDACC__
// nvcc's front end ignores the attribute (with a warning); CUDA sources reach these variables
// through the general model: the same variables, only slower access code.
#define KAEL_FAST_TLS
#else
#define KAEL_FAST_TLS __attribute__((tls_model("initial-exec")))
#endif

// A per-thread free list of fixed-size blocks for small, frequently made objects
// (TensorImpl, Storage): a hit is a pointer pop instead of a malloc. Blocks freed on another
// thread go to that thread's list; each list keeps at most kMax blocks.
template <std::size_t Size>
class FreeList {
 public:
  static void* allocate() {
    State* s = state();
    if (s != nullptr && s->count > 0) return s->blocks[--s->count];
    return ::operator new(Size);
  }
  static void deallocate(void* p) noexcept {
    State* s = state();
    if (s != nullptr && s->count < kMax) {
      s->blocks[s->count++] = p;
      return;
    }
    ::operator delete(p);
  }

 private:
  static constexpr int kMax = 64;
  struct State {
    void* blocks[kMax];
    int count = 0;
  };
  // Frees the thread's blocks when it exits; afterwards the list is bypassed.
  struct Owner {
    State* state = nullptr;
    ~Owner() {
      if (state == nullptr) return;
      while (state->count > 0) ::operator delete(state->blocks[--state->count]);
      delete state;
      current() = nullptr;
      finished() = true;
    }
  };
  static State*& current() {
    static thread_local State* s KAEL_FAST_TLS = nullptr;
    return s;
  }
  static bool& finished() {
    static thread_local bool f KAEL_FAST_TLS = false;
    return f;
  }
  static State* state() {
    State* s = current();
    if (s != nullptr || finished()) return s;
    static thread_local Owner owner;
    owner.state = s = new State();
    current() = s;
    return s;
  }
};

// Gives T class-specific operator new/delete served by FreeList<sizeof(T)>.
template <typename T>
struct FreeListAllocated {
  static void* operator new(std::size_t size) {
    return size == sizeof(T) ? FreeList<sizeof(T)>::allocate() : ::operator new(size);
  }
  static void operator delete(void* p, std::size_t size) noexcept {
    if (size == sizeof(T)) {
      FreeList<sizeof(T)>::deallocate(p);
    } else {
      ::operator delete(p);
    }
  }
};

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
