// Helpers of kael.nn and kael.data: _parse_idx (the C++ IDX reader of kael/data/idx.h, for
// kael.data.load_mnist) and _set_data_ (Module.to keeping parameter identity).
#include <Python.h>

#include <string>
#include <vector>

#include "kael/data/idx.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

// _parse_idx(data, name, /): the tensor stored in the IDX bytes `data` (any buffer of bytes);
// name is the file name that error messages show.
PyObject* py_parse_idx(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_Format(PyExc_TypeError, "_parse_idx() takes 2 arguments (data, name), got %zd", nargs);
    return nullptr;
  }
  if (!PyUnicode_Check(args[1])) {
    PyErr_Format(PyExc_TypeError, "_parse_idx(): name must be a str, got %s", Py_TYPE(args[1])->tp_name);
    return nullptr;
  }
  Py_ssize_t name_size = 0;
  const char* name = PyUnicode_AsUTF8AndSize(args[1], &name_size);
  if (name == nullptr) return nullptr;
  Py_buffer view;
  if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return nullptr;
  PyObject* result = nullptr;
  try {
    Tensor t = data::read_idx(static_cast<const std::uint8_t*>(view.buf), static_cast<std::size_t>(view.len),
                              std::string_view(name, static_cast<std::size_t>(name_size)));
    result = wrap(std::move(t));
  } catch (...) {
    translate_exception();
  }
  PyBuffer_Release(&view);
  return result;
}

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

void append_data_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_parse_idx", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_parse_idx)),
                 METH_FASTCALL,
                 "_parse_idx(data, name, /)\n--\n\nThe tensor stored in the bytes of an IDX file (the MNIST "
                 "format); name is the file name shown in error messages."});
  out.push_back({"_set_data_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_set_data)),
                 METH_FASTCALL,
                 "_set_data_(tensor, other, /)\n--\n\nPoints tensor at other's storage, shape, strides and dtype in "
                 "place (the Python object stays the same); returns tensor."});
}

}  // namespace kael::python
