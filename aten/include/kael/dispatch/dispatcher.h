#pragma once
// The dispatcher: a flat table of kernels per operator and dispatch key.
//
// Note [Dispatch]
// Each op has one OpEntry with an unboxed kernel per DispatchKey, constant-initialised by
// generated code (no registration at start-up, no strings or maps on the hot path). Every
// kernel takes the call's DispatchKeySet as its first argument, then the op's arguments:
//
//     Tensor kernel(DispatchKeySet ks, const Operand& self, const Operand& other, const Scalar& alpha)
//
// A call takes the union of its tensor arguments' key sets, removes the thread's excluded
// keys and the keys that fall through for this op, and calls the kernel of the highest
// remaining key with that set. Keys, lowest priority first: CPU, CUDA (backends) < Python
// (sees every op below autograd) < Autograd < Autocast (on the thread's included keys while
// autocast is enabled; only the ops of its table have kernels there).
//
// - Redispatch: a kernel at key K calls the op again for the keys below its own through
//   `kael::redispatch::<op>(ks.below(K), ...)` (generated next to `kael::<op>`).
// - Fallthrough: a key for which an op has no kernel and whose fallback is "fall through"
//   (Python and Autograd until something registers a fallback for them) is skipped, at the
//   cost of one mask per call. A backend key without a kernel never falls through: its slot
//   holds a generated stub raising "<op> is not implemented for <key>".
// - Boxed calls (Note [Boxed calls]): every op also has a boxed entry, `boxed(op, ks, stack)`,
//   that takes its arguments from a Stack of IValues and leaves its result there. A boxed
//   fallback registered for a key (set_fallback) then serves every op without a kernel at
//   that key: the key's slot holds a generated adapter that boxes the arguments, calls the
//   fallback, and unboxes the result. The Python key works this way.
//
// Composite kernels: `CompositeExplicit` registers one kernel for every backend key (autograd
// needs a derivative for it); `CompositeImplicit` registers it for every key, Autograd and
// Python included, so the op runs above autograd and autograd records the ops it calls.

#include <atomic>
#include <span>
#include <string_view>

#include "kael/core/dispatch_key_set.h"
#include "kael/core/intrusive_ptr.h"
#include "kael/dispatch/ivalue.h"

namespace kael::dispatch {

using KernelFn = void (*)();
struct OpEntry;
// A boxed kernel: arguments on `stack` in schema order, replaced by the result.
using BoxedKernel = void (*)(const OpEntry& op, DispatchKeySet ks, Stack& stack);

struct OpEntry {
  const char* name;                    // schema name with overload, e.g. "add.Tensor"
  KernelFn kernels[kNumDispatchKeys];  // unboxed: Ret (*)(DispatchKeySet, Args...)
  DispatchKeySet missing;              // keys without an op-specific kernel
  KernelFn defaults[kNumDispatchKeys]; // what a slot holds without a kernel: stub or boxing adapter
  BoxedKernel boxed;                   // calls the op from a stack at the given keys
  int num_args;                        // arguments a boxed call takes from the stack

  template <typename Fn>
  Fn kernel(DispatchKey k) const {
    return reinterpret_cast<Fn>(kernels[static_cast<int>(k)]);
  }
  bool has_kernel(DispatchKey k) const { return !missing.has(k); }
};

// Keys removed from every call on this thread (e.g. Autograd below the autograd layer).
inline thread_local DispatchKeySet tls_excluded KAEL_FAST_TLS;
// Keys added to every call on this thread (e.g. Python while a dispatch mode is active).
inline thread_local DispatchKeySet tls_included KAEL_FAST_TLS;

namespace detail {
// Keys that fall through for ops without a kernel at them (no boxed fallback registered).
inline std::atomic<std::uint32_t> fallthrough_bits{(1u << static_cast<unsigned>(DispatchKey::Python)) |
                                                    (1u << static_cast<unsigned>(DispatchKey::Autograd)) |
                                                    (1u << static_cast<unsigned>(DispatchKey::Autocast))};
}  // namespace detail

inline DispatchKeySet fallthrough_keys() {
  return DispatchKeySet::from_bits(detail::fallthrough_bits.load(std::memory_order_relaxed));
}

// The keys a call of `op` over arguments carrying `keys` runs with; its kernel is the highest.
inline DispatchKeySet effective_keys(const OpEntry& op, DispatchKeySet keys) {
  return (keys | tls_included) - tls_excluded - (fallthrough_keys() & op.missing);
}

// The key whose kernel runs for a call whose tensors carry `keys` (ignoring fallthrough).
inline DispatchKey select_key(DispatchKeySet keys) { return ((keys | tls_included) - tls_excluded).highest(); }

// Calls op's kernel for the highest effective key. Fn is Ret (*)(DispatchKeySet, Args...).
template <typename Fn, typename... Args>
decltype(auto) call(const OpEntry& op, DispatchKeySet keys, Args&&... args) {
  const DispatchKeySet ks = effective_keys(op, keys);
  return op.kernel<Fn>(ks.highest())(ks, std::forward<Args>(args)...);
}

// Boxed call of `op` over its arguments on `stack` (the key set comes from their tensors,
// or from `keys` when given); leaves the result on the stack.
void call_boxed(const OpEntry& op, Stack& stack);
void redispatch_boxed(const OpEntry& op, DispatchKeySet keys, Stack& stack);
// The key set of a boxed call's arguments: the union of their tensors' (and devices') keys.
DispatchKeySet key_set_of_stack(const OpEntry& op, const Stack& stack);

// The boxed fallback of a key (null when the key falls through or raises).
BoxedKernel fallback(DispatchKey key);
// Registers (or, with null, removes) the boxed fallback of the Python or Autograd key; returns
// the previous one. Ops without a kernel at that key then call it instead of falling through.
BoxedKernel set_fallback(DispatchKey key, BoxedKernel fn);
// Called by the generated adapters in a key's slot: runs the op's boxed kernel at the key
// (set_boxed_kernel), else the key's fallback (there must be one).
void call_fallback(const OpEntry& op, DispatchKeySet ks, Stack& stack);

// Installs `fn` as the kernel of `op` at the non-backend key `key`, in boxed form: the slot gets
// the op's generated boxing adapter, which calls fn. One function so serves a table of ops
// (the autocast kernels, aten/src/autocast/autocast.cpp) while every other op keeps falling
// through the key. A null fn removes it. Returns the previous boxed kernel (or null).
BoxedKernel set_boxed_kernel(const OpEntry& op, DispatchKey key, BoxedKernel fn);

// Replaces the kernel of `op` at `key` (tests and extensions); returns the previous one. A
// null kernel removes it (the slot then falls through or raises as described above).
KernelFn set_kernel(const char* op, DispatchKey key, KernelFn fn);

// Every op of the registry (generated), and lookup by schema name.
std::span<OpEntry* const> all_ops();
const OpEntry* find_op(std::string_view name);

const char* key_name(DispatchKey k);

// RAII guards adding keys to this thread's excluded or included set, restoring it on exit. They
// name the thread_local directly instead of holding a reference to it (UBSan reported a
// reference bound to the initial-exec thread_local as null).
class ExcludeGuard {
 public:
  explicit ExcludeGuard(DispatchKeySet keys) : saved_(tls_excluded) { tls_excluded = tls_excluded | keys; }
  ~ExcludeGuard() { tls_excluded = saved_; }
  ExcludeGuard(const ExcludeGuard&) = delete;
  ExcludeGuard& operator=(const ExcludeGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

class IncludeGuard {
 public:
  explicit IncludeGuard(DispatchKeySet keys) : saved_(tls_included) { tls_included = tls_included | keys; }
  ~IncludeGuard() { tls_included = saved_; }
  IncludeGuard(const IncludeGuard&) = delete;
  IncludeGuard& operator=(const IncludeGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

// Raised by the generated stubs of keys without a kernel.
[[noreturn]] void not_implemented(const char* op, DispatchKey key);

}  // namespace kael::dispatch
