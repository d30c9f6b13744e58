// The binding of kael_gpt's forward (Note [GPT] in kael/gpt/gpt.h): _gpt_parameters, the
// parameter table kael.GPT builds its Parameters from, and _gpt_forward, its forward pass.
#include <Python.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "guard.h"
#include "kael/gpt/gpt.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

// Reads the config tuple (vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias,
// layer_norm_epsilon) of `fn`; false with a TypeError set when it is not one. The values are
// checked by Config::validate.
bool read_config(const char* fn, PyObject* obj, gpt::Config& config) {
  constexpr Py_ssize_t kFields = 8;
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != kFields) {
    PyErr_Format(PyExc_TypeError,
                 "%s(): config must be a tuple (vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias, "
                 "layer_norm_epsilon), got %s%s",
                 fn, Py_TYPE(obj)->tp_name, PyTuple_Check(obj) ? " of the wrong length" : "");
    return false;
  }
  static const char* const kNames[kFields] = {"vocab_size", "block_size", "n_layer", "n_head",
                                              "n_embd",     "dropout",    "bias",    "layer_norm_epsilon"};
  std::int64_t* ints[5] = {&config.vocab_size, &config.block_size, &config.n_layer, &config.n_head, &config.n_embd};
  for (Py_ssize_t i = 0; i < 5; ++i) {
    PyObject* v = PyTuple_GET_ITEM(obj, i);  // the tuple (immutable) holds it for the call
    if (!PyLong_Check(v) || PyBool_Check(v)) {
      PyErr_Format(PyExc_TypeError, "%s(): config.%s must be an int, got %s", fn, kNames[i], Py_TYPE(v)->tp_name);
      return false;
    }
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (n == -1 && PyErr_Occurred()) return false;
    if (overflow != 0) {
      PyErr_Format(PyExc_ValueError, "%s(): config.%s is out of range: %R", fn, kNames[i], v);
      return false;
    }
    *ints[i] = n;
  }
  double* floats[2] = {&config.dropout, &config.layer_norm_epsilon};
  const Py_ssize_t float_at[2] = {5, 7};
  for (int i = 0; i < 2; ++i) {
    PyObject* v = PyTuple_GET_ITEM(obj, float_at[i]);
    if (!(PyFloat_Check(v) || PyLong_Check(v)) || PyBool_Check(v)) {
      PyErr_Format(PyExc_TypeError, "%s(): config.%s must be a float, got %s", fn, kNames[float_at[i]],
                   Py_TYPE(v)->tp_name);
      return false;
    }
    *floats[i] = PyFloat_AsDouble(v);
    if (*floats[i] == -1.0 && PyErr_Occurred()) return false;
  }
  PyObject* bias = PyTuple_GET_ITEM(obj, 6);
  if (!PyBool_Check(bias)) {
    PyErr_Format(PyExc_TypeError, "%s(): config.bias must be a bool, got %s", fn, Py_TYPE(bias)->tp_name);
    return false;
  }
  config.bias = bias == Py_True;
  return true;
}

// A tuple of the sizes (new reference).
PyObject* shape_tuple(const std::vector<std::int64_t>& sizes) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(sizes.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    PyObject* n = PyLong_FromLongLong(sizes[i]);
    if (n == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), n);
  }
  return out;
}

// _gpt_parameters(config, /): [(name, shape), ...] in the order _gpt_forward takes them.
PyObject* py_gpt_parameters(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 1) {
    PyErr_Format(PyExc_TypeError, "_gpt_parameters() takes 1 argument (config), got %zd", nargs);
    return nullptr;
  }
  gpt::Config config;
  if (!read_config("_gpt_parameters", args[0], config)) return nullptr;
  return guarded([&]() -> PyObject* {
    config.validate();
    const auto names = gpt::parameter_names(config);
    const auto shapes = gpt::parameter_shapes(config);
    PyObject* out = PyList_New(static_cast<Py_ssize_t>(names.size()));
    if (out == nullptr) return nullptr;
    for (std::size_t i = 0; i < names.size(); ++i) {
      PyObject* shape = shape_tuple(shapes[i]);
      PyObject* item = shape ? Py_BuildValue("(sN)", names[i].c_str(), shape) : nullptr;
      if (item == nullptr) {
        Py_DECREF(out);
        return nullptr;
      }
      PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
    }
    return out;
  });
}

// _gpt_forward(config, params, idx, targets, training, /): (logits, loss), loss None without
// targets.
PyObject* py_gpt_forward(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_Format(PyExc_TypeError,
                 "_gpt_forward() takes 5 arguments (config, params, idx, targets, training), got %zd", nargs);
    return nullptr;
  }
  gpt::Config config;
  if (!read_config("_gpt_forward", args[0], config)) return nullptr;
  PyObject* params_obj = args[1];
  if (!PyList_Check(params_obj) && !PyTuple_Check(params_obj)) {
    PyErr_Format(PyExc_TypeError, "_gpt_forward(): params must be a list of tensors, got %s",
                 Py_TYPE(params_obj)->tp_name);
    return nullptr;
  }
  // The Tensor handles hold each parameter's impl, so the list may change afterwards; nothing
  // between the reads runs Python code.
  std::vector<Tensor> params;
  const Py_ssize_t n = PyList_Check(params_obj) ? PyList_GET_SIZE(params_obj) : PyTuple_GET_SIZE(params_obj);
  params.reserve(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PyList_Check(params_obj) ? PyList_GET_ITEM(params_obj, i) : PyTuple_GET_ITEM(params_obj, i);
    if (!is_tensor(item)) {
      PyErr_Format(PyExc_TypeError, "_gpt_forward(): params[%zd] must be a Tensor, got %s", i, Py_TYPE(item)->tp_name);
      return nullptr;
    }
    params.push_back(tensor_of(item));
  }
  if (!is_tensor(args[2])) {
    PyErr_Format(PyExc_TypeError, "_gpt_forward(): idx must be a Tensor, got %s", Py_TYPE(args[2])->tp_name);
    return nullptr;
  }
  const Tensor idx = tensor_of(args[2]);
  std::optional<Tensor> targets;
  if (args[3] != Py_None) {
    if (!is_tensor(args[3])) {
      PyErr_Format(PyExc_TypeError, "_gpt_forward(): targets must be a Tensor or None, got %s",
                   Py_TYPE(args[3])->tp_name);
      return nullptr;
    }
    targets = tensor_of(args[3]);
  }
  if (!PyBool_Check(args[4])) {
    PyErr_Format(PyExc_TypeError, "_gpt_forward(): training must be a bool, got %s", Py_TYPE(args[4])->tp_name);
    return nullptr;
  }
  const bool training = args[4] == Py_True;
  return guarded([&]() -> PyObject* {
    const gpt::Weights weights = gpt::Weights::from_list(config, params);
    gpt::Output out = gpt::forward(config, weights, idx, targets, training);
    PyObject* logits = wrap(std::move(out.logits));
    if (logits == nullptr) return nullptr;
    PyObject* loss = out.loss.defined() ? wrap(std::move(out.loss)) : Py_NewRef(Py_None);
    if (loss == nullptr) {
      Py_DECREF(logits);
      return nullptr;
    }
    return Py_BuildValue("(NN)", logits, loss);
  }, gil::Op{true});  // each op's loops run without the GIL (Note [Concurrency])
}

}  // namespace

void append_gpt_forward_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_gpt_parameters", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_gpt_parameters)),
                 METH_FASTCALL,
                 "_gpt_parameters(config, /)\n--\n\nThe GPT's parameters as [(name, shape), ...], Hugging Face's "
                 "names in the order _gpt_forward takes them; config is (vocab_size, block_size, n_layer, n_head, "
                 "n_embd, dropout, bias, layer_norm_epsilon)."});
  out.push_back({"_gpt_forward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_gpt_forward)),
                 METH_FASTCALL,
                 "_gpt_forward(config, params, idx, targets, training, /)\n--\n\nThe GPT's forward pass: (logits, "
                 "loss), loss the mean cross-entropy over the targets that are not -100, None when targets is "
                 "None; params in the order of _gpt_parameters(config)."});
}

}  // namespace kael::python
