#pragma once
// Reverse-mode automatic differentiation: graph nodes, saved tensors, grad mode and the engine.
//
// Note [Autograd]
// A tensor that requires grad carries the Autograd dispatch key. The generated Autograd kernel
// of a differentiable op (src/autograd/functions_<k>.cpp in the build tree) records a Node
// (MulBackward0, ...) holding exactly what the op's derivative formulas use, as SavedVariables
// that remember the version of the tensor at save time, and the edges to the nodes of its
// inputs; then it redispatches below Autograd. A leaf that requires grad is reached through its
// AccumulateGrad node, which adds the gradient into `.grad`. Tensors without the key never see
// any of this: plain `a + b` dispatches straight to the backend.
//
// Grad mode is thread-local. Turning it off excludes the Autograd key on the thread, so no
// kernel records anything and no per-call check is needed.
//
// The engine (run_backward) runs on the calling thread: it counts each node's dependencies
// from the roots, then executes nodes whose inputs are complete, latest-created first, and
// frees the saved tensors of every node it ran unless asked to keep the graph. Each call has
// its own state, so independent graphs can be differentiated on several threads at once.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kael/core/tensor.h"
#include "kael/dispatch/dispatcher.h"

namespace kael::autograd {

using variable_list = std::vector<Tensor>;
class Node;

inline bool same_sizes(IntArrayRef a, IntArrayRef b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

// ------------------------------------------------------------------ grad mode

namespace detail {
inline thread_local bool tls_grad_enabled KAEL_FAST_TLS = true;
}  // namespace detail

struct GradMode {
  static bool is_enabled() { return detail::tls_grad_enabled; }
  static void set_enabled(bool enabled) {
    detail::tls_grad_enabled = enabled;
    dispatch::tls_excluded = enabled ? dispatch::tls_excluded.remove(DispatchKey::Autograd)
                                     : dispatch::tls_excluded.add(DispatchKey::Autograd);
  }
};

// Sets grad mode for a scope and restores the previous mode on exit.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

struct NoGradGuard : AutoGradMode {
  NoGradGuard() : AutoGradMode(false) {}
};

// Inference mode: grad mode off, and the tensors made meanwhile are inference tensors, which
// track no versions and no views (Note [Inference tensors] in kael/core/storage.h).
struct InferenceMode {
  static bool is_enabled() { return ::kael::detail::tls_inference_mode; }
  static void set_enabled(bool enabled) { ::kael::detail::tls_inference_mode = enabled; }
};
class AutoInferenceMode {
 public:
  explicit AutoInferenceMode(bool enabled)
      : prev_(InferenceMode::is_enabled()), grad_(enabled ? false : GradMode::is_enabled()) {
    InferenceMode::set_enabled(enabled);
  }
  ~AutoInferenceMode() { InferenceMode::set_enabled(prev_); }
  AutoInferenceMode(const AutoInferenceMode&) = delete;
  AutoInferenceMode& operator=(const AutoInferenceMode&) = delete;

 private:
  bool prev_;
  AutoGradMode grad_;
};

// Anomaly mode: nodes record the forward call site, and NaN in a backward result raises.
struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};
// Where the forward op of a node was called (set by the Python layer: its stack).
using TraceFn = std::string (*)();
void set_trace_function(TraceFn fn);

// ------------------------------------------------------------------ metadata of tensors

struct Edge {
  std::shared_ptr<Node> function;
  std::uint32_t input_nr = 0;
  bool is_valid() const { return static_cast<bool>(function); }
};

// A hook on a tensor's gradient: returns a replacement, or an undefined tensor to keep it.
using GradHook = std::function<Tensor(const Tensor&)>;

struct AutogradMeta : AutogradMetaBase {
  bool requires_grad = false;  // a leaf's flag (non-leaves require grad through grad_fn)
  bool retains_grad = false;
  std::uint32_t output_nr = 0;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  std::weak_ptr<Node> grad_accumulator;
  // A differentiable view: the tensor (with a history) whose storage it views, and the version
  // of that storage when the view's history was recorded (Note [Views of a modified base]).
  Tensor view_base;
  std::uint32_t view_version = 0;
  // Hooks on a leaf's gradient (a non-leaf's live on its grad_fn), run before accumulation.
  std::vector<std::pair<int, GradHook>> leaf_hooks;
  int retain_hook_id = 0;
  ~AutogradMeta() override;
};

// The tensor's metadata, or null.
inline AutogradMeta* meta_of(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd_meta()) : nullptr;
}
AutogradMeta& ensure_meta(const Tensor& t);

// Whether t takes part in the graph: a leaf that requires grad, or the result of a recorded op.
inline bool requires_grad(const Tensor& t) {
  if (!t.defined() || !t.key_set().has(DispatchKey::Autograd)) return false;
  const AutogradMeta* m = meta_of(t);
  return m != nullptr && (m->requires_grad || m->grad_fn);
}
inline bool requires_grad(const Operand& o) { return o.is_tensor() && requires_grad(o.tensor()); }
inline bool requires_grad(const std::optional<Tensor>& t) { return t && requires_grad(*t); }
inline bool requires_grad(TensorList ts) {
  for (const Tensor& t : ts)
    if (requires_grad(t)) return true;
  return false;
}
inline bool is_leaf(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m == nullptr || !m->grad_fn;
}
const std::shared_ptr<Node>& grad_fn(const Tensor& t);
// Sets a leaf's requires_grad (RuntimeError on a non-leaf, or a non-float tensor asked to).
void set_requires_grad(const Tensor& t, bool value);
// The edge a gradient for t flows into: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);
std::shared_ptr<Node> grad_accumulator(const Tensor& t);

// ------------------------------------------------------------------ saved tensors

// A tensor saved for backward, with its version at save time. An op's own result is saved
// without its grad_fn (which would be a reference cycle) and gets it back when unpacked.
class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);
  // The saved tensor; RuntimeError when it was freed by a backward pass or modified in place
  // since (naming `node` and the versions).
  Tensor unpack(const Node* node) const;
  void reset_data() {
    data_ = Tensor();
    released_ = was_defined_;
  }
  bool defined() const { return was_defined_; }
  // "[2, 3] float32", or "(freed)" after a backward pass released it.
  std::string description() const;

 private:
  Tensor data_;
  std::uint32_t version_ = 0;
  std::uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool was_defined_ = false;
  bool released_ = false;
  bool requires_grad_ = false;
  std::weak_ptr<Node> grad_fn_;  // for outputs: the node that produced it
};

// ------------------------------------------------------------------ nodes

struct InputMeta {
  DimVector sizes;
  ScalarType dtype = ScalarType::Float32;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // Gradients of the inputs (one per next edge) from the gradients of the outputs.
  virtual variable_list apply(variable_list&& grads) = 0;
  // Frees the saved tensors (after a backward pass without retain_graph).
  virtual void release_variables() {}
  // Text of the saved tensors' shapes, for explain().
  virtual std::string saved_description() const { return ""; }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  void set_next_edges(std::vector<Edge> edges) { next_edges_ = std::move(edges); }
  bool should_compute_output(std::size_t i) const { return i < next_edges_.size() && next_edges_[i].is_valid(); }

  // One entry per forward output: the shape and dtype its gradient must have.
  std::uint32_t add_input_metadata(const Tensor& t);
  const std::vector<InputMeta>& input_metadata() const { return input_metadata_; }
  std::size_t num_inputs() const { return input_metadata_.size(); }

  std::uint64_t sequence_nr() const { return sequence_nr_; }
  // Hooks on the gradient of output `output_nr` (tensor hooks of non-leaves, retain_grad).
  void add_pre_hook(std::uint32_t output_nr, GradHook hook, int id);
  bool remove_pre_hook(int id);
  void add_retain_grad_hook(std::uint32_t output_nr, std::weak_ptr<Node> self_ref);
  // Runs the pre-hooks on `grads` (called by the engine before apply).
  void run_pre_hooks(variable_list& grads);
  bool has_pre_hooks() const { return !pre_hooks_.empty(); }
  // Calls f(hook) for each pre-hook's function, without the lock: for the Python binding's
  // garbage collector, which only looks at a node that nothing else can reach (Note [Tensor
  // objects and the garbage collector]).
  template <typename F>
  void for_each_pre_hook(F&& f) const {
    for (const PreHook& h : pre_hooks_) f(h.fn);
  }

  // Anomaly mode: the forward call site.
  const std::string& forward_trace() const { return forward_trace_; }
  void set_forward_trace(std::string s) { forward_trace_ = std::move(s); }

  // The Python object of this node (borrowed back-pointer, as for tensors).
  void* pyobj = nullptr;
  std::mutex mutex;  // serialises AccumulateGrad

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMeta> input_metadata_;

 private:
  struct PreHook {
    std::uint32_t output_nr;
    GradHook fn;
    int id;
  };
  std::vector<PreHook> pre_hooks_;
  std::uint64_t sequence_nr_;
  std::string forward_trace_;
};

// The node of a leaf: adds the incoming gradient into the leaf's .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  variable_list apply(variable_list&& grads) override;
  // The leaf (the leaf refers to its accumulator weakly, so there is no cycle).
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

// Gradients flowing into a node that raises (a node of a graph that was freed, or an op whose
// derivative is not implemented).
class ErrorNode : public Node {
 public:
  explicit ErrorNode(std::string msg) : msg_(std::move(msg)) {}
  std::string name() const override { return "Error"; }
  variable_list apply(variable_list&&) override;

 private:
  std::string msg_;
};

// The node of a view's history after an in-place op on its base: the gradient of the view is
// the slice of the base's gradient.
class AsStridedBackward : public Node {
 public:
  AsStridedBackward(const Tensor& base, const Tensor& view);
  std::string name() const override { return "AsStridedBackward0"; }
  variable_list apply(variable_list&& grads) override;

 private:
  DimVector base_sizes_, sizes_, strides_;
  std::int64_t offset_;
  ScalarType dtype_;
};

// The base's history after an in-place op `fn` on one of its views.
class CopySlices : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, std::shared_ptr<Node> fn);
  std::string name() const override { return "CopySlices"; }
  variable_list apply(variable_list&& grads) override;
  void release_variables() override { fn_->release_variables(); }

 private:
  DimVector base_sizes_, sizes_, strides_;
  std::int64_t offset_;
  std::shared_ptr<Node> fn_;
};

// ------------------------------------------------------------------ recording (generated kernels)

// Whether a call over these arguments records a node (grad mode is on when the Autograd kernel
// runs at all).
template <typename... Args>
bool compute_requires_grad(const Args&... args) {
  return (requires_grad(args) || ...);
}

inline void append_edges(std::vector<Edge>& out, const Tensor& t) { out.push_back(gradient_edge(t)); }
inline void append_edges(std::vector<Edge>& out, const Operand& o) {
  out.push_back(o.is_tensor() ? gradient_edge(o.tensor()) : Edge{});
}
inline void append_edges(std::vector<Edge>& out, const std::optional<Tensor>& t) {
  out.push_back(t ? gradient_edge(*t) : Edge{});
}
inline void append_edges(std::vector<Edge>& out, TensorList ts) {
  for (const Tensor& t : ts) out.push_back(gradient_edge(t));
}

// The tensor of an Operand (a number becomes a 0-d tensor of its wrapped dtype).
Tensor operand_tensor(const Operand& o);

// Records `fn` as the history of `result` (output number `output_nr`).
void set_history(const Tensor& result, const std::shared_ptr<Node>& fn);
// Marks result as a differentiable view of `base` (base requires grad).
void set_view_of(const Tensor& result, const Tensor& base);
// Before an in-place op on self: RuntimeError when self is a leaf that requires grad (or a view
// of one).
void check_inplace(const char* op, const Tensor& self);
// After an in-place op recorded as `fn`: self's history becomes fn (through CopySlices for a
// view of a tensor with a history).
void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn);
// Raised by the Autograd kernel of an op with an input that requires grad but no formula for it.
[[noreturn]] void not_differentiable(const char* op, const char* input);
// Raised by the Autograd kernel of an out= variant over inputs that require grad.
[[noreturn]] void out_not_differentiable(const char* op);
// The forward trace of a new node, when anomaly mode is on.
void record_trace(Node& node);

// ------------------------------------------------------------------ the engine

// Runs the backward pass from `roots` (gradient edges of the outputs) with `grad_outputs`.
// With `inputs` empty, gradients accumulate into leaves' .grad and the result is empty; else
// only the nodes leading to an input edge run, and the result holds the gradient of each input
// edge (undefined where none reached it); with `accumulate`, the AccumulateGrad nodes among the
// input edges run too (backward(inputs=...)), else nothing accumulates (grad()).
variable_list run_backward(const std::vector<Edge>& roots, variable_list grad_outputs, bool keep_graph,
                           bool create_graph, const std::vector<Edge>& inputs = {}, bool accumulate = false);

// Queues f to run on this thread when the backward pass running on it ends, after its last node
// (torch's Variable._execution_engine.queue_callback; DistributedDataParallel waits for its
// gradient all-reduces there). Error outside a backward pass.
void queue_callback(std::function<void()> f);

// tensor.backward(gradient, retain_graph, create_graph, inputs) for the tensors `outputs`: with
// `inputs`, only those tensors accumulate a gradient (non-leaves into their .grad).
void backward(const variable_list& outputs, const variable_list& grad_outputs, bool keep_graph, bool create_graph,
              const variable_list& inputs = {});
// autograd.grad(outputs, inputs, ...).
variable_list grad(const variable_list& outputs, const variable_list& inputs, const variable_list& grad_outputs,
                   bool keep_graph, bool create_graph, bool allow_unused);

// Tensor hooks.
int register_hook(const Tensor& t, GradHook hook);
void remove_hook(const Tensor& t, int id);
void retain_grad(const Tensor& t);

// The readable text of the graph that produced t (node names, saved shapes), and its DOT form.
std::string explain(const Tensor& t);
std::string graphviz(const Tensor& t);

}  // namespace kael::autograd
