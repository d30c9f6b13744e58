#include "kael/dispatch/dispatcher.h"

#include "kael/core/device.h"
#include "kael/core/error.h"

namespace kael::dispatch {

const OpEntry* find_op(std::string_view name) {
  for (const OpEntry* op : all_ops())
    if (name == op->name) return op;
  return nullptr;
}

const char* key_name(DispatchKey k) { return kael::detail::kDispatchKeyNames[static_cast<int>(k)]; }

void not_implemented(const char* op, DispatchKey key) {
  std::string name(op);
  if (auto dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  KAEL_CHECK(key != DispatchKey::CUDA || cuda_backend_built(),
             name << " is not implemented for CUDA: this build of kael has no CUDA backend");
  KAEL_CHECK(false, name << " is not implemented for " << key_name(key));
  __builtin_unreachable();
}

}  // namespace kael::dispatch
