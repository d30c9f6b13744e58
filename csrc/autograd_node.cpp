// Graph nodes as Python objects: a tensor's grad_fn, next_functions, an AccumulateGrad's variable.
#include <Python.h>

#include <cstdint>
#include <memory>

#include "autograd_python.h"
#include "kael/autograd/autograd.h"
#include "tensor_object.h"

namespace kael::python {

using autograd::Node;

namespace {

struct PyNode {
  PyObject_HEAD
  std::shared_ptr<Node> node;
};

extern PyTypeObject NodeType;

void node_dealloc(PyObject* self) {
  auto* pn = reinterpret_cast<PyNode*>(self);
  if (pn->node && pn->node->pyobj == self) pn->node->pyobj = nullptr;
  pn->node.~shared_ptr<Node>();
  Py_TYPE(self)->tp_free(self);
}

PyObject* node_repr(PyObject* self) {
  const auto* pn = reinterpret_cast<PyNode*>(self);
  return PyUnicode_FromFormat("<%s object at %p>", pn->node->name().c_str(), self);
}

PyObject* node_name(PyObject* self, PyObject*) {
  return PyUnicode_FromString(reinterpret_cast<PyNode*>(self)->node->name().c_str());
}

PyObject* node_next_functions(PyObject* self, void*) {
  const auto& edges = reinterpret_cast<PyNode*>(self)->node->next_edges();
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(edges.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    PyObject* fn = wrap_node(edges[i].function);
    if (fn == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyObject* pair = Py_BuildValue("(NI)", fn, static_cast<unsigned>(edges[i].input_nr));
    if (pair == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), pair);
  }
  return out;
}

PyObject* node_variable(PyObject* self, void*) {
  const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(reinterpret_cast<PyNode*>(self)->node.get());
  if (acc == nullptr) {
    PyErr_SetString(PyExc_AttributeError, "only AccumulateGrad nodes have a variable");
    return nullptr;
  }
  return wrap(acc->variable());
}

PyObject* node_saved(PyObject* self, void*) {
  return PyUnicode_FromString(reinterpret_cast<PyNode*>(self)->node->saved_description().c_str());
}

PyObject* node_richcompare(PyObject* a, PyObject* b, int op) {
  if (!PyObject_TypeCheck(b, &NodeType) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  const bool same = reinterpret_cast<PyNode*>(a)->node == reinterpret_cast<PyNode*>(b)->node;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

Py_hash_t node_hash(PyObject* self) {
  return static_cast<Py_hash_t>(reinterpret_cast<std::uintptr_t>(reinterpret_cast<PyNode*>(self)->node.get()) >> 4);
}

PyMethodDef node_methods[] = {{"name", node_name, METH_NOARGS, "name($self, /)\n--\n\nThe node's name."},
                              {nullptr, nullptr, 0, nullptr}};
PyGetSetDef node_getset[] = {
    {"next_functions", node_next_functions, nullptr, "The nodes gradients flow to: (node or None, input_nr) pairs.",
     nullptr},
    {"variable", node_variable, nullptr, "The leaf of an AccumulateGrad node.", nullptr},
    {"_saved", node_saved, nullptr, "What the node saved for backward, as text.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject NodeType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael._C._Node",
    .tp_basicsize = sizeof(PyNode),
    .tp_dealloc = node_dealloc,
    .tp_repr = node_repr,
    .tp_hash = node_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A node of the autograd graph (a tensor's grad_fn).",
    .tp_richcompare = node_richcompare,
    .tp_methods = node_methods,
    .tp_getset = node_getset,
};

}  // namespace

PyObject* wrap_node(const std::shared_ptr<Node>& node) {
  if (!node) Py_RETURN_NONE;
  if (node->pyobj != nullptr) {
    auto* obj = static_cast<PyObject*>(node->pyobj);
    Py_INCREF(obj);
    return obj;
  }
  PyObject* obj = NodeType.tp_alloc(&NodeType, 0);
  if (obj == nullptr) return nullptr;
  auto* pn = reinterpret_cast<PyNode*>(obj);
  new (&pn->node) std::shared_ptr<Node>(node);
  node->pyobj = obj;
  return obj;
}

int kael_init_node_type(PyObject* module) {
  if (PyType_Ready(&NodeType) < 0) return -1;
  Py_INCREF(&NodeType);
  return PyModule_AddObject(module, "_Node", reinterpret_cast<PyObject*>(&NodeType));
}

}  // namespace kael::python
