// Helpers of kael.nn and kael.optim: _set_data_ (Module.to keeping parameter identity) and
// _adam_update (the fused step of kael.optim.Adam and AdamW, kael/native/optim.h).
#include <Python.h>

#include <string>
#include <vector>

#include "guard.h"
#include "kael/native/optim.h"
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

// The tensors of a list or tuple (None: an empty list), or false with a TypeError set.
bool tensor_list(PyObject* obj, const char* name, std::vector<Tensor>& out) {
  if (obj == Py_None) return true;
  if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "_adam_update(): %s must be a list of tensors, got %s", name, Py_TYPE(obj)->tp_name);
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  PyObject** items = PySequence_Fast_ITEMS(obj);
  out.reserve(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!is_tensor(items[i])) {
      PyErr_Format(PyExc_TypeError, "_adam_update(): %s[%zd] must be a tensor, got %s", name, i,
                   Py_TYPE(items[i])->tp_name);
      return false;
    }
    out.push_back(tensor_of(items[i]));
  }
  return true;
}

// _adam_update(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr, beta1, beta2, eps,
// weight_decay, decoupled, amsgrad, maximize, step, /): one fused Adam(W) step of every parameter
// when the lists qualify (adam_update_supported), returning True; False, with nothing written,
// when they do not (the caller then runs its per-parameter ops).
PyObject* py_adam_update(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 14) {
    PyErr_Format(PyExc_TypeError, "_adam_update() takes 14 arguments, got %zd", nargs);
    return nullptr;
  }
  const char* names[5] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs"};
  std::vector<Tensor> lists[5];
  for (int i = 0; i < 5; ++i)
    if (!tensor_list(args[i], names[i], lists[i])) return nullptr;
  native::AdamOptions o;
  double* numbers[5] = {&o.lr, &o.beta1, &o.beta2, &o.eps, &o.weight_decay};
  for (int i = 0; i < 5; ++i) {
    *numbers[i] = PyFloat_AsDouble(args[5 + i]);
    if (*numbers[i] == -1.0 && PyErr_Occurred()) return nullptr;
  }
  bool* flags[3] = {&o.decoupled, &o.amsgrad, &o.maximize};
  for (int i = 0; i < 3; ++i) {
    const int v = PyObject_IsTrue(args[10 + i]);
    if (v < 0) return nullptr;
    *flags[i] = v != 0;
  }
  o.step = PyLong_AsLongLong(args[13]);
  if (o.step == -1 && PyErr_Occurred()) return nullptr;
  return guarded([&] {
    if (!native::adam_update_supported(lists[0], lists[1], lists[2], lists[3], lists[4], o.amsgrad)) Py_RETURN_FALSE;
    native::adam_update_cpu(lists[0], lists[1], lists[2], lists[3], lists[4], o);
    Py_RETURN_TRUE;
  });
}

}  // namespace

void append_nn_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_set_data_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_set_data)),
                 METH_FASTCALL,
                 "_set_data_(tensor, other, /)\n--\n\nPoints tensor at other's storage, shape, strides and dtype in "
                 "place (the Python object stays the same); returns tensor."});
  out.push_back({"_adam_update", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_adam_update)),
                 METH_FASTCALL,
                 "_adam_update(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr, beta1, beta2, eps, "
                 "weight_decay, decoupled, amsgrad, maximize, step, /)\n--\n\nOne fused Adam (decoupled: AdamW) step "
                 "of every parameter in the lists; False (nothing written) when they are not contiguous float32 or "
                 "float64 CPU tensors of one dtype and shape per parameter."});
}

}  // namespace kael::python
