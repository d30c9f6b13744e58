#pragma once
// The dispatch key set an argument contributes to a call (see Note [Dispatch]).

#include <optional>

#include "kael/core/error.h"
#include "kael/core/tensor.h"

namespace kael::dispatch {

inline DispatchKeySet key_set_of(const Tensor& t) { return t.key_set(); }
inline DispatchKeySet key_set_of(const Operand& o) {
  return o.is_tensor() ? o.tensor().key_set() : DispatchKeySet();
}
inline DispatchKeySet key_set_of(const std::optional<Tensor>& t) {
  return t ? t->key_set() : DispatchKeySet();
}
inline DispatchKeySet key_set_of(TensorList ts) {
  DispatchKeySet keys;
  for (const Tensor& t : ts) keys = keys | t.key_set();
  return keys;
}
// The key set of a call whose tensors all come from lists: CPU when every list is empty.
inline DispatchKeySet or_cpu(DispatchKeySet keys) { return keys.empty() ? DispatchKeySet(DispatchKey::CPU) : keys; }
inline DispatchKeySet key_set_of(Device d) { return DispatchKeySet(d.backend_key()); }
inline DispatchKeySet key_set_of(const std::optional<Device>& d) { return key_set_of(d.value_or(kCPU)); }

// A call with tensors and a device argument runs the kernel of the argument's device (the
// kernel of the target device handles copies from other devices); the tensors' other keys
// stay. Without a device argument the tensors decide.
inline constexpr DispatchKeySet kBackendKeys = DispatchKeySet(DispatchKey::CPU) | DispatchKeySet(DispatchKey::CUDA);
inline DispatchKeySet on_device(DispatchKeySet keys, Device d) { return (keys - kBackendKeys) | key_set_of(d); }
inline DispatchKeySet on_device(DispatchKeySet keys, const std::optional<Device>& d) {
  return d ? on_device(keys, *d) : keys;
}

// Pointwise ops take numbers for tensors, but not only numbers.
inline void check_has_tensor(const char* op, DispatchKeySet keys) {
  KAEL_CHECK_TYPE(!keys.empty(), op << ": expected at least one tensor argument, got only numbers");
}

}  // namespace kael::dispatch
