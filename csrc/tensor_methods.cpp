// kael.Tensor's hand-written members: repr, hash, the sequence protocol, properties, methods, and
// the one method table and property table of the type, which list every hand-written member
// (defined here and in the files tensor_members.h names); the generated methods are merged into
// the method table when the module loads.
#include <Python.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "arg_parsing.h"
#include "kael/core/convert.h"
#include "guard.h"
#include "kael_function.h"
#include "pyobject.h"
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/ops/permute.h"
#include "kael/ops/select.h"
#include "kael/ops/to.h"
#include "kael/ops/transpose.h"
#include "tensor_members.h"
#include "tensor_object.h"

// Note [__kael_function__] for the hand-written methods, properties and slots: `name` is what
// the override receives (Tensor.<name>, or Tensor.<name>.__get__ for a property).
#define KAEL_OVERRIDE_NOARGS(name)                                   \
  if (self_overrides(self)) [[unlikely]]                             \
  return call_kael_function(name, true, self, nullptr, 0, nullptr)
#define KAEL_OVERRIDE_GETTER(name)       \
  if (self_overrides(self)) [[unlikely]] \
  return call_kael_function_getter(name, self)

namespace kael::python {

void append_generated_methods(std::vector<PyMethodDef>& out);  // generated: python/tables.cpp

namespace {

PyObject* scalar_to_python(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return PyBool_FromLong(s.to<bool>());
    case Scalar::Kind::Int:
      return PyLong_FromLongLong(s.to<std::int64_t>());
    case Scalar::Kind::Float:
      break;
  }
  return PyFloat_FromDouble(s.to<double>());
}

PyObject* int_tuple(IntArrayRef v) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(v.size()));
  if (t == nullptr) return nullptr;
  for (std::size_t i = 0; i < v.size(); ++i) {
    PyObject* item = PyLong_FromLongLong(v[i]);
    if (item == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), item);
  }
  return t;
}


// torch's repr ends with the autograd state: grad_fn=<Name> for a tensor an op recorded,
// requires_grad=True for a leaf that requires grad; Tensor::to_string places it after the other
// suffixes as torch's _add_suffixes does (Note [Print options]: the line width).
std::vector<std::string> autograd_suffix(const Tensor& t) {
  if (const auto& fn = autograd::grad_fn(t)) return {"grad_fn=<" + fn->name() + ">"};
  if (autograd::requires_grad(t)) return {"requires_grad=True"};
  return {};
}


// ------------------------------------------------------------------ sequence protocol

Py_ssize_t sq_length(PyObject* self) {
  if (self_overrides(self)) [[unlikely]] {
    PyObject* r = call_kael_function("__len__", true, self, nullptr, 0, nullptr);
    const Py_ssize_t n = r == nullptr ? -1 : PyNumber_AsSsize_t(r, PyExc_OverflowError);
    Py_XDECREF(r);
    return n;
  }
  const Tensor& t = tensor_of(self);
  if (t.dim() == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d tensor");
    return -1;
  }
  return static_cast<Py_ssize_t>(t.sizes()[0]);
}

PyObject* sq_item(PyObject* self, Py_ssize_t i) {
  return guarded([&]() -> Tensor { return kael::select(tensor_of(self), 0, i); }, gil::Op{false});
}



// ------------------------------------------------------------------ properties

PyObject* get_shape(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("shape");
  return make_size(tensor_of(self).sizes());
}
PyObject* get_dtype(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("dtype");
  PyObject* d = dtype_object(tensor_of(self).dtype());
  Py_INCREF(d);
  return d;
}
// NumPy leaves a binary operator to an operand of higher __array_priority__, as it does for
// PyTorch's tensors (1000): np.int64(2) + t calls t.__radd__ instead of making an object array of
// t's elements.
PyObject* get_array_priority(PyObject*, void*) { return PyLong_FromLong(1000); }
PyObject* get_device(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("device");
  return device_object(tensor_of(self).device());
}
PyObject* get_ndim(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("ndim");
  return PyLong_FromLongLong(tensor_of(self).dim());
}
PyObject* get_T(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("T");
  return guarded([&]() -> Tensor {
    const Tensor& t = tensor_of(self);
    if (t.dim() > 2)
      warn(WarningKind::User,
           "T: the use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and "
           "it will throw an error in a future release. Consider `x.mT` to transpose batches of matrices or "
           "`x.permute(*range(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.");
    DimVector dims(t.dim());
    for (std::int64_t i = 0; i < t.dim(); ++i) dims[i] = t.dim() - 1 - i;
    return kael::permute(t, dims);
  }, gil::Op{false});
}
PyObject* get_mT(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("mT");
  // PyTorch 2.x: the identity on a 0-d tensor (the same object), with its deprecation warning
  if (tensor_of(self).dim() == 0) {
    if (PyErr_WarnEx(PyExc_UserWarning,
                     "mT: Tensor.mT is deprecated on 0-D tensors. This function is the identity in these cases.",
                     1) < 0)
      return nullptr;
    Py_INCREF(self);
    return self;
  }
  return guarded([&]() -> Tensor {
    const Tensor& t = tensor_of(self);
    KAEL_CHECK(t.dim() >= 2, "mT: tensor.mT is only supported on matrices or batches of matrices. Got "
                                 << t.dim() << "-D tensor.");
    return kael::transpose(t, -2, -1);
  }, gil::Op{false});
}
PyObject* get_is_cuda(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("is_cuda");
  return PyBool_FromLong(tensor_of(self).device().is_cuda());
}
PyObject* get_itemsize(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("itemsize");
  return PyLong_FromLongLong(tensor_of(self).element_size());
}
// The version counter of the storage (see Note [Version counter]); in-place writes bump it.
PyObject* get_version(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("_version");
  if (tensor_of(self).impl()->storage()->is_inference()) {  // Note [Inference tensors]
    PyErr_SetString(PyExc_RuntimeError, "Inference tensors do not track version counter.");
    return nullptr;
  }
  return PyLong_FromUnsignedLong(tensor_of(self).impl()->version());
}

// The tensor a view was made from (see Note [Views record their base]), or None.
PyObject* get_base(PyObject* self, void*) {
  KAEL_OVERRIDE_GETTER("_base");
  const IntrusivePtr<TensorImpl>& base = tensor_of(self).impl()->view_base();
  if (!base) Py_RETURN_NONE;
  return wrap(Tensor(base));
}


// ------------------------------------------------------------------ methods

// Parses the optional dim argument of size()/stride(), given by position or as dim=.
bool optional_dim(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, const char* name, std::int64_t& dim,
                  bool& given) {
  given = false;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  bool ok = nargs + nkw <= 1;
  if (ok && nkw == 1) ok = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "dim") == 0;
  PyObject* arg = ok && nargs + nkw == 1 ? args[0] : Py_None;
  if (ok && arg == Py_None) return true;
  // An int as every int parameter takes it (conv_int): anything with __index__, such as a NumPy
  // integer, but not a bool or a tensor.
  const Match m = ok ? conv_int(arg, dim) : Match::No;
  if (m == Match::Error) return false;
  if (m == Match::No) {
    PyErr_Format(PyExc_TypeError, "%s() received an invalid combination of arguments - expected %s(int dim=None)",
                 name, name);
    return false;
  }
  given = true;
  return true;
}

PyObject* m_size(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (self_overrides(self) || wants_kael_function(nullptr, args, nargs, kwnames)) [[unlikely]]
    return call_kael_function("size", true, self, args, nargs, kwnames);
  std::int64_t dim = 0;
  bool given = false;
  if (!optional_dim(args, nargs, kwnames, "size", dim, given)) return nullptr;
  if (!given) return get_shape(self, nullptr);
  return guarded([&] { return PyLong_FromLongLong(tensor_of(self).size(dim)); });
}

PyObject* m_stride(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (self_overrides(self) || wants_kael_function(nullptr, args, nargs, kwnames)) [[unlikely]]
    return call_kael_function("stride", true, self, args, nargs, kwnames);
  std::int64_t dim = 0;
  bool given = false;
  if (!optional_dim(args, nargs, kwnames, "stride", dim, given)) return nullptr;
  if (!given) return int_tuple(tensor_of(self).strides());
  return guarded([&] { return PyLong_FromLongLong(tensor_of(self).stride(dim)); });
}

PyObject* m_dim(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("dim");
  return PyLong_FromLongLong(tensor_of(self).dim());
}
PyObject* m_numel(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("numel");
  return PyLong_FromLongLong(tensor_of(self).numel());
}
PyObject* m_element_size(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("element_size");
  return PyLong_FromLongLong(tensor_of(self).element_size());
}
PyObject* m_is_contiguous(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("is_contiguous");
  return PyBool_FromLong(tensor_of(self).is_contiguous());
}
PyObject* m_data_ptr(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("data_ptr");
  return PyLong_FromVoidPtr(tensor_of(self).numel() ? tensor_of(self).data_ptr() : nullptr);
}
PyObject* m_item(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("item");
  return guarded([&] { return scalar_to_python(tensor_of(self).item()); });
}

PyObject* tolist_rec(const Tensor& t, std::int64_t dim, const char* p) {
  if (dim == t.dim()) {
    return visit_dtype(t.dtype(), [&](auto tag) -> PyObject* {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return PyBool_FromLong(load_bool(reinterpret_cast<const bool*>(p)));  // Note [Bool bytes]
      } else if constexpr (std::is_integral_v<T>) {
        return PyLong_FromLongLong(*reinterpret_cast<const T*>(p));
      } else {
        return PyFloat_FromDouble(static_cast<double>(*reinterpret_cast<const T*>(p)));
      }
    });
  }
  // A dim of one element may have any stride (x[::2**63 - 1]), whose size in bytes need not fit:
  // it is never stepped over.
  const std::int64_t n = t.sizes()[dim], step = n > 1 ? t.strides()[dim] * t.element_size() : 0;
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
  if (list == nullptr) return nullptr;
  for (std::int64_t i = 0; i < n; ++i) {
    PyObject* item = tolist_rec(t, dim + 1, p + i * step);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

PyObject* m_tolist(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("tolist");
  const Tensor& t = tensor_of(self);
  if (!t.device().is_cpu()) {
    PyErr_SetString(PyExc_RuntimeError, "tolist: move the tensor to the cpu first");
    return nullptr;
  }
  return tolist_rec(t, 0, static_cast<const char*>(t.data_ptr()));
}

PyObject* m_cpu(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("cpu");
  return guarded([&]() -> Tensor { return kael::to(tensor_of(self), kCPU); }, gil::Op{false});
}

PyObject* m_is_floating_point(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("is_floating_point");
  return PyBool_FromLong(is_floating(tensor_of(self).dtype()));
}

// Tensor.float(), Tensor.half(), ...: one conversion method per dtype (names from codegen/enums.py).
template <int I>
PyObject* m_as(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS(detail::kScalarTypeMethod[I]);
  return guarded([&]() -> Tensor { return kael::to(tensor_of(self), static_cast<ScalarType>(I)); }, gil::Op{false});
}


PyObject* m_cuda(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("cuda");
  return guarded([&]() -> Tensor { return kael::to(tensor_of(self), Device{DeviceType::CUDA, 0}); }, gil::Op{false});
}

PyObject* m_is_view(PyObject* self, PyObject*) {
  KAEL_OVERRIDE_NOARGS("_is_view");
  return PyBool_FromLong(tensor_of(self).impl()->is_view());
}

}  // namespace

// module_name.name(self, *args, **kwargs): the hand-written methods that are Python functions.
PyObject* call_module_function(const char* module_name, const char* name, PyObject* self, PyObject* args,
                               PyObject* kwargs) {
  PyObject* module = PyImport_ImportModule(module_name);
  if (module == nullptr) return nullptr;
  PyObject* fn = PyObject_GetAttrString(module, name);
  Py_DECREF(module);
  if (fn == nullptr) return nullptr;
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject* full = PyTuple_New(n + 1);
  if (full == nullptr) {
    Py_DECREF(fn);
    return nullptr;
  }
  Py_INCREF(self);
  PyTuple_SET_ITEM(full, 0, self);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(args, i);
    Py_INCREF(item);
    PyTuple_SET_ITEM(full, i + 1, item);
  }
  PyObject* result = PyObject_Call(fn, full, kwargs);
  Py_DECREF(full);
  Py_DECREF(fn);
  return result;
}

namespace {

// Tensor.<name>(...) as kael.functional.<name>(self, ...): the methods whose result depends on a
// flag (nonzero(as_tuple=), unique(return_*=)) are written once, in Python.
PyObject* forward_to_functional(const char* name, PyObject* self, PyObject* args, PyObject* kwargs) {
  if (self_overrides(self) || tuple_wants_kael_function(args, kwargs)) [[unlikely]] {
    PyObject* head = PyTuple_Pack(1, self);
    PyObject* full = head == nullptr ? nullptr : PySequence_Concat(head, args);  // (self, *args)
    Py_XDECREF(head);
    if (full == nullptr) return nullptr;
    PyObject* r = call_kael_function_tuple(name, full, kwargs);
    Py_DECREF(full);
    return r;
  }
  return call_module_function("kael.functional", name, self, args, kwargs);
}
PyObject* m_nonzero(PyObject* self, PyObject* args, PyObject* kwargs) {
  return forward_to_functional("nonzero", self, args, kwargs);
}
PyObject* m_unique(PyObject* self, PyObject* args, PyObject* kwargs) {
  return forward_to_functional("unique", self, args, kwargs);
}



}  // namespace

// Identity hash: __eq__ is elementwise, so a value hash would be meaningless.
Py_hash_t tensor_hash(PyObject* self) { return PyBaseObject_Type.tp_hash(self); }

PyObject* tensor_repr(PyObject* self) {
  KAEL_OVERRIDE_NOARGS("__repr__");
  return guarded([&] {
    const Tensor& t = tensor_of(self);
    return PyUnicode_FromString(t.to_string(autograd_suffix(t)).c_str());
  });
}

PyObject* tensor_iter(PyObject* self) {
  KAEL_OVERRIDE_NOARGS("__iter__");
  if (tensor_of(self).dim() == 0) {
    PyErr_SetString(PyExc_TypeError, "iteration over a 0-d tensor");
    return nullptr;
  }
  return PySeqIter_New(self);
}

PySequenceMethods tensor_as_sequence = {
    .sq_length = sq_length,
    .sq_item = sq_item,
};

PyMappingMethods tensor_as_mapping = {
    .mp_length = sq_length,
    .mp_subscript = tensor_getitem,
    .mp_ass_subscript = tensor_setitem,
};

PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, nullptr, "The size of each dim, as a kael.Size.", nullptr},
    {"dtype", get_dtype, nullptr, "The element type.", nullptr},
    {"device", get_device, nullptr, "The device, a kael.device.", nullptr},
    {"ndim", get_ndim, nullptr, "The number of dims.", nullptr},
    {"T", get_T, nullptr, "The view with all dims reversed.", nullptr},
    {"mT", get_mT, nullptr, "The view with the last two dims swapped.", nullptr},
    {"is_cuda", get_is_cuda, nullptr, "Whether the tensor is on a CUDA device.", nullptr},
    {"itemsize", get_itemsize, nullptr, "Size of one element in bytes.", nullptr},
    {"_version", get_version, nullptr, "Counter of in-place writes, shared by views.", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, "The instance attributes.", nullptr},
    {"_base", get_base, nullptr, "The tensor this view was made from, or None when it is not a view.", nullptr},
    {"__array_priority__", get_array_priority, nullptr,
     "Above NumPy's: NumPy leaves binary operators to the tensor (np.int64(2) + t calls t.__radd__).", nullptr},
    // autograd_tensor.cpp
    {"requires_grad", get_requires_grad, set_requires_grad_attr,
     "Whether autograd records operations on this tensor.", nullptr},
    {"grad", get_grad, set_grad, "The gradient accumulated by backward(), or None.", nullptr},
    {"grad_fn", get_grad_fn, nullptr, "The graph node that created this tensor, or None for leaves.", nullptr},
    {"is_leaf", get_is_leaf, nullptr, "Whether the tensor was not created by a recorded operation.", nullptr},
    {"retains_grad", get_retains_grad, nullptr, "Whether retain_grad() was called on this non-leaf tensor.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

namespace {

// Every hand-written method of kael.Tensor but the conversions to a dtype (below). The autograd
// ones come first: a name listed twice is bound to its first entry.
PyMethodDef handwritten_methods[] = {
    // autograd_tensor.cpp
    {"requires_grad_", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_requires_grad_)),
     METH_VARARGS | METH_KEYWORDS,
     "requires_grad_($self, requires_grad=True)\n--\n\nSets requires_grad in place and returns the tensor."},
    {"retain_grad", m_retain_grad, METH_NOARGS,
     "retain_grad($self, /)\n--\n\nMakes backward() fill .grad of this non-leaf tensor."},
    {"detach_", m_detach_, METH_NOARGS, "detach_($self, /)\n--\n\nDetaches the tensor from the graph in place."},
    {"is_inference", m_is_inference, METH_NOARGS,
     "is_inference($self, /)\n--\n\nWhether the tensor is an inference tensor (made in inference mode)."},
    {"backward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_backward)),
     METH_VARARGS | METH_KEYWORDS,
     "backward($self, gradient=None, retain_graph=None, create_graph=False, inputs=None)\n--\n\nComputes the "
     "gradient of this tensor with respect to the graph leaves and accumulates it into their .grad."},
    {"register_hook", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_register_hook_py)),
     METH_VARARGS | METH_KEYWORDS,
     "register_hook($self, hook)\n--\n\nRegisters hook(grad) on this tensor's gradient; it may return a "
     "replacement. Returns a handle with remove()."},
    {"_register_hook", m_register_hook, METH_O,
     "_register_hook($self, fn, /)\n--\n\nRegisters a gradient hook; returns its id."},
    {"_remove_hook", m_remove_hook, METH_O,
     "_remove_hook($self, id, /)\n--\n\nRemoves the gradient hook with the given id."},
    // this file
    {"size", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_size)), METH_FASTCALL | METH_KEYWORDS,
     "size($self, dim=None)\n--\n\nThe shape as a tuple, or the size of one dim."},
    {"stride", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_stride)), METH_FASTCALL | METH_KEYWORDS,
     "stride($self, dim=None)\n--\n\nThe strides (in elements) as a tuple, or the stride of one dim."},
    {"dim", m_dim, METH_NOARGS, "dim($self, /)\n--\n\nThe number of dims."},
    {"nonzero", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_nonzero)), METH_VARARGS | METH_KEYWORDS,
     "nonzero($self, *, as_tuple=False)\n--\n\nThe indices of the nonzero elements (kael.nonzero)."},
    {"unique", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_unique)), METH_VARARGS | METH_KEYWORDS,
     "unique($self, sorted=True, return_inverse=False, return_counts=False, dim=None)\n--\n\nThe unique elements "
     "(kael.unique)."},
    {"_is_view", m_is_view, METH_NOARGS, "_is_view($self, /)\n--\n\nWhether the tensor is a view of another tensor."},
    {"numel", m_numel, METH_NOARGS, "numel($self, /)\n--\n\nThe number of elements."},
    {"element_size", m_element_size, METH_NOARGS, "element_size($self, /)\n--\n\nSize of one element in bytes."},
    {"is_contiguous", m_is_contiguous, METH_NOARGS,
     "is_contiguous($self, /)\n--\n\nWhether the layout is row-major contiguous."},
    {"data_ptr", m_data_ptr, METH_NOARGS, "data_ptr($self, /)\n--\n\nAddress of the first element."},
    {"item", m_item, METH_NOARGS, "item($self, /)\n--\n\nThe single element as a Python float, int or bool."},
    {"tolist", m_tolist, METH_NOARGS, "tolist($self, /)\n--\n\nThe elements as nested Python lists."},
    {"cpu", m_cpu, METH_NOARGS, "cpu($self, /)\n--\n\nThe tensor on the cpu (itself when it already is)."},
    {"cuda", m_cuda, METH_NOARGS, "cuda($self, /)\n--\n\nThe tensor on the CUDA device (itself when it already is)."},
    {"is_floating_point", m_is_floating_point, METH_NOARGS,
     "is_floating_point($self, /)\n--\n\nWhether the dtype is a floating point type."},
    // pyobject.cpp
    {"as_subclass", m_as_subclass, METH_O,
     "as_subclass($self, cls, /)\n--\n\nA tensor of the subclass cls sharing this tensor's data."},
    {"storage_offset", m_storage_offset, METH_NOARGS,
     "storage_offset($self, /)\n--\n\nThe offset of the first element in the storage, in elements."},
    {"_set_data", m_set_data, METH_O, "_set_data($self, other, /)\n--\n\nPoints the tensor at other's data."},
    {"_data", m_data, METH_NOARGS,
     "_data($self, /)\n--\n\nThe tensor's data outside autograd, with a version counter of its own."},
    {nullptr, nullptr, 0, nullptr}};

template <int... I>
void append_dtype_methods(std::vector<PyMethodDef>& out, std::integer_sequence<int, I...>) {
  static std::string docs[kNumScalarTypes];
  for (int i = 0; i < kNumScalarTypes; ++i)
    docs[i] = std::string(detail::kScalarTypeMethod[i]) + "($self, /)\n--\n\nThe tensor as " +
              detail::kScalarTypeNames[i] + " (itself when it already is).";
  (out.push_back({detail::kScalarTypeMethod[I], m_as<I>, METH_NOARGS, docs[I].c_str()}), ...);
}

}  // namespace

PyMethodDef* tensor_methods() {
  static std::vector<PyMethodDef> methods;
  if (methods.empty()) {
    for (PyMethodDef* m = handwritten_methods; m->ml_name != nullptr; ++m) methods.push_back(*m);
    append_dtype_methods(methods, std::make_integer_sequence<int, kNumScalarTypes>{});
    append_generated_methods(methods);
    methods.push_back({nullptr, nullptr, 0, nullptr});
  }
  return methods.data();
}

}  // namespace kael::python
