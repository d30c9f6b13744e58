// Helpers of kael.nn: _set_data_ (Module.to keeping parameter identity).
#include <Python.h>

#include <vector>

#include "guard.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

// _set_data_(tensor, other, /): points tensor at other's data (storage, shape, strides, dtype) in
// place, keeping the Python object; returns tensor.
PyObject* py_set_data(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !is_tensor(args[0]) || !is_tensor(args[1])) {
    PyErr_SetString(PyExc_TypeError, "_set_data_() takes two tensors (tensor, other)");
    return nullptr;
  }
  tensor_of(args[0]).impl()->set_data(*tensor_of(args[1]).impl());
  Py_INCREF(args[0]);
  return args[0];
}

}  // namespace

void append_nn_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_set_data_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_set_data)),
                 METH_FASTCALL,
                 "_set_data_(tensor, other, /)\n--\n\nPoints tensor at other's storage, shape, strides and dtype in "
                 "place (the Python object stays the same); returns tensor."});
}

}  // namespace kael::python
