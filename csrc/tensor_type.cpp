// The kael.Tensor type: lifetime (Note [PyObject preservation]), the garbage collector's view of a
// tensor, construction, and the type object assembled from its parts (tensor_members.h).
#include "tensor_object.h"

#include <cstdint>
#include <new>
#include <utility>

#include "guard.h"
#include "kael/autograd/autograd.h"
#include "kael/ops/detach.h"
#include "kael/ops/empty.h"
#include "python_owner.h"
#include "tensor_members.h"

namespace kael::python {

// See Note [PyObject preservation] (kael/core/tensor_impl.h). The states of a Python tensor
// `self` over an impl whose pyobj() is self:
//   Python owns:  self->tensor holds a reference to the impl (the usual state);
//   impl owns:    impl->owns_pyobj(); the impl holds one reference to self and self->tensor's
//                 pointer is borrowed (it does not count in the impl's use_count()).
// Flips: a dealloc of self while other C++ owners hold the impl makes the impl own self
// (preserve); wrap() of an impl that owns its object gives the object back to Python; the
// death of an impl that owns its object gives the object its reference back and drops it
// (release_owned_pyobj), so the object and the impl die together.
// A weak reference that Python resolves while the impl owns the object returns it without a
// flip; the object then has Python references as well as the impl's, and when those go it is
// back to the impl's one reference (no dealloc). If the impl dies first, release_owned_pyobj
// gives the object its reference to the impl back, and the object lives on, owned by Python.
// A weak reference never sees a dead object: the object dies (and its weak references are
// cleared) only together with the impl.

PyObject* wrap(Tensor t) {
  if (!t.defined()) Py_RETURN_NONE;
  TensorImpl* impl = t.impl();
  if (void* existing = impl->pyobj()) {
    PyObject* obj = static_cast<PyObject*>(existing);
    if (impl->owns_pyobj()) [[unlikely]] {
      // Back to Python: the object's borrowed pointer becomes a reference again, and the
      // impl's reference to the object is the one returned.
      impl->set_owns_pyobj(false);
      impl->incref();
      return obj;
    }
    Py_INCREF(obj);
    return obj;
  }
  // PyType_GenericAlloc without its generic parts (size computation, memset): every field is
  // set here, and the object is tracked once it is complete.
  PyTensor* pt = PyObject_GC_New(PyTensor, &TensorType);
  if (pt == nullptr) return nullptr;
  pt->weakreflist = nullptr;
  pt->dict = nullptr;
  new (&pt->tensor) Tensor(std::move(t));
  auto* obj = reinterpret_cast<PyObject*>(pt);
  impl->set_pyobj(obj);
  PyObject_GC_Track(obj);
  return obj;
}

// Called from a dealloc when must_preserve(self): the object stays alive, owned by its impl.
void preserve(PyObject* self) {
  TensorImpl* impl = reinterpret_cast<PyTensor*>(self)->tensor.impl();
  // Resurrect the object with the reference its impl now holds (CPython's own pattern for an
  // object kept alive by its finalizer). A GC object is still tracked at this point.
  Py_INCREF(self);
  impl->set_owns_pyobj(true);
  // Drop the object's reference to the impl, keeping the pointer (now borrowed). If the other
  // owners let go meanwhile (another thread), this is the last reference: release() drops the
  // object again, with the ownership flipped back, and the object dies in a nested dealloc.
  // Nothing touches self after this line.
  if (impl->decref()) TensorImpl::release(impl);
}

// The impl's last reference went while it owns its Python object: the object takes the impl
// back (its pointer counts again) and the impl's reference to the object is dropped, which
// deallocates the object and, with it, the impl. Runs on any thread (the GIL is taken);
// after interpreter shutdown both are leaked.
static void release_owned_pyobj(TensorImpl* impl) noexcept {
  with_gil_for_release([impl] {
    impl->set_owns_pyobj(false);
    impl->incref();  // from 0: the reference of the object's tensor field
    Py_DECREF(static_cast<PyObject*>(impl->pyobj()));
  });
}

void finish_dealloc(PyObject* self) {
  auto* pt = reinterpret_cast<PyTensor*>(self);
  PyObject_GC_UnTrack(self);  // (a subclass's dealloc untracked it already)
  if (pt->weakreflist != nullptr) PyObject_ClearWeakRefs(self);
  if (pt->dict != nullptr) Py_CLEAR(pt->dict);
  if (pt->tensor.defined() && pt->tensor.impl()->pyobj() == self) pt->tensor.impl()->set_pyobj(nullptr);
  pt->tensor.~Tensor();
  Py_TYPE(self)->tp_free(self);
}

// Note [Tensor objects and the garbage collector]
// kael.Tensor is a GC type, as torch.Tensor is: a tensor's __dict__, its hooks and its graph
// can close a reference cycle (t.me = t; a hook whose closure refers to the tensor; a custom
// Function's ctx holding its output), which only the collector can break. It costs a tiny a + b
// the allocation with a GC header, a track and an untrack (docs/performance.md, "Instructions
// per tiny `a + b`"; docs/decisions/pyobject-preservation.md); wrap() allocates with
// PyObject_GC_New and tracks the object once every field is set. Python subclasses add their
// __slots__ and their type (csrc/tensor_subclass.cpp) and end with the functions below. What an
// object reports must be references that only it holds, or the collector would free what C++
// still uses:
// - An object that would be preserved if Python dropped it (Python owns its impl, C++ co-owns
//   it) reports no references: what it refers to (its __dict__) counts as a root, so the
//   collector never clears a __dict__ that the object may carry back to Python later.
// - An object its impl owns is referenced from C++ only, so the collector sees it as reachable
//   unless the object whose C++ structures own that impl reports it.
// - An object whose impl has no other owner (the object's reference, or, for an object its
//   impl owns, the one C++ holder the impl has) reports, besides its __dict__, what the impl
//   alone reaches: the objects its impl owns exclusively (its .grad and its view base, each
//   when held only there and owning its object); its hooks' callables; and, when the impl
//   alone holds its grad_fn, the Python objects of that node and of the nodes below it held
//   only by the edge they were reached through: their hooks, a Python Function's backward (and
//   through it the ctx), the objects of leaves that their AccumulateGrad alone owns
//   (traverse_autograd, csrc/autograd_tensor.cpp). So a cycle through a hook closure, a ctx,
//   a .grad or a base and a __dict__ is collected. A node or hook that something else holds
//   too (another tensor, a grad_fn object, a running backward pass) is not looked into. PyTorch
//   reports the hooks and a grad_fn's ctx, but not .grad, a base or a non-leaf's hooks.
// - The collector runs with the GIL; every writer of what is reported either holds the GIL or
//   holds the structure (so it is not reported), and use counts only fall meanwhile.
// - tp_clear never touches the tensor field: clearing the Python references (__dict__, slots,
//   the hooks' callables and a Python backward it reported) breaks any cycle, and the tensor
//   stays valid for whatever still reads the object (a cleared hook does nothing).
int tensor_traverse(PyObject* self, visitproc visit, void* arg) {
  if (python_owns_shared_impl(self)) return 0;
  auto* pt = reinterpret_cast<PyTensor*>(self);
  Py_VISIT(pt->dict);
  const Tensor& t = pt->tensor;
  if (t.defined() && t.impl()->use_count() == 1) {
    if (const autograd::AutogradMeta* meta = autograd::meta_of(t)) {
      Py_VISIT(exclusively_owned_pyobj(meta->grad.impl()));
      if (const int r = traverse_autograd(*meta, visit, arg)) return r;
    }
    Py_VISIT(exclusively_owned_pyobj(t.impl()->view_base().get()));
  }
  return 0;
}

int tensor_clear(PyObject* self) {
  if (python_owns_shared_impl(self)) return 0;
  auto* pt = reinterpret_cast<PyTensor*>(self);
  Py_CLEAR(pt->dict);
  const Tensor& t = pt->tensor;
  if (t.defined() && t.impl()->use_count() == 1)
    if (const autograd::AutogradMeta* meta = autograd::meta_of(t)) clear_autograd(*meta);
  return 0;
}

namespace {

// tp_dealloc of kael.Tensor itself (Python subclasses get theirs from the metaclass,
// csrc/tensor_subclass.cpp). The fast path tests the impl's reference count once: when the
// object is the only owner, that test replaces the atomic decrement.
void tensor_dealloc(PyObject* self) {
  auto* pt = reinterpret_cast<PyTensor*>(self);
  TensorImpl* impl = pt->tensor.impl();
  if (impl != nullptr && impl->unique_for_destruction()) [[likely]] {
    // The object is the impl's only owner: both die. No one else can reach the impl, so it is
    // destroyed without the atomic decrement (the check's acquire stands for the decrement's).
    PyObject_GC_UnTrack(self);  // before anything below can run Python code (and the collector)
    if (pt->weakreflist != nullptr) PyObject_ClearWeakRefs(self);
    if (pt->dict != nullptr) Py_CLEAR(pt->dict);
    impl->set_pyobj(nullptr);
    pt->tensor.release_impl().detach();
    TensorImpl::release(impl);
    Py_TYPE(self)->tp_free(self);
    return;
  }
  // (a subclass instance reaches this only from its own dealloc, which asked already)
  if (must_preserve(self) && Py_IS_TYPE(self, &TensorType)) {
    preserve(self);  // the object stays tracked
    return;
  }
  finish_dealloc(self);
}

// kael.Tensor(data=None): a new tensor object sharing data's storage (like detach()), of the
// calling class, so Python subclasses (nn.Parameter) can wrap existing data.
PyObject* tensor_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"data", nullptr};
  PyObject* data = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Tensor", const_cast<char**>(keywords), &data)) return nullptr;
  return guarded([&]() -> PyObject* {
    Tensor t;
    if (data == Py_None) {
      const std::int64_t size[] = {0};
      t = kael::empty(size);
    } else if (is_tensor(data)) {
      t = kael::detach(tensor_of(data));
    } else {
      PyErr_Format(PyExc_TypeError, "Tensor(): expected a Tensor or None, got %s; use kael.tensor(data) for data",
                   Py_TYPE(data)->tp_name);
      return nullptr;
    }
    PyObject* obj = type->tp_alloc(type, 0);
    if (obj == nullptr) return nullptr;
    auto* pt = reinterpret_cast<PyTensor*>(obj);
    new (&pt->tensor) Tensor(std::move(t));
    pt->tensor.impl()->set_pyobj(obj);
    return obj;
  });
}

int tensor_init(PyObject*, PyObject*, PyObject*) { return 0; }

}  // namespace

PyTypeObject TensorType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael.Tensor",
    .tp_basicsize = sizeof(PyTensor),
    .tp_dealloc = tensor_dealloc,
    .tp_repr = tensor_repr,
    .tp_as_number = &tensor_as_number,
    .tp_as_sequence = &tensor_as_sequence,
    .tp_as_mapping = &tensor_as_mapping,
    .tp_hash = tensor_hash,
    .tp_str = tensor_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Tensor(data=None)\n--\n\nA multi-dimensional array of one dtype on one device.",
    .tp_traverse = tensor_traverse,
    .tp_clear = tensor_clear,
    .tp_richcompare = tensor_richcompare,
    .tp_weaklistoffset = offsetof(PyTensor, weakreflist),
    .tp_iter = tensor_iter,
    .tp_getset = tensor_getset,
    .tp_dictoffset = offsetof(PyTensor, dict),
    .tp_init = tensor_init,
    .tp_alloc = PyType_GenericAlloc,
    .tp_new = tensor_new,
    .tp_free = PyObject_GC_Del,
};

int kael_init_tensor(PyObject* module) {
  TensorType.tp_methods = tensor_methods();
  if (kael_init_tensor_meta() < 0) return -1;
  Py_SET_TYPE(&TensorType, &TensorMetaType);
  TensorImpl::pyobj_releaser = &release_owned_pyobj;
  if (PyType_Ready(&TensorType) < 0) return -1;
  Py_INCREF(&TensorType);
  if (PyModule_AddObject(module, "Tensor", reinterpret_cast<PyObject*>(&TensorType)) < 0) return -1;
  return kael_init_dtype(module);
}

}  // namespace kael::python
