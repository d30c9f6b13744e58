// The autograd members of kael.Tensor (requires_grad, grad, grad_fn, is_leaf, retain_grad(),
// detach_(), hooks; listed in the method table of tensor_methods.cpp; backward() is in
// autograd_engine.cpp) and what the garbage collector sees through a tensor's graph.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd_python.h"
#include "tensor_members.h"
#include "guard.h"
#include "kael_function.h"
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "tensor_object.h"

namespace kael::python {

using autograd::AutogradMeta;
using autograd::Node;

namespace {


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

autograd::GradHook python_hook(PyObject* fn) { return PythonHook{std::make_shared<PyRef>(fn)}; }

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

PyObject* method_override(const char* name, PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* head = PyTuple_Pack(1, self);
  PyObject* full = head == nullptr ? nullptr : PySequence_Concat(head, args);
  Py_XDECREF(head);
  if (full == nullptr) return nullptr;
  PyObject* r = call_kael_function_tuple(name, full, kwargs);
  Py_DECREF(full);
  return r;
}

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

// Tensor.register_hook is written in Python (kael/autograd/__init__.py): its handle is a Python object.
PyObject* m_register_hook_py(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (self_overrides(self) || tuple_wants_kael_function(args, kwargs)) [[unlikely]]
    return method_override("register_hook", self, args, kwargs);
  return call_module_function("kael.autograd", "_tensor_register_hook", self, args, kwargs);
}

Tensor PythonHook::operator()(const Tensor& g) const {
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

}  // namespace kael::python
