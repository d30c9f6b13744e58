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
// `accessor`: "__get__" / "__set__" of the property Tensor.<name> instead of the attribute.
PyObject* func_object(const char* name, bool method, const char* accessor = nullptr) {
  static PyObject* cache = PyDict_New();
  const std::string key = std::string(method ? "Tensor." : "kael.") + name + (accessor ? accessor : "");
  if (PyObject* cached = PyDict_GetItemString(cache, key.c_str())) {
    Py_INCREF(cached);
    return cached;
  }
  PyObject* func = nullptr;
  if (method) {
    // from the type's dict: a property is wanted as the descriptor, not through a getter
    PyObject* attr = PyDict_GetItemString(TensorType.tp_dict, name);
    if (attr == nullptr) {
      func = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&TensorType), name);
    } else if (accessor != nullptr) {
      func = PyObject_GetAttrString(attr, accessor);
    } else {
      func = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&TensorType), name);
    }
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

namespace {

// Calls the overrides of the types in `types` with (func, types, args, kwargs) until one returns
// something other than NotImplemented; `label` names the function in the TypeError when all
// decline. A new reference, or nullptr with a Python exception.
PyObject* dispatch(PyObject* func, const std::vector<PyTypeObject*>& types, PyObject* arg_tuple, PyObject* kwargs,
                   const std::string& label) {
  PyObject* type_tuple = PyTuple_New(static_cast<Py_ssize_t>(types.size()));
  if (type_tuple == nullptr) return nullptr;
  for (std::size_t i = 0; i < types.size(); ++i) {
    Py_INCREF(types[i]);
    PyTuple_SET_ITEM(type_tuple, static_cast<Py_ssize_t>(i), reinterpret_cast<PyObject*>(types[i]));
  }
  PyObject* result = nullptr;
  for (std::size_t i = 0; i < types.size(); ++i) {
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
    PyErr_Format(PyExc_TypeError, "no implementation found for '%s' on types that implement __kael_function__: [%s]",
                 label.c_str(), names.c_str());
  }
  Py_DECREF(type_tuple);
  return result;
}

// The overrides of func over a tuple of arguments and a dict (or null) of keywords.
PyObject* dispatch_tuple(PyObject* func, PyObject* arg_tuple, PyObject* kwargs, const std::string& label) {
  std::vector<PyTypeObject*> types;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(arg_tuple); ++i) collect(PyTuple_GET_ITEM(arg_tuple, i), types, false);
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (kwargs != nullptr && PyDict_Next(kwargs, &pos, &key, &value)) collect(value, types, false);
  PyObject* kw = kwargs != nullptr ? kwargs : PyDict_New();
  if (kw == nullptr) return nullptr;
  if (kwargs != nullptr) Py_INCREF(kw);
  PyObject* result = dispatch(func, types, arg_tuple, kw, label);
  Py_DECREF(kw);
  return result;
}

std::string label_of(const char* name, bool method) { return std::string(method ? "kael.Tensor." : "kael.") + name; }

}  // namespace

PyObject* call_kael_function(const char* name, bool method, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames) {
  PyObject* func = func_object(name, method);
  if (func == nullptr) return nullptr;
  const Py_ssize_t first = self != nullptr ? 1 : 0;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  PyObject* arg_tuple = PyTuple_New(first + nargs);
  PyObject* kwargs = PyDict_New();
  PyObject* result = nullptr;
  if (arg_tuple != nullptr && kwargs != nullptr) {
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
    if (ok) result = dispatch_tuple(func, arg_tuple, kwargs, label_of(name, method));
  }
  Py_XDECREF(arg_tuple);
  Py_XDECREF(kwargs);
  Py_DECREF(func);
  return result;
}

PyObject* call_kael_function_tuple(const char* name, PyObject* args, PyObject* kwargs) {
  PyObject* func = func_object(name, true);
  if (func == nullptr) return nullptr;
  PyObject* result = dispatch_tuple(func, args, kwargs, label_of(name, true));
  Py_DECREF(func);
  return result;
}

PyObject* call_kael_function_getter(const char* name, PyObject* self) {
  PyObject* func = func_object(name, true, "__get__");
  if (func == nullptr) return nullptr;
  PyObject* args = PyTuple_Pack(1, self);
  PyObject* result = args == nullptr ? nullptr : dispatch_tuple(func, args, nullptr, label_of(name, true) + ".__get__");
  Py_XDECREF(args);
  Py_DECREF(func);
  return result;
}

int call_kael_function_setter(const char* name, PyObject* self, PyObject* value) {
  PyObject* func = func_object(name, true, value != nullptr ? "__set__" : "__delete__");
  if (func == nullptr) return -1;
  PyObject* args = value != nullptr ? PyTuple_Pack(2, self, value) : PyTuple_Pack(1, self);
  PyObject* result = args == nullptr ? nullptr : dispatch_tuple(func, args, nullptr, label_of(name, true) + ".__set__");
  Py_XDECREF(args);
  Py_DECREF(func);
  if (result == nullptr) return -1;
  Py_DECREF(result);
  return 0;
}

bool tuple_wants_kael_function(PyObject* args, PyObject* kwargs) {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); ++i)
    if (has_kael_function(PyTuple_GET_ITEM(args, i))) return true;
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (kwargs != nullptr && PyDict_Next(kwargs, &pos, &key, &value))
    if (has_kael_function(value)) return true;
  return false;
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

// _has_kael_function(args, kwargs=None): whether an argument (a tuple) or keyword value overrides
// (False while overrides are disabled on this thread).
PyObject* py_has_kael_function(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1 || nargs > 2 || !PyTuple_Check(args[0]) || (nargs == 2 && args[1] != Py_None && !PyDict_Check(args[1]))) {
    PyErr_SetString(PyExc_TypeError, "_has_kael_function(args: tuple, kwargs: dict | None = None)");
    return nullptr;
  }
  return PyBool_FromLong(tuple_wants_kael_function(args[0], nargs == 2 && args[1] != Py_None ? args[1] : nullptr));
}

// _handle_kael_function(func, args, kwargs=None): calls the overrides of the arguments with func.
PyObject* py_handle_kael_function(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2 || nargs > 3 || !PyTuple_Check(args[1]) || (nargs == 3 && args[2] != Py_None && !PyDict_Check(args[2]))) {
    PyErr_SetString(PyExc_TypeError, "_handle_kael_function(func, args: tuple, kwargs: dict | None = None)");
    return nullptr;
  }
  PyObject* qualname = PyObject_GetAttrString(args[0], "__qualname__");
  std::string label = "function";
  // PyUnicode_AsUTF8 gives no UTF-8 for a name with lone surrogates: the label stays "function".
  const char* name = qualname != nullptr && PyUnicode_Check(qualname) ? PyUnicode_AsUTF8(qualname) : nullptr;
  if (name != nullptr) label = std::string("kael.") + name;
  Py_XDECREF(qualname);
  PyErr_Clear();
  return dispatch_tuple(args[0], args[1], nargs == 3 && args[2] != Py_None ? args[2] : nullptr, label);
}

}  // namespace

void append_kael_function_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_has_kael_function", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_has_kael_function)),
                 METH_FASTCALL,
                 "_has_kael_function(args, kwargs=None, /)\n--\n\nWhether an argument overrides __kael_function__."});
  out.push_back({"_handle_kael_function",
                 reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_handle_kael_function)), METH_FASTCALL,
                 "_handle_kael_function(func, args, kwargs=None, /)\n--\n\nCalls the arguments' __kael_function__ "
                 "overrides with func."});
  out.push_back({"_kael_function_enabled", py_kael_function_enabled, METH_O,
                 "_kael_function_enabled(enabled, /)\n--\n\nTurns __kael_function__ overrides on this thread on or "
                 "off; returns the previous setting."});
}

}  // namespace kael::python
