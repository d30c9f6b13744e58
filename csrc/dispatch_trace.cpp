// kael._C._trace_dispatch(fn): runs fn() with the Python dispatch key included on this thread
// and a boxed fallback that records the name of every op that reaches that key, then
// redispatches below it. It shows which registered ops a Python-level operation goes through
// (the key sees every op below autograd, after composite-implicit ops decompose), which is
// what a `__torch_dispatch__`-style mode will see. Used by tests; not a public API.
//
// kael._C._profile_ops(fn) uses the same key to time the ops: each op's calls and the seconds
// spent below the key, by name (a kernel's inner calls of other ops are below the key and count
// in its own time). For tools/bench; not a public API.
#include <Python.h>

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kael/dispatch/dispatcher.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

thread_local std::vector<std::string>* tls_trace = nullptr;
// op name -> (calls, seconds)
using Profile = std::map<std::string, std::pair<long long, double>>;
thread_local Profile* tls_profile = nullptr;
thread_local bool tls_profile_shapes = false;

// "name [sizes of each tensor argument, non-contiguous ones marked *]"
std::string profile_key(const dispatch::OpEntry& op, const dispatch::Stack& stack) {
  std::string key(op.name);
  if (!tls_profile_shapes) return key;
  for (const auto& v : stack) {
    if (!v.is_tensor() || !v.to_tensor().defined()) continue;
    const Tensor& t = v.to_tensor();
    key += " [";
    for (std::int64_t d = 0; d < t.dim(); ++d) key += (d ? ", " : "") + std::to_string(t.sizes()[d]);
    key += t.is_contiguous() ? "]" : "]*";
  }
  return key;
}

void tracing_fallback(const dispatch::OpEntry& op, DispatchKeySet ks, dispatch::Stack& stack) {
  if (tls_trace != nullptr) tls_trace->emplace_back(op.name);
  dispatch::ExcludeGuard below(DispatchKeySet(DispatchKey::Python));
  if (tls_profile == nullptr) {
    dispatch::redispatch_boxed(op, ks.below(DispatchKey::Python), stack);
    return;
  }
  std::string key = profile_key(op, stack);
  const auto start = std::chrono::steady_clock::now();
  dispatch::redispatch_boxed(op, ks.below(DispatchKey::Python), stack);
  auto& entry = (*tls_profile)[std::move(key)];
  entry.first += 1;
  entry.second += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Installed once and never removed: another thread tracing at the same time must not find the
// fallback gone halfway through its call. Only threads inside _trace_dispatch or _profile_ops
// include the Python key, so nothing else reaches it.
void install_fallback() {
  static const bool installed = (dispatch::set_fallback(DispatchKey::Python, &tracing_fallback), true);
  (void)installed;
}

PyObject* py_profile_ops(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_Format(PyExc_TypeError, "_profile_ops() takes 2 arguments (fn, shapes), got %zd", nargs);
    return nullptr;
  }
  PyObject* fn = args[0];
  const int shapes = PyObject_IsTrue(args[1]);
  if (shapes < 0) return nullptr;
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "_profile_ops: expected a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  install_fallback();
  Profile profile;
  Profile* outer = tls_profile;
  const bool outer_shapes = tls_profile_shapes;
  tls_profile = &profile;
  tls_profile_shapes = shapes != 0;
  PyObject* result;
  {
    dispatch::IncludeGuard mode(DispatchKeySet(DispatchKey::Python));
    result = PyObject_CallNoArgs(fn);
  }
  tls_profile = outer;
  tls_profile_shapes = outer_shapes;
  if (result == nullptr) return nullptr;
  PyObject* timings = PyDict_New();
  if (timings == nullptr) {
    Py_DECREF(result);
    return nullptr;
  }
  for (const auto& [name, entry] : profile) {
    PyObject* value = Py_BuildValue("(Ld)", entry.first, entry.second);
    if (value == nullptr || PyDict_SetItemString(timings, name.c_str(), value) < 0) {
      Py_XDECREF(value);
      Py_DECREF(result);
      Py_DECREF(timings);
      return nullptr;
    }
    Py_DECREF(value);
  }
  return Py_BuildValue("(NN)", result, timings);
}

PyObject* py_trace_dispatch(PyObject*, PyObject* fn) {
  if (!PyCallable_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "_trace_dispatch: expected a callable, got %s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  install_fallback();
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
  functions.push_back({"_profile_ops", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_profile_ops)),
                       METH_FASTCALL,
                       "_profile_ops(fn, shapes, /)\n--\n\nCalls fn() and returns (its result, {op: (calls, seconds)}) "
                       "for the ops that reached the Python dispatch key, an op named with the shapes of its tensor "
                       "arguments when shapes is true (a tool for benchmarks)."});
}

}  // namespace kael::python
