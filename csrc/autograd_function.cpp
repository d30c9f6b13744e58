// The nodes of kael.autograd.Function (kael/autograd/function.py): _record_function makes the node
// of a Function call, whose backward is the Python callable.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd_python.h"
#include "guard.h"
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/ops/detach.h"
#include "tensor_object.h"

namespace kael::python {

using autograd::Node;

void PyFunctionNode::release_variables() {
  for (autograd::SavedVariable& v : saved_) v.reset_data();
  if (Py_IsInitialized()) {
    Gil gil;
    backward_.reset();
  }
}

autograd::variable_list PyFunctionNode::apply(autograd::variable_list&& grads) {
  Gil gil;
  KAEL_CHECK(backward_ && backward_->obj,
             "Trying to backward through the graph a second time (or directly access saved tensors after they "
             "have already been freed). Specify retain_graph=True if you need to backward through the graph a "
             "second time. (node: "
                 << name_ << ")");
  PyObject* args = PyTuple_New(static_cast<Py_ssize_t>(grads.size()));
  if (args == nullptr) throw PythonError{};
  for (std::size_t i = 0; i < grads.size(); ++i) {
    PyObject* g = wrap(grads[i]);
    if (g == nullptr) {
      Py_DECREF(args);
      throw PythonError{};
    }
    PyTuple_SET_ITEM(args, static_cast<Py_ssize_t>(i), g);
  }
  PyObject* r = PyObject_Call(backward_->obj, args, nullptr);
  Py_DECREF(args);
  if (r == nullptr) throw PythonError{};
  autograd::variable_list out;
  const bool ok = is_tensor(r) || r == Py_None
                      ? (out.push_back(r == Py_None ? Tensor() : tensor_of(r)), true)
                      : tensors_of(r, name_.c_str(), true, out);
  Py_DECREF(r);
  if (!ok) throw PythonError{};
  if (out.size() != next_edges_.size()) {
    PyErr_Format(PyExc_RuntimeError, "function %s returned an incorrect number of gradients (expected %zu, got %zu)",
                 name_.c_str(), next_edges_.size(), out.size());
    throw PythonError{};
  }
  return out;
}

PyObject* PyFunctionNode::unpack_saved() {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(saved_.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < saved_.size(); ++i) {
    PyObject* item;
    if (saved_none_[i]) {
      Py_INCREF(Py_None);
      item = Py_None;
    } else {
      item = wrap(saved_[i].unpack(this));
    }
    if (item == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

namespace {

constexpr const char* kNodeCapsule = "kael.autograd.FunctionNode";

void node_capsule_destructor(PyObject* capsule) {
  delete static_cast<std::weak_ptr<Node>*>(PyCapsule_GetPointer(capsule, kNodeCapsule));
}

// The saved_tensors of a Function call, through a weak reference to its node.
PyObject* saved_tensors_of(PyObject* capsule, PyObject*) {
  auto* weak = static_cast<std::weak_ptr<Node>*>(PyCapsule_GetPointer(capsule, kNodeCapsule));
  if (weak == nullptr) return nullptr;
  return guarded([&]() -> PyObject* {
    std::shared_ptr<Node> node = weak->lock();
    KAEL_CHECK(node != nullptr,
               "Trying to backward through the graph a second time (or directly access saved tensors after they "
               "have already been freed). Saved intermediate values of the graph are freed when you call "
               ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
               "a second time or if you need to access saved tensors after calling backward.");
    return static_cast<PyFunctionNode*>(node.get())->unpack_saved();
  });
}

PyMethodDef saved_tensors_def = {"saved_tensors", saved_tensors_of, METH_NOARGS,
                                 "The tensors the Function call saved for backward."};

// _record_function(name, backward, inputs, outputs, non_differentiable, saved, dirty=()): makes
// the node of a Function call (edges from the tensors among `inputs`, one per argument), sets it
// as the history of each differentiable output and keeps the `saved` tensors in it. Returns the
// outputs (an output that is an input comes back as a new tensor sharing its data, unless it is
// among `dirty`, the inputs ctx.mark_dirty named: those were modified in place and come back as
// themselves, their history rebased onto the node as an in-place op's) and a function returning
// the saved tensors (which refers to the node weakly).
PyObject* py_record_function(PyObject*, PyObject* args) {
  const char* name;
  PyObject *backward, *inputs, *outputs, *nondiff, *saved, *dirty_arg = nullptr;
  if (!PyArg_ParseTuple(args, "sOOOOO|O:_record_function", &name, &backward, &inputs, &outputs, &nondiff, &saved,
                        &dirty_arg))
    return nullptr;
  PyObject* in = PySequence_Fast(inputs, "inputs");
  if (in == nullptr) return nullptr;
  std::vector<autograd::Edge> edges;
  std::vector<Tensor> input_tensors;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(in); ++i) {
    PyObject* o = PySequence_Fast_GET_ITEM(in, i);
    if (is_tensor(o)) {
      edges.push_back(autograd::gradient_edge(tensor_of(o)));
      input_tensors.push_back(tensor_of(o));
    } else {
      edges.emplace_back();
    }
  }
  Py_DECREF(in);
  std::vector<Tensor> outs, skip, to_save, dirty;
  if (!tensors_of(outputs, "Function outputs", true, outs) || !tensors_of(nondiff, "non-differentiable", false, skip) ||
      !tensors_of(saved, "save_for_backward", true, to_save) ||
      (dirty_arg != nullptr && !tensors_of(dirty_arg, "mark_dirty", false, dirty)))
    return nullptr;
  return guarded([&]() -> PyObject* {
    auto node = std::make_shared<PyFunctionNode>(name);
    node->set_backward(backward);
    node->set_next_edges(std::move(edges));
    autograd::record_trace(*node);
    std::vector<Tensor> recorded(outs.size());
    std::vector<bool> with_history(outs.size(), false);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      Tensor t = outs[i];
      if (t.defined()) {
        bool is_input = false, is_dirty = false;
        for (const Tensor& x : input_tensors) is_input = is_input || x.is_same(t);
        for (const Tensor& x : dirty) is_dirty = is_dirty || x.is_same(t);
        bool differentiable = is_floating(t.dtype());
        for (const Tensor& x : skip) differentiable = differentiable && !x.is_same(outs[i]);
        // torch's rules: an input returned as an output comes back as a new tensor sharing its data,
        // except a dirty one that is differentiable or requires no grad (it comes back as itself)
        if (is_input && !(is_dirty && (differentiable || !autograd::requires_grad(t)))) t = kael::detach(t);
        if (differentiable && is_dirty) {
          KAEL_CHECK(!(autograd::requires_grad(t) && autograd::is_leaf(t)),
                     name << ": a leaf Variable that requires grad has been used in an in-place operation.");
          KAEL_CHECK(!(t.impl()->is_view() && outs.size() > 1),
                     name << ": If your Function modifies inplace an input that is a view of another Tensor, your "
                             "Function cannot return more than one Tensor. This is not supported by the current "
                             "autograd engine. You should either make sure the input is not a view (using .clone() "
                             "for example) or make your Function only return one Tensor.");
          autograd::check_inplace(name, t);
          t.bump_version();  // as torch marks a dirty tensor: saved copies of it are stale now
          autograd::rebase_history(t, node);
        } else if (differentiable) {
          autograd::set_history(t, node);
        } else {
          node->add_input_metadata(t);  // keeps output numbering
        }
        with_history[i] = differentiable;
      }
      recorded[i] = t;
    }
    for (const Tensor& t : to_save) {
      node->saved_none_.push_back(!t.defined());
      std::size_t i = 0;
      while (t.defined() && i < outs.size() && !(outs[i].defined() && outs[i].is_same(t))) ++i;
      if (t.defined() && i < outs.size()) {
        node->saved_.emplace_back(recorded[i], with_history[i]);
      } else {
        node->saved_.emplace_back(t, false);
      }
    }
    PyObject* result = PyTuple_New(static_cast<Py_ssize_t>(outs.size()));
    if (result == nullptr) return nullptr;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      PyObject* w = wrap(recorded[i]);
      if (w == nullptr) {
        Py_DECREF(result);
        return nullptr;
      }
      PyTuple_SET_ITEM(result, static_cast<Py_ssize_t>(i), w);
    }
    PyObject* capsule = PyCapsule_New(new std::weak_ptr<Node>(node), kNodeCapsule, node_capsule_destructor);
    PyObject* unpack = capsule != nullptr ? PyCFunction_New(&saved_tensors_def, capsule) : nullptr;
    Py_XDECREF(capsule);
    if (unpack == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
    return Py_BuildValue("(NN)", result, unpack);
  });
}

}  // namespace

void append_function_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_record_function", py_record_function, METH_VARARGS, "_record_function(name, backward, inputs, outputs, non_differentiable, saved, dirty=(), /)\n--\n\nRecords the node of a Python Function; returns its outputs and a function returning its saved tensors."});
}

}  // namespace kael::python
