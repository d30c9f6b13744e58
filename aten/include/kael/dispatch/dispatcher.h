#pragma once
// The dispatcher: a flat table of kernels per operator and dispatch key.
//
// Note [Dispatch]
// Each op has one OpEntry with a function pointer per DispatchKey, constant-initialised by
// generated code (no registration at start-up, no strings or maps on the hot path). A call
// takes the union of its tensor arguments' key sets, removes the thread's excluded keys
// and calls the kernel of the highest remaining key. Keys without a kernel hold a generated
// stub that raises "<op> is not implemented for <key>". Composite (device-agnostic) kernels
// are registered under every backend key.

#include <span>
#include <string_view>

#include "kael/core/dispatch_key_set.h"
#include "kael/core/intrusive_ptr.h"

namespace kael::dispatch {

using KernelFn = void (*)();

struct OpEntry {
  const char* name;  // schema name with overload, e.g. "add.Tensor"
  KernelFn kernels[kNumDispatchKeys];

  template <typename Fn>
  Fn kernel(DispatchKey k) const {
    return reinterpret_cast<Fn>(kernels[static_cast<int>(k)]);
  }
};

// Keys removed from every call on this thread (e.g. Autograd below the autograd layer).
inline thread_local DispatchKeySet tls_excluded KAEL_FAST_TLS;

// The key whose kernel runs for a call whose tensors carry `keys`.
inline DispatchKey select_key(DispatchKeySet keys) { return (keys - tls_excluded).highest(); }

// RAII guard excluding keys on this thread.
class ExcludeGuard {
 public:
  explicit ExcludeGuard(DispatchKeySet keys) : saved_(tls_excluded) { tls_excluded = tls_excluded | keys; }
  ~ExcludeGuard() { tls_excluded = saved_; }
  ExcludeGuard(const ExcludeGuard&) = delete;
  ExcludeGuard& operator=(const ExcludeGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

// Every op of the registry (generated), and lookup by schema name.
std::span<const OpEntry* const> all_ops();
const OpEntry* find_op(std::string_view name);

const char* key_name(DispatchKey k);

// Raised by the generated stubs of keys without a kernel.
[[noreturn]] void not_implemented(const char* op, DispatchKey key);

}  // namespace kael::dispatch
