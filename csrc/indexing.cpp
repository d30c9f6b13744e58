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

// One index of a key, converted. Every call into Python (__index__ of ints and slice bounds)
// happens while the key is converted, before the tensor's geometry is read, so an __index__
// that resizes the tensor cannot make the walk read sizes that no longer exist.
struct Index {
  enum class Kind : std::uint8_t { Ellipsis, None, Int, Slice } kind;
  std::int64_t value = 0;  // Int
  Py_ssize_t start = 0, stop = 0, step = 1;  // Slice
};

Index convert_index(PyObject* item) {
  if (item == Py_Ellipsis) return {Index::Kind::Ellipsis};
  if (item == Py_None) return {Index::Kind::None};
  if (is_index_key(item)) {
    const Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) throw PythonError();
    return {Index::Kind::Int, static_cast<std::int64_t>(i)};
  }
  if (PySlice_Check(item)) {
    Index r{Index::Kind::Slice};
    if (PySlice_Unpack(item, &r.start, &r.stop, &r.step) < 0) throw PythonError();
    KAEL_CHECK_VALUE(r.step > 0, "index: negative or zero slice steps are not supported (got " << r.step
                                                                                           << "); use flip or a copy");
    return r;
  }
  if (is_tensor(item)) {
    const Tensor& idx = tensor_of(item);
    // (a uint8 or bool tensor is a mask in PyTorch, not an index)
    KAEL_CHECK_TYPE(idx.dim() == 0 && is_integral(idx.dtype(), /*include_bool=*/false) && is_signed(idx.dtype()),
                    "index: indexing with tensors other than 0-d signed integer tensors is not supported yet (got "
                        << idx.dim() << "-d " << idx.dtype() << ")");
    return {Index::Kind::Int, idx.item().to<std::int64_t>()};
  }
  KAEL_CHECK_INDEX(false, "index: unsupported index of type " << Py_TYPE(item)->tp_name
                                                              << " (expected int, slice, None, ... or a tuple)");
  __builtin_unreachable();
}

Tensor apply_key(const Tensor& self, PyObject* key) {
  // The key (a tuple, immutable, or a single object) is held by the caller for the whole call.
  std::vector<Index> items;
  if (PyTuple_Check(key)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key); ++i) items.push_back(convert_index(PyTuple_GET_ITEM(key, i)));
  } else {
    items.push_back(convert_index(key));
  }
  std::int64_t consumed = 0;
  bool ellipsis = false;
  for (const Index& item : items) {
    if (item.kind == Index::Kind::Ellipsis) {
      KAEL_CHECK_INDEX(!ellipsis, "index: an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (item.kind != Index::Kind::None) {
      ++consumed;
    }
  }
  KAEL_CHECK_INDEX(consumed <= self.dim(),
                   "index: too many indices for tensor of dimension " << self.dim() << " (got " << consumed << ")");
  Tensor t = self;
  std::int64_t dim = 0;
  for (const Index& item : items) {
    switch (item.kind) {
      case Index::Kind::Ellipsis:
        dim += self.dim() - consumed;
        break;
      case Index::Kind::None:
        t = kael::unsqueeze(t, dim);
        ++dim;
        break;
      case Index::Kind::Int: {
        const std::int64_t size = t.sizes()[dim];
        KAEL_CHECK_INDEX(item.value >= -size && item.value < size, "index: index " << item.value
                                                                                   << " is out of range for dimension "
                                                                                   << dim << " with size " << size);
        t = kael::select(t, dim, item.value);
        break;
      }
      case Index::Kind::Slice:
        t = kael::slice(t, dim, item.start, item.stop, item.step);
        ++dim;
        break;
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
