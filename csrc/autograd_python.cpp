// The Python side of autograd: Tensor.requires_grad/grad/grad_fn/..., graph nodes as Python
// objects (grad_fn, next_functions), grad mode, the engine entry points (which release the GIL;
// hooks and Python Functions take it back), and nodes of kael.autograd.Function.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arg_parsing.h"
#include "guard.h"
#include "kael_function.h"
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/ops/detach.h"
#include "tensor_object.h"

namespace kael::python {

using autograd::AutogradMeta;
using autograd::Node;

namespace {

// ------------------------------------------------------------------ GIL helpers

struct Gil {
  PyGILState_STATE state;
  Gil() : state(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;
};

// A new reference dropped at the end of the scope (with the GIL held).
struct OwnedRef {
  PyObject* obj;
  explicit OwnedRef(PyObject* o) : obj(o) {}
  ~OwnedRef() { Py_XDECREF(obj); }
  OwnedRef(const OwnedRef&) = delete;
  OwnedRef& operator=(const OwnedRef&) = delete;
};

// A Python object owned from C++ code that may drop it without the GIL.
struct PyRef {
  PyObject* obj;
  explicit PyRef(PyObject* o) : obj(o) { Py_XINCREF(o); }
  ~PyRef() {
    if (obj != nullptr && Py_IsInitialized()) {
      Gil gil;
      Py_CLEAR(obj);
    }
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
};

// ------------------------------------------------------------------ nodes as Python objects

struct PyNode {
  PyObject_HEAD
  std::shared_ptr<Node> node;
};

extern PyTypeObject NodeType;

PyObject* wrap_node(const std::shared_ptr<Node>& node) {
  if (!node) Py_RETURN_NONE;
  if (node->pyobj != nullptr) {
    auto* obj = static_cast<PyObject*>(node->pyobj);
    Py_INCREF(obj);
    return obj;
  }
  PyObject* obj = NodeType.tp_alloc(&NodeType, 0);
  if (obj == nullptr) return nullptr;
  auto* pn = reinterpret_cast<PyNode*>(obj);
  new (&pn->node) std::shared_ptr<Node>(node);
  node->pyobj = obj;
  return obj;
}

void node_dealloc(PyObject* self) {
  auto* pn = reinterpret_cast<PyNode*>(self);
  if (pn->node && pn->node->pyobj == self) pn->node->pyobj = nullptr;
  pn->node.~shared_ptr<Node>();
  Py_TYPE(self)->tp_free(self);
}

PyObject* node_repr(PyObject* self) {
  const auto* pn = reinterpret_cast<PyNode*>(self);
  return PyUnicode_FromFormat("<%s object at %p>", pn->node->name().c_str(), self);
}

PyObject* node_name(PyObject* self, PyObject*) {
  return PyUnicode_FromString(reinterpret_cast<PyNode*>(self)->node->name().c_str());
}

PyObject* node_next_functions(PyObject* self, void*) {
  const auto& edges = reinterpret_cast<PyNode*>(self)->node->next_edges();
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(edges.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    PyObject* fn = wrap_node(edges[i].function);
    if (fn == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyObject* pair = Py_BuildValue("(NI)", fn, static_cast<unsigned>(edges[i].input_nr));
    if (pair == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), pair);
  }
  return out;
}

PyObject* node_variable(PyObject* self, void*) {
  const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(reinterpret_cast<PyNode*>(self)->node.get());
  if (acc == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "only AccumulateGrad nodes have a variable");
    return nullptr;
  }
  return wrap(acc->variable());
}

PyObject* node_saved(PyObject* self, void*) {
  return PyUnicode_FromString(reinterpret_cast<PyNode*>(self)->node->saved_description().c_str());
}

PyObject* node_richcompare(PyObject* a, PyObject* b, int op) {
  if (!PyObject_TypeCheck(b, &NodeType) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  const bool same = reinterpret_cast<PyNode*>(a)->node == reinterpret_cast<PyNode*>(b)->node;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

Py_hash_t node_hash(PyObject* self) {
  return static_cast<Py_hash_t>(reinterpret_cast<std::uintptr_t>(reinterpret_cast<PyNode*>(self)->node.get()) >> 4);
}

PyMethodDef node_methods[] = {{"name", node_name, METH_NOARGS, "name($self, /)\n--\n\nThe node's name."},
                              {nullptr, nullptr, 0, nullptr}};
PyGetSetDef node_getset[] = {
    {"next_functions", node_next_functions, nullptr, "The nodes gradients flow to: (node or None, input_nr) pairs.",
     nullptr},
    {"variable", node_variable, nullptr, "The leaf of an AccumulateGrad node.", nullptr},
    {"_saved", node_saved, nullptr, "What the node saved for backward, as text.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject NodeType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael._C._Node",
    .tp_basicsize = sizeof(PyNode),
    .tp_dealloc = node_dealloc,
    .tp_repr = node_repr,
    .tp_hash = node_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A node of the autograd graph (a tensor's grad_fn).",
    .tp_richcompare = node_richcompare,
    .tp_methods = node_methods,
    .tp_getset = node_getset,
};

// ------------------------------------------------------------------ Tensor attributes

PyObject* get_requires_grad(PyObject* self, void*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function_getter("requires_grad", self);
  return PyBool_FromLong(autograd::requires_grad(tensor_of(self)));
}

int set_requires_grad_attr(PyObject* self, PyObject* value, void*) {
  if (value == nullptr || !PyBool_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "requires_grad must be a bool");
    return -1;
  }
  return guarded([&] {
    autograd::set_requires_grad(tensor_of(self), value == Py_True);
    return 0;
  });
}

PyObject* get_grad(PyObject* self, void*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function_getter("grad", self);
  const Tensor& t = tensor_of(self);
  const AutogradMeta* m = autograd::meta_of(t);
  if (m != nullptr && m->grad_fn && !m->retains_grad && !m->grad.defined()) {
    if (PyErr_WarnEx(PyExc_UserWarning,
                     "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                     "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
                     "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.",
                     1) < 0)
      return nullptr;
  }
  if (m == nullptr || !m->grad.defined()) Py_RETURN_NONE;
  return wrap(m->grad);
}

int set_grad(PyObject* self, PyObject* value, void*) {
  const Tensor& t = tensor_of(self);
  if (value == nullptr || value == Py_None) {
    if (AutogradMeta* m = autograd::meta_of(t)) m->grad = Tensor();
    return 0;
  }
  if (!is_tensor(value)) {
    PyErr_Format(PyExc_TypeError, "assigned grad expected to be a Tensor or None but got grad of type %s",
                 Py_TYPE(value)->tp_name);
    return -1;
  }
  const Tensor& g = tensor_of(value);
  return guarded([&] {
    KAEL_CHECK(g.dtype() == t.dtype(), "assigned grad has data of a different type");
    KAEL_CHECK(autograd::same_sizes(g.sizes(), t.sizes()), "assigned grad has data of a different size");
    autograd::ensure_meta(t).grad = g;
    return 0;
  });
}

PyObject* get_grad_fn(PyObject* self, void*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function_getter("grad_fn", self);
  const Tensor& t = tensor_of(self);
  if (!autograd::requires_grad(t)) Py_RETURN_NONE;
  return wrap_node(autograd::grad_fn(t));
}

PyObject* get_is_leaf(PyObject* self, void*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function_getter("is_leaf", self);
  return PyBool_FromLong(autograd::is_leaf(tensor_of(self)));
}

PyObject* get_retains_grad(PyObject* self, void*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function_getter("retains_grad", self);
  const AutogradMeta* m = autograd::meta_of(tensor_of(self));
  return PyBool_FromLong(m != nullptr && m->retains_grad);
}

// Note [__kael_function__]: (self, *args) and kwargs to the overrides of Tensor.<name>.
PyObject* method_override(const char* name, PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* head = PyTuple_Pack(1, self);
  PyObject* full = head == nullptr ? nullptr : PySequence_Concat(head, args);
  Py_XDECREF(head);
  if (full == nullptr) return nullptr;
  PyObject* r = call_kael_function_tuple(name, full, kwargs);
  Py_DECREF(full);
  return r;
}

PyObject* m_requires_grad_(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (self_overrides(self) || tuple_wants_kael_function(args, kwargs)) [[unlikely]]
    return method_override("requires_grad_", self, args, kwargs);
  static const char* keywords[] = {"requires_grad", nullptr};
  int value = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:requires_grad_", const_cast<char**>(keywords), &value))
    return nullptr;
  return guarded([&] {
    autograd::set_requires_grad(tensor_of(self), value != 0);
    Py_INCREF(self);
    return self;
  });
}

PyObject* m_is_inference(PyObject* self, PyObject*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function("is_inference", true, self, nullptr, 0, nullptr);
  return PyBool_FromLong(tensor_of(self).impl()->storage()->is_inference());
}

PyObject* m_retain_grad(PyObject* self, PyObject*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function("retain_grad", true, self, nullptr, 0, nullptr);
  return guarded([&] {
    autograd::retain_grad(tensor_of(self));
    Py_RETURN_NONE;
  });
}

PyObject* m_detach_(PyObject* self, PyObject*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function("detach_", true, self, nullptr, 0, nullptr);
  return guarded([&] {
    const Tensor& t = tensor_of(self);
    if (AutogradMeta* m = autograd::meta_of(t)) {
      KAEL_CHECK(!m->view_base.defined() || !autograd::requires_grad(m->view_base),
                 "Can't detach views in-place. Use detach() instead.");
      m->grad_fn.reset();
      m->requires_grad = false;
      m->output_nr = 0;
    }
    t.impl()->remove_keys(DispatchKeySet(DispatchKey::Autograd));
    Py_INCREF(self);
    return self;
  });
}

// The name a hook's errors give it, as torch's: its __name__, else "<unknown>".
std::string hook_name(PyObject* fn) {
  std::string out = "<unknown>";
  PyObject* name = PyObject_GetAttrString(fn, "__name__");
  if (name != nullptr && PyUnicode_Check(name)) {
    Py_ssize_t n = 0;
    if (const char* s = PyUnicode_AsUTF8AndSize(name, &n)) out.assign(s, static_cast<std::size_t>(n));
  }
  Py_XDECREF(name);
  PyErr_Clear();
  return out;
}

// The type name torch's messages give a tensor (at::Tensor::toString): the legacy tensor type
// ("kael.FloatTensor", "kael.cuda.DoubleTensor"), or "CPUBoolType" / "CPUBFloat16Type" for the
// dtypes that have none there.
std::string legacy_type_name(const Tensor& t) {
  static constexpr std::pair<const char*, const char*> names[] = {
      {"float32", "FloatTensor"}, {"float64", "DoubleTensor"}, {"float16", "HalfTensor"},
      {"uint8", "ByteTensor"},    {"int8", "CharTensor"},      {"int16", "ShortTensor"},
      {"int32", "IntTensor"},     {"int64", "LongTensor"}};
  const bool cuda = t.device().is_cuda();
  const std::string dtype = dtype_name(t.dtype());
  for (const auto& [d, name] : names)
    if (dtype == d) return (cuda ? "kael.cuda." : "kael.") + std::string(name);
  if (t.dtype() == ScalarType::Bool) return cuda ? "CUDABoolType" : "CPUBoolType";
  if (t.dtype() == ScalarType::BFloat16) return cuda ? "CUDABFloat16Type" : "CPUBFloat16Type";
  return (cuda ? "kael.cuda." : "kael.") + dtype;
}

// A hook may replace a gradient only by one of the same dtype, device and size, as torch's
// check_single_result: the engine never converts a hook's result. Raises RuntimeError naming the hook.
void check_hook_result(PyObject* fn, const Tensor& original, const Tensor& result) {
  if (original.dtype() != result.dtype() || original.device().type != result.device().type) {
    PyErr_Format(PyExc_RuntimeError, "hook '%s' has changed the type of value (was %s got %s)", hook_name(fn).c_str(),
                 legacy_type_name(original).c_str(), legacy_type_name(result).c_str());
    throw PythonError{};
  }
  if (!autograd::same_sizes(original.sizes(), result.sizes())) {
    PyErr_Format(PyExc_RuntimeError, "hook '%s' has changed the size of value", hook_name(fn).c_str());
    throw PythonError{};
  }
}

// A Python callable as a gradient hook (Tensor.register_hook on a leaf or a non-leaf): called
// with the GIL; None keeps the gradient, a tensor replaces it (same dtype, device and size). A
// named type, so that the garbage collector finds the callable in a GradHook (traverse_autograd).
struct PythonHook {
  std::shared_ptr<PyRef> ref;

  Tensor operator()(const Tensor& g) const {
    Gil gil;
    // null once the collector cleared it: the tensor it hooked was garbage
    PyObject* fn = ref->obj;
    if (fn == nullptr) return Tensor();
    const OwnedRef held(Py_NewRef(fn));  // the hook may remove itself while it runs
    PyObject* arg = wrap(g);
    const OwnedRef r(arg == nullptr ? nullptr : PyObject_CallOneArg(fn, arg));
    Py_XDECREF(arg);
    if (r.obj == nullptr) throw PythonError{};
    if (r.obj == Py_None) return Tensor();
    if (!is_tensor(r.obj)) {
      PyErr_Format(PyExc_TypeError, "hook '%s' returned %s: expected a Tensor or None", hook_name(fn).c_str(),
                   Py_TYPE(r.obj)->tp_name);
      throw PythonError{};
    }
    Tensor out = tensor_of(r.obj);
    check_hook_result(fn, g, out);
    return out;
  }
};

autograd::GradHook python_hook(PyObject* fn) { return PythonHook{std::make_shared<PyRef>(fn)}; }

PyObject* m_register_hook(PyObject* self, PyObject* fn) {
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "register_hook expects a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  return guarded([&] { return PyLong_FromLong(autograd::register_hook(tensor_of(self), python_hook(fn))); });
}

PyObject* m_remove_hook(PyObject* self, PyObject* id) {
  const long v = PyLong_AsLong(id);
  if (v == -1 && PyErr_Occurred()) return nullptr;
  return guarded([&] {
    autograd::remove_hook(tensor_of(self), static_cast<int>(v));
    Py_RETURN_NONE;
  });
}

// Tensor.backward and Tensor.register_hook are written in Python (kael/autograd/__init__.py).
PyObject* forward_to_autograd(const char* name, PyObject* self, PyObject* args, PyObject* kwargs) {
  return call_module_function("kael.autograd", name, self, args, kwargs);
}

PyObject* m_backward(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (self_overrides(self) || tuple_wants_kael_function(args, kwargs)) [[unlikely]]
    return method_override("backward", self, args, kwargs);
  return forward_to_autograd("_tensor_backward", self, args, kwargs);
}

PyObject* m_register_hook_py(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (self_overrides(self) || tuple_wants_kael_function(args, kwargs)) [[unlikely]]
    return method_override("register_hook", self, args, kwargs);
  return forward_to_autograd("_tensor_register_hook", self, args, kwargs);
}

PyGetSetDef autograd_getset[] = {
    {"requires_grad", get_requires_grad, set_requires_grad_attr,
     "Whether autograd records operations on this tensor.", nullptr},
    {"grad", get_grad, set_grad, "The gradient accumulated by backward(), or None.", nullptr},
    {"grad_fn", get_grad_fn, nullptr, "The graph node that created this tensor, or None for leaves.", nullptr},
    {"is_leaf", get_is_leaf, nullptr, "Whether the tensor was not created by a recorded operation.", nullptr},
    {"retains_grad", get_retains_grad, nullptr, "Whether retain_grad() was called on this non-leaf tensor.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMethodDef autograd_methods[] = {
    {"requires_grad_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_requires_grad_)),
     METH_VARARGS | METH_KEYWORDS,
     "requires_grad_($self, requires_grad=True)\n--\n\nSets requires_grad in place and returns the tensor."},
    {"retain_grad", m_retain_grad, METH_NOARGS,
     "retain_grad($self, /)\n--\n\nMakes backward() fill .grad of this non-leaf tensor."},
    {"detach_", m_detach_, METH_NOARGS, "detach_($self, /)\n--\n\nDetaches the tensor from the graph in place."},
    {"is_inference", m_is_inference, METH_NOARGS,
     "is_inference($self, /)\n--\n\nWhether the tensor is an inference tensor (made in inference mode)."},
    {"backward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_backward)),
     METH_VARARGS | METH_KEYWORDS,
     "backward($self, gradient=None, retain_graph=None, create_graph=False, inputs=None)\n--\n\nComputes the "
     "gradient of this tensor with respect to the graph leaves and accumulates it into their .grad."},
    {"register_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_register_hook_py)),
     METH_VARARGS | METH_KEYWORDS,
     "register_hook($self, hook)\n--\n\nRegisters hook(grad) on this tensor's gradient; it may return a "
     "replacement. Returns a handle with remove()."},
    {"_register_hook", m_register_hook, METH_O, "_register_hook($self, fn, /)\n--\n\nRegisters a gradient hook; returns its id."},
    {"_remove_hook", m_remove_hook, METH_O, "_remove_hook($self, id, /)\n--\n\nRemoves the gradient hook with the given id."},
    {nullptr, nullptr, 0, nullptr}};

// ------------------------------------------------------------------ module functions

PyObject* py_is_grad_enabled(PyObject*, PyObject*) { return PyBool_FromLong(autograd::GradMode::is_enabled()); }

PyObject* py_set_grad_enabled(PyObject*, PyObject* arg) {
  const int v = PyObject_IsTrue(arg);
  if (v < 0) return nullptr;
  autograd::GradMode::set_enabled(v != 0);
  Py_RETURN_NONE;
}

PyObject* py_is_inference_mode_enabled(PyObject*, PyObject*) {
  return PyBool_FromLong(autograd::InferenceMode::is_enabled());
}

PyObject* py_set_inference_mode(PyObject*, PyObject* arg) {
  const int v = PyObject_IsTrue(arg);
  if (v < 0) return nullptr;
  autograd::InferenceMode::set_enabled(v != 0);
  Py_RETURN_NONE;
}

PyObject* py_set_anomaly_enabled(PyObject*, PyObject* arg) {
  const int v = PyObject_IsTrue(arg);
  if (v < 0) return nullptr;
  autograd::AnomalyMode::set_enabled(v != 0);
  Py_RETURN_NONE;
}

PyObject* py_is_anomaly_enabled(PyObject*, PyObject*) { return PyBool_FromLong(autograd::AnomalyMode::is_enabled()); }

// A sequence of tensors (None entries as undefined tensors when allowed).
bool tensors_of(PyObject* seq, const char* what, bool allow_none, std::vector<Tensor>& out) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(fast, i);
    if (is_tensor(o)) {
      out.push_back(tensor_of(o));
    } else if (allow_none && o == Py_None) {
      out.emplace_back();
    } else {
      PyErr_Format(PyExc_TypeError, "%s: expected a Tensor%s at position %zd, got %s", what,
                   allow_none ? " or None" : "", i, Py_TYPE(o)->tp_name);
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

// _run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs): the GIL is released
// while the engine runs.
PyObject* py_run_backward(PyObject*, PyObject* args) {
  PyObject *outs, *grads, *ins;
  int keep_graph = 0, create_graph = 0;
  if (!PyArg_ParseTuple(args, "OOppO:_run_backward", &outs, &grads, &keep_graph, &create_graph, &ins)) return nullptr;
  std::vector<Tensor> outputs, grad_outputs, inputs;
  if (!tensors_of(outs, "backward", false, outputs) || !tensors_of(grads, "backward", true, grad_outputs) ||
      !tensors_of(ins, "backward", false, inputs))
    return nullptr;
  return guarded([&] { autograd::backward(outputs, grad_outputs, keep_graph != 0, create_graph != 0, inputs); },
                 gil::Released{});
}

// _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused) -> tuple
PyObject* py_grad(PyObject*, PyObject* args) {
  PyObject *outs, *ins, *grads;
  int keep_graph = 0, create_graph = 0, allow_unused = 0;
  if (!PyArg_ParseTuple(args, "OOOppp:_grad", &outs, &ins, &grads, &keep_graph, &create_graph, &allow_unused))
    return nullptr;
  std::vector<Tensor> outputs, inputs, grad_outputs;
  if (!tensors_of(outs, "grad", false, outputs) || !tensors_of(ins, "grad", false, inputs) ||
      !tensors_of(grads, "grad", true, grad_outputs))
    return nullptr;
  return guarded([&] {
    return autograd::grad(outputs, inputs, grad_outputs, keep_graph != 0, create_graph != 0, allow_unused != 0);
  }, gil::Released{});
}

PyObject* py_explain(PyObject*, PyObject* t) {
  if (!is_tensor(t)) {
    PyErr_SetString(PyExc_TypeError, "explain: expected a Tensor");
    return nullptr;
  }
  return guarded([&] { return PyUnicode_FromString(autograd::explain(tensor_of(t)).c_str()); });
}

PyObject* py_graphviz(PyObject*, PyObject* t) {
  if (!is_tensor(t)) {
    PyErr_SetString(PyExc_TypeError, "graphviz: expected a Tensor");
    return nullptr;
  }
  return guarded([&] { return PyUnicode_FromString(autograd::graphviz(tensor_of(t)).c_str()); });
}

// ------------------------------------------------------------------ kael.autograd.Function

// The node of a Python Function: its backward is the Python callable, called with the GIL held.
class PyFunctionNode : public Node {
 public:
  explicit PyFunctionNode(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void release_variables() override {
    for (autograd::SavedVariable& v : saved_) v.reset_data();
    if (Py_IsInitialized()) {
      Gil gil;
      backward_.reset();
    }
  }
  autograd::variable_list apply(autograd::variable_list&& grads) override {
    Gil gil;
    KAEL_CHECK(backward_ && backward_->obj,
               "Trying to backward through the graph a second time (or directly access saved tensors after they "
               "have already been freed). Specify retain_graph=True if you need to backward through the graph a "
               "second time. (node: "
                   << name_ << ")");
    PyObject* args = PyTuple_New(static_cast<Py_ssize_t>(grads.size()));
    if (args == nullptr) throw PythonError{};
    for (std::size_t i = 0; i < grads.size(); ++i) {
      PyObject* g = wrap(grads[i]);
      if (g == nullptr) {
        Py_DECREF(args);
        throw PythonError{};
      }
      PyTuple_SET_ITEM(args, static_cast<Py_ssize_t>(i), g);
    }
    PyObject* r = PyObject_Call(backward_->obj, args, nullptr);
    Py_DECREF(args);
    if (r == nullptr) throw PythonError{};
    autograd::variable_list out;
    const bool ok = is_tensor(r) || r == Py_None
                        ? (out.push_back(r == Py_None ? Tensor() : tensor_of(r)), true)
                        : tensors_of(r, name_.c_str(), true, out);
    Py_DECREF(r);
    if (!ok) throw PythonError{};
    if (out.size() != next_edges_.size()) {
      PyErr_Format(PyExc_RuntimeError, "function %s returned an incorrect number of gradients (expected %zu, got %zu)",
                   name_.c_str(), next_edges_.size(), out.size());
      throw PythonError{};
    }
    return out;
  }

 private:
  std::string name_;
  std::shared_ptr<PyRef> backward_ = nullptr;

 public:
  void set_backward(PyObject* fn) { backward_ = std::make_shared<PyRef>(fn); }
  // The reference to the Python backward (for the garbage collector), or null once released.
  const std::shared_ptr<PyRef>* backward_ref() const {
    return backward_ && backward_->obj != nullptr ? &backward_ : nullptr;
  }
  // What ctx.save_for_backward saved, as SavedVariables (None entries undefined): an output of
  // the Function itself is kept without its grad_fn, which is this node, so saving it makes no
  // reference cycle (the ctx reaches the node only weakly, through saved_tensors_of).
  std::vector<autograd::SavedVariable> saved_;
  std::vector<bool> saved_none_;

  // ctx.saved_tensors: a tuple of the unpacked tensors (RuntimeError once freed or modified).
  PyObject* unpack_saved() {
    PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(saved_.size()));
    if (out == nullptr) return nullptr;
    for (std::size_t i = 0; i < saved_.size(); ++i) {
      PyObject* item;
      if (saved_none_[i]) {
        Py_INCREF(Py_None);
        item = Py_None;
      } else {
        item = wrap(saved_[i].unpack(this));
      }
      if (item == nullptr) {
        Py_DECREF(out);
        return nullptr;
      }
      PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
    }
    return out;
  }
};

constexpr const char* kNodeCapsule = "kael.autograd.FunctionNode";

void node_capsule_destructor(PyObject* capsule) {
  delete static_cast<std::weak_ptr<Node>*>(PyCapsule_GetPointer(capsule, kNodeCapsule));
}

// The saved_tensors of a Function call, through a weak reference to its node.
PyObject* saved_tensors_of(PyObject* capsule, PyObject*) {
  auto* weak = static_cast<std::weak_ptr<Node>*>(PyCapsule_GetPointer(capsule, kNodeCapsule));
  if (weak == nullptr) return nullptr;
  return guarded([&]() -> PyObject* {
    std::shared_ptr<Node> node = weak->lock();
    KAEL_CHECK(node != nullptr,
               "Trying to backward through the graph a second time (or directly access saved tensors after they "
               "have already been freed). Saved intermediate values of the graph are freed when you call "
               ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
               "a second time or if you need to access saved tensors after calling backward.");
    return static_cast<PyFunctionNode*>(node.get())->unpack_saved();
  });
}

PyMethodDef saved_tensors_def = {"saved_tensors", saved_tensors_of, METH_NOARGS,
                                 "The tensors the Function call saved for backward."};

// _record_function(name, backward, inputs, outputs, non_differentiable, saved, dirty=()): makes
// the node of a Function call (edges from the tensors among `inputs`, one per argument), sets it
// as the history of each differentiable output and keeps the `saved` tensors in it. Returns the
// outputs (an output that is an input comes back as a new tensor sharing its data, unless it is
// among `dirty`, the inputs ctx.mark_dirty named: those were modified in place and come back as
// themselves, their history rebased onto the node as an in-place op's) and a function returning
// the saved tensors (which refers to the node weakly).
PyObject* py_record_function(PyObject*, PyObject* args) {
  const char* name;
  PyObject *backward, *inputs, *outputs, *nondiff, *saved, *dirty_arg = nullptr;
  if (!PyArg_ParseTuple(args, "sOOOOO|O:_record_function", &name, &backward, &inputs, &outputs, &nondiff, &saved,
                        &dirty_arg))
    return nullptr;
  PyObject* in = PySequence_Fast(inputs, "inputs");
  if (in == nullptr) return nullptr;
  std::vector<autograd::Edge> edges;
  std::vector<Tensor> input_tensors;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(in); ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(in, i);
    if (is_tensor(o)) {
      edges.push_back(autograd::gradient_edge(tensor_of(o)));
      input_tensors.push_back(tensor_of(o));
    } else {
      edges.emplace_back();
    }
  }
  Py_DECREF(in);
  std::vector<Tensor> outs, skip, to_save, dirty;
  if (!tensors_of(outputs, "Function outputs", true, outs) || !tensors_of(nondiff, "non-differentiable", false, skip) ||
      !tensors_of(saved, "save_for_backward", true, to_save) ||
      (dirty_arg != nullptr && !tensors_of(dirty_arg, "mark_dirty", false, dirty)))
    return nullptr;
  return guarded([&]() -> PyObject* {
    auto node = std::make_shared<PyFunctionNode>(name);
    node->set_backward(backward);
    node->set_next_edges(std::move(edges));
    autograd::record_trace(*node);
    std::vector<Tensor> recorded(outs.size());
    std::vector<bool> with_history(outs.size(), false);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      Tensor t = outs[i];
      if (t.defined()) {
        bool is_input = false, is_dirty = false;
        for (const Tensor& x : input_tensors) is_input = is_input || x.is_same(t);
        for (const Tensor& x : dirty) is_dirty = is_dirty || x.is_same(t);
        bool differentiable = is_floating(t.dtype());
        for (const Tensor& x : skip) differentiable = differentiable && !x.is_same(outs[i]);
        // torch's rules: an input returned as an output comes back as a new tensor sharing its data,
        // except a dirty one that is differentiable or requires no grad (it comes back as itself)
        if (is_input && !(is_dirty && (differentiable || !autograd::requires_grad(t)))) t = kael::detach(t);
        if (differentiable && is_dirty) {
          KAEL_CHECK(!(autograd::requires_grad(t) && autograd::is_leaf(t)),
                     name << ": a leaf Variable that requires grad has been used in an in-place operation.");
          KAEL_CHECK(!(t.impl()->is_view() && outs.size() > 1),
                     name << ": If your Function modifies inplace an input that is a view of another Tensor, your "
                             "Function cannot return more than one Tensor. This is not supported by the current "
                             "autograd engine. You should either make sure the input is not a view (using .clone() "
                             "for example) or make your Function only return one Tensor.");
          autograd::check_inplace(name, t);
          t.bump_version();  // as torch marks a dirty tensor: saved copies of it are stale now
          autograd::rebase_history(t, node);
        } else if (differentiable) {
          autograd::set_history(t, node);
        } else {
          node->add_input_metadata(t);  // keeps output numbering
        }
        with_history[i] = differentiable;
      }
      recorded[i] = t;
    }
    for (const Tensor& t : to_save) {
      node->saved_none_.push_back(!t.defined());
      std::size_t i = 0;
      while (t.defined() && i < outs.size() && !(outs[i].defined() && outs[i].is_same(t))) ++i;
      if (t.defined() && i < outs.size()) {
        node->saved_.emplace_back(recorded[i], with_history[i]);
      } else {
        node->saved_.emplace_back(t, false);
      }
    }
    PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(outs.size()));
    if (result == nullptr) return nullptr;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      PyObject* w = wrap(recorded[i]);
      if (w == nullptr) {
        Py_DECREF(result);
        return nullptr;
      }
      PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), w);
    }
    PyObject* capsule = PyCapsule_New(new std::weak_ptr<Node>(node), kNodeCapsule, node_capsule_destructor);
    PyObject* unpack = capsule != nullptr ? PyCFunction_New(&saved_tensors_def, capsule) : nullptr;
    Py_XDECREF(capsule);
    if (unpack == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
    return Py_BuildValue("(NN)", result, unpack);
  });
}

std::string python_stack() {
  Gil gil;
  std::string out;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* mod = PyImport_ImportModule("traceback");
  if (mod != nullptr) {
    PyObject* lines = PyObject_CallMethod(mod, "format_stack", nullptr);
    if (lines != nullptr) {
      PyObject* sep = PyUnicode_FromString("");
      PyObject* text = sep ? PyUnicode_Join(sep, lines) : nullptr;
      if (text != nullptr) {
        const char* s = PyUnicode_AsUTF8(text);
        if (s != nullptr) out = s;
        Py_DECREF(text);
      }
      Py_XDECREF(sep);
      Py_DECREF(lines);
    }
    Py_DECREF(mod);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return out;
}

// Note [Tensor objects and the garbage collector], the autograd part. Calls f(ref, obj) for each
// Python object that the autograd metadata `m` of a tensor keeps alive through C++ structures
// that nothing but m reaches (the caller checked that its object is the only owner of the
// impl): its leaf hooks; and, when m alone holds its grad_fn, that node and each node below it
// held only by the edge it was reached through, with their tensor hooks, a Python Function's
// backward (a closure over its ctx) and the object of a leaf that its AccumulateGrad alone owns.
// `ref` holds the reference to clear (null for a tensor object, which clears itself). A hook or node
// held elsewhere too (by a running backward pass, a grad_fn object, another tensor) is left out,
// so its objects count as reachable. Nothing reached here can change meanwhile: every writer
// of these structures either holds the GIL or holds the node. f returns nonzero to stop.
template <typename F>
int for_each_autograd_ref(const AutogradMeta& m, F&& f) {
  auto hook = [&](const autograd::GradHook& fn) -> int {
    const PythonHook* h = fn.target<PythonHook>();
    if (h == nullptr || h->ref.use_count() != 1 || h->ref->obj == nullptr) return 0;
    return f(&h->ref, h->ref->obj);
  };
  for (const auto& entry : m.leaf_hooks)
    if (const int r = hook(entry.second)) return r;
  if (!m.grad_fn || m.grad_fn.use_count() != 1) return 0;
  std::vector<const Node*> stack{m.grad_fn.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    int r = 0;
    n->for_each_pre_hook([&](const autograd::GradHook& fn) {
      if (r == 0) r = hook(fn);
    });
    if (r != 0) return r;
    if (const auto* fn = dynamic_cast<const PyFunctionNode*>(n)) {
      if (const std::shared_ptr<PyRef>* ref = fn->backward_ref())
        if (const int r2 = f(ref, (*ref)->obj)) return r2;
    } else if (const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(n)) {
      if (PyObject* leaf = exclusively_owned_pyobj(acc->variable().impl()))
        if (const int r2 = f(nullptr, leaf)) return r2;
    }
    for (const autograd::Edge& e : n->next_edges())
      if (e.function && e.function.use_count() == 1) stack.push_back(e.function.get());
  }
  return 0;
}

}  // namespace

int traverse_autograd(const AutogradMeta& m, visitproc visit, void* arg) {
  return for_each_autograd_ref(m, [&](const std::shared_ptr<PyRef>*, PyObject* obj) {
    Py_VISIT(obj);
    return 0;
  });
}

void clear_autograd(const AutogradMeta& m) {
  // Cleared after the walk, each kept alive meanwhile: a clear can run any Python code (__del__),
  // which may remove hooks.
  std::vector<std::shared_ptr<PyRef>> refs;
  for_each_autograd_ref(m, [&](const std::shared_ptr<PyRef>* ref, PyObject*) {
    if (ref != nullptr) refs.push_back(*ref);
    return 0;
  });
  for (const std::shared_ptr<PyRef>& ref : refs) Py_CLEAR(ref->obj);
}

void append_autograd_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"is_grad_enabled", py_is_grad_enabled, METH_NOARGS,
                 "is_grad_enabled()\n--\n\nWhether autograd records operations on this thread."});
  out.push_back({"_set_grad_enabled", py_set_grad_enabled, METH_O, "_set_grad_enabled(mode, /)\n--\n\nTurns grad mode on or off on this thread."});
  out.push_back({"is_inference_mode_enabled", py_is_inference_mode_enabled, METH_NOARGS,
                 "is_inference_mode_enabled()\n--\n\nWhether inference mode is on on this thread."});
  out.push_back({"_set_inference_mode", py_set_inference_mode, METH_O, "_set_inference_mode(mode, /)\n--\n\nSets the inference-mode flag of this thread."});
  out.push_back({"_set_anomaly_enabled", py_set_anomaly_enabled, METH_O, "_set_anomaly_enabled(mode, /)\n--\n\nTurns anomaly detection on or off."});
  out.push_back({"is_anomaly_enabled", py_is_anomaly_enabled, METH_NOARGS,
                 "is_anomaly_enabled()\n--\n\nWhether anomaly detection is on."});
  out.push_back({"_run_backward", py_run_backward, METH_VARARGS, "_run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs, /)\n--\n\nRuns the backward pass (tensor.backward()); with inputs, only they get gradients."});
  out.push_back({"_grad", py_grad, METH_VARARGS, "_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, /)\n--\n\nComputes gradients of outputs with respect to inputs."});
  out.push_back({"_explain", py_explain, METH_O, "_explain(tensor, /)\n--\n\nThe graph behind a tensor as text."});
  out.push_back({"_graphviz", py_graphviz, METH_O, "_graphviz(tensor, /)\n--\n\nThe graph behind a tensor in Graphviz DOT."});
  out.push_back({"_record_function", py_record_function, METH_VARARGS, "_record_function(name, backward, inputs, outputs, non_differentiable, saved, dirty=(), /)\n--\n\nRecords the node of a Python Function; returns its outputs and a function returning its saved tensors."});
}

int kael_init_autograd(PyObject* module) {
  if (PyType_Ready(&NodeType) < 0) return -1;
  Py_INCREF(&NodeType);
  if (PyModule_AddObject(module, "_Node", reinterpret_cast<PyObject*>(&NodeType)) < 0) return -1;
  PyObject* dict = TensorType.tp_dict;
  for (PyGetSetDef* g = autograd_getset; g->name != nullptr; ++g) {
    PyObject* d = PyDescr_NewGetSet(&TensorType, g);
    if (d == nullptr || PyDict_SetItemString(dict, g->name, d) < 0) return -1;
    Py_DECREF(d);
  }
  for (PyMethodDef* m = autograd_methods; m->ml_name != nullptr; ++m) {
    PyObject* d = PyDescr_NewMethod(&TensorType, m);
    if (d == nullptr || PyDict_SetItemString(dict, m->ml_name, d) < 0) return -1;
    Py_DECREF(d);
  }
  PyType_Modified(&TensorType);
  autograd::set_trace_function(&python_stack);
  return 0;
}

}  // namespace kael::python
