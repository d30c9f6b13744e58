#pragma once
// The kael.Tensor Python type and the kael.dtype objects.

#include <Python.h>

#include "kael/core/tensor.h"
#include "kael/core/tensor_impl.h"
#include "errors.h"

namespace kael::autograd {
struct AutogradMeta;
}  // namespace kael::autograd

namespace kael::python {

// A Python tensor: the handle is stored inline, so a borrowed PyObject* gives a
// `const Tensor&` without touching the refcount. See Note [PyObject preservation].
//
// kael.Tensor has an instance __dict__ (t.tag = 1 works, as on torch tensors) and is a GC type
// (see Note [Tensor objects and the garbage collector]).
struct PyTensor {
  PyObject_HEAD
  Tensor tensor;
  PyObject* weakreflist;
  PyObject* dict;
};

extern PyTypeObject TensorType;
extern PyTypeObject DtypeType;

// Exact type first (the common case), then subclasses.
inline bool is_tensor(PyObject* o) { return Py_IS_TYPE(o, &TensorType) || PyObject_TypeCheck(o, &TensorType); }
inline const Tensor& tensor_of(PyObject* o) { return reinterpret_cast<PyTensor*>(o)->tensor; }

// Note [PyObject preservation] (kael/core/tensor_impl.h), the binding's half: whether the
// dealloc of self (its last Python reference gone) must keep it alive, owned by its impl,
// because other C++ owners hold the impl. (An object its impl owns is never deallocated: the
// impl's reference keeps it, and release_owned_pyobj clears the flag before dropping it.)
inline bool must_preserve(PyObject* self) {
  const TensorImpl* impl = reinterpret_cast<PyTensor*>(self)->tensor.impl();
  return impl != nullptr && impl->use_count() != 1 && impl->pyobj() == self;
}
// An object that would be kept for the other C++ owners of its impl if Python dropped it now.
inline bool python_owns_shared_impl(PyObject* self) {
  const TensorImpl* impl = reinterpret_cast<PyTensor*>(self)->tensor.impl();
  return impl != nullptr && !impl->owns_pyobj() && impl->use_count() != 1 && impl->pyobj() == self;
}
// Keeps self alive, owned by its impl (call from a dealloc when must_preserve(self)).
void preserve(PyObject* self);
// The deallocation every Python tensor ends with: weak references, __dict__, the impl's
// back-pointer, the tensor field, the memory.
void finish_dealloc(PyObject* self);
// The kael.Tensor part of a subclass's tp_traverse / tp_clear (the __dict__ and the objects owned
// through C++ alone); csrc/tensor_subclass.cpp adds the slots and the type.
int tensor_traverse(PyObject* self, visitproc visit, void* arg);
int tensor_clear(PyObject* self);
// An object owned through C++ alone: the Python object of `impl` when impl owns it and has no
// other owner than the structure it was reached through.
inline PyObject* exclusively_owned_pyobj(const TensorImpl* impl) {
  if (impl == nullptr || impl->use_count() != 1 || !impl->owns_pyobj()) return nullptr;
  return static_cast<PyObject*>(impl->pyobj());
}
// Their autograd part (csrc/autograd_tensor.cpp), for a tensor whose impl has no other owner:
// the Python objects its hooks and its graph keep alive where nothing else reaches them.
int traverse_autograd(const autograd::AutogradMeta& m, visitproc visit, void* arg);
void clear_autograd(const autograd::AutogradMeta& m);
// The metaclass of kael.Tensor, which gives Python subclasses a preserving dealloc and a
// matching traverse/clear (csrc/tensor_subclass.cpp); set up before TensorType is readied.
extern PyTypeObject TensorMetaType;
int kael_init_tensor_meta();

// The Python object of a tensor: the existing one when the impl has one, else a new
// kael.Tensor. Returns a new reference (None for an undefined tensor).
PyObject* wrap(Tensor t);

// module_name.name(self, *args, **kwargs), for methods written in Python (new reference).
PyObject* call_module_function(const char* module_name, const char* name, PyObject* self, PyObject* args,
                               PyObject* kwargs);

// The kael.dtype singleton of a ScalarType (borrowed).
PyObject* dtype_object(ScalarType t);
ScalarType dtype_of_object(PyObject* o);

}  // namespace kael::python
