#pragma once
// The parts of kael.Tensor, by the file that defines them. tensor_type.cpp assembles the type
// from them; tensor_methods.cpp holds its one method table and its one property table, which
// list every hand-written method and property (the generated methods are merged into the method
// table when the module loads, kael_init_tensor).
//
//   tensor_type.cpp     the type, lifetime (Note [PyObject preservation]), the collector's view
//   tensor_dtype.cpp    the kael.dtype objects
//   tensor_number.cpp   the number protocol and comparisons
//   tensor_methods.cpp  repr, hash, the sequence protocol, properties, the hand-written methods
//                       and the tables
//   indexing.cpp        __getitem__ and __setitem__
//   autograd_tensor.cpp the autograd members (requires_grad, grad, hooks, ...)
//   autograd_engine.cpp backward()
//   pyobject.cpp        storage_offset, as_subclass and the primitives of kael/_tensor.py

#include <Python.h>

namespace kael::python {

// ---- tensor_dtype.cpp
int kael_init_dtype(PyObject* module);

// ---- tensor_number.cpp
extern PyNumberMethods tensor_as_number;
PyObject* tensor_richcompare(PyObject* l, PyObject* r, int op);

// ---- tensor_methods.cpp
PyObject* tensor_repr(PyObject* self);
Py_hash_t tensor_hash(PyObject* self);
PyObject* tensor_iter(PyObject* self);
extern PySequenceMethods tensor_as_sequence;
extern PyMappingMethods tensor_as_mapping;  // __getitem__, __setitem__ from indexing.cpp
// The method table, hand-written methods first and then the generated ones (built once; the
// pointer stays valid), and the property table.
PyMethodDef* tensor_methods();
extern PyGetSetDef tensor_getset[];

// ---- indexing.cpp
PyObject* tensor_getitem(PyObject* self, PyObject* key);
int tensor_setitem(PyObject* self, PyObject* key, PyObject* value);

// ---- autograd_tensor.cpp
PyObject* get_requires_grad(PyObject* self, void*);
int set_requires_grad_attr(PyObject* self, PyObject* value, void*);
PyObject* get_grad(PyObject* self, void*);
int set_grad(PyObject* self, PyObject* value, void*);
PyObject* get_grad_fn(PyObject* self, void*);
PyObject* get_is_leaf(PyObject* self, void*);
PyObject* get_retains_grad(PyObject* self, void*);
PyObject* m_requires_grad_(PyObject* self, PyObject* args, PyObject* kwargs);
PyObject* m_is_inference(PyObject* self, PyObject*);
PyObject* m_retain_grad(PyObject* self, PyObject*);
PyObject* m_detach_(PyObject* self, PyObject*);
PyObject* m_register_hook(PyObject* self, PyObject* fn);
PyObject* m_remove_hook(PyObject* self, PyObject* id);
PyObject* m_register_hook_py(PyObject* self, PyObject* args, PyObject* kwargs);

// ---- autograd_engine.cpp
PyObject* m_backward(PyObject* self, PyObject* args, PyObject* kwargs);

// ---- pyobject.cpp
PyObject* m_storage_offset(PyObject* self, PyObject*);
PyObject* m_set_data(PyObject* self, PyObject* other);
PyObject* m_data(PyObject* self, PyObject*);
PyObject* m_as_subclass(PyObject* self, PyObject* cls);

}  // namespace kael::python
