// Basic indexing: t[int], t[slice], t[None], t[...], tuples of them; all views, made by the
// registered ops select, slice and unsqueeze; assignment writes through copy_ and fill_.
// Worked example: t[0, ..., None, 1:3] on shape [2, 3, 4] -> select(0, 0), skip 1 dim,
// unsqueeze(1), slice(2, 1, 3) -> shape [3, 1, 2].
#include <vector>

#include "arg_parsing.h"
#include "kael/core/error.h"
#include "kael/native/pointwise.h"
#include "kael/ops/select.h"
#include "kael/ops/slice.h"
#include "kael/ops/unsqueeze.h"

namespace kael::python {

namespace {

bool is_index_key(PyObject* o) { return !PyBool_Check(o) && (PyLong_Check(o) || (!is_tensor(o) && PyIndex_Check(o))); }

Tensor apply_key(const Tensor& self, PyObject* key) {
  std::vector<PyObject*> items;
  if (PyTuple_Check(key)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); ++i) items.push_back(PyTuple_GET_ITEM(key, i));
  } else {
    items.push_back(key);
  }
  std::int64_t consumed = 0;
  bool ellipsis = false;
  for (PyObject* item : items) {
    if (item == Py_Ellipsis) {
      KAEL_CHECK_INDEX(!ellipsis, "index: an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (item != Py_None) {
      ++consumed;
    }
  }
  KAEL_CHECK_INDEX(consumed <= self.dim(),
                   "index: too many indices for tensor of dimension " << self.dim() << " (got " << consumed << ")");
  Tensor t = self;
  std::int64_t dim = 0;
  for (PyObject* item : items) {
    if (item == Py_Ellipsis) {
      dim += self.dim() - consumed;
    } else if (item == Py_None) {
      t = kael::unsqueeze(t, dim);
      ++dim;
    } else if (is_index_key(item)) {
      const Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);
      if (i == -1 && PyErr_Occurred()) throw PythonError();
      const std::int64_t size = t.sizes()[dim];
      KAEL_CHECK_INDEX(i >= -size && i < size,
                       "index: index " << i << " is out of range for dimension " << dim << " with size " << size);
      t = kael::select(t, dim, i);
    } else if (PySlice_Check(item)) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(item, &start, &stop, &step) < 0) throw PythonError();
      KAEL_CHECK_VALUE(step > 0, "index: negative or zero slice steps are not supported (got " << step
                                                                                           << "); use flip or a copy");
      // The bounds are converted (__index__ may run Python code) before t's geometry is read.
      t = kael::slice(t, dim, start, stop, step);
      ++dim;
    } else if (is_tensor(item)) {
      const Tensor& idx = tensor_of(item);
      // (a uint8 or bool tensor is a mask in PyTorch, not an index)
      KAEL_CHECK_TYPE(idx.dim() == 0 && is_integral(idx.dtype(), /*include_bool=*/false) && is_signed(idx.dtype()),
                      "index: indexing with tensors other than 0-d signed integer tensors is not supported yet (got "
                          << idx.dim() << "-d " << idx.dtype() << ")");
      t = kael::select(t, dim, idx.item().to<std::int64_t>());
    } else {
      KAEL_CHECK_INDEX(false, "index: unsupported index of type " << Py_TYPE(item)->tp_name
                                                                  << " (expected int, slice, None, ... or a tuple)");
    }
  }
  return t;
}

}  // namespace

PyObject* tensor_getitem(PyObject* self, PyObject* key) {
  return call_op(false, [&]() -> Tensor { return apply_key(tensor_of(self), key); });
}

int tensor_setitem(PyObject* self, PyObject* key, PyObject* value) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_TypeError, "index: tensors do not support item deletion");
    return -1;
  }
  try {
    const Tensor view = apply_key(tensor_of(self), key);
    if (is_tensor(value)) {
      native::assign(view, tensor_of(value));
      return has_pending_warnings() && !flush_warnings() ? -1 : 0;
    }
    Scalar s;
    const Match m = conv_scalar(value, s);
    if (m == Match::Error) return -1;
    KAEL_CHECK_TYPE(m == Match::Yes,
                    "index: can only assign a tensor or a number, got " << Py_TYPE(value)->tp_name);
    native::assign(view, s);
    return has_pending_warnings() && !flush_warnings() ? -1 : 0;
  } catch (...) {
    translate_exception();
    return -1;
  }
}

}  // namespace kael::python
