#pragma once
// kael.Size, kael.device objects and the Python-level Tensor methods (csrc/pyobject.cpp).

#include <Python.h>

#include <vector>

#include "kael/core/device.h"
#include "kael/core/small_vector.h"

namespace kael::python {

extern PyTypeObject SizeType;

// A new kael.Size of the sizes.
PyObject* make_size(IntArrayRef sizes);
// The kael.device object of d (cached; a new reference); the name string before kael.device
// is registered.
PyObject* device_object(Device d);
// Whether o is a kael.device object.
bool is_device_object(PyObject* o);

void append_pyobject_functions(std::vector<PyMethodDef>& out);
int kael_init_pyobject(PyObject* module);

}  // namespace kael::python
