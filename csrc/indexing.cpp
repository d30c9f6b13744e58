// Indexing: t[key] and t[key] = value, composed of registered ops only.
// Basic keys (int, slice, None, ..., 0-d integer tensors) make views with select, slice and
// unsqueeze. Advanced keys (integer tensors of any dims, bool masks, lists of ints or bools)
// follow NumPy's rules: the indexed dims are permuted to the front of the basic view, gathered
// by _index (or written by index_put_), and the broadcast index dims go where the first
// advanced index was when the advanced indices are adjacent, else to the front. Assignment
// writes through copy_/fill_ into the basic view, or through index_put_ into it, so no write
// is lost.
// Worked example: t[0, ..., None, 1:3] on shape [2, 3, 4] -> select(0, 0), skip 1 dim,
// unsqueeze(1), slice(2, 1, 3) -> shape [3, 1, 2].
#include <algorithm>
#include <sstream>
#include <vector>

#include "arg_parsing.h"
#include "kael_function.h"
#include "tensor_new.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/pointwise.h"
#include "kael/ops/_index.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/empty.h"
#include "kael/ops/index_put.h"
#include "kael/ops/index_put_.h"
#include "kael/ops/ne.h"
#include "kael/ops/nonzero.h"
#include "kael/ops/permute.h"
#include "kael/ops/select.h"
#include "kael/ops/slice.h"
#include "kael/ops/unsqueeze.h"

namespace kael::python {


namespace {

// Holds a new reference (or nullptr); drops it on scope exit.
struct ScopedRef {
  PyObject* p;
  explicit ScopedRef(PyObject* o) : p(o) {}
  ~ScopedRef() { Py_XDECREF(p); }
  ScopedRef(const ScopedRef&) = delete;
  ScopedRef& operator=(const ScopedRef&) = delete;
};

bool is_index_key(PyObject* o) { return !PyBool_Check(o) && (PyLong_Check(o) || (!is_tensor(o) && PyIndex_Check(o))); }

// One index of a key, converted. Every call into Python (__index__ of ints and slice bounds,
// lists turned into tensors) happens while the key is converted, before the tensor's geometry
// is read, so an __index__ that resizes the tensor cannot make the walk read sizes that no
// longer exist.
struct Index {
  enum class Kind : std::uint8_t { Ellipsis, None, Int, Slice, Tensor, Bool } kind;
  std::int64_t value = 0;                    // Int; Bool: 0 or 1
  Py_ssize_t start = 0, stop = 0, step = 1;  // Slice
  Tensor tensor;                             // Tensor: an integer or bool index tensor
  bool byte_mask = false;                    // Tensor: a bool mask read from a uint8 one
  // dims of the indexed tensor the item consumes
  std::int64_t consumes() const {
    switch (kind) {
      case Kind::Int:
      case Kind::Slice:
        return 1;
      case Kind::Tensor:
        return tensor.dtype() == ScalarType::Bool ? tensor.dim() : 1;
      default:
        return 0;
    }
  }
};

// A list (or a NumPy array) in a key: the index tensor kael.tensor makes of it (int64 for ints,
// bool for bools; an empty list is an empty int64 index).
Tensor tensor_from_sequence(PyObject* item) {
  if (PyList_Check(item) && PyList_GET_SIZE(item) == 0) {
    const std::int64_t size[] = {0};
    return kael::empty(size, ScalarType::Int64);
  }
  PyObject* args[] = {item};
  PyObject* t = py_tensor(nullptr, args, 1, nullptr);
  if (t == nullptr) throw PythonError();
  Tensor out = tensor_of(t);
  Py_DECREF(t);
  return out;
}

Index convert_tensor_index(Tensor idx) {
  const bool byte = idx.dtype() == ScalarType::UInt8;
  if (byte) {
    // As PyTorch: a uint8 index is a mask, read as its nonzero bytes (deprecated, with a warning
    // where it has dims; a 0-d one is read as a bool, as torch reads it, without one).
    if (idx.dim() > 0)
      warn(WarningKind::User,
           "indexing with dtype kael.uint8 is now deprecated, please use a dtype kael.bool instead.");
    idx = kael::ne(idx, Scalar(std::int64_t{0}));
  }
  const ScalarType t = idx.dtype();
  KAEL_CHECK_INDEX(t == ScalarType::Bool || is_integral(t, /*include_bool=*/false),
                   "index: tensors used as indices must be long, int, byte or bool tensors (got " << t << ")");
  if (idx.dim() == 0 && t != ScalarType::Bool) return {Index::Kind::Int, idx.item().to<std::int64_t>()};
  if (idx.dim() == 0) return {Index::Kind::Bool, idx.item().to<bool>() ? 1 : 0};
  Index r{Index::Kind::Tensor};
  r.tensor = std::move(idx);
  r.byte_mask = byte;
  return r;
}

Index convert_index(PyObject* item) {
  if (item == Py_Ellipsis) return {Index::Kind::Ellipsis};
  if (item == Py_None) return {Index::Kind::None};
  if (PyBool_Check(item)) return {Index::Kind::Bool, item == Py_True ? 1 : 0};
  // A NumPy array implements __index__ (for one integer element), but as a key it is an index
  // tensor, as in PyTorch: `t[np.array([0, 1])]` selects rows; a 0-d array is an integer or a
  // bool as its tensor would be. NumPy scalars are integers through __index__ or invalid
  // (np.bool_, np.float64), never index tensors.
  const NumpyKind np = PyLong_Check(item) ? NumpyKind::None : numpy_kind(item);
  if (np == NumpyKind::Array) return convert_tensor_index(tensor_from_sequence(item));
  if (is_index_key(item)) {
    const Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) throw PythonError();
    return {Index::Kind::Int, static_cast<std::int64_t>(i)};
  }
  if (PySlice_Check(item)) {
    Index r{Index::Kind::Slice};
    if (PySlice_Unpack(item, &r.start, &r.stop, &r.step) < 0) throw PythonError();
    KAEL_CHECK_VALUE(r.step > 0, "index: step must be greater than zero (got "
                                     << r.step << "); negative slice steps are not supported, use flip or a copy");
    return r;
  }
  if (is_tensor(item)) return convert_tensor_index(tensor_of(item));
  if (PyList_Check(item) || (np == NumpyKind::None && PyObject_HasAttrString(item, "__array_interface__")))
    return convert_tensor_index(tensor_from_sequence(item));
  KAEL_CHECK_INDEX(false, "index: unsupported index of type "
                              << Py_TYPE(item)->tp_name
                              << " (only integers, slices (`:`), ellipsis (`...`), None and long or bool tensors or "
                                 "lists are valid indices)");
  __builtin_unreachable();
}

// The result of walking a key: the basic view, and the advanced indices over its dims.
struct Walk {
  Tensor view;
  std::vector<std::int64_t> dims;  // dims of `view` an index tensor addresses, increasing
  std::vector<Tensor> indices;     // integer index tensors, one per entry of dims
  int index_tensors = 0;           // items of the key that are index tensors (a bool counts)
  bool mask = false;               // one of them is a bool mask with dims
  bool byte_mask = false;          // one of them is a uint8 mask with dims
};

// PyTorch's (and NumPy's old) reading of a list key: one of fewer than 32 items that holds a
// tensor, a sequence, a slice, an Ellipsis or None is read as the tuple of its items, with
// PyTorch's deprecation warning (`t[[[0, 1], [1, 0]]]` is `t[[0, 1], [1, 0]]`); any other list
// (of ints or bools) is one index tensor. Returns the tuple (a new reference, a snapshot of the
// list, so that an item's __index__ cannot change the list under the walk), or nullptr.
PyObject* list_as_tuple(PyObject* key) {
  if (!PyList_Check(key) || PyList_GET_SIZE(key) >= 32) return nullptr;
  PyObject* tuple = PyList_AsTuple(key);
  if (tuple == nullptr) throw PythonError();
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    PyObject* item = PyTuple_GET_ITEM(tuple, i);
    if (is_tensor(item) || PySequence_Check(item) || PySlice_Check(item) || item == Py_Ellipsis || item == Py_None) {
      warn(WarningKind::User,
           "Using a non-tuple sequence for multidimensional indexing is deprecated; use x[tuple(seq)] instead of "
           "x[seq]. A later release will read it as a tensor index, x[kael.tensor(seq)], which will result either "
           "in an error or a different result");
      return tuple;
    }
  }
  Py_DECREF(tuple);
  return nullptr;
}

Walk walk_key(const Tensor& self, PyObject* key) {
  // The key (a tuple, immutable, or a single object) is held by the caller for the whole call;
  // a list read as a tuple is held here.
  std::vector<Index> items;
  PyObject* as_tuple = list_as_tuple(key);
  const ScopedRef hold(as_tuple);
  if (as_tuple != nullptr) key = as_tuple;
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
    }
    consumed += item.consumes();
  }
  KAEL_CHECK_INDEX(consumed <= self.dim(),
                   "index: too many indices for tensor of dimension " << self.dim() << " (got " << consumed << ")");
  Walk w{self, {}, {}};
  Tensor& t = w.view;
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
      case Index::Kind::Bool: {
        // a 0-d bool: a new dim of size 1, indexed by [0] (True) or [] (False), as in NumPy
        ++w.index_tensors;
        t = kael::unsqueeze(t, dim);
        const std::int64_t size[] = {item.value};
        Tensor idx = kael::empty(size, ScalarType::Int64);
        if (item.value) native::assign(idx, Scalar(std::int64_t{0}));
        w.dims.push_back(dim);
        w.indices.push_back(std::move(idx));
        ++dim;
        break;
      }
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
      case Index::Kind::Tensor:
        ++w.index_tensors;
        if (item.tensor.dtype() == ScalarType::Bool) {
          w.mask = true;
          w.byte_mask = w.byte_mask || item.byte_mask;
          const Tensor& mask = item.tensor;
          for (std::int64_t j = 0; j < mask.dim(); ++j)
            KAEL_CHECK_INDEX(mask.sizes()[j] == t.sizes()[dim + j],
                             "index: The shape of the mask " << shape_str(mask.sizes()) << " at index " << j
                                                             << " does not match the shape of the indexed tensor "
                                                             << shape_str(t.sizes()) << " at index " << dim + j);
          const Tensor nz = kael::nonzero(mask);  // [n, mask.dim()]
          for (std::int64_t j = 0; j < mask.dim(); ++j) {
            w.dims.push_back(dim + j);
            w.indices.push_back(kael::select(nz, 1, j));
          }
          dim += mask.dim();
        } else {
          w.dims.push_back(dim);
          w.indices.push_back(item.tensor);
          ++dim;
        }
        break;
    }
  }
  return w;
}

// The advanced part of a walk: the view with the indexed dims in front (a view of the basic
// view), the permutation that takes the gathered result (B + other dims) to NumPy's layout,
// and the shape of the result.
struct Advanced {
  Tensor front;
  DimVector result_perm;
  DimVector result_shape;
};

std::string shapes_str(const std::vector<Tensor>& tensors) {
  std::ostringstream out;
  for (std::size_t j = 0; j < tensors.size(); ++j) out << (j ? ", " : "") << shape_str(tensors[j].sizes());
  return out.str();
}

Advanced plan_advanced(const Walk& w) {
  const Tensor& t = w.view;
  DimVector perm{IntArrayRef(w.dims)};
  std::vector<bool> indexed(static_cast<std::size_t>(t.dim()), false);
  for (const std::int64_t d : w.dims) indexed[static_cast<std::size_t>(d)] = true;
  for (std::int64_t d = 0; d < t.dim(); ++d)
    if (!indexed[static_cast<std::size_t>(d)]) perm.push_back(d);
  // indices that do not broadcast together: PyTorch's IndexError (not the RuntimeError of other
  // shapes that do not broadcast)
  DimVector bshape;
  bool broadcast = true;
  for (const Tensor& i : w.indices)
    broadcast = broadcast && native::try_broadcast_shapes(DimVector(bshape), i.sizes(), bshape);
  KAEL_CHECK_INDEX(broadcast, "index: shape mismatch: indexing tensors could not be broadcast together with shapes "
                                  << shapes_str(w.indices));
  const auto nb = static_cast<std::int64_t>(bshape.size());
  const std::int64_t k = static_cast<std::int64_t>(w.dims.size());
  // adjacent advanced indices keep their place (the dims before them come first)
  const bool adjacent = w.dims.back() - w.dims.front() + 1 == k;
  const std::int64_t before = adjacent ? w.dims.front() : 0;
  const std::int64_t rest = t.dim() - k;
  Advanced a{kael::permute(t, perm), {}, {}};
  for (std::int64_t i = 0; i < before; ++i) a.result_perm.push_back(nb + i);
  for (std::int64_t i = 0; i < nb; ++i) a.result_perm.push_back(i);
  for (std::int64_t i = before; i < rest; ++i) a.result_perm.push_back(nb + i);
  DimVector gathered = bshape;
  for (std::int64_t i = 0; i < rest; ++i) gathered.push_back(a.front.sizes()[k + i]);
  for (const std::int64_t p : a.result_perm) a.result_shape.push_back(gathered[p]);
  return a;
}

Tensor apply_key(const Tensor& self, PyObject* key) {
  Walk w = walk_key(self, key);
  if (w.dims.empty()) return w.view;
  const Advanced a = plan_advanced(w);
  Tensor gathered = kael::_index(a.front, w.indices);
  bool identity = true;
  for (std::size_t i = 0; i < a.result_perm.size(); ++i) identity = identity && a.result_perm[i] == static_cast<std::int64_t>(i);
  // laid out row-major in the result's own order, as PyTorch's index returns it
  return identity ? gathered : kael::contiguous(kael::permute(gathered, a.result_perm));
}

}  // namespace

PyObject* tensor_getitem(PyObject* self, PyObject* key) {
  // Note [__kael_function__]: self, or an index (a tuple's items too), may override
  if (self_or_arg_overrides(self, key)) [[unlikely]] {
    PyObject* args[] = {key};
    return call_kael_function("__getitem__", true, self, args, 1, nullptr);
  }
  return guarded([&]() -> Tensor { return apply_key(tensor_of(self), key); }, gil::Op{false});
}

int tensor_setitem(PyObject* self, PyObject* key, PyObject* value) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_TypeError, "index: tensors do not support item deletion");
    return -1;
  }
  if (self_or_arg_overrides(self, key) || has_kael_function(value)) [[unlikely]] {
    PyObject* args[] = {key, value};
    PyObject* r = call_kael_function("__setitem__", true, self, args, 2, nullptr);
    if (r == nullptr) return -1;
    Py_DECREF(r);
    return 0;
  }
  return guarded([&]() -> int {
    const Tensor* value_tensor = nullptr;
    Scalar s;
    if (is_tensor(value)) {
      value_tensor = &tensor_of(value);
    } else {
      const Match m = conv_scalar(value, s, "index");
      if (m == Match::Error) return -1;
      KAEL_CHECK_TYPE(m == Match::Yes, "index: can only assign a tensor or a number, got " << Py_TYPE(value)->tp_name);
    }
    // PyTorch's shortcut for a key that is False itself (not in a tuple): nothing is written, but
    // a number is still range-checked against the dtype as every other key checks it
    // (native::assign: float16/bfloat16 round without a check), so x[False] = 2**40 on int32 raises.
    if (key == Py_False) {
      const ScalarType dtype = tensor_of(self).dtype();
      if (value_tensor == nullptr && !is_reduced_floating(dtype)) check_convertible("index", s, dtype);
      return 0;
    }
    // A key that is True itself is a copy into t.unsqueeze(0) in PyTorch (not index_put_): the
    // value is converted, and an expanded t is refused by the copy's overlap check.
    const Walk w = key == Py_True ? Walk{kael::unsqueeze(tensor_of(self), 0), {}, {}} : walk_key(tensor_of(self), key);
    if (w.dims.empty()) {
      if (value_tensor != nullptr) {
        native::assign(w.view, *value_tensor);
      } else {
        native::assign(w.view, s);
      }
    } else {
      // the value, broadcast to the result's shape (and converted to its dtype, see below),
      // then laid out as index_put_ reads it (B + other dims) and written through the indices.
      // A tensor value keeps its dtype, so index_put_ refuses one of another dtype (torch's
      // "Index put requires the source and destination dtypes match"), except where PyTorch
      // converts it: its masked_fill shortcut (one bool mask the only index tensor, a
      // one-element value), which converts value.item() with the overflow check of a number.
      const Advanced a = plan_advanced(w);
      bool convert = value_tensor == nullptr;
      // PyTorch writes a one-element value through one mask with masked_fill_, which refuses a
      // uint8 mask (reading through one is allowed, with a warning)
      KAEL_CHECK(!(w.index_tensors == 1 && w.mask && w.byte_mask && (value_tensor == nullptr || value_tensor->numel() == 1)),
                 "index: masked_fill_ only supports boolean masks, but got mask with dtype kael.uint8");
      if (!convert && value_tensor->numel() == 1) {
        convert = w.index_tensors == 1 && w.mask;
        if (convert) check_convertible("index", value_tensor->item(), w.view.dtype());
      }
      const ScalarType values_dtype = convert ? w.view.dtype() : value_tensor->dtype();
      Tensor values = kael::empty(a.result_shape, values_dtype, w.view.device());
      if (value_tensor != nullptr) {
        native::assign(values, *value_tensor);
      } else {
        native::assign(values, s);
      }
      DimVector inverse(a.result_perm.size());
      for (std::size_t i = 0; i < a.result_perm.size(); ++i) inverse[static_cast<std::size_t>(a.result_perm[i])] = static_cast<std::int64_t>(i);
      kael::index_put_(a.front, w.indices, kael::permute(values, inverse));
    }
    return 0;
  });
}

}  // namespace kael::python
