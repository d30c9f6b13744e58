// __kael_function__ overrides (see Note [__kael_function__] in kael_function.h).
#include "kael_function.h"

#include <string>
#include <vector>

namespace kael::python {

namespace {

// Overrides are off on this thread while kael.Tensor's default __kael_function__ runs func.
thread_local bool overrides_disabled = false;

PyObject* name_object() {
  static PyObject* name = PyUnicode_InternFromString("__kael_function__");
  return name;
}

bool has_own_override(PyTypeObject* type) {
  PyObject* attr = _PyType_Lookup(type, name_object());
  return attr != nullptr && attr != _PyType_Lookup(&TensorType, name_object());
}

// The function an override receives: kael.<name> (the public function, which may be a
// Python-level wrapper) or Tensor.<name>.
PyObject* func_object(const char* name, bool method) {
  static PyObject* cache = PyDict_New();
  const std::string key = std::string(method ? "Tensor." : "kael.") + name;
  if (PyObject* cached = PyDict_GetItemString(cache, key.c_str())) {
    Py_INCREF(cached);
    return cached;
  }
  PyObject* func = nullptr;
  if (method) {
    func = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&TensorType), name);
  } else {
    PyObject* module = PyImport_ImportModule("kael");
    if (module != nullptr) {
      func = PyObject_GetAttrString(module, name);
      Py_DECREF(module);
    }
    if (func == nullptr) {
      PyErr_Clear();
      module = PyImport_ImportModule("kael._C");
      if (module == nullptr) return nullptr;
      func = PyObject_GetAttrString(module, name);
      Py_DECREF(module);
    }
  }
  if (func == nullptr) return nullptr;
  if (PyDict_SetItemString(cache, key.c_str(), func) < 0) {
    Py_DECREF(func);
    return nullptr;
  }
  return func;
}

// Adds the type of an overriding argument (and of the overriding items of a list or tuple
// argument) to types, subclasses before their bases, as PyTorch orders them.
void collect(PyObject* o, std::vector<PyTypeObject*>& types, bool nested) {
  if (!nested && (PyList_CheckExact(o) || PyTuple_CheckExact(o))) {
    PyObject* seq = o;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; ++i) collect(PySequence_Fast_ITEMS(seq)[i], types, true);
    return;
  }
  if (!has_kael_function(o)) return;
  PyTypeObject* t = Py_TYPE(o);
  for (PyTypeObject* seen : types)
    if (seen == t) return;
  auto at = types.end();
  for (auto it = types.begin(); it != types.end(); ++it) {
    if (PyType_IsSubtype(t, *it)) {
      at = it;
      break;
    }
  }
  types.insert(at, t);
}

}  // namespace

bool has_kael_function_slow(PyObject* o) {
  if (overrides_disabled) return false;
  if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PySequence_Fast_ITEMS(o)[i];
      if (!Py_IS_TYPE(item, &TensorType) && !PyList_CheckExact(item) && !PyTuple_CheckExact(item) &&
          has_kael_function(item))
        return true;
    }
    return false;
  }
  return has_own_override(Py_TYPE(o));
}

PyObject* call_kael_function(const char* name, bool method, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames) {
  std::vector<PyTypeObject*> types;
  if (self != nullptr) collect(self, types, false);
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t i = 0; i < nargs + nkw; ++i) collect(args[i], types, false);
  PyObject* func = func_object(name, method);
  if (func == nullptr) return nullptr;
  const Py_ssize_t first = self != nullptr ? 1 : 0;
  PyObject* arg_tuple = PyTuple_New(first + nargs);
  PyObject* kwargs = PyDict_New();
  PyObject* type_tuple = PyTuple_New(static_cast<Py_ssize_t>(types.size()));
  PyObject* result = nullptr;
  if (arg_tuple != nullptr && kwargs != nullptr && type_tuple != nullptr) {
    if (self != nullptr) {
      Py_INCREF(self);
      PyTuple_SET_ITEM(arg_tuple, 0, self);
    }
    for (Py_ssize_t i = 0; i < nargs; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(arg_tuple, first + i, args[i]);
    }
    bool ok = true;
    for (Py_ssize_t j = 0; ok && j < nkw; ++j) ok = PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, j), args[nargs + j]) == 0;
    for (std::size_t i = 0; i < types.size(); ++i) {
      Py_INCREF(types[i]);
      PyTuple_SET_ITEM(type_tuple, static_cast<Py_ssize_t>(i), reinterpret_cast<PyObject*>(types[i]));
    }
    for (std::size_t i = 0; ok && i < types.size(); ++i) {
      PyObject* override = PyObject_GetAttr(reinterpret_cast<PyObject*>(types[i]), name_object());
      if (override == nullptr) break;
      result = PyObject_CallFunctionObjArgs(override, func, type_tuple, arg_tuple, kwargs, nullptr);
      Py_DECREF(override);
      if (result != Py_NotImplemented) break;
      Py_CLEAR(result);
    }
    if (result == nullptr && !PyErr_Occurred()) {
      std::string names;
      for (PyTypeObject* t : types) names += std::string(names.empty() ? "" : ", ") + "'" + t->tp_name + "'";
      PyErr_Format(PyExc_TypeError,
                   "no implementation found for '%s%s' on types that implement __kael_function__: [%s]",
                   method ? "kael.Tensor." : "kael.", name, names.c_str());
    }
  }
  Py_XDECREF(arg_tuple);
  Py_XDECREF(kwargs);
  Py_XDECREF(type_tuple);
  Py_DECREF(func);
  return result;
}

namespace {

// _kael_function_enabled(enabled): turns overrides on this thread on or off; returns the
// previous setting.
PyObject* py_kael_function_enabled(PyObject*, PyObject* arg) {
  const int enabled = PyObject_IsTrue(arg);
  if (enabled < 0) return nullptr;
  const bool previous = !overrides_disabled;
  overrides_disabled = enabled == 0;
  return PyBool_FromLong(previous);
}

}  // namespace

void append_kael_function_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_kael_function_enabled", py_kael_function_enabled, METH_O,
                 "_kael_function_enabled(enabled, /)\n--\n\nTurns __kael_function__ overrides on this thread on or "
                 "off; returns the previous setting."});
}

}  // namespace kael::python
