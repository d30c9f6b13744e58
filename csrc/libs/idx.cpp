// The binding of kael_idx (kael/data/idx.h): _parse_idx, the IDX reader of kael.data.load_mnist.
#include <Python.h>

#include <cstdint>
#include <vector>

#include "guard.h"
#include "kael/data/idx.h"
#include "py_utf8.h"
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
  OwnedUtf8 name;  // held across the exporter's getbuffer, which may run code of its own
  if (!utf8_of("_parse_idx()", args[1], Surrogates::Strict, name)) return nullptr;
  Py_buffer view;
  if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return nullptr;
  PyObject* result = guarded([&] {
    return data::read_idx(static_cast<const std::uint8_t*>(view.buf), static_cast<std::size_t>(view.len), name.view());
  });
  PyBuffer_Release(&view);
  return result;
}

}  // namespace

void append_idx_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_parse_idx", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_parse_idx)),
                 METH_FASTCALL,
                 "_parse_idx(data, name, /)\n--\n\nThe tensor stored in the bytes of an IDX file (the MNIST "
                 "format); name is the file name shown in error messages."});
}

}  // namespace kael::python
