#pragma once
// Note [__kael_function__]
// Python objects can override kael's functions and methods, with PyTorch's
// __torch_function__ convention: a class that defines
//   @classmethod
//   def __kael_function__(cls, func, types, args=(), kwargs=None): ...
// is called instead of the op when one of its instances is an argument of a generated function
// or method (or an operand of an operator). kael.Tensor's own __kael_function__ is the default:
// it runs func with overrides disabled and returns Tensor results as instances of cls, so a
// subclass that wants to keep its type calls super().__kael_function__(...). A subclass that
// defines nothing gets plain tensors back, and costs nothing: the check is one exact-type
// comparison per argument for kael.Tensor, Python numbers and None.

#include <Python.h>

#include "tensor_object.h"

namespace kael::python {

// Whether o (an argument) has a __kael_function__ other than kael.Tensor's default.
bool has_kael_function_slow(PyObject* o);
inline bool has_kael_function(PyObject* o) {
  if (Py_IS_TYPE(o, &TensorType) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || o == Py_None ||
      PyBool_Check(o) || PyUnicode_CheckExact(o) || Py_IS_TYPE(o, &DtypeType))
    return false;
  return has_kael_function_slow(o);
}

// Whether any of the arguments asks for __kael_function__ (self first, for a method).
inline bool wants_kael_function(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (self != nullptr && has_kael_function(self)) return true;
  const Py_ssize_t n = nargs + (kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames));
  for (Py_ssize_t i = 0; i < n; ++i)
    if (has_kael_function(args[i])) return true;
  return false;
}

// Calls the overrides of the function or method `name` (kael.<name> or Tensor.<name>) with the
// arguments; a new reference, or nullptr with a Python exception.
PyObject* call_kael_function(const char* name, bool method, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames);

}  // namespace kael::python
