// The autocast state of the thread for kael.amp.autocast_mode (Note [Autocast] in
// kael/autocast/autocast.h). Private bindings: the Python module checks device types and dtypes
// and spells the public API; a device is passed as its index (0 cpu, 1 cuda).
#include <Python.h>

#include "guard.h"
#include "kael/autocast/autocast.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

bool device_arg(PyObject* args, DeviceType* device, PyObject** value = nullptr) {
  int index = 0;
  if (value ? !PyArg_ParseTuple(args, "iO", &index, value) : !PyArg_ParseTuple(args, "i", &index)) return false;
  if (index != 0 && index != 1) {
    PyErr_Format(PyExc_ValueError, "autocast: device index must be 0 (cpu) or 1 (cuda), got %d", index);
    return false;
  }
  *device = index == 0 ? DeviceType::CPU : DeviceType::CUDA;
  return true;
}

PyObject* py_is_enabled(PyObject*, PyObject* args) {
  DeviceType d;
  if (!device_arg(args, &d)) return nullptr;
  return PyBool_FromLong(autocast::is_enabled(d));
}

PyObject* py_set_enabled(PyObject*, PyObject* args) {
  DeviceType d;
  PyObject* value = nullptr;
  if (!device_arg(args, &d, &value)) return nullptr;
  const int enabled = PyObject_IsTrue(value);
  if (enabled < 0) return nullptr;
  return guarded([&] { autocast::set_enabled(d, enabled != 0); });
}

PyObject* py_get_dtype(PyObject*, PyObject* args) {
  DeviceType d;
  if (!device_arg(args, &d)) return nullptr;
  PyObject* out = dtype_object(autocast::get_dtype(d));
  Py_INCREF(out);
  return out;
}

PyObject* py_set_dtype(PyObject*, PyObject* args) {
  DeviceType d;
  PyObject* value = nullptr;
  if (!device_arg(args, &d, &value)) return nullptr;
  if (!PyObject_TypeCheck(value, &DtypeType)) {
    PyErr_Format(PyExc_TypeError, "set_autocast_dtype: expected a kael.dtype, got %s", Py_TYPE(value)->tp_name);
    return nullptr;
  }
  return guarded([&] { autocast::set_dtype(d, dtype_of_object(value)); });
}

PyObject* py_is_cache_enabled(PyObject*, PyObject*) { return PyBool_FromLong(autocast::is_cache_enabled()); }

PyObject* py_set_cache_enabled(PyObject*, PyObject* value) {
  const int enabled = PyObject_IsTrue(value);
  if (enabled < 0) return nullptr;
  autocast::set_cache_enabled(enabled != 0);
  Py_RETURN_NONE;
}

PyObject* py_increment_nesting(PyObject*, PyObject*) { return PyLong_FromLongLong(autocast::increment_nesting()); }
PyObject* py_decrement_nesting(PyObject*, PyObject*) { return PyLong_FromLongLong(autocast::decrement_nesting()); }

PyObject* py_clear_cache(PyObject*, PyObject*) {
  return guarded([] { autocast::clear_cache(); });
}

PyObject* py_cache_size(PyObject*, PyObject*) { return PyLong_FromLongLong(autocast::cache_size()); }

PyObject* py_cast(PyObject*, PyObject* args) {
  PyObject *tensor = nullptr, *dtype = nullptr;
  int index = 0;
  if (!PyArg_ParseTuple(args, "OiO", &tensor, &index, &dtype)) return nullptr;
  if (!is_tensor(tensor) || !PyObject_TypeCheck(dtype, &DtypeType) || (index != 0 && index != 1)) {
    PyErr_SetString(PyExc_TypeError, "_autocast_cast(tensor, device, dtype): expected a kael.Tensor, 0 or 1, a kael.dtype");
    return nullptr;
  }
  return guarded([&] {
    return autocast::cast(tensor_of(tensor), dtype_of_object(dtype), index == 0 ? DeviceType::CPU : DeviceType::CUDA);
  });
}

PyObject* py_ops(PyObject*, PyObject*) {
  return guarded([]() -> PyObject* {
    const auto names = autocast::registered_ops();
    PyObject* out = PyList_New(static_cast<Py_ssize_t>(names.size()));
    if (out == nullptr) throw PythonError{};
    for (std::size_t i = 0; i < names.size(); ++i) {
      PyObject* entry = Py_BuildValue("(si)", names[i].c_str(), static_cast<int>(*autocast::policy_of(names[i])));
      if (entry == nullptr) {
        Py_DECREF(out);
        throw PythonError{};
      }
      PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), entry);
    }
    return out;
  });
}

}  // namespace

void append_autocast_functions(std::vector<PyMethodDef>& functions) {
  functions.push_back({"_autocast_is_enabled", py_is_enabled, METH_VARARGS,
                       "_autocast_is_enabled(device, /)\n--\n\nWhether autocast is on for the device (0 cpu, 1 cuda) "
                       "on this thread."});
  functions.push_back({"_autocast_set_enabled", py_set_enabled, METH_VARARGS,
                       "_autocast_set_enabled(device, enabled, /)\n--\n\nTurns autocast on or off for the device on "
                       "this thread."});
  functions.push_back({"_autocast_get_dtype", py_get_dtype, METH_VARARGS,
                       "_autocast_get_dtype(device, /)\n--\n\nThe lower-precision dtype of the device's autocast."});
  functions.push_back({"_autocast_set_dtype", py_set_dtype, METH_VARARGS,
                       "_autocast_set_dtype(device, dtype, /)\n--\n\nSets the lower-precision dtype of the device's "
                       "autocast (float16 or bfloat16)."});
  functions.push_back({"_autocast_is_cache_enabled", py_is_cache_enabled, METH_NOARGS,
                       "_autocast_is_cache_enabled()\n--\n\nWhether autocast caches weight casts on this thread."});
  functions.push_back({"_autocast_set_cache_enabled", py_set_cache_enabled, METH_O,
                       "_autocast_set_cache_enabled(enabled, /)\n--\n\nTurns the weight cast cache on or off."});
  functions.push_back({"_autocast_increment_nesting", py_increment_nesting, METH_NOARGS,
                       "_autocast_increment_nesting()\n--\n\nEnters an autocast context; returns the depth."});
  functions.push_back({"_autocast_decrement_nesting", py_decrement_nesting, METH_NOARGS,
                       "_autocast_decrement_nesting()\n--\n\nLeaves an autocast context; returns the depth."});
  functions.push_back({"_autocast_clear_cache", py_clear_cache, METH_NOARGS,
                       "_autocast_clear_cache()\n--\n\nDrops the weight casts cached on this thread."});
  functions.push_back({"_autocast_cache_size", py_cache_size, METH_NOARGS,
                       "_autocast_cache_size()\n--\n\nHow many weight casts are cached on this thread."});
  functions.push_back({"_autocast_cast", py_cast, METH_VARARGS,
                       "_autocast_cast(tensor, device, dtype, /)\n--\n\nThe tensor as an autocast kernel casts an "
                       "argument to dtype (through the weight cast cache)."});
  functions.push_back({"_autocast_ops", py_ops, METH_NOARGS,
                       "_autocast_ops()\n--\n\n[(schema name, policy)] of the ops with an autocast kernel (policy 0: "
                       "the autocast dtype, 1: float32, 2: the widest dtype)."});
}

}  // namespace kael::python
