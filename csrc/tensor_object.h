#pragma once
// The kael.Tensor Python type and the kael.dtype objects.

#include <Python.h>

#include "kael/core/tensor.h"

namespace kael::python {

// A Python tensor: the handle is stored inline, so a borrowed PyObject* gives a
// `const Tensor&` without touching the refcount. See Note [PyObject preservation].
struct PyTensor {
  PyObject_HEAD
  Tensor tensor;
  PyObject* weakreflist;
};

extern PyTypeObject TensorType;
extern PyTypeObject DtypeType;

// Exact type first (the common case), then subclasses.
inline bool is_tensor(PyObject* o) { return Py_IS_TYPE(o, &TensorType) || PyObject_TypeCheck(o, &TensorType); }
inline const Tensor& tensor_of(PyObject* o) { return reinterpret_cast<PyTensor*>(o)->tensor; }

// The Python object of a tensor: the existing one when the impl has one, else a new
// kael.Tensor. Returns a new reference (None for an undefined tensor).
PyObject* wrap(Tensor t);

// The kael.dtype singleton of a ScalarType (borrowed).
PyObject* dtype_object(ScalarType t);
ScalarType dtype_of_object(PyObject* o);

// Translates the C++ exception being handled into a Python exception (see errors.cpp), then
// issues the warnings the failed call raised (see Note [Warnings]).
void translate_exception();

// Raises the warnings kael::warn() buffered on this thread (see Note [Warnings]); false when
// one of them became an exception.
bool has_pending_warnings();
bool flush_warnings();
void install_warning_handler();

// Thrown from code that already set a Python exception.
struct PythonError {};

}  // namespace kael::python
