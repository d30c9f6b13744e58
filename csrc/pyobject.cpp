// The objects around a tensor that PyTorch code expects: kael.Size, kael.device objects for
// Tensor.device, the primitives kael/_tensor.py builds NumPy interop and the Python-level
// Tensor methods on (see Note [Python-level Tensor methods]).
#include <Python.h>

#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "arg_parsing.h"
#include "kael_function.h"
#include "kael/core/error.h"
#include "kael/core/tensor_impl.h"
#include "kael/ops/as_strided.h"
#include "kael/ops/detach.h"
#include "py_utf8.h"
#include "pyobject.h"
#include "python_owner.h"
#include "tensor_members.h"
#include "tensor_object.h"

namespace kael::python {

// ------------------------------------------------------------------ kael.Size

namespace {

PyObject* size_from_items(PyTypeObject* type, PyObject* items) {
  // items: a tuple of Python ints (new objects or borrowed)
  const Py_ssize_t n = PyTuple_GET_SIZE(items);
  PyObject* out = type->tp_alloc(type, n);
  if (out == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(items, i);
    Py_INCREF(item);
    PyTuple_SET_ITEM(out, i, item);
  }
  return out;
}

// kael.Size(iterable=()): the items as ints (anything with __index__, a 1-element integer tensor
// too), as torch.Size.
PyObject* size_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* iterable = nullptr;
  static const char* keywords[] = {"sizes", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Size", const_cast<char**>(keywords), &iterable)) return nullptr;
  PyObject* seq = iterable == nullptr ? PyTuple_New(0) : PySequence_Tuple(iterable);
  if (seq == nullptr) return nullptr;
  const Py_ssize_t n = PyTuple_GET_SIZE(seq);
  PyObject* ints = PyTuple_New(n);
  if (ints == nullptr) {
    Py_DECREF(seq);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyTuple_GET_ITEM(seq, i);
    PyObject* value = nullptr;
    if (PyLong_CheckExact(item)) {
      Py_INCREF(item);
      value = item;
    } else if (!PyBool_Check(item) && PyIndex_Check(item)) {
      value = PyNumber_Index(item);
    }
    if (value == nullptr) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "kael.Size() takes an iterable of 'int' (item %zd is '%s')", i,
                     Py_TYPE(item)->tp_name);
      Py_DECREF(seq);
      Py_DECREF(ints);
      return nullptr;
    }
    PyTuple_SET_ITEM(ints, i, value);
  }
  Py_DECREF(seq);
  PyObject* out = size_from_items(type, ints);
  Py_DECREF(ints);
  return out;
}

PyObject* size_repr(PyObject* self) {
  PyObject* list = PySequence_List(self);
  if (list == nullptr) return nullptr;
  PyObject* out = PyUnicode_FromFormat("kael.Size(%R)", list);
  Py_DECREF(list);
  return out;
}

PyObject* size_numel(PyObject* self, PyObject*) {
  PyObject* product = PyLong_FromLong(1);
  for (Py_ssize_t i = 0; product != nullptr && i < PyTuple_GET_SIZE(self); ++i) {
    PyObject* next = PyNumber_Multiply(product, PyTuple_GET_ITEM(self, i));
    Py_DECREF(product);
    product = next;
  }
  return product;
}

PyObject* size_reduce(PyObject* self, PyObject*) {
  PyObject* items = PySequence_Tuple(self);
  if (items == nullptr) return nullptr;
  return Py_BuildValue("(O(N))", Py_TYPE(self), items);
}

// A plain tuple result of tuple's own slot, as a Size.
PyObject* as_size(PyObject* result) {
  if (result == nullptr || !PyTuple_CheckExact(result)) return result;
  PyObject* out = size_from_items(&SizeType, result);
  Py_DECREF(result);
  return out;
}

PyObject* size_subscript(PyObject* self, PyObject* key) {
  PyObject* r = PyTuple_Type.tp_as_mapping->mp_subscript(self, key);
  return PySlice_Check(key) ? as_size(r) : r;
}
PyObject* size_concat(PyObject* self, PyObject* other) {
  return as_size(PyTuple_Type.tp_as_sequence->sq_concat(self, other));
}
PyObject* size_repeat(PyObject* self, Py_ssize_t n) { return as_size(PyTuple_Type.tp_as_sequence->sq_repeat(self, n)); }

PyMethodDef size_methods[] = {
    {"numel", size_numel, METH_NOARGS, "numel($self, /)\n--\n\nThe number of elements of a tensor of this shape."},
    {"__reduce__", size_reduce, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PySequenceMethods size_as_sequence = {};
PyMappingMethods size_as_mapping = {};

}  // namespace

PyTypeObject SizeType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael.Size",
    .tp_repr = size_repr,
    .tp_as_sequence = &size_as_sequence,
    .tp_as_mapping = &size_as_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Size(sizes=())\n--\n\nThe shape of a tensor: a tuple of ints with numel().",
    .tp_methods = size_methods,
    .tp_new = size_new,
};

PyObject* make_size(IntArrayRef sizes) {
  PyObject* out = SizeType.tp_alloc(&SizeType, static_cast<Py_ssize_t>(sizes.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    PyObject* item = PyLong_FromLongLong(sizes[i]);
    if (item == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

// ------------------------------------------------------------------ kael.device objects

namespace {

// kael.device, a Python class (kael/_tensor.py) registered at import; its objects are cached
// per device, so t.device is t.device.
PyObject* device_class = nullptr;
PyObject* device_cache = nullptr;  // {"cpu": device(type='cpu'), "cuda:0": ...}

PyObject* py_register_device_class(PyObject*, PyObject* cls) {
  if (!PyType_Check(cls)) {
    PyErr_SetString(PyExc_TypeError, "_register_device_class: expected a class");
    return nullptr;
  }
  Py_INCREF(cls);
  Py_XSETREF(device_class, cls);
  Py_XSETREF(device_cache, PyDict_New());
  if (device_cache == nullptr) return nullptr;
  Py_RETURN_NONE;
}

// _parse_device(name): (type, index or None) of a device string, checked by the C++ parser
// every op uses, so kael.device("cuda:x") fails as t.to("cuda:x") does.
PyObject* py_parse_device(PyObject*, PyObject* arg) {
  if (!PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "device(): expected a device string, got %s", Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  OwnedUtf8 utf8;
  if (!utf8_of("device()", arg, Surrogates::Strict, utf8)) return nullptr;
  const std::string_view name = utf8.view();
  return guarded([&]() -> PyObject* {
    const Device d = parse_device(name);
    const char* type = d.is_cuda() ? "cuda" : "cpu";
    if (name.find(':') == std::string_view::npos) return Py_BuildValue("(sO)", type, Py_None);
    return Py_BuildValue("(si)", type, static_cast<int>(std::stoi(std::string(name.substr(name.find(':') + 1)))));
  });
}

}  // namespace

PyObject* device_object(Device d) {
  // a tensor's device has an index, as in PyTorch (device(type='cuda', index=0))
  const std::string name = d.is_cuda() ? "cuda:" + std::to_string(d.index) : std::string("cpu");
  if (device_class == nullptr) return PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
  PyObject* cached = PyDict_GetItemString(device_cache, name.c_str());
  if (cached != nullptr) {
    Py_INCREF(cached);
    return cached;
  }
  PyObject* obj = PyObject_CallFunction(device_class, "s", name.c_str());
  if (obj == nullptr) return nullptr;
  if (PyDict_SetItemString(device_cache, name.c_str(), obj) < 0) {
    Py_DECREF(obj);
    return nullptr;
  }
  return obj;
}

bool is_device_object(PyObject* o) {
  return device_class != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(device_class));
}

// ------------------------------------------------------------------ primitives for kael/_tensor.py

namespace {

// Note [Python-level Tensor methods]
// kael.Tensor is a static C type, so Python code cannot set attributes on it. Methods and
// properties that are plain orchestration (new_zeros, type, numpy, __dlpack__, __reduce_ex__,
// ...) are written in kael/_tensor.py and placed into the type's dict once at import by
// _tensor_extend; they are ordinary Python functions and properties on kael.Tensor.
PyObject* py_tensor_extend(PyObject*, PyObject* mapping) {
  if (!PyDict_Check(mapping)) {
    PyErr_SetString(PyExc_TypeError, "_tensor_extend: expected a dict");
    return nullptr;
  }
  PyObject* dict = TensorType.tp_dict;
  PyObject *key = nullptr, *value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(mapping, &pos, &key, &value))
    if (PyDict_SetItem(dict, key, value) < 0) return nullptr;
  PyType_Modified(&TensorType);
  Py_RETURN_NONE;
}

bool int_list(PyObject* o, const char* what, DimVector& out) {
  PyObject* seq = PySequence_Fast(o, what);
  if (seq == nullptr) return false;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
    const long long v = PyLong_AsLongLong(PySequence_Fast_ITEMS(seq)[i]);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      return false;
    }
    out.push_back(v);
  }
  Py_DECREF(seq);
  return true;
}

// _from_pointer(owner, address, nbytes, dtype, sizes, strides, offset): a CPU tensor over nbytes
// of memory at address that `owner` keeps valid; the storage holds a reference to owner until the
// last tensor over it dies. Sizes and strides are in elements, offset in elements.
PyObject* py_from_pointer(PyObject*, PyObject* args) {
  PyObject *owner = nullptr, *address = nullptr, *dtype_obj = nullptr, *sizes_obj = nullptr, *strides_obj = nullptr;
  unsigned long long nbytes = 0;
  long long offset = 0;
  if (!PyArg_ParseTuple(args, "OOKO!OOL:_from_pointer", &owner, &address, &nbytes, &DtypeType, &dtype_obj, &sizes_obj,
                        &strides_obj, &offset))
    return nullptr;
  void* data = PyLong_AsVoidPtr(address);
  if (data == nullptr && PyErr_Occurred()) return nullptr;
  DimVector sizes, strides;
  if (!int_list(sizes_obj, "_from_pointer: sizes must be a sequence", sizes) ||
      !int_list(strides_obj, "_from_pointer: strides must be a sequence", strides))
    return nullptr;
  return guarded([&]() -> PyObject* {
    KAEL_CHECK_VALUE(sizes.size() == strides.size(), "_from_pointer: sizes and strides differ in length");
    IntrusivePtr<Storage> storage = storage_owned_by(owner, data, static_cast<std::size_t>(nbytes));
    return wrap(Tensor(TensorImpl::make(std::move(storage), dtype_of_object(dtype_obj), std::move(sizes),
                                        std::move(strides), offset)));
  });
}

constexpr const char* kStorageRefName = "kael.Storage";

void storage_ref_destructor(PyObject* capsule) {
  delete static_cast<IntrusivePtr<Storage>*>(PyCapsule_GetPointer(capsule, kStorageRefName));
}

// _storage_ref(t): (capsule holding a reference to t's storage, address of the storage's first
// byte, storage size in bytes, device string). The capsule keeps the bytes alive (numpy(),
// __dlpack__, untyped_storage()).
PyObject* py_storage_ref(PyObject*, PyObject* arg) {
  if (!is_tensor(arg)) {
    PyErr_Format(PyExc_TypeError, "_storage_ref: expected a Tensor, got %s", Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  const IntrusivePtr<Storage>& storage = tensor_of(arg).impl()->storage_ptr();
  auto* held = new IntrusivePtr<Storage>(storage);
  PyObject* capsule = PyCapsule_New(held, kStorageRefName, &storage_ref_destructor);
  if (capsule == nullptr) {
    delete held;
    return nullptr;
  }
  PyObject* device = device_object(storage->device());
  if (device == nullptr) {
    Py_DECREF(capsule);
    return nullptr;
  }
  return Py_BuildValue("(NNKN)", capsule, PyLong_FromVoidPtr(storage->data()),
                       static_cast<unsigned long long>(storage->nbytes()), device);
}

}  // namespace

// ------------------------------------------------------------------ Tensor methods
// (listed in the method table of tensor_methods.cpp)

PyObject* m_storage_offset(PyObject* self, PyObject*) {
  if (self_overrides(self)) [[unlikely]]
    return call_kael_function("storage_offset", true, self, nullptr, 0, nullptr);
  return PyLong_FromLongLong(tensor_of(self).impl()->offset());
}

// t.data = other: t takes other's storage and geometry (PyTorch's set_data); the dtypes must
// agree.
PyObject* m_set_data(PyObject* self, PyObject* other) {
  if (!is_tensor(other)) {
    PyErr_Format(PyExc_TypeError, "data: expected a Tensor, got %s", Py_TYPE(other)->tp_name);
    return nullptr;
  }
  return guarded([&] {
    TensorImpl* dst = tensor_of(self).impl();
    const TensorImpl* src = tensor_of(other).impl();
    KAEL_CHECK_TYPE(dst->dtype() == src->dtype(), "data: the new data must have the tensor's dtype "
                                                      << dst->dtype() << " (got " << src->dtype() << ")");
    dst->set_storage(src->storage_ptr(), DimVector(src->sizes()), DimVector(src->strides()), src->offset());
  });
}

// t.data: a tensor outside autograd over t's elements with a version counter of its own (PyTorch's
// variable_data), so that writing through it (w = x.data; w.add_(1)) leaves the versions of x,
// and of what autograd saved of x, as they were. detach() shares x's counter.
PyObject* m_data(PyObject* self, PyObject*) {
  return guarded([&] {
    Tensor out = kael::detach(tensor_of(self));
    out.impl()->set_own_version_counter();
    return out;
  });
}

// t.as_subclass(cls): a cls object over an alias of t (a view of the same elements), as
// PyTorch's Tensor.as_subclass.
PyObject* m_as_subclass(PyObject* self, PyObject* cls) {
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &TensorType)) {
    PyErr_Format(PyExc_TypeError, "as_subclass: expected a subclass of kael.Tensor, got %R", cls);
    return nullptr;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(self);
    Tensor alias = kael::as_strided(t, t.sizes(), t.strides(), t.impl()->offset());
    PyObject* obj = type->tp_alloc(type, 0);
    if (obj == nullptr) return nullptr;
    auto* pt = reinterpret_cast<PyTensor*>(obj);
    new (&pt->tensor) Tensor(std::move(alias));
    pt->tensor.impl()->set_pyobj(obj);
    return obj;
  });
}

void append_pyobject_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_register_device_class", py_register_device_class, METH_O,
                 "_register_device_class(cls, /)\n--\n\nThe class of the objects Tensor.device returns."});
  out.push_back({"_parse_device", py_parse_device, METH_O,
                 "_parse_device(name, /)\n--\n\n(type, index or None) of a device string."});
  out.push_back({"_tensor_extend", py_tensor_extend, METH_O,
                 "_tensor_extend(mapping, /)\n--\n\nAdds Python-level methods and properties to kael.Tensor."});
  out.push_back({"_from_pointer", py_from_pointer, METH_VARARGS,
                 "_from_pointer(owner, address, nbytes, dtype, sizes, strides, offset, /)\n--\n\nA tensor over "
                 "memory that owner keeps alive."});
  out.push_back({"_storage_ref", py_storage_ref, METH_O,
                 "_storage_ref(tensor, /)\n--\n\n(capsule owning the storage, address, nbytes, device)."});
}

int kael_init_pyobject(PyObject* module) {
  SizeType.tp_base = &PyTuple_Type;
  size_as_sequence = *PyTuple_Type.tp_as_sequence;
  size_as_sequence.sq_concat = size_concat;
  size_as_sequence.sq_repeat = size_repeat;
  size_as_mapping = *PyTuple_Type.tp_as_mapping;
  size_as_mapping.mp_subscript = size_subscript;
  if (PyType_Ready(&SizeType) < 0) return -1;
  Py_INCREF(&SizeType);
  if (PyModule_AddObject(module, "Size", reinterpret_cast<PyObject*>(&SizeType)) < 0) return -1;
  return 0;
}

}  // namespace kael::python
