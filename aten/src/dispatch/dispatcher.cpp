#include "kael/dispatch/dispatcher.h"

#include <mutex>

#include "kael/core/device.h"
#include "kael/core/error.h"
#include "kael/dispatch/keys.h"

namespace kael::dispatch {

namespace {
std::atomic<BoxedKernel> g_fallbacks[kNumDispatchKeys];
std::mutex g_registration_mutex;  // serialises writers; readers load the slots atomically

// The boxed kernels of set_boxed_kernel, per key: an append-only table of (op, kernel) read
// without a lock (a slot's op is written once, before the count that publishes it).
constexpr int kMaxBoxedKernels = 512;
struct BoxedSlot {
  std::atomic<const OpEntry*> op{nullptr};
  std::atomic<BoxedKernel> fn{nullptr};
};
BoxedSlot g_boxed[kNumDispatchKeys][kMaxBoxedKernels];
std::atomic<int> g_boxed_count[kNumDispatchKeys];

BoxedKernel boxed_kernel(const OpEntry& op, DispatchKey key) {
  const int k = static_cast<int>(key);
  const int n = g_boxed_count[k].load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (g_boxed[k][i].op.load(std::memory_order_relaxed) == &op) return g_boxed[k][i].fn.load(std::memory_order_acquire);
  return nullptr;
}
}  // namespace

const char* IValue::tag_name(Tag t) {
  switch (t) {
    case Tag::None:
      return "None";
    case Tag::Tensor:
      return "Tensor";
    case Tag::Scalar:
      return "Scalar";
    case Tag::Int:
      return "int";
    case Tag::Double:
      return "float";
    case Tag::Bool:
      return "bool";
    case Tag::IntList:
      return "int[]";
    case Tag::ScalarType:
      return "ScalarType";
    case Tag::Device:
      return "Device";
    case Tag::TensorList:
      return "Tensor[]";
    case Tag::String:
      return "str";
    case Tag::Generator:
      return "Generator";
  }
  return "?";
}

const OpEntry* find_op(std::string_view name) {
  for (const OpEntry* op : all_ops())
    if (name == op->name) return op;
  return nullptr;
}

const char* key_name(DispatchKey k) { return kael::detail::kDispatchKeyNames[static_cast<int>(k)]; }

void not_implemented(const char* op, DispatchKey key) {
  std::string name(op);
  if (auto dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  KAEL_CHECK_IMPLEMENTED(key != DispatchKey::CUDA || cuda_backend_built(),
                         name << " is not implemented for CUDA: this build of kael has no CUDA backend");
  KAEL_CHECK_IMPLEMENTED(false, name << " is not implemented for " << key_name(key));
  __builtin_unreachable();
}

DispatchKeySet key_set_of_stack(const OpEntry& op, const Stack& stack) {
  KAEL_CHECK_VALUE(static_cast<int>(stack.size()) >= op.num_args,
                   op.name << ": boxed call needs " << op.num_args << " arguments, the stack holds " << stack.size());
  DispatchKeySet keys;
  bool device = false;
  for (std::size_t i = stack.size() - op.num_args; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    if (v.is_tensor()) {
      keys = keys | v.to_tensor().key_set();
    } else if (v.tag() == IValue::Tag::TensorList) {
      keys = keys | key_set_of(v.to_tensor_list());
    } else if (v.tag() == IValue::Tag::Device && !device) {
      keys = keys | DispatchKeySet(v.to_device().backend_key());
      device = true;
    }
  }
  if (keys.empty()) keys = DispatchKeySet(DispatchKey::CPU);
  return keys;
}

void redispatch_boxed(const OpEntry& op, DispatchKeySet keys, Stack& stack) {
  KAEL_CHECK_VALUE(static_cast<int>(stack.size()) >= op.num_args,
                   op.name << ": boxed call needs " << op.num_args << " arguments, the stack holds " << stack.size());
  op.boxed(op, keys, stack);
}

void call_boxed(const OpEntry& op, Stack& stack) { redispatch_boxed(op, key_set_of_stack(op, stack), stack); }

BoxedKernel fallback(DispatchKey key) { return g_fallbacks[static_cast<int>(key)].load(std::memory_order_acquire); }

BoxedKernel set_fallback(DispatchKey key, BoxedKernel fn) {
  KAEL_CHECK_VALUE(key == DispatchKey::Python || key == DispatchKey::Autograd,
                   "set_fallback: only the Python and Autograd keys take a boxed fallback, not " << key_name(key));
  std::lock_guard<std::mutex> lock(g_registration_mutex);
  BoxedKernel old = g_fallbacks[static_cast<int>(key)].exchange(fn, std::memory_order_acq_rel);
  const std::uint32_t bit = 1u << static_cast<unsigned>(key);
  if (fn) {
    detail::fallthrough_bits.fetch_and(~bit, std::memory_order_acq_rel);
  } else {
    detail::fallthrough_bits.fetch_or(bit, std::memory_order_acq_rel);
  }
  return old;
}

void call_fallback(const OpEntry& op, DispatchKeySet ks, Stack& stack) {
  const DispatchKey key = ks.highest();
  BoxedKernel fn = boxed_kernel(op, key);
  if (fn == nullptr) fn = fallback(key);
  KAEL_CHECK(fn != nullptr, op.name << ": no kernel and no fallback for " << key_name(key));
  fn(op, ks, stack);
}

BoxedKernel set_boxed_kernel(const OpEntry& op, DispatchKey key, BoxedKernel fn) {
  KAEL_CHECK_VALUE(!kBackendKeys.has(key),
                   "set_boxed_kernel: " << op.name << ": a backend key takes unboxed kernels, not " << key_name(key));
  std::lock_guard<std::mutex> lock(g_registration_mutex);
  const int k = static_cast<int>(key);
  OpEntry& entry = const_cast<OpEntry&>(op);  // the entries are the generated (mutable) globals
  const int n = g_boxed_count[k].load(std::memory_order_relaxed);
  int slot = n;
  for (int i = 0; i < n; ++i)
    if (g_boxed[k][i].op.load(std::memory_order_relaxed) == &op) slot = i;
  BoxedKernel old = nullptr;
  if (slot == n) {
    if (fn == nullptr) return nullptr;
    KAEL_CHECK(n < kMaxBoxedKernels, "set_boxed_kernel: more than " << kMaxBoxedKernels << " boxed kernels for "
                                                                    << key_name(key));
    g_boxed[k][n].op.store(&op, std::memory_order_relaxed);
    g_boxed[k][n].fn.store(fn, std::memory_order_release);
    g_boxed_count[k].store(n + 1, std::memory_order_release);
  } else {
    old = g_boxed[k][slot].fn.exchange(fn, std::memory_order_acq_rel);
  }
  // The slot calls the generated boxing adapter, which finds fn through call_fallback.
  entry.kernels[k] = entry.defaults[k];
  entry.missing = fn ? entry.missing.remove(key) : entry.missing.add(key);
  return old;
}

KernelFn set_kernel(const char* name, DispatchKey key, KernelFn fn) {
  std::lock_guard<std::mutex> lock(g_registration_mutex);
  for (OpEntry* op : all_ops()) {
    if (std::string_view(name) != op->name) continue;
    const int k = static_cast<int>(key);
    KernelFn old = op->missing.has(key) ? nullptr : op->kernels[k];
    op->kernels[k] = fn ? fn : op->defaults[k];
    op->missing = fn ? op->missing.remove(key) : op->missing.add(key);
    return old;
  }
  KAEL_CHECK_VALUE(false, "set_kernel: no op named '" << name << "'");
  __builtin_unreachable();
}

}  // namespace kael::dispatch
