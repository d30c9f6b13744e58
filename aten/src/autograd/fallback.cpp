// The Autograd key's boxed fallback: what an op without a derivative formula does under autograd
// (the generated Autograd kernels of the ops with formulas are in the generated
// autograd/functions_*.cpp).
#include <string>
#include <string_view>

#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/dispatch/dispatcher.h"
#include "fallback.h"

namespace kael::autograd {

// ------------------------------------------------------------------ ops without a formula

namespace {
// Ops that are not differentiable by design: their results never require grad.
bool non_differentiable(std::string_view op) {
  return op == "detach" || op == "view.dtype" || op == "bernoulli.p" || op == "_unique2" || op == "_unique_dim" || op == "multinomial";
}

}  // namespace

// The Autograd fallback (fallback.h; engine.cpp registers it): an op with no Autograd kernel (no
// derivative in the registry) runs below autograd; if an input requires grad and the op produced
// a floating-point result, that result would silently have no history, so it raises instead.
void autograd_fallback(const dispatch::OpEntry& op, DispatchKeySet ks, dispatch::Stack& stack) {
  const std::size_t base = stack.size() - static_cast<std::size_t>(op.num_args);
  bool any = false;
  for (std::size_t i = base; i < stack.size() && !any; ++i) {
    const dispatch::IValue& v = stack[i];
    if (v.is_tensor()) {
      any = requires_grad(v.to_tensor());
    } else if (v.tag() == dispatch::IValue::Tag::TensorList) {
      any = requires_grad(TensorList(v.to_tensor_list()));
    }
  }
  {
    dispatch::ExcludeGuard below(DispatchKeySet(DispatchKey::Autograd));
    dispatch::redispatch_boxed(op, ks.below(DispatchKey::Autograd), stack);
  }
  if (!any || non_differentiable(op.name)) return;
  for (std::size_t i = base; i < stack.size(); ++i) {
    const dispatch::IValue& v = stack[i];
    bool floating = v.is_tensor() && is_floating(v.to_tensor().dtype());
    if (v.tag() == dispatch::IValue::Tag::TensorList)
      for (const Tensor& t : v.to_tensor_list()) floating = floating || is_floating(t.dtype());
    std::string name(op.name);
    if (auto dot = name.find('.'); dot != std::string::npos) name.resize(dot);
    KAEL_CHECK(!floating, name << ": the derivative is not implemented (an input requires grad); compute it under "
                                  "kael.no_grad() or on .detach()ed inputs");
  }
}

}  // namespace kael::autograd
