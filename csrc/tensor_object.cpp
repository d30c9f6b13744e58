// The kael.Tensor type: lifetime, identity, protocols and hand-written methods.
#include "tensor_object.h"

#include <cmath>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "arg_parsing.h"
#include "guard.h"
#include "kael_function.h"
#include "pyobject.h"
#include "python_owner.h"
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/ops/abs.h"
#include "kael/ops/add.h"
#include "kael/ops/detach.h"
#include "kael/ops/div.h"
#include "kael/ops/empty.h"
#include "kael/ops/eq.h"
#include "kael/ops/floor_divide.h"
#include "kael/ops/ge.h"
#include "kael/ops/gt.h"
#include "kael/ops/le.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/logical_or.h"
#include "kael/ops/logical_xor.h"
#include "kael/ops/lt.h"
#include "kael/ops/matmul.h"
#include "kael/ops/mul.h"
#include "kael/ops/reciprocal.h"
#include "kael/ops/ne.h"
#include "kael/ops/neg.h"
#include "kael/ops/permute.h"
#include "kael/ops/pow.h"
#include "kael/ops/remainder.h"
#include "kael/ops/select.h"
#include "kael/ops/sub.h"
#include "kael/ops/to.h"
#include "kael/ops/transpose.h"

// Note [__kael_function__] for the hand-written methods, properties and slots: `name` is what
// the override receives (Tensor.<name>, or Tensor.<name>.__get__ for a property).
#define KAEL_OVERRIDE_NOARGS(name)                                   \
  if (self_overrides(self)) [[unlikely]]                             \
  return call_kael_function(name, true, self, nullptr, 0, nullptr)
#define KAEL_OVERRIDE_GETTER(name)       \
  if (self_overrides(self)) [[unlikely]] \
  return call_kael_function_getter(name, self)

namespace kael::python {

void append_generated_methods(std::vector<PyMethodDef>& out);

// ------------------------------------------------------------------ dtype objects

namespace {

struct PyDtype {
  PyObject_HEAD
  ScalarType type;
};

PyObject* dtype_objects[kNumScalarTypes] = {};

PyObject* dtype_repr(PyObject* self) {
  return PyUnicode_FromFormat("kael.%s", dtype_name(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_get_itemsize(PyObject* self, void*) {
  return PyLong_FromLong(itemsize(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_get_is_floating(PyObject* self, void*) {
  return PyBool_FromLong(is_floating(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_get_is_signed(PyObject* self, void*) {
  return PyBool_FromLong(is_signed(reinterpret_cast<PyDtype*>(self)->type));
}

// kael has no complex dtypes: every dtype is real, and its real counterpart is itself.
PyObject* dtype_get_is_complex(PyObject*, void*) { Py_RETURN_FALSE; }

PyGetSetDef dtype_getset[] = {
    {"itemsize", dtype_get_itemsize, nullptr, "Size of one element in bytes.", nullptr},
    {"is_floating_point", dtype_get_is_floating, nullptr, "Whether the dtype is a floating point type.", nullptr},
    {"is_signed", dtype_get_is_signed, nullptr, "Whether the dtype can represent negative numbers.", nullptr},
    {"is_complex", dtype_get_is_complex, nullptr, "Whether the dtype is a complex type (never, in kael).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* dtype_reduce(PyObject* self, PyObject*) {
  return PyUnicode_FromString(dtype_name(reinterpret_cast<PyDtype*>(self)->type));
}

PyObject* dtype_to_real(PyObject* self, PyObject*) { return Py_NewRef(self); }

PyMethodDef dtype_methods[] = {{"__reduce__", dtype_reduce, METH_NOARGS, nullptr},
                               {"to_real", dtype_to_real, METH_NOARGS,
                                "to_real($self, /)\n--\n\nThe real dtype of the same precision: the dtype itself."},
                               {nullptr, nullptr, 0, nullptr}};

}  // namespace

PyTypeObject DtypeType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael.dtype",
    .tp_basicsize = sizeof(PyDtype),
    .tp_repr = dtype_repr,
    .tp_str = dtype_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The data type of a tensor: kael.float32, kael.float64, kael.int64 or kael.bool.",
    .tp_methods = dtype_methods,
    .tp_getset = dtype_getset,
};

PyObject* dtype_object(ScalarType t) { return dtype_objects[static_cast<int>(t)]; }
ScalarType dtype_of_object(PyObject* o) { return reinterpret_cast<PyDtype*>(o)->type; }

// ------------------------------------------------------------------ lifetime

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
// about 65 of its 2240 instructions (allocation with a GC header, track, untrack; callgrind,
// docs/decisions.md); wrap() allocates with PyObject_GC_New and tracks the object once every
// field is set. Python subclasses add their __slots__ and their type (csrc/tensor_subclass.cpp)
// and end with the functions below. What an object reports must be references that only it
// holds, or the collector would free what C++ still uses:
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
//   (traverse_autograd, csrc/autograd_python.cpp). So a cycle through a hook closure, a ctx,
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

// ------------------------------------------------------------------ helpers

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

// `function`: the kael function an operand's __kael_function__ override receives for this
// operator (kael.add for +; Note [__kael_function__]).
template <typename F>
PyObject* binary(PyObject* l, PyObject* r, F f, const char* function = nullptr) {
  if (function != nullptr && !(Py_IS_TYPE(l, &TensorType) && Py_IS_TYPE(r, &TensorType)) &&
      (has_kael_function(l) || has_kael_function(r))) [[unlikely]] {
    PyObject* args[] = {l, r};
    return call_kael_function(function, false, nullptr, args, 2, nullptr);
  }
  // A foreign operand (Match::No) means "return NotImplemented", so Python tries the other side.
  Operand a{Scalar()}, b{Scalar()};
  Match m = conv_operand(l, a, function);  // a complex number raises (t == 1j is not False)
  if (m == Match::Yes) m = conv_operand(r, b, function);
  if (m == Match::No) Py_RETURN_NOTIMPLEMENTED;
  if (m == Match::Error) return nullptr;
  return guarded([&]() -> Tensor { return f(a, b); }, gil::Op{large(a) || large(b)});
}

template <typename F>
PyObject* inplace(PyObject* self, PyObject* other, F f, const char* method = nullptr) {
  if (!is_tensor(self)) Py_RETURN_NOTIMPLEMENTED;
  if (method != nullptr && !(Py_IS_TYPE(self, &TensorType) && Py_IS_TYPE(other, &TensorType)) &&
      (has_kael_function(self) || has_kael_function(other))) [[unlikely]]
    return call_kael_function(method, true, self, &other, 1, nullptr);
  Operand b{Scalar()};
  const Match m = conv_operand(other, b, method);
  if (m == Match::No) Py_RETURN_NOTIMPLEMENTED;
  if (m == Match::Error) return nullptr;
  const Tensor& t = tensor_of(self);
  return guarded([&]() -> Tensor { return f(t, b); }, gil::Op{large(t)});
}

// ------------------------------------------------------------------ number protocol

PyObject* nb_add(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::add(a, b); }, "add");
}
PyObject* nb_sub(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::sub(a, b); }, "sub");
}
// A number on the left is computed as torch's reflected operators compute it: `s * t` as
// mul(t, s) (so the number is read as mul's `other`, in float32 for a float16/bfloat16 t: Note
// [Numbers as PyTorch reads them] in docs/decisions.md), and `s / t` as reciprocal(t) * s
// (torch's __rtruediv__; 1e6 / float16(65504) is 15.26, not the inf of a number rounded to
// float16 first).
PyObject* nb_mul(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    return !a.is_tensor() && b.is_tensor() ? kael::mul(b, a) : kael::mul(a, b);
  }, "mul");
}
PyObject* nb_div(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    return !a.is_tensor() && b.is_tensor() ? kael::mul(kael::reciprocal(b.tensor()), a) : kael::div(a, b);
  }, "div");
}
PyObject* nb_pow(PyObject* l, PyObject* r, PyObject* mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::pow(a, b); }, "pow");
}
PyObject* nb_floordiv(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::floor_divide(a, b); }, "floor_divide");
}
PyObject* nb_mod(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::remainder(a, b); }, "remainder");
}

// &, |, ^ and ~ are the logical ops on bool operands (a Python bool counts as one). kael has no
// bitwise kernels (docs/decisions.md), so other dtypes raise instead of computing something else.
bool is_bool_operand(const Operand& o) {
  return o.is_tensor() ? o.tensor().dtype() == ScalarType::Bool : o.scalar().is_bool();
}
void check_bool_operands(const char* op, const Operand& a, const Operand& b) {
  KAEL_CHECK(is_bool_operand(a) && is_bool_operand(b),
             op << ": bitwise operations are not implemented; kael computes & | ^ ~ on bool tensors only (got "
                << (a.is_tensor() ? dtype_name(a.tensor().dtype()) : "a number") << " and "
                << (b.is_tensor() ? dtype_name(b.tensor().dtype()) : "a number") << ")");
}
PyObject* nb_and(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    check_bool_operands("__and__", a, b);
    return kael::logical_and(a, b);
  }, "logical_and");
}
PyObject* nb_or(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    check_bool_operands("__or__", a, b);
    return kael::logical_or(a, b);
  }, "logical_or");
}
PyObject* nb_xor(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    check_bool_operands("__xor__", a, b);
    return kael::logical_xor(a, b);
  }, "logical_xor");
}
PyObject* nb_invert(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__invert__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> Tensor {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.dtype() == ScalarType::Bool, "__invert__: bitwise operations are not implemented; kael computes "
                                              "~ on bool tensors only (got " << dtype_name(t.dtype()) << ")");
    return kael::logical_not(t);
  }, gil::Op{false});
}
PyObject* nb_iand(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) {
    check_bool_operands("__iand__", Operand(a), b);
    return kael::logical_and_(a, b);
  }, "logical_and_");
}
PyObject* nb_ior(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) {
    check_bool_operands("__ior__", Operand(a), b);
    return kael::logical_or_(a, b);
  }, "logical_or_");
}
PyObject* nb_ixor(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) {
    check_bool_operands("__ixor__", Operand(a), b);
    return kael::logical_xor_(a, b);
  }, "logical_xor_");
}
PyObject* nb_ifloordiv(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::floor_divide_(a, b); }, "floor_divide_");
}
PyObject* nb_imod(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::remainder_(a, b); }, "remainder_");
}
PyObject* nb_iadd(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::add_(a, b); }, "add_");
}
PyObject* nb_isub(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::sub_(a, b); }, "sub_");
}
PyObject* nb_imul(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::mul_(a, b); }, "mul_");
}
PyObject* nb_idiv(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::div_(a, b); }, "div_");
}
PyObject* nb_ipow(PyObject* s, PyObject* o, PyObject* mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::pow_(a, b); }, "pow_");
}
PyObject* nb_matmul(PyObject* l, PyObject* r) {
  if (!(Py_IS_TYPE(l, &TensorType) && Py_IS_TYPE(r, &TensorType)) && (has_kael_function(l) || has_kael_function(r)))
      [[unlikely]] {
    PyObject* args[] = {l, r};
    return call_kael_function("matmul", false, nullptr, args, 2, nullptr);
  }
  if (!is_tensor(l) || !is_tensor(r)) Py_RETURN_NOTIMPLEMENTED;
  const Tensor& a = tensor_of(l);
  const Tensor& b = tensor_of(r);
  return guarded([&]() -> Tensor { return kael::matmul(a, b); }, gil::Op{large(a) || large(b)});
}
PyObject* nb_neg(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__neg__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> Tensor { return kael::neg(tensor_of(s)); }, gil::Op{false});
}
PyObject* nb_abs(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__abs__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> Tensor { return kael::abs(tensor_of(s)); }, gil::Op{false});
}
PyObject* nb_pos(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__pos__", true, s, nullptr, 0, nullptr);
  Py_INCREF(s);
  return s;
}

int nb_bool(PyObject* s) {
  if (self_overrides(s)) [[unlikely]] {
    PyObject* r = call_kael_function("__bool__", true, s, nullptr, 0, nullptr);
    const int truth = r == nullptr ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    return truth;
  }
  return guarded([&] {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
    const Scalar v = t.item();
    return v.to<double>() != 0 ? 1 : 0;
  });
}

PyObject* nb_int(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__int__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.numel() == 1, "int: only one element tensors can be converted to Python scalars");
    const Scalar v = t.item();
    if (!v.is_floating()) return PyLong_FromLongLong(v.to<std::int64_t>());
    // As PyTorch: Python's int(float), exact at any size (int(tensor(3.4e38)) is a 39-digit int);
    // ValueError for NaN, OverflowError for an infinity
    return PyLong_FromDouble(v.to<double>());
  });
}

PyObject* nb_float(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__float__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.numel() == 1, "float: only one element tensors can be converted to Python scalars");
    return PyFloat_FromDouble(t.item().to<double>());
  });
}

PyObject* nb_index(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__index__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK_TYPE(is_integral(t.dtype(), /*include_bool=*/true) && t.numel() == 1,
                    "__index__: only integer tensors of a single element can be converted to an index");
    return PyLong_FromLongLong(t.item().to<std::int64_t>());
  });
}

PyNumberMethods tensor_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_remainder = nb_mod,
    .nb_power = nb_pow,
    .nb_negative = nb_neg,
    .nb_positive = nb_pos,
    .nb_absolute = nb_abs,
    .nb_bool = nb_bool,
    .nb_invert = nb_invert,
    .nb_and = nb_and,
    .nb_xor = nb_xor,
    .nb_or = nb_or,
    .nb_int = nb_int,
    .nb_float = nb_float,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_remainder = nb_imod,
    .nb_inplace_power = nb_ipow,
    .nb_inplace_and = nb_iand,
    .nb_inplace_xor = nb_ixor,
    .nb_inplace_or = nb_ior,
    .nb_floor_divide = nb_floordiv,
    .nb_true_divide = nb_div,
    .nb_inplace_floor_divide = nb_ifloordiv,
    .nb_inplace_true_divide = nb_idiv,
    .nb_index = nb_index,
    .nb_matrix_multiply = nb_matmul,
};

// ------------------------------------------------------------------ comparisons, hash

PyObject* richcompare(PyObject* l, PyObject* r, int op) {
  switch (op) {
    case Py_EQ:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::eq(a, b); }, "eq");
    case Py_NE:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::ne(a, b); }, "ne");
    case Py_LT:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::lt(a, b); }, "lt");
    case Py_LE:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::le(a, b); }, "le");
    case Py_GT:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::gt(a, b); }, "gt");
    case Py_GE:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::ge(a, b); }, "ge");
    default:
      Py_RETURN_NOTIMPLEMENTED;
  }
}

// Identity hash: __eq__ is elementwise, so a value hash would be meaningless.
Py_hash_t tensor_hash(PyObject* self) { return PyBaseObject_Type.tp_hash(self); }

// torch's repr ends with the autograd state: grad_fn=<Name> for a tensor an op recorded,
// requires_grad=True for a leaf that requires grad; Tensor::to_string places it after the other
// suffixes as torch's _add_suffixes does (Note [Print options]: the line width).
std::vector<std::string> autograd_suffix(const Tensor& t) {
  if (const auto& fn = autograd::grad_fn(t)) return {"grad_fn=<" + fn->name() + ">"};
  if (autograd::requires_grad(t)) return {"requires_grad=True"};
  return {};
}

PyObject* tensor_repr(PyObject* self) {
  KAEL_OVERRIDE_NOARGS("__repr__");
  return guarded([&] {
    const Tensor& t = tensor_of(self);
    return PyUnicode_FromString(t.to_string(autograd_suffix(t)).c_str());
  });
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
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

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
      const T v = *reinterpret_cast<const T*>(p);
      if constexpr (std::is_same_v<T, bool>) {
        return PyBool_FromLong(v);
      } else if constexpr (std::is_integral_v<T>) {
        return PyLong_FromLongLong(v);
      } else {
        return PyFloat_FromDouble(static_cast<double>(v));
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

template <int... I>
void append_dtype_methods(std::vector<PyMethodDef>& out, std::integer_sequence<int, I...>) {
  static std::string docs[kNumScalarTypes];
  for (int i = 0; i < kNumScalarTypes; ++i)
    docs[i] = std::string(detail::kScalarTypeMethod[i]) + "($self, /)\n--\n\nThe tensor as " +
              detail::kScalarTypeNames[i] + " (itself when it already is).";
  (out.push_back({detail::kScalarTypeMethod[I], m_as<I>, METH_NOARGS, docs[I].c_str()}), ...);
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

// Tensor.<name>(...) as kael.functional.<name>(self, ...): the ops that return a Python value
// rather than a tensor (allclose, equal) are written once, in Python.
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
PyObject* m_allclose(PyObject* self, PyObject* args, PyObject* kwargs) {
  return forward_to_functional("allclose", self, args, kwargs);
}
PyObject* m_equal(PyObject* self, PyObject* args, PyObject* kwargs) {
  return forward_to_functional("equal", self, args, kwargs);
}
// ---- methods whose result depends on a flag (nonzero(as_tuple=), unique(return_*=)), in Python
PyObject* m_nonzero(PyObject* self, PyObject* args, PyObject* kwargs) {
  return forward_to_functional("nonzero", self, args, kwargs);
}
PyObject* m_unique(PyObject* self, PyObject* args, PyObject* kwargs) {
  return forward_to_functional("unique", self, args, kwargs);
}

PyMethodDef handwritten_methods[] = {
    {"size", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_size)), METH_FASTCALL | METH_KEYWORDS,
     "size($self, dim=None)\n--\n\nThe shape as a tuple, or the size of one dim."},
    {"stride", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_stride)), METH_FASTCALL | METH_KEYWORDS,
     "stride($self, dim=None)\n--\n\nThe strides (in elements) as a tuple, or the stride of one dim."},
    {"dim", m_dim, METH_NOARGS, "dim($self, /)\n--\n\nThe number of dims."},
    {"allclose", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_allclose)), METH_VARARGS | METH_KEYWORDS,
     "allclose($self, other, rtol=1e-05, atol=1e-08, equal_nan=False)\n--\n\nWhether every element is close to "
     "other's (kael.allclose)."},
    {"equal", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&m_equal)), METH_VARARGS | METH_KEYWORDS,
     "equal($self, other)\n--\n\nWhether other has the same shape and values (kael.equal)."},
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
    {nullptr, nullptr, 0, nullptr}};

std::vector<PyMethodDef>& all_methods() {
  static std::vector<PyMethodDef> methods;
  return methods;
}

}  // namespace

PyObject* tensor_getitem(PyObject* self, PyObject* key);
int tensor_setitem(PyObject* self, PyObject* key, PyObject* value);

namespace {
PyMappingMethods tensor_as_mapping = {
    .mp_length = sq_length,
    .mp_subscript = tensor_getitem,
    .mp_ass_subscript = tensor_setitem,
};
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
    .tp_richcompare = richcompare,
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
  auto& methods = all_methods();
  for (PyMethodDef* m = handwritten_methods; m->ml_name != nullptr; ++m) methods.push_back(*m);
  append_dtype_methods(methods, std::make_integer_sequence<int, kNumScalarTypes>{});
  append_pyobject_methods(methods);  // pyobject.cpp
  append_generated_methods(methods);
  methods.push_back({nullptr, nullptr, 0, nullptr});
  TensorType.tp_methods = methods.data();
  if (kael_init_tensor_meta() < 0) return -1;
  Py_SET_TYPE(&TensorType, &TensorMetaType);
  TensorImpl::pyobj_releaser = &release_owned_pyobj;
  if (PyType_Ready(&TensorType) < 0 || PyType_Ready(&DtypeType) < 0) return -1;
  Py_INCREF(&TensorType);
  if (PyModule_AddObject(module, "Tensor", reinterpret_cast<PyObject*>(&TensorType)) < 0) return -1;
  Py_INCREF(&DtypeType);
  if (PyModule_AddObject(module, "dtype", reinterpret_cast<PyObject*>(&DtypeType)) < 0) return -1;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto* d = PyObject_New(PyDtype, &DtypeType);
    if (d == nullptr) return -1;
    d->type = static_cast<ScalarType>(i);
    dtype_objects[i] = reinterpret_cast<PyObject*>(d);
    Py_INCREF(d);
    if (PyModule_AddObject(module, dtype_name(d->type), reinterpret_cast<PyObject*>(d)) < 0) return -1;
    // Other names of the dtype (kael.float, kael.half, ...), "|"-separated in the generated table.
    const std::string_view aliases = detail::kScalarTypeAliases[i];
    for (std::size_t start = 0; start < aliases.size();) {
      const std::size_t end = std::min(aliases.find('|', start), aliases.size());
      const std::string alias(aliases.substr(start, end - start));
      Py_INCREF(d);
      if (PyModule_AddObject(module, alias.c_str(), reinterpret_cast<PyObject*>(d)) < 0) return -1;
      start = end + 1;
    }
  }
  return 0;
}

}  // namespace kael::python
