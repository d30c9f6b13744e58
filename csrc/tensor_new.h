// kael.tensor and the NumPy type checks that other parts of the extension share.
#pragma once

#include <Python.h>

namespace kael::python {

// kael.tensor(data, *, dtype=None, device=None, requires_grad=False) (vectorcall form).
PyObject* py_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);

enum class NumpyKind { None, Array, Scalar };

// Whether o is a NumPy array, a NumPy scalar or neither (before NumPy is imported: neither).
// Never calls into Python once NumPy's types are known.
NumpyKind numpy_kind(PyObject* o);

}  // namespace kael::python
