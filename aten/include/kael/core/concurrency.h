#pragma once
// Loops that run without the caller's lock, on state of their own.
//
// Note [Concurrency]
// A caller may hold a lock around every call into kael (the Python extension holds the GIL)
// and allow a call to drop it while its loops run (the extension does so when an operand is
// large). The rule that makes this safe:
//   - Set-up runs with the caller's lock held: reading a tensor's geometry and storage,
//     checks, promotion, allocation, resizing an out= argument (the only code that changes a
//     TensorImpl's sizes, strides or storage from an op) all happen under it. A resize through
//     out= in another thread is therefore never seen half done.
//   - Before dropping the lock, a kernel makes every tensor its loop reads or writes the call's
//     own (UnlockedSection::own): a private TensorImpl with a copy of the sizes, strides and
//     offset, over a private view of the storage's current memory. The storage itself is held
//     (a reference) and pinned: a resize that grows a pinned storage in place retires the old
//     memory instead of freeing it, until the last pin goes (Storage::grow). So a concurrent
//     resize, `empty_cache()` or the death of every other reference can neither free memory a
//     running loop uses nor change the geometry it walks.
//   - Pins and retired memory are only touched with the caller's lock held: sections pin before
//     they drop it and unpin after they take it back.
// Values written concurrently into the same elements are the user's race, as in PyTorch; the
// process never reads freed memory or walks out of bounds because of it. C++ callers without
// such a lock (no CallerLock installed) never drop anything; they synchronise their own threads.

#include <array>

#include "kael/core/intrusive_ptr.h"
#include "kael/core/tensor.h"

namespace kael {

// The caller's lock: `release` drops it and returns a non-null token for `reacquire`.
struct CallerLock {
  void* (*release)() = nullptr;
  void (*reacquire)(void* token) = nullptr;
};
// Installs the caller's lock (once, before any call that allows unlocking).
void set_caller_lock(CallerLock lock);

namespace detail {
// Whether the current call allows its loops to drop the caller's lock.
inline thread_local bool tls_may_unlock KAEL_FAST_TLS = false;
}  // namespace detail

// Set by the caller around one call (with its lock held): the call's loops may drop the lock.
class AllowUnlock {
 public:
  explicit AllowUnlock(bool allow) : previous_(detail::tls_may_unlock) { detail::tls_may_unlock = allow; }
  ~AllowUnlock() { detail::tls_may_unlock = previous_; }
  AllowUnlock(const AllowUnlock&) = delete;
  AllowUnlock& operator=(const AllowUnlock&) = delete;

 private:
  bool previous_;
};

// A kernel's loop that may run without the caller's lock. Inactive (and free: one thread-local
// load) unless the call allows unlocking; inside an unlocked section, nested ones are inactive.
//
//   UnlockedSection section;
//   const Tensor& out = section.own(out_);   // with the lock held
//   const Tensor& in = section.own(input);
//   section.unlock();
//   ... loop over out and in only ...
//
// The lock is taken back when the section ends (also when the loop throws).
class UnlockedSection {
 public:
  UnlockedSection() : active_(detail::tls_may_unlock) {}
  ~UnlockedSection() {
    if (active_) end();
  }
  UnlockedSection(const UnlockedSection&) = delete;
  UnlockedSection& operator=(const UnlockedSection&) = delete;

  bool active() const { return active_; }
  // t itself when inactive; otherwise the call's own tensor over t's current memory, valid
  // until the section ends (see the Note); any number per section (a fused optimizer step owns
  // every parameter and state tensor), each before unlock().
  const Tensor& own(const Tensor& t) { return active_ ? own_slow(t) : t; }
  void unlock() {
    if (active_) unlock_slow();
  }

 private:
  struct State;
  const Tensor& own_slow(const Tensor& t);
  void unlock_slow();
  void end() noexcept;

  bool active_;
  State* state_ = nullptr;
};

}  // namespace kael
