#pragma once
// The Python side of autograd, shared by its files:
//   autograd_tensor.cpp    Tensor.requires_grad/grad/grad_fn/..., hooks (declared in
//                          tensor_members.h), and what the garbage collector sees through a
//                          tensor's graph;
//   autograd_engine.cpp    the engine entry points (Tensor.backward, kael.autograd.backward and
//                          grad; they release the GIL, and hooks and Python Functions take it
//                          back), grad mode, anomaly mode;
//   autograd_node.cpp      graph nodes as Python objects (grad_fn, next_functions);
//   autograd_function.cpp  the nodes of kael.autograd.Function.

#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kael/autograd/autograd.h"
#include "tensor_object.h"

namespace kael::python {

// The GIL, taken for the scope (from a thread that may or may not hold it).
struct Gil {
  PyGILState_STATE state;
  Gil() : state(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;
};

// A new reference dropped at the end of the scope (with the GIL held).
struct OwnedRef {
  PyObject* obj;
  explicit OwnedRef(PyObject* o) : obj(o) {}
  ~OwnedRef() { Py_XDECREF(obj); }
  OwnedRef(const OwnedRef&) = delete;
  OwnedRef& operator=(const OwnedRef&) = delete;
};

// A Python object owned from C++ code that may drop it without the GIL.
struct PyRef {
  PyObject* obj;
  explicit PyRef(PyObject* o) : obj(o) { Py_XINCREF(o); }
  ~PyRef() {
    if (obj != nullptr && Py_IsInitialized()) {
      Gil gil;
      Py_CLEAR(obj);
    }
  }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
};

// ---- autograd_node.cpp
// The Python object of a node (None for none); a new reference.
PyObject* wrap_node(const std::shared_ptr<autograd::Node>& node);
int kael_init_node_type(PyObject* module);

// ---- autograd_tensor.cpp
// Note [__kael_function__]: (self, *args) and kwargs to the overrides of Tensor.<name>.
PyObject* method_override(const char* name, PyObject* self, PyObject* args, PyObject* kwargs);
// A Python callable as a gradient hook (Tensor.register_hook on a leaf or a non-leaf): called
// with the GIL; None keeps the gradient, a tensor replaces it (same dtype, device and size). A
// named type, so that the garbage collector finds the callable in a GradHook (traverse_autograd).
struct PythonHook {
  std::shared_ptr<PyRef> ref;
  Tensor operator()(const Tensor& g) const;
};

// ---- autograd_engine.cpp
// A sequence of tensors (None entries as undefined tensors when allowed); false with a TypeError
// naming `what` and the position otherwise.
bool tensors_of(PyObject* seq, const char* what, bool allow_none, std::vector<Tensor>& out);
// kael.autograd.backward(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs) and
// Tensor.backward (tensors: self), the arguments as the caller gave them: reads them as torch
// does, then runs the engine without the GIL. None, or a new reference to None.
PyObject* run_backward(PyObject* tensors, PyObject* grad_tensors, PyObject* retain_graph, PyObject* create_graph,
                       PyObject* inputs);

// ---- autograd_function.cpp
// The node of a Python Function: its backward is the Python callable, called with the GIL held.
class PyFunctionNode : public autograd::Node {
 public:
  explicit PyFunctionNode(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void release_variables() override;
  autograd::variable_list apply(autograd::variable_list&& grads) override;

  void set_backward(PyObject* fn) { backward_ = std::make_shared<PyRef>(fn); }
  // The reference to the Python backward (for the garbage collector), or null once released.
  const std::shared_ptr<PyRef>* backward_ref() const {
    return backward_ && backward_->obj != nullptr ? &backward_ : nullptr;
  }
  // What ctx.save_for_backward saved, as SavedVariables (None entries undefined): an output of
  // the Function itself is kept without its grad_fn, which is this node, so saving it makes no
  // reference cycle (the ctx reaches the node only weakly, through saved_tensors_of).
  std::vector<autograd::SavedVariable> saved_;
  std::vector<bool> saved_none_;

  // ctx.saved_tensors: a tuple of the unpacked tensors (RuntimeError once freed or modified).
  PyObject* unpack_saved();

 private:
  std::string name_;
  std::shared_ptr<PyRef> backward_ = nullptr;
};

}  // namespace kael::python
