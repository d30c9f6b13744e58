// Autograd's saved tensors, graph nodes and engine (see Note [Autograd] in kael/autograd/autograd.h);
// history.cpp records the graph (tensor metadata, set_history, hooks).
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
std::atomic<std::uint64_t> g_sequence_nr{0};
std::atomic<bool> g_anomaly{false};
std::atomic<TraceFn> g_trace_fn{nullptr};

std::string describe(const Tensor& t) {
  std::ostringstream os;
  os << "[kael." << dtype_name(t.dtype()) << " " << shape_str(t.sizes()) << "]";
  return os.str();
}
}  // namespace

bool AnomalyMode::is_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled) { g_anomaly.store(enabled, std::memory_order_relaxed); }
void set_trace_function(TraceFn fn) { g_trace_fn.store(fn); }

void record_trace(Node& node) {
  if (!AnomalyMode::is_enabled()) return;
  if (TraceFn fn = g_trace_fn.load()) node.set_forward_trace(fn());
}

// ------------------------------------------------------------------ saved variables

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  KAEL_CHECK(!t.impl()->storage()->is_inference(),
             "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
             "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and "
             "use it in autograd, or use `kael.no_grad()` instead of `kael.inference_mode()`.");
  was_defined_ = true;
  is_output_ = is_output;
  version_ = t.impl()->version();
  requires_grad_ = requires_grad(t);
  if (is_output) {
    // An alias without metadata: the node would otherwise own itself through the tensor.
    const TensorImpl& impl = *t.impl();
    data_ = Tensor(TensorImpl::make(impl.storage_ptr(), impl.dtype(), DimVector(impl.sizes()),
                                    DimVector(impl.strides()), impl.offset()));
    data_.impl()->share_version_counter(impl);
    if (const AutogradMeta* m = meta_of(t)) {
      grad_fn_ = m->grad_fn;
      output_nr_ = m->output_nr;
    }
  } else {
    data_ = t;
  }
}

Tensor SavedVariable::unpack(const Node* node) const {
  if (!was_defined_) return {};
  const std::string name = node ? node->name() : std::string("a node");
  KAEL_CHECK(!released_,
             "Trying to backward through the graph a second time (or directly access saved tensors after they "
             "have already been freed). Saved intermediate values of the graph are freed when you call "
             ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
             "a second time or if you need to access saved tensors after calling backward. (node: "
             << name << ")");
  const std::uint32_t now = data_.impl()->version();
  KAEL_CHECK(now == version_, "one of the variables needed for gradient computation has been modified by an "
                              "inplace operation: "
                                  << describe(data_) << ", which is saved by " << name << ", is at version " << now
                                  << "; expected version " << version_ << " instead.");
  if (!is_output_) return data_;
  std::shared_ptr<Node> fn = grad_fn_.lock();
  if (!fn || !requires_grad_) return data_;
  const TensorImpl& impl = *data_.impl();
  Tensor out(TensorImpl::make(impl.storage_ptr(), impl.dtype(), DimVector(impl.sizes()), DimVector(impl.strides()),
                              impl.offset()));
  AutogradMeta& m = ensure_meta(out);
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr_;
  out.impl()->add_keys(DispatchKeySet(DispatchKey::Autograd));
  return out;
}

std::string SavedVariable::description() const {
  if (released_ || !data_.defined()) return "(freed)";
  return shape_str(data_.sizes()) + " " + dtype_name(data_.dtype());
}

Tensor meta_stand_in(IntArrayRef sizes, ScalarType dtype) {
  const std::int64_t* none = nullptr;
  return kael::expand(kael::empty(IntArrayRef(none, 0), dtype), sizes);
}

// ------------------------------------------------------------------ nodes

Node::Node() : sequence_nr_(g_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}
Node::~Node() = default;

std::uint32_t Node::add_input_metadata(const Tensor& t) {
  input_metadata_.push_back(InputMeta{DimVector(t.sizes()), t.dtype(), t.device()});
  return static_cast<std::uint32_t>(input_metadata_.size() - 1);
}

void Node::add_pre_hook(std::uint32_t output_nr, GradHook hook, int id) {
  std::lock_guard<std::mutex> lock(mutex);
  pre_hooks_.push_back(PreHook{output_nr, std::move(hook), id});
}

bool Node::remove_pre_hook(int id) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = std::find_if(pre_hooks_.begin(), pre_hooks_.end(), [&](const PreHook& h) { return h.id == id; });
  if (it == pre_hooks_.end()) return false;
  pre_hooks_.erase(it);
  return true;
}

void Node::run_pre_hooks(variable_list& grads) {
  std::vector<PreHook> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex);
    hooks = pre_hooks_;
  }
  // User hooks first, then the retain_grad hooks (negative ids), which see the hooked value.
  for (int pass = 0; pass < 2; ++pass) {
    for (const PreHook& h : hooks) {
      if ((h.id < 0) != (pass == 1) || h.output_nr >= grads.size() || !grads[h.output_nr].defined()) continue;
      Tensor r = h.fn(grads[h.output_nr]);
      if (r.defined()) grads[h.output_nr] = std::move(r);
    }
  }
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  input_metadata_.push_back(InputMeta{DimVector(variable_.sizes()), variable_.dtype(), variable_.device()});
}

namespace {
// PyTorch's gradient layout contract: the .grad of a dense, non-overlapping variable has the
// variable's strides (a channels-last weight gets a channels-last gradient), any other variable's
// is contiguous. Strides of size-1 dims do not count.
bool has_grad_layout(const Tensor& g, const Tensor& variable) {
  if (!is_non_overlapping_and_dense(variable)) return g.is_contiguous();
  const IntArrayRef sizes = variable.sizes(), vs = variable.strides(), gs = g.strides();
  if (!std::equal(sizes.begin(), sizes.end(), g.sizes().begin(), g.sizes().end())) return false;
  for (std::size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && vs[d] != gs[d]) return false;
  return true;
}

// A contiguous copy of g that nothing else refers to (the engine may hand one tensor to several
// leaves).
Tensor fresh_copy(const Tensor& g) { return g.is_contiguous() ? kael::clone(g) : kael::contiguous(g); }

// The same laid out as the contract asks for variable's .grad.
Tensor fresh_copy(const Tensor& g, const Tensor& variable) {
  if (is_non_overlapping_and_dense(variable) && !variable.is_contiguous()) {
    Tensor c = kael::empty_strided(variable.sizes(), variable.strides(), g.dtype(), g.device());
    kael::copy_(c, g);
    return c;
  }
  return fresh_copy(g);
}

// g itself where the caller holds the only reference to it and to its memory and it has the
// contract's layout (as PyTorch's AccumulateGrad steals such a gradient), else fresh_copy(g). A
// gradient that a hook, the caller of backward or another leaf still holds is copied, so that
// nothing outside sees a later change of .grad (an optimizer's in-place step, zero_) or changes
// it. Saves a copy of every parameter's gradient per backward, and the allocation it faults in.
Tensor take_or_copy(Tensor&& g, const Tensor& variable) {
  if (has_grad_layout(g, variable) && g.impl()->use_count() == 1 && g.impl()->storage()->use_count() == 1)
    return std::move(g);
  return fresh_copy(g, variable);
}
}  // namespace

variable_list AccumulateGrad::apply(variable_list&& grads) {
  Tensor g = std::move(grads.at(0));
  AutogradMeta& m = ensure_meta(variable_);
  std::vector<std::pair<int, GradHook>> hooks;
  {
    std::lock_guard<std::mutex> lock(mutex);
    hooks = m.leaf_hooks;
  }
  for (auto& [id, fn] : hooks) {
    if (!g.defined()) break;
    Tensor r = fn(g);
    if (r.defined()) g = std::move(r);
  }
  if (!g.defined()) return {};
  std::lock_guard<std::mutex> lock(mutex);
  if (!m.grad.defined()) {
    m.grad = GradMode::is_enabled() ? g : take_or_copy(std::move(g), variable_);
  } else if (!GradMode::is_enabled() && !requires_grad(m.grad)) {
    kael::add_(m.grad, g);
  } else {
    m.grad = kael::add(m.grad, g);
  }
  return {};
}

variable_list ErrorNode::apply(variable_list&&) {
  KAEL_CHECK(false, msg_);
  __builtin_unreachable();
}

AsStridedBackward::AsStridedBackward(const Tensor& base, const Tensor& view)
    : base_sizes_(base.sizes()),
      sizes_(view.sizes()),
      strides_(view.strides()),
      offset_(view.impl()->offset() - base.impl()->offset()),
      dtype_(base.dtype()) {}

variable_list AsStridedBackward::apply(variable_list&& grads) {
  Tensor g = kael::zeros(base_sizes_, dtype_);
  kael::copy_(kael::as_strided(g, sizes_, strides_, offset_), grads.at(0));
  return {g};
}

CopySlices::CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> fn)
    : base_sizes_(base.sizes()),
      sizes_(view.sizes()),
      strides_(view.strides()),
      offset_(view.impl()->offset() - base.impl()->offset()),
      fn_(std::move(fn)) {
  std::vector<Edge> edges{gradient_edge(base)};
  const auto& fn_edges = fn_->next_edges();
  for (std::size_t i = 1; i < fn_edges.size(); ++i) edges.push_back(fn_edges[i]);
  next_edges_ = std::move(edges);
}

variable_list CopySlices::apply(variable_list&& grads) {
  const Tensor& grad = grads.at(0);
  Tensor result;
  variable_list res;
  if (!GradMode::is_enabled()) {
    // the slice of the gradient replaced, in place, by fn's gradient of its input
    result = fresh_copy(grad);
    Tensor slice = kael::as_strided(result, sizes_, strides_, offset_);
    res = fn_->apply({fresh_copy(slice)});
    if (!res.empty() && res[0].defined()) {
      kael::copy_(slice, same_sizes(res[0].sizes(), slice.sizes()) ? res[0] : kael::sum_to_size(res[0], slice.sizes()));
    } else {
      kael::zero_(slice);
    }
  } else {
    // create_graph: the same from differentiable ops, none of which writes a tensor that a
    // recorded op saved (as_strided saves its input): grad * keep + the slice's gradient placed
    // into zeros
    const Tensor slice = kael::as_strided(fresh_copy(grad), sizes_, strides_, offset_);
    res = fn_->apply({fresh_copy(slice)});
    const Tensor keep = kael::ones(base_sizes_, grad.dtype(), grad.device());
    kael::zero_(kael::as_strided(keep, sizes_, strides_, offset_));
    result = kael::mul(grad, keep);
    if (!res.empty() && res[0].defined()) {
      const Tensor embed = kael::zeros(base_sizes_, grad.dtype(), grad.device());
      kael::copy_(kael::as_strided(embed, sizes_, strides_, offset_),
                  same_sizes(res[0].sizes(), slice.sizes()) ? res[0] : kael::sum_to_size(res[0], slice.sizes()));
      result = kael::add(result, embed);
    }
  }
  variable_list out{result};
  for (std::size_t i = 1; i < res.size(); ++i) out.push_back(res[i]);
  out.resize(next_edges_.size());
  return out;
}

// ------------------------------------------------------------------ the engine

namespace {

class GraphRoot : public Node {
 public:
  GraphRoot(std::vector<Edge> roots, variable_list grads) : grads_(std::move(grads)) {
    next_edges_ = std::move(roots);
  }
  std::string name() const override { return "GraphRoot"; }
  variable_list apply(variable_list&&) override { return grads_; }

 private:
  variable_list grads_;
};

struct CompareNodes {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

// Fits a node's output gradient to what the receiving input expects (broadcasting reduced away,
// dtype converted), or raises.
Tensor validate(const Node& fn, std::size_t i, Tensor g, const InputMeta& meta) {
  if (!same_sizes(g.sizes(), meta.sizes)) {
    bool expandable = g.dim() >= static_cast<std::int64_t>(meta.sizes.size());
    if (expandable) {
      const std::int64_t lead = g.dim() - static_cast<std::int64_t>(meta.sizes.size());
      for (std::size_t d = 0; d < meta.sizes.size(); ++d) {
        const std::int64_t gs = g.sizes()[lead + d], ms = meta.sizes[d];
        if (gs != ms && ms != 1) expandable = false;
      }
    }
    KAEL_CHECK(expandable, "Function " << fn.name() << " returned an invalid gradient at index " << i << " - got "
                                       << shape_str(g.sizes()) << " but expected shape compatible with "
                                       << shape_str(meta.sizes));
    g = kael::sum_to_size(g, meta.sizes);
  }
  if (g.dtype() != meta.dtype) g = kael::to(g, meta.dtype);
  return g;
}

// The gradient already held for the tensor a SliceBackward node slices, when the node may add
// its piece into it in place (Note [Slice gradients added in place]): one owner (the engine's
// buffer), not a view, its storage its own and allocated by kael, contiguous, and of the node's
// one input gradient's dtype; null otherwise.
Tensor* offered_slice_target(const Node& fn, const variable_list& in,
                             std::unordered_map<Node*, variable_list>& buffers) {
  if (in.size() != 1 || !in[0].defined() || fn.next_edges().size() != 1) return nullptr;
  const Edge& e = fn.next_edges()[0];
  if (!e.is_valid()) return nullptr;
  auto it = buffers.find(e.function.get());
  if (it == buffers.end() || it->second.size() <= e.input_nr) return nullptr;
  Tensor& slot = it->second[e.input_nr];
  if (!slot.defined() || slot.dtype() != in[0].dtype() || !slot.is_contiguous()) return nullptr;
  const TensorImpl* impl = slot.impl();
  // (memory kael did not allocate, from NumPy or DLPack, may be read by its owner)
  if (impl->use_count() != 1 || impl->is_view() || impl->storage() == nullptr || impl->storage()->use_count() != 1 ||
      impl->storage()->allocator() == nullptr)
    return nullptr;
  if (fn.name() != "SliceBackward0") return nullptr;
  return &slot;
}

void check_anomaly(const Node& fn, const variable_list& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& o = outputs[i];
    if (!o.defined() || !is_floating(o.dtype())) continue;
    if (kael::any(kael::isnan(o), std::nullopt, false).item().to<bool>()) {
      std::ostringstream msg;
      msg << "Function '" << fn.name() << "' returned nan values in its " << i << "th output.";
      if (!fn.forward_trace().empty()) {
        msg << "\nTraceback of forward call that caused the error:\n" << fn.forward_trace();
      } else {
        msg << "\n(enable anomaly detection before the forward pass to see the forward call site)";
      }
      KAEL_CHECK(false, msg.str());
    }
  }
}

}  // namespace

namespace {
// The callbacks queued during the backward pass running on this thread (queue_callback).
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

struct CallbackScope {
  std::vector<std::function<void()>>* previous;
  explicit CallbackScope(std::vector<std::function<void()>>* mine) : previous(t_callbacks) { t_callbacks = mine; }
  ~CallbackScope() { t_callbacks = previous; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
};
}  // namespace

void queue_callback(std::function<void()> f) {
  KAEL_CHECK(t_callbacks != nullptr, "queue_callback: no backward pass is running on this thread");
  t_callbacks->push_back(std::move(f));
}

variable_list run_backward(const std::vector<Edge>& roots, variable_list grad_outputs, bool keep_graph,
                           bool create_graph, const std::vector<Edge>& inputs, bool accumulate) {
  std::vector<std::function<void()>> callbacks;
  const CallbackScope callback_scope(&callbacks);
  auto root = std::make_shared<GraphRoot>(roots, std::move(grad_outputs));
  const bool capture = !inputs.empty();

  // Dependencies, and (for grad()) which nodes lead to an input.
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> keep_alive;
  std::unordered_map<Node*, std::vector<std::pair<std::uint32_t, std::size_t>>> captures;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_valid()) captures[inputs[i].function.get()].emplace_back(inputs[i].input_nr, i);
  std::unordered_map<Node*, bool> reaches;  // node -> some capture is at or below it
  {
    std::vector<Node*> stack{root.get()};
    std::unordered_set<Node*> seen{root.get()};
    std::vector<Node*> order;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges()) {
        if (!e.is_valid()) continue;
        Node* c = e.function.get();
        ++deps[c];
        if (seen.insert(c).second) {
          keep_alive.push_back(e.function);
          stack.push_back(c);
        }
      }
    }
    if (capture) {
      // Reverse DFS pre-order is not a topological order in general: iterate to a fixpoint.
      for (Node* n : order) reaches[n] = captures.count(n) > 0;
      bool changed = true;
      while (changed) {
        changed = false;
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
          Node* n = *it;
          if (reaches[n]) continue;
          for (const Edge& e : n->next_edges()) {
            if (e.is_valid() && reaches[e.function.get()]) {
              reaches[n] = changed = true;
              break;
            }
          }
        }
      }
    }
  }

  variable_list captured(inputs.size());
  std::unordered_map<Node*, variable_list> buffers;
  std::priority_queue<Node*, std::vector<Node*>, CompareNodes> ready;
  ready.push(root.get());
  AutoGradMode grad_mode(create_graph);

  while (!ready.empty()) {
    Node* fn = ready.top();
    ready.pop();
    variable_list in;
    if (fn != root.get()) {
      auto it = buffers.find(fn);
      in = std::move(it->second);
      buffers.erase(it);
      in.resize(fn->num_inputs());
      fn->run_pre_hooks(in);
    }
    if (capture) {
      bool leaf_input = false;
      if (auto c = captures.find(fn); c != captures.end()) {
        for (auto [input_nr, idx] : c->second)
          if (input_nr < in.size()) captured[idx] = in[input_nr];
        leaf_input = accumulate && dynamic_cast<AccumulateGrad*>(fn) != nullptr;
      }
      bool needed = fn == root.get() || leaf_input;
      for (const Edge& e : fn->next_edges()) needed = needed || (e.is_valid() && reaches[e.function.get()]);
      if (!needed) continue;
    }
    variable_list out;
    const bool any_defined = fn == root.get() || std::any_of(in.begin(), in.end(), [](const Tensor& t) {
      return t.defined();
    });
    if (any_defined) {
      if (fn != root.get() && in.size() > 1) {
        // Zeros for the outputs no gradient reached; integer outputs (indices) have none.
        for (std::size_t i = 0; i < in.size(); ++i)
          if (!in[i].defined() && is_floating(fn->input_metadata()[i].dtype))
            in[i] = kael::zeros(fn->input_metadata()[i].sizes, fn->input_metadata()[i].dtype);
      }
      // Note [Slice gradients added in place]
      Tensor* slice_target = create_graph ? nullptr : offered_slice_target(*fn, in, buffers);
      detail::slice_grad_target() = slice_target;
      try {
        out = fn->apply(std::move(in));
      } catch (...) {
        detail::slice_grad_target() = nullptr;
        throw;
      }
      detail::slice_grad_target() = nullptr;
      if (!keep_graph) fn->release_variables();
      if (AnomalyMode::is_enabled()) check_anomaly(*fn, out);
    }
    out.resize(fn->next_edges().size());
    for (std::size_t i = 0; i < fn->next_edges().size(); ++i) {
      const Edge& e = fn->next_edges()[i];
      if (!e.is_valid()) continue;
      Node* next = e.function.get();
      if (out[i].defined()) {
        Tensor g = validate(*fn, i, std::move(out[i]), next->input_metadata().at(e.input_nr));
        variable_list& buf = buffers[next];
        if (buf.size() < next->num_inputs()) buf.resize(next->num_inputs());
        Tensor& slot = buf[e.input_nr];
        if (!slot.defined()) slot = std::move(g);
        else if (!g.is_same(slot)) slot = kael::add(slot, g);  // the same: added in place (see above)
      } else {
        buffers.try_emplace(next);
      }
      if (--deps[next] == 0) ready.push(next);
    }
  }
  // The queued callbacks, in order; one may queue another.
  for (std::size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> f = std::move(callbacks[i]);
    f();
  }
  return captured;
}

namespace {
std::vector<Edge> root_edges(const variable_list& outputs, const variable_list& grad_outputs,
                             variable_list& grads) {
  KAEL_CHECK_VALUE(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
                   "grad requires one gradient per output: got " << grad_outputs.size() << " gradients for "
                                                                 << outputs.size() << " outputs");
  std::vector<Edge> roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KAEL_CHECK(requires_grad(out), "element " << i << " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      KAEL_CHECK(out.numel() == 1, "grad can be implicitly created only for scalar outputs");
      g = kael::ones_like(out);
    } else {
      KAEL_CHECK(same_sizes(g.sizes(), out.sizes()), "Mismatch in shape: grad_output[" << i << "] has a shape of "
                                                                           << shape_str(g.sizes())
                                                                           << " and output[" << i
                                                                           << "] has a shape of "
                                                                           << shape_str(out.sizes()) << ".");
    }
    roots.push_back(gradient_edge(out));
    grads.push_back(std::move(g));
  }
  return roots;
}
}  // namespace

void backward(const variable_list& outputs, const variable_list& grad_outputs, bool keep_graph, bool create_graph,
              const variable_list& inputs) {
  variable_list grads;
  std::vector<Edge> roots = root_edges(outputs, grad_outputs, grads);
  if (inputs.empty()) {
    run_backward(roots, std::move(grads), keep_graph || create_graph, create_graph);
    return;
  }
  // Only the listed tensors get gradients: the leaves through their AccumulateGrad (hooks
  // included), the others into their .grad as retain_grad() would.
  std::vector<Edge> input_edges;
  for (const Tensor& t : inputs) {
    KAEL_CHECK(requires_grad(t), "can't retain_grad on Tensor that has requires_grad=False");
    input_edges.push_back(gradient_edge(t));
  }
  variable_list got = run_backward(roots, std::move(grads), keep_graph || create_graph, create_graph, input_edges,
                                   /*accumulate=*/true);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (is_leaf(inputs[i]) || !got[i].defined()) continue;
    AutogradMeta& m = ensure_meta(inputs[i]);
    if (m.retains_grad) continue;  // its retain_grad hook has accumulated it
    if (!m.grad.defined()) {
      m.grad = create_graph ? got[i] : fresh_copy(got[i]);
    } else {
      AutoGradMode mode(create_graph);
      m.grad = kael::add(m.grad, got[i]);
    }
  }
}

variable_list grad(const variable_list& outputs, const variable_list& inputs, const variable_list& grad_outputs,
                   bool keep_graph, bool create_graph, bool allow_unused) {
  variable_list grads;
  std::vector<Edge> roots = root_edges(outputs, grad_outputs, grads);
  std::vector<Edge> input_edges;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    KAEL_CHECK(requires_grad(inputs[i]), "One of the differentiated Tensors does not require grad");
    input_edges.push_back(gradient_edge(inputs[i]));
  }
  variable_list result = run_backward(roots, std::move(grads), keep_graph, create_graph, input_edges);
  for (std::size_t i = 0; i < result.size(); ++i) {
    KAEL_CHECK(allow_unused || result[i].defined(),
               "One of the differentiated Tensors appears to not have been used in the graph. Set "
               "allow_unused=True if this is the desired behavior.");
    if (result[i].defined() && !same_sizes(result[i].sizes(), inputs[i].sizes()))
      result[i] = validate(*input_edges[i].function, i, result[i], InputMeta{DimVector(inputs[i].sizes()),
                                                                             inputs[i].dtype(), inputs[i].device()});
  }
  return result;
}

// The Autograd key's boxed fallback (fallback.cpp) is registered here: this object is always linked.
namespace {
[[maybe_unused]] const bool g_fallback_registered = (dispatch::set_fallback(DispatchKey::Autograd, &autograd_fallback), true);
}  // namespace

}  // namespace kael::autograd
