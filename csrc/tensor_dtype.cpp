// The kael.dtype objects: one per ScalarType, registered under its name and its aliases
// (kael.float32 is kael.float).
#include <Python.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "tensor_members.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

struct PyDtype {
  PyObject_HEAD
  ScalarType type;
};

PyObject* dtype_objects[kNumScalarTypes] = {};

PyObject* dtype_repr(PyObject* self) {
  return PyUnicode_FromFormat("kael.%s", dtype_name(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_get_itemsize(PyObject* self, void*) {
  return PyLong_FromLong(itemsize(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_get_is_floating(PyObject* self, void*) {
  return PyBool_FromLong(is_floating(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_get_is_signed(PyObject* self, void*) {
  return PyBool_FromLong(is_signed(reinterpret_cast<PyDtype*>(self)->type));
}

// kael has no complex dtypes: every dtype is real, and its real counterpart is itself.
PyObject* dtype_get_is_complex(PyObject*, void*) { Py_RETURN_FALSE; }

PyGetSetDef dtype_getset[] = {
    {"itemsize", dtype_get_itemsize, nullptr, "Size of one element in bytes.", nullptr},
    {"is_floating_point", dtype_get_is_floating, nullptr, "Whether the dtype is a floating point type.", nullptr},
    {"is_signed", dtype_get_is_signed, nullptr, "Whether the dtype can represent negative numbers.", nullptr},
    {"is_complex", dtype_get_is_complex, nullptr, "Whether the dtype is a complex type (never, in kael).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* dtype_reduce(PyObject* self, PyObject*) {
  return PyUnicode_FromString(dtype_name(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_to_real(PyObject* self, PyObject*) { return Py_NewRef(self); }

PyMethodDef dtype_methods[] = {{"__reduce__", dtype_reduce, METH_NOARGS, nullptr},
                               {"to_real", dtype_to_real, METH_NOARGS,
                                "to_real($self, /)\n--\n\nThe real dtype of the same precision: the dtype itself."},
                               {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject DtypeType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael.dtype",
    .tp_basicsize = sizeof(PyDtype),
    .tp_repr = dtype_repr,
    .tp_str = dtype_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The data type of a tensor: kael.float32, kael.float64, kael.int64 or kael.bool.",
    .tp_methods = dtype_methods,
    .tp_getset = dtype_getset,
};

PyObject* dtype_object(ScalarType t) { return dtype_objects[static_cast<int>(t)]; }
ScalarType dtype_of_object(PyObject* o) { return reinterpret_cast<PyDtype*>(o)->type; }

int kael_init_dtype(PyObject* module) {
  if (PyType_Ready(&DtypeType) < 0) return -1;
  Py_INCREF(&DtypeType);
  if (PyModule_AddObject(module, "dtype", reinterpret_cast<PyObject*>(&DtypeType)) < 0) return -1;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto* d = PyObject_New(PyDtype, &DtypeType);
    if (d == nullptr) return -1;
    d->type = static_cast<ScalarType>(i);
    dtype_objects[i] = reinterpret_cast<PyObject*>(d);
    Py_INCREF(d);
    if (PyModule_AddObject(module, dtype_name(d->type), reinterpret_cast<PyObject*>(d)) < 0) return -1;
    // Other names of the dtype (kael.float, kael.half, ...), "|"-separated in the generated table.
    const std::string_view aliases = detail::kScalarTypeAliases[i];
    for (std::size_t start = 0; start < aliases.size();) {
      const std::size_t end = std::min(aliases.find('|', start), aliases.size());
      const std::string alias(aliases.substr(start, end - start));
      Py_INCREF(d);
      if (PyModule_AddObject(module, alias.c_str(), reinterpret_cast<PyObject*>(d)) < 0) return -1;
      start = end + 1;
    }
  }
  return 0;
}

}  // namespace kael::python
