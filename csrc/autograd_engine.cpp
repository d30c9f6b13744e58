// The autograd engine's entry points (Tensor.backward, kael.autograd.backward and grad: the
// arguments read as torch reads them, the engine run without the GIL), grad mode, inference
// mode, anomaly mode, and text views of a graph.
#include <Python.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd_python.h"
#include "guard.h"
#include "kael_function.h"
#include "kael/autograd/autograd.h"
#include "tensor_members.h"
#include "tensor_object.h"

namespace kael::python {

void append_function_functions(std::vector<PyMethodDef>& out);  // autograd_function.cpp

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


namespace {

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

// ---- the arguments of backward() and grad(), read as torch reads them

// What Python's type(o).__name__ gives (the type's name without its module).
const char* type_name(PyObject* o) {
  const char* name = Py_TYPE(o)->tp_name;
  const char* dot = std::strrchr(name, '.');
  return dot != nullptr ? dot + 1 : name;
}

// A tensor or a sequence of tensors as a tuple (a new reference): a Tensor is one, None none (a
// TypeError unless none_ok, as torch's tuple(None)), anything else is iterated whole; its items
// are Tensors or None (a None is refused later, where a tensor is needed).
PyObject* tensor_tuple(PyObject* x, const char* what, bool none_ok) {
  if (x == Py_None) {
    if (none_ok) return PyTuple_New(0);
    PyErr_Format(PyExc_TypeError, "%s: expected a Tensor or a sequence of Tensors, got None", what);
    return nullptr;
  }
  if (is_tensor(x)) return PyTuple_Pack(1, x);
  PyObject* out = PySequence_Tuple(x);
  if (out == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(out); ++i) {
    PyObject* t = PyTuple_GET_ITEM(out, i);
    if (t != Py_None && !is_tensor(t)) {
      PyErr_Format(PyExc_TypeError, "%s: expected Tensors, got %s", what, type_name(t));
      Py_DECREF(out);
      return nullptr;
    }
  }
  return out;
}

// The gradients of n tensors as a tuple (a new reference), as torch reads them: a Tensor is one
// gradient, None one None per tensor, anything else is iterated whole; then zipped with the
// tensors, so gradients beyond the last tensor are never looked at, and fewer than n raise.
PyObject* gradient_tuple(PyObject* grads, Py_ssize_t n, const char* what) {
  if (grads == Py_None) {
    PyObject* out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != nullptr && i < n; ++i) PyTuple_SET_ITEM(out, i, Py_NewRef(Py_None));
    return out;
  }
  const OwnedRef all(is_tensor(grads) ? PyTuple_Pack(1, grads) : PySequence_Tuple(grads));
  if (all.obj == nullptr) return nullptr;
  PyObject* out = PyTuple_GetSlice(all.obj, 0, n);
  if (out == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(out); ++i) {
    PyObject* g = PyTuple_GET_ITEM(out, i);
    if (g != Py_None && !is_tensor(g)) {
      PyErr_Format(PyExc_TypeError, "%s: gradients can be either Tensors or None, but got %s", what, type_name(g));
      Py_DECREF(out);
      return nullptr;
    }
  }
  if (PyTuple_GET_SIZE(out) != n) {
    PyErr_Format(PyExc_RuntimeError, "%s: got %zd tensors and %zd gradients", what, n, PyTuple_GET_SIZE(out));
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

// A flag as torch's engine reads it (an unsigned byte through __index__): a bool, or an integer
// 0..255 (0 is False); None, str and float are TypeErrors, other integers OverflowError.
bool flag_of(PyObject* value, const char* name, bool& out) {
  if (PyBool_Check(value)) {
    out = value == Py_True;
    return true;
  }
  if (value == Py_None || !PyIndex_Check(value)) {
    PyErr_Format(PyExc_TypeError, "%s must be a bool, got %s", name, type_name(value));
    return false;
  }
  const OwnedRef index(PyNumber_Index(value));
  if (index.obj == nullptr) return false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.obj, &overflow);
  if (v == -1 && PyErr_Occurred()) return false;
  if (overflow != 0 || v < 0 || v > 255) {
    PyErr_Format(PyExc_OverflowError, "%s must be a bool, got %S", name, index.obj);
    return false;
  }
  out = v != 0;
  return true;
}

// _queue_callback(callback, /): callback() when the backward pass running on this thread ends
// (torch's Variable._execution_engine.queue_callback); RuntimeError outside a backward pass.
PyObject* py_queue_callback(PyObject*, PyObject* fn) {
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "queue_callback(): expected a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  auto ref = std::make_shared<PyRef>(fn);
  return guarded([&] {
    autograd::queue_callback([ref] {
      Gil gil;
      if (ref->obj == nullptr) return;
      const OwnedRef r(PyObject_CallNoArgs(ref->obj));
      if (r.obj == nullptr) throw PythonError{};
    });
  });
}

// _run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs, /): kael.autograd.backward.
PyObject* py_run_backward(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_Format(PyExc_TypeError, "_run_backward() takes 5 positional arguments but %zd were given", nargs);
    return nullptr;
  }
  return run_backward(args[0], args[1], args[2], args[3], args[4]);
}

// _grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, /): kael.autograd.grad,
// the arguments as the caller gave them; a tuple of gradients.
PyObject* py_grad(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_Format(PyExc_TypeError, "_grad() takes 6 positional arguments but %zd were given", nargs);
    return nullptr;
  }
  const OwnedRef outs(tensor_tuple(args[0], "grad", false));
  if (outs.obj == nullptr) return nullptr;
  const OwnedRef ins(tensor_tuple(args[1], "grad", false));
  if (ins.obj == nullptr) return nullptr;
  if (PyTuple_GET_SIZE(ins.obj) == 0) {
    PyErr_SetString(PyExc_RuntimeError, "`inputs` argument to `grad()` cannot be empty.");
    return nullptr;
  }
  const OwnedRef grads(gradient_tuple(args[2], PyTuple_GET_SIZE(outs.obj), "grad"));
  if (grads.obj == nullptr) return nullptr;
  bool keep_graph = false, create_graph = false, allow_unused = false;
  if (!flag_of(args[3] == Py_None ? args[4] : args[3], "retain_graph", keep_graph) ||
      !flag_of(args[4], "create_graph", create_graph) ||
      (args[5] != Py_None && !flag_of(args[5], "allow_unused", allow_unused)))
    return nullptr;
  std::vector<Tensor> outputs, inputs, grad_outputs;
  if (!tensors_of(outs.obj, "grad", false, outputs) || !tensors_of(ins.obj, "grad", false, inputs) ||
      !tensors_of(grads.obj, "grad", true, grad_outputs))
    return nullptr;
  return guarded([&] {
    return autograd::grad(outputs, inputs, grad_outputs, keep_graph, create_graph, allow_unused);
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

}  // namespace

PyObject* run_backward(PyObject* tensors, PyObject* grad_tensors, PyObject* retain_graph, PyObject* create_graph,
                       PyObject* inputs) {
  const OwnedRef ins(tensor_tuple(inputs, "backward", true));
  if (ins.obj == nullptr) return nullptr;
  if (inputs != Py_None && PyTuple_GET_SIZE(ins.obj) == 0) {
    PyErr_SetString(PyExc_RuntimeError, "`inputs` argument to `backward()` cannot be empty.");
    return nullptr;
  }
  const OwnedRef outs(tensor_tuple(tensors, "backward", false));
  if (outs.obj == nullptr) return nullptr;
  const OwnedRef grads(gradient_tuple(grad_tensors, PyTuple_GET_SIZE(outs.obj), "backward"));
  if (grads.obj == nullptr) return nullptr;
  bool keep_graph = false, create = false;
  if (!flag_of(retain_graph == Py_None ? create_graph : retain_graph, "retain_graph", keep_graph) ||
      !flag_of(create_graph, "create_graph", create))
    return nullptr;
  std::vector<Tensor> outputs, grad_outputs, input_tensors;
  if (!tensors_of(outs.obj, "backward", false, outputs) || !tensors_of(grads.obj, "backward", true, grad_outputs) ||
      !tensors_of(ins.obj, "backward", false, input_tensors))
    return nullptr;
  return guarded([&] { autograd::backward(outputs, grad_outputs, keep_graph, create, input_tensors); },
                 gil::Released{});
}

// Tensor.backward(gradient=None, retain_graph=None, create_graph=False, inputs=None): the engine
// runs from here, as kael.autograd.backward(self, gradient, retain_graph, create_graph,
// inputs=inputs) runs it.
PyObject* m_backward(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (self_overrides(self) || tuple_wants_kael_function(args, kwargs)) [[unlikely]]
    return method_override("backward", self, args, kwargs);
  static const char* keywords[] = {"gradient", "retain_graph", "create_graph", "inputs", nullptr};
  PyObject *gradient = Py_None, *retain_graph = Py_None, *create_graph = Py_False, *inputs = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OOOO:backward", const_cast<char**>(keywords), &gradient,
                                   &retain_graph, &create_graph, &inputs))
    return nullptr;
  return run_backward(self, gradient, retain_graph, create_graph, inputs);
}

void append_autograd_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"is_grad_enabled", py_is_grad_enabled, METH_NOARGS,
                 "is_grad_enabled()\n--\n\nWhether autograd records operations on this thread."});
  out.push_back({"_set_grad_enabled", py_set_grad_enabled, METH_O,
                 "_set_grad_enabled(mode, /)\n--\n\nTurns grad mode on or off on this thread."});
  out.push_back({"is_inference_mode_enabled", py_is_inference_mode_enabled, METH_NOARGS,
                 "is_inference_mode_enabled()\n--\n\nWhether inference mode is on on this thread."});
  out.push_back({"_set_inference_mode", py_set_inference_mode, METH_O,
                 "_set_inference_mode(mode, /)\n--\n\nSets the inference-mode flag of this thread."});
  out.push_back({"_set_anomaly_enabled", py_set_anomaly_enabled, METH_O,
                 "_set_anomaly_enabled(mode, /)\n--\n\nTurns anomaly detection on or off."});
  out.push_back({"is_anomaly_enabled", py_is_anomaly_enabled, METH_NOARGS,
                 "is_anomaly_enabled()\n--\n\nWhether anomaly detection is on."});
  out.push_back({"_run_backward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_run_backward)),
                 METH_FASTCALL,
                 "_run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs, /)\n--\n\nRuns the "
                 "backward pass (kael.autograd.backward, with the arguments as given); with inputs, only they get "
                 "gradients."});
  out.push_back({"_grad", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_grad)), METH_FASTCALL,
                 "_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, /)\n--\n\n"
                 "Computes gradients of outputs with respect to inputs (kael.autograd.grad, with the arguments as "
                 "given)."});
  out.push_back({"_queue_callback", py_queue_callback, METH_O,
                 "_queue_callback(callback, /)\n--\n\ncallback() when the backward pass running on this thread "
                 "ends (torch's Variable._execution_engine.queue_callback)."});
  out.push_back({"_explain", py_explain, METH_O, "_explain(tensor, /)\n--\n\nThe graph behind a tensor as text."});
  out.push_back({"_graphviz", py_graphviz, METH_O,
                 "_graphviz(tensor, /)\n--\n\nThe graph behind a tensor in Graphviz DOT."});
  append_function_functions(out);
}

int kael_init_autograd(PyObject* module) {
  if (kael_init_node_type(module) < 0) return -1;
  autograd::set_trace_function(&python_stack);
  return 0;
}

}  // namespace kael::python
