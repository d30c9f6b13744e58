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
      PyBool_Check(o) || PyUnicode_CheckExact(o) || Py_IS_TYPE(o, &DtypeType) || PySlice_Check(o) ||
      o == Py_Ellipsis)
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

// The hand-written methods, properties and protocol slots of kael.Tensor (size, tolist,
// __getitem__, shape, __len__, ...) honour overrides too, as torch's do: they ask whether self
// overrides (one exact-type comparison for a plain tensor) and whether an argument does.
inline bool self_overrides(PyObject* self) { return !Py_IS_TYPE(self, &TensorType) && has_kael_function_slow(self); }
inline bool self_or_arg_overrides(PyObject* self, PyObject* arg) {
  return self_overrides(self) || (arg != nullptr && has_kael_function(arg));
}
// The override of the getter of property `name` (func: Tensor.<name>.__get__, as torch passes).
PyObject* call_kael_function_getter(const char* name, PyObject* self);
// The override of the setter of property `name` (func: Tensor.<name>.__set__); -1 on error.
int call_kael_function_setter(const char* name, PyObject* self, PyObject* value);
// With the arguments as a tuple (self first for a method) and a dict or null, for METH_VARARGS
// methods and the Python-level methods (kael/_tensor.py): the function Tensor.<name>.
PyObject* call_kael_function_tuple(const char* name, PyObject* args, PyObject* kwargs);
// Whether any item of args (a tuple) or value of kwargs (a dict or null) overrides.
bool tuple_wants_kael_function(PyObject* args, PyObject* kwargs);

}  // namespace kael::python
