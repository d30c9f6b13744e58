// kael._C._trace_dispatch(fn): runs fn() with the Python dispatch key included on this thread
// and a boxed fallback that records the name of every op that reaches that key, then
// redispatches below it. It shows which registered ops a Python-level operation goes through
// (the key sees every op below autograd, after composite-implicit ops decompose), which is
// what a `__torch_dispatch__`-style mode will see. Used by tests; not a public API.
#include <Python.h>

#include <string>
#include <vector>

#include "kael/dispatch/dispatcher.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

thread_local std::vector<std::string>* tls_trace = nullptr;

void tracing_fallback(const dispatch::OpEntry& op, DispatchKeySet ks, dispatch::Stack& stack) {
  if (tls_trace != nullptr) tls_trace->emplace_back(op.name);
  dispatch::ExcludeGuard below(DispatchKeySet(DispatchKey::Python));
  dispatch::redispatch_boxed(op, ks.below(DispatchKey::Python), stack);
}

PyObject* py_trace_dispatch(PyObject*, PyObject* fn) {
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "_trace_dispatch: expected a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  // Installed once and never removed: another thread tracing at the same time must not find
  // the fallback gone halfway through its call. Only threads inside _trace_dispatch include the
  // Python key, so nothing else reaches it.
  static const bool installed = (dispatch::set_fallback(DispatchKey::Python, &tracing_fallback), true);
  (void)installed;
  std::vector<std::string> trace;
  std::vector<std::string>* outer = tls_trace;
  tls_trace = &trace;
  PyObject* result;
  {
    dispatch::IncludeGuard mode(DispatchKeySet(DispatchKey::Python));
    result = PyObject_CallNoArgs(fn);
  }
  tls_trace = outer;
  if (result == nullptr) return nullptr;
  PyObject* names = PyList_New(static_cast<Py_ssize_t>(trace.size()));
  if (names == nullptr) {
    Py_DECREF(result);
    return nullptr;
  }
  for (std::size_t i = 0; i < trace.size(); ++i) {
    PyObject* s = PyUnicode_FromStringAndSize(trace[i].data(), static_cast<Py_ssize_t>(trace[i].size()));
    if (s == nullptr) {
      Py_DECREF(result);
      Py_DECREF(names);
      return nullptr;
    }
    PyList_SET_ITEM(names, static_cast<Py_ssize_t>(i), s);
  }
  return Py_BuildValue("(NN)", result, names);
}

}  // namespace

void append_dispatch_functions(std::vector<PyMethodDef>& functions) {
  functions.push_back({"_trace_dispatch", py_trace_dispatch, METH_O,
                       "_trace_dispatch(fn, /)\n--\n\nCalls fn() and returns (its result, the names of the ops that "
                       "reached the Python dispatch key, in order)."});
}

}  // namespace kael::python
