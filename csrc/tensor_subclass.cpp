// Python subclasses of kael.Tensor (kael.nn.Parameter, users' classes): the metaclass that gives
// them a dealloc which keeps the object (with its __dict__ and slots) alive while C++ holds
// its impl, and a GC traverse/clear that agree with it. See Note [PyObject preservation].
//
// Note [Tensor subclass dealloc]
// CPython gives every class statement `subtype_dealloc`, which runs __del__ and clears the
// instance's __slots__ before it reaches kael.Tensor's dealloc (and drops the class's reference
// after it): too late to keep the object intact. The metaclass
// (kael.Tensor's type, inherited by every subclass) replaces tp_dealloc, tp_traverse and
// tp_clear of each new subclass with the functions below, which first ask must_preserve() and
// otherwise do what subtype_dealloc / subtype_traverse / subtype_clear do (finalizer, weak
// references, slots, the type's reference), ending with kael.Tensor's own part.
// Delegating to subtype_dealloc is not possible: it walks the class chain from the object's
// type and would call back into the replaced slot.
//
// The garbage collector: see Note [Tensor objects and the garbage collector]
// (csrc/tensor_type.cpp); the __dict__ is kael.Tensor's own (tp_dictoffset), so subclasses add
// no dict of their own and only their __slots__ and their type are handled here.
#include <Python.h>
#include <structmember.h>

#include "tensor_object.h"

namespace kael::python {

namespace {

// __slots__ members of the Python classes between type and kael.Tensor (as CPython's
// traverse_slots / clear_slots).
template <typename F>
int for_each_slot(PyObject* self, F&& f) {
  for (PyTypeObject* base = Py_TYPE(self); base != nullptr && base != &TensorType; base = base->tp_base) {
    if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE) || Py_SIZE(base) == 0 || base->tp_members == nullptr) continue;
    PyMemberDef* member = base->tp_members;
    for (Py_ssize_t i = 0; i < Py_SIZE(base); ++i, ++member) {
      if (member->type != T_OBJECT_EX || (member->flags & READONLY)) continue;
      auto** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(self) + member->offset);
      if (const int err = f(slot)) return err;
    }
  }
  return 0;
}

int tensor_subclass_traverse(PyObject* self, visitproc visit, void* arg) {
  if (python_owns_shared_impl(self)) return 0;
  if (const int err = for_each_slot(self, [&](PyObject** slot) -> int {
        Py_VISIT(*slot);
        return 0;
      }))
    return err;
  Py_VISIT(Py_TYPE(self));  // instances of a heap type hold a reference to it
  return tensor_traverse(self, visit, arg);
}

int tensor_subclass_clear(PyObject* self) {
  if (python_owns_shared_impl(self)) return 0;
  for_each_slot(self, [](PyObject** slot) -> int {
    Py_CLEAR(*slot);
    return 0;
  });
  return tensor_clear(self);
}

// As CPython's subtype_dealloc (GC variant), preceded by the preservation check.
void tensor_subclass_dealloc(PyObject* self) {
  if (must_preserve(self)) {
    preserve(self);  // the object is still GC-tracked
    return;
  }
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  const bool has_finalizer = type->tp_finalize != nullptr || type->tp_del != nullptr;
  if (type->tp_finalize != nullptr) {
    PyObject_GC_Track(self);
    if (PyObject_CallFinalizerFromDealloc(self) < 0) return;  // resurrected by __del__
    PyObject_GC_UnTrack(self);
  }
  auto* pt = reinterpret_cast<PyTensor*>(self);
  if (pt->weakreflist != nullptr) PyObject_ClearWeakRefs(self);
  if (type->tp_del != nullptr) {
    PyObject_GC_Track(self);
    type->tp_del(self);
    if (Py_REFCNT(self) > 0) return;  // resurrected
    PyObject_GC_UnTrack(self);
  }
  if (has_finalizer) {
    // weak references made by the finalizer: cleared without their callbacks, as CPython does
#if PY_VERSION_HEX < 0x030D0000
    while (pt->weakreflist != nullptr) _PyWeakref_ClearRef(reinterpret_cast<PyWeakReference*>(pt->weakreflist));
#else
    if (pt->weakreflist != nullptr) PyObject_ClearWeakRefs(self);
#endif
  }
  for_each_slot(self, [](PyObject** slot) -> int {
    Py_CLEAR(*slot);
    return 0;
  });
  finish_dealloc(self);  // kael.Tensor's part; tp_free is the class's (PyObject_GC_Del)
  Py_DECREF(type);       // instances of a heap type hold a reference to it
}

// type.__new__, then the subclass gets the preserving slots (Note [Tensor subclass dealloc]).
// tp_new rather than tp_init so that type(name, (kael.Tensor,), ns), which calls the winning
// metaclass's tp_new, gets them too.
PyObject* tensor_meta_new(PyTypeObject* metatype, PyObject* args, PyObject* kwargs) {
  PyObject* cls = PyType_Type.tp_new(metatype, args, kwargs);
  if (cls == nullptr) return nullptr;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (PyType_IsSubtype(type, &TensorType) && (type->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
      (type->tp_flags & Py_TPFLAGS_HAVE_GC)) {
    type->tp_dealloc = tensor_subclass_dealloc;
    type->tp_traverse = tensor_subclass_traverse;
    type->tp_clear = tensor_subclass_clear;
  }
  return cls;
}

}  // namespace

PyTypeObject TensorMetaType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael._TensorMeta",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The metaclass of kael.Tensor: subclasses keep their objects alive while C++ holds their tensors.",
    .tp_new = tensor_meta_new,
};

int kael_init_tensor_meta() {
  TensorMetaType.tp_base = &PyType_Type;
  return PyType_Ready(&TensorMetaType);
}

}  // namespace kael::python
