// Autograd's history: the metadata a tensor carries (requires_grad, grad_fn, views of a
// modified base), the nodes an op records and the in-place rebase, and the hooks on tensors
// (see Note [Autograd] in kael/autograd/autograd.h); engine.cpp runs the graph backward.
#include <algorithm>
#include <atomic>
#include <functional>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "kael/autograd/autograd.h"
#include "kael/autograd/saved_args.h"
#include "kael/autograd/formula_helpers.h"
#include "kael/autograd/slice_grad_target.h"
#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/ops/add.h"
#include "kael/ops/any.h"
#include "kael/ops/as_strided.h"
#include "kael/ops/sum_to_size.h"
#include "kael/ops/clone.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/copy_.h"
#include "kael/ops/empty.h"
#include "kael/ops/empty_strided.h"
#include "kael/ops/expand.h"
#include "kael/ops/full.h"
#include "kael/ops/isnan.h"
#include "kael/ops/mul.h"
#include "kael/ops/ones.h"
#include "kael/ops/ones_like.h"
#include "kael/ops/to.h"
#include "kael/ops/zero_.h"
#include "kael/ops/zeros.h"
#include "fallback.h"


namespace kael::autograd {

namespace {
std::atomic<int> g_hook_id{0};
}  // namespace

// ------------------------------------------------------------------ metadata

AutogradMeta::~AutogradMeta() {
  if (retain_hook_id != 0 && grad_fn) grad_fn->remove_pre_hook(retain_hook_id);
}

AutogradMeta& ensure_meta(const Tensor& t) {
  KAEL_INTERNAL_ASSERT(t.defined());
  if (auto* m = meta_of(t)) return *m;
  auto m = std::make_unique<AutogradMeta>();
  AutogradMeta* raw = m.get();
  t.impl()->set_autograd_meta(std::move(m));
  return *raw;
}

// Note [Views of a modified base]
// A differentiable view records the version of its storage when its history is set. When the
// storage was written in place since (through the base or another view), the view's history
// predates the write: reading it gives the view a fresh AsStridedBackward0 over the base's
// current history, as PyTorch regenerates it, so its gradient follows the data it holds.
namespace {
void refresh_view_history(const Tensor& t, AutogradMeta& m) {
  if (!m.view_base.defined() || !m.grad_fn) return;
  const std::uint32_t now = t.impl()->version();
  if (now == m.view_version) [[likely]] return;
  const Tensor& base = m.view_base;
  if (!requires_grad(base)) return;
  KAEL_CHECK(base.is_contiguous(),
             "a view of a non-contiguous tensor that requires grad was modified in place (through its base or "
             "another view) and cannot be differentiated; call .contiguous() (or .clone()) on the base first");
  auto fn = std::make_shared<AsStridedBackward>(base, t);
  fn->set_next_edges({gradient_edge(base)});
  m.grad_fn = fn;
  m.output_nr = fn->add_input_metadata(t);
  m.view_version = now;
}
}  // namespace

const std::shared_ptr<Node>& grad_fn(const Tensor& t) {
  static const std::shared_ptr<Node> none;
  AutogradMeta* m = meta_of(t);
  if (m == nullptr) return none;
  refresh_view_history(t, *m);
  return m->grad_fn;
}

void set_requires_grad(const Tensor& t, bool value) {
  AutogradMeta* m = meta_of(t);
  KAEL_CHECK(m == nullptr || !m->grad_fn,
             "you can only change requires_grad flags of leaf variables. If you want to use a computed variable "
             "in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
  KAEL_CHECK(!value || is_floating(t.dtype()),
             "only Tensors of floating point dtype can require gradients (got " << dtype_name(t.dtype()) << ")");
  KAEL_CHECK(!value || !t.impl()->storage()->is_inference() || InferenceMode::is_enabled(),
             "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  if (!value && m == nullptr) return;
  ensure_meta(t).requires_grad = value;
  if (value) t.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  AutogradMeta& m = ensure_meta(t);
  if (auto acc = m.grad_accumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(t);
  m.grad_accumulator = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = meta_of(t);
  if (m == nullptr || !t.key_set().has(DispatchKey::Autograd)) return {};
  refresh_view_history(t, *m);
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (m->requires_grad) return {grad_accumulator(t), 0};
  return {};
}

Tensor operand_tensor(const Operand& o) {
  if (o.is_tensor()) return o.tensor();
  const std::int64_t* none = nullptr;
  // A Python float keeps its double value (as torch's wrapped numbers are float64): in float32
  // (its promotion dtype), mul's gradient of a float64 x * 0.01 would be 0.00999999977. A
  // formula's result may then be float64 where the input's is not; the engine converts each
  // gradient to its input's dtype.
  const ScalarType t = o.scalar().is_floating() ? ScalarType::Float64 : o.scalar().wrapped_dtype();
  return kael::full(IntArrayRef(none, 0), o.scalar(), t);
}

void set_history(const Tensor& result, const std::shared_ptr<Node>& fn) {
  AutogradMeta& m = ensure_meta(result);
  m.grad_fn = fn;
  m.output_nr = fn->add_input_metadata(result);
  m.requires_grad = false;
  result.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
}

void set_view_of(const Tensor& result, const Tensor& base) {
  const AutogradMeta* bm = meta_of(base);
  AutogradMeta& m = ensure_meta(result);
  m.view_base = (bm && bm->view_base.defined()) ? bm->view_base : base;
  m.view_version = result.impl()->version();
}

namespace {
// The tensor whose history an in-place op on `self` changes along with self's: the base of a
// differentiable view, or the base of a plain view whose base does not require grad.
Tensor inplace_base(const Tensor& self) {
  const AutogradMeta* m = meta_of(self);
  if (m && m->view_base.defined()) return m->view_base;
  if (self.impl()->is_view()) {
    Tensor base(self.impl()->view_base());
    if (!requires_grad(base)) return base;
  }
  return {};
}
}  // namespace

void check_inplace(const char* op, const Tensor& self) {
  if (requires_grad(self) && is_leaf(self))
    KAEL_CHECK(false, op << ": a leaf Variable that requires grad is being used in an in-place operation.");
  const AutogradMeta* m = meta_of(self);
  if (m && m->view_base.defined() && requires_grad(m->view_base) && is_leaf(m->view_base))
    KAEL_CHECK(false, op << ": a view of a leaf Variable that requires grad is being used in an in-place operation.");
}

void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn) {
  Tensor base = inplace_base(self);
  if (!base.defined()) {
    set_history(self, fn);
    return;
  }
  KAEL_CHECK(base.is_contiguous(),
             "an in-place operation on a view of a non-contiguous tensor that requires grad is not supported; "
             "call .contiguous() (or .clone()) on the base first");
  auto cs = std::make_shared<CopySlices>(base, self, fn);
  set_history(base, cs);
  auto view_fn = std::make_shared<AsStridedBackward>(base, self);
  view_fn->set_next_edges({gradient_edge(base)});
  set_history(self, view_fn);
  AutogradMeta& m = ensure_meta(self);
  m.view_base = base;
  m.view_version = self.impl()->version();
}

void not_differentiable(const char* op, const char* input) {
  KAEL_CHECK(false, op << ": the derivative for '" << input << "' is not implemented");
  __builtin_unreachable();
}

void out_not_differentiable(const char* op) {
  KAEL_CHECK(false, op << "(): functions with out=... arguments don't support automatic differentiation, but "
                          "one of the arguments requires grad.");
  __builtin_unreachable();
}

// ------------------------------------------------------------------ hooks

int register_hook(const Tensor& t, GradHook hook) {
  KAEL_CHECK(requires_grad(t), "cannot register a hook on a tensor that doesn't require gradient");
  const int id = g_hook_id.fetch_add(1) + 1;
  AutogradMeta& m = ensure_meta(t);
  refresh_view_history(t, m);
  if (m.grad_fn) {
    m.grad_fn->add_pre_hook(m.output_nr, std::move(hook), id);
  } else {
    auto acc = grad_accumulator(t);
    std::lock_guard<std::mutex> lock(acc->mutex);
    m.leaf_hooks.emplace_back(id, std::move(hook));
  }
  return id;
}

void remove_hook(const Tensor& t, int id) {
  AutogradMeta* m = meta_of(t);
  if (m == nullptr) return;
  if (m->grad_fn && m->grad_fn->remove_pre_hook(id)) return;
  auto& hooks = m->leaf_hooks;
  hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.first == id; }), hooks.end());
}

void retain_grad(const Tensor& t) {
  KAEL_CHECK(requires_grad(t), "can't retain_grad on Tensor that has requires_grad=False");
  AutogradMeta& m = ensure_meta(t);
  refresh_view_history(t, m);
  if (!m.grad_fn || m.retains_grad) return;  // leaves keep their grad anyway
  m.retains_grad = true;
  const int id = -(g_hook_id.fetch_add(1) + 1);
  TensorImpl* impl = t.impl();  // the hook is removed when the tensor dies (~AutogradMeta)
  m.grad_fn->add_pre_hook(
      m.output_nr,
      [impl](const Tensor& g) {
        auto* meta = static_cast<AutogradMeta*>(impl->autograd_meta());
        if (meta == nullptr) return Tensor();
        if (!meta->grad.defined()) {
          meta->grad = GradMode::is_enabled() ? g : (g.is_contiguous() ? kael::clone(g) : kael::contiguous(g));
        } else {
          meta->grad = kael::add(meta->grad, g);
        }
        return Tensor();
      },
      id);
  m.retain_hook_id = id;
}

}  // namespace kael::autograd
