// PyInit__C: the kael._C extension module.
#include <Python.h>

#include <string>
#include <vector>

#include "arg_parsing.h"
#include "guard.h"
#include "kael/core/allocator.h"
#include "kael/core/concurrency.h"
#include "kael/core/device.h"
#include "kael/core/error.h"
#include "kael/dispatch/dispatcher.h"
#include "kael/native/pointwise.h"
#include "kael/runtime/threads.h"
#include "tensor_object.h"
#include "tensor_new.h"

namespace kael::python {

void append_generated_functions(std::vector<PyMethodDef>& out);
void append_dispatch_functions(std::vector<PyMethodDef>& out);
void append_autocast_functions(std::vector<PyMethodDef>& out);  // autocast.cpp
void append_owner_functions(std::vector<PyMethodDef>& out);
void append_parallel_functions(std::vector<PyMethodDef>& out);
void append_safetensors_functions(std::vector<PyMethodDef>& out);  // libs/safetensors.cpp
void append_nn_functions(std::vector<PyMethodDef>& out);    // nn_support.cpp
void append_idx_functions(std::vector<PyMethodDef>& out);   // libs/idx.cpp
void append_build_config_functions(std::vector<PyMethodDef>& out);  // build_config.cpp
const char* build_version();                                         // build_config.cpp
void append_distributed_functions(std::vector<PyMethodDef>& out);  // libs/distributed.cpp
void append_gpt_forward_functions(std::vector<PyMethodDef>& out);   // libs/gpt_forward.cpp
void append_gpt_generate_functions(std::vector<PyMethodDef>& out);  // libs/gpt_generate.cpp
int kael_init_tensor(PyObject* module);
PyObject* make_return_types();
int kael_init_generator(PyObject* module);  // generator.cpp
int kael_init_bpe(PyObject* module);        // libs/bpe_tokenizer.cpp
int kael_init_gpt_generate(PyObject* module);  // libs/gpt_generate.cpp
void append_pyobject_functions(std::vector<PyMethodDef>& out);  // pyobject.cpp
void append_kael_function_functions(std::vector<PyMethodDef>& out);  // kael_function.cpp
int kael_init_pyobject(PyObject* module);
void append_autograd_functions(std::vector<PyMethodDef>& out);  // autograd_engine.cpp
int kael_init_autograd(PyObject* module);                        // autograd_engine.cpp

namespace {

// The optional `device` argument of allocator_stats() and empty_cache() (null when not given).
bool device_arg(const char* fname, PyObject* args, PyObject* kwargs, PyObject*& device) {
  static const char* keywords[] = {"device", nullptr};
  const std::string format = std::string("|O:") + fname;
  return PyArg_ParseTupleAndKeywords(args, kwargs, format.c_str(), const_cast<char**>(keywords), &device) != 0;
}

// The allocator of the device named by `device` (null or None: the cpu).
Allocator& allocator_of(const char* fname, PyObject* device) {
  Device d = kCPU;
  if (device != nullptr && device != Py_None) {
    KAEL_CHECK_TYPE(PyUnicode_Check(device), fname << ": device must be a string such as 'cpu' or 'cuda', got "
                                                   << Py_TYPE(device)->tp_name);
    Py_ssize_t size = 0;
    const char* name = PyUnicode_AsUTF8AndSize(device, &size);
    if (name == nullptr) throw PythonError();
    d = parse_device(std::string_view(name, static_cast<std::size_t>(size)));
  }
  return allocator_for(fname, d);
}

PyObject* py_allocator_stats(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* device = nullptr;
  if (!device_arg("allocator_stats", args, kwargs, device)) return nullptr;
  return guarded([&] {
    const AllocatorStats s = allocator_of("allocator_stats", device).stats();
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L}", "reserved_bytes", static_cast<long long>(s.reserved_bytes),
                         "in_use_bytes", static_cast<long long>(s.in_use_bytes), "cached_bytes",
                         static_cast<long long>(s.cached_bytes), "hits", static_cast<long long>(s.hits), "misses",
                         static_cast<long long>(s.misses));
  });
}

PyObject* py_empty_cache(PyObject*, PyObject* args, PyObject* kwargs) {
  PyObject* device = nullptr;
  if (!device_arg("empty_cache", args, kwargs, device)) return nullptr;
  return guarded([&] { allocator_of("empty_cache", device).empty_cache(); });
}

PyObject* py_set_num_threads(PyObject*, PyObject* arg) {
  if (!PyLong_Check(arg) || PyBool_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "set_num_threads(): expected set_num_threads(int n), got %s", Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  const long long n = PyLong_AsLongLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  return guarded([&] {
    KAEL_CHECK(n >= 1 && n <= 1024, "set_num_threads: expected 1..1024, got " << n);  // torch: RuntimeError
    set_num_threads(static_cast<int>(n));
  });
}

PyObject* py_get_num_threads(PyObject*, PyObject*) {
  return guarded([] { return PyLong_FromLong(get_num_threads()); });
}

// set_default_dtype(d) / get_default_dtype(): Note [The default dtype] in kael/core/scalar_type.h.
PyObject* py_set_default_dtype(PyObject*, PyObject* arg) {
  if (!Py_IS_TYPE(arg, &DtypeType)) {
    PyErr_Format(PyExc_TypeError,
                 "set_default_dtype(): expected a kael.dtype, got %s (only floating-point types are supported "
                 "as the default type)",
                 Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  const ScalarType t = dtype_of_object(arg);
  if (!is_floating(t)) {
    PyErr_Format(PyExc_TypeError,
                 "set_default_dtype(): only floating-point types are supported as the default type, got kael.%s",
                 dtype_name(t));
    return nullptr;
  }
  set_default_dtype(t);
  Py_RETURN_NONE;
}

PyObject* py_get_default_dtype(PyObject*, PyObject*) { return Py_NewRef(dtype_object(default_dtype())); }

// _set_printoptions(precision, threshold, edgeitems, linewidth, sci_mode) with every value given
// (kael.set_printoptions checks them and fills the ones left out); sci_mode -1 (auto), 0 or 1.
// Note [Print options] in kael/core/tensor.h.
PyObject* py_set_printoptions(PyObject*, PyObject* args) {
  PrintOptions o;
  long long edgeitems = 0, linewidth = 0;
  if (!PyArg_ParseTuple(args, "idLLi:_set_printoptions", &o.precision, &o.threshold, &edgeitems, &linewidth,
                        &o.sci_mode))
    return nullptr;
  if (o.precision < 0 || edgeitems < 0 || o.sci_mode < -1 || o.sci_mode > 1 || o.threshold != o.threshold) {
    PyErr_SetString(PyExc_ValueError, "_set_printoptions(): precision and edgeitems must be >= 0, threshold a "
                                      "number and sci_mode -1, 0 or 1");
    return nullptr;
  }
  o.edgeitems = edgeitems;
  o.linewidth = linewidth;
  set_print_options(o);
  Py_RETURN_NONE;
}

PyObject* py_get_printoptions(PyObject*, PyObject*) {
  const PrintOptions o = print_options();
  return Py_BuildValue("(idLLi)", o.precision, o.threshold, static_cast<long long>(o.edgeitems),
                       static_cast<long long>(o.linewidth), o.sci_mode);
}

PyObject* py_cuda_is_available(PyObject*, PyObject*) { return PyBool_FromLong(cuda_backend_built()); }

// {op name: {dispatch key: has a kernel}} for introspection and tests.
PyObject* py_registered_ops(PyObject*, PyObject*) {
  PyObject* out = PyList_New(0);
  if (out == nullptr) return nullptr;
  for (const dispatch::OpEntry* op : dispatch::all_ops()) {
    PyObject* name = PyUnicode_FromString(op->name);
    if (name == nullptr || PyList_Append(out, name) < 0) {
      Py_XDECREF(name);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(name);
  }
  return out;
}

// promote_types(type1, type2), can_cast(from_, to), result_type(tensor1, tensor2): PyTorch's
// type-promotion queries (see Note [Type promotion]).
bool two_args(const char* name, Py_ssize_t nargs) {
  if (nargs == 2) return true;
  PyErr_Format(PyExc_TypeError, "%s() takes 2 positional arguments but %zd were given", name, nargs);
  return false;
}

PyObject* two_dtypes(const char* name, PyObject* const* args, Py_ssize_t nargs, ScalarType& a, ScalarType& b) {
  if (!two_args(name, nargs)) return nullptr;
  for (int i = 0; i < 2; ++i) {
    if (!Py_IS_TYPE(args[i], &DtypeType)) {
      PyErr_Format(PyExc_TypeError, "%s(): argument %d must be kael.dtype, not %s", name, i + 1,
                   Py_TYPE(args[i])->tp_name);
      return nullptr;
    }
  }
  a = dtype_of_object(args[0]);
  b = dtype_of_object(args[1]);
  return Py_None;
}

PyObject* py_promote_types(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  ScalarType a, b;
  if (two_dtypes("promote_types", args, nargs, a, b) == nullptr) return nullptr;
  PyObject* d = dtype_object(promote_types(a, b));
  Py_INCREF(d);
  return d;
}

PyObject* py_can_cast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  ScalarType from, to;
  if (two_dtypes("can_cast", args, nargs, from, to) == nullptr) return nullptr;
  return PyBool_FromLong(can_cast(from, to));
}

PyObject* py_result_type(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!two_args("result_type", nargs)) return nullptr;
  Operand a{Scalar()}, b{Scalar()};
  for (int i = 0; i < 2; ++i) {
    const Match m = conv_operand(args[i], i == 0 ? a : b);
    if (m == Match::Error) return nullptr;
    if (m == Match::No) {
      PyErr_Format(PyExc_TypeError, "result_type(): argument %d must be a Tensor or a number, not %s", i + 1,
                   Py_TYPE(args[i])->tp_name);
      return nullptr;
    }
  }
  PyObject* d = dtype_object(native::result_type({&a, &b}));
  Py_INCREF(d);
  return d;
}

std::vector<PyMethodDef>& module_functions() {
  static std::vector<PyMethodDef> functions;
  return functions;
}

PyModuleDef module_def = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "kael._C",
    .m_doc = "kael's compiled core: tensors, operators and runtime controls.",
    .m_size = -1,
};

}  // namespace

}  // namespace kael::python

PyMODINIT_FUNC PyInit__C() {
  using namespace kael::python;
  auto& functions = module_functions();
  if (functions.empty()) {
    functions.push_back({"tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_tensor)),
                         METH_FASTCALL | METH_KEYWORDS,
                         "tensor(data, *, dtype=None, device=None, requires_grad=False)\n--\n\nA new tensor copied from nested "
                         "sequences, "
                         "numbers or a NumPy array."});
    functions.push_back({"allocator_stats", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_allocator_stats)),
                         METH_VARARGS | METH_KEYWORDS,
                         "allocator_stats(device='cpu')\n--\n\nCounters of the device's caching allocator: "
                         "reserved_bytes, in_use_bytes, cached_bytes, hits, misses."});
    functions.push_back({"empty_cache", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_empty_cache)),
                         METH_VARARGS | METH_KEYWORDS,
                         "empty_cache(device='cpu')\n--\n\nReturns every block the device's allocator caches to the "
                         "system."});
    functions.push_back({"set_num_threads", py_set_num_threads, METH_O,
                         "set_num_threads(n, /)\n--\n\nSets the number of threads of intra-op parallelism (1..1024)."});
    functions.push_back({"get_num_threads", py_get_num_threads, METH_NOARGS,
                         "get_num_threads()\n--\n\nThe number of threads of intra-op parallelism."});
    functions.push_back({"set_default_dtype", py_set_default_dtype, METH_O,
                         "set_default_dtype(d, /)\n--\n\nSets the dtype of floating tensors made without one "
                         "(float32, float64, float16 or bfloat16), as torch.set_default_dtype."});
    functions.push_back({"get_default_dtype", py_get_default_dtype, METH_NOARGS,
                         "get_default_dtype()\n--\n\nThe dtype of floating tensors made without one (float32 "
                         "unless set_default_dtype changed it)."});
    functions.push_back({"_set_printoptions", py_set_printoptions, METH_VARARGS,
                         "_set_printoptions(precision, threshold, edgeitems, linewidth, sci_mode, /)\n--\n\n"
                         "Sets every print option (kael.set_printoptions is the public form)."});
    functions.push_back({"_get_printoptions", py_get_printoptions, METH_NOARGS,
                         "_get_printoptions()\n--\n\n(precision, threshold, edgeitems, linewidth, sci_mode), "
                         "sci_mode -1 when chosen from the values."});
    functions.push_back({"cuda_is_available", py_cuda_is_available, METH_NOARGS,
                         "cuda_is_available()\n--\n\nWhether this build has a CUDA backend and a device."});
    functions.push_back({"promote_types", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_promote_types)),
                         METH_FASTCALL,
                         "promote_types(type1, type2, /)\n--\n\nThe smallest dtype both dtypes convert to "
                         "without losing their category, as in PyTorch."});
    functions.push_back({"can_cast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_can_cast)),
                         METH_FASTCALL,
                         "can_cast(from_, to, /)\n--\n\nWhether an op result of dtype from_ may be written into a "
                         "tensor of dtype to."});
    functions.push_back({"result_type", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_result_type)),
                         METH_FASTCALL,
                         "result_type(tensor1, tensor2, /)\n--\n\nThe dtype of an arithmetic op on the two tensors or "
                         "numbers, by PyTorch's promotion rules."});
    functions.push_back({"_registered_ops", py_registered_ops, METH_NOARGS,
                         "_registered_ops()\n--\n\nSchema names of every operator in the dispatcher."});
    append_owner_functions(functions);
    append_pyobject_functions(functions);
    append_kael_function_functions(functions);
    append_parallel_functions(functions);
    append_safetensors_functions(functions);
    append_nn_functions(functions);
    append_idx_functions(functions);
    append_build_config_functions(functions);
    append_distributed_functions(functions);
    append_gpt_forward_functions(functions);
    append_gpt_generate_functions(functions);
    append_generated_functions(functions);
    append_dispatch_functions(functions);
    append_autocast_functions(functions);
    append_autograd_functions(functions);
    functions.push_back({nullptr, nullptr, 0, nullptr});
  }
  module_def.m_methods = functions.data();
  install_warning_handler();
  // Loops of large operands run without the GIL (Note [Concurrency] in kael/core/concurrency.h).
  kael::set_caller_lock({[]() -> void* { return PyEval_SaveThread(); },
                         [](void* state) { PyEval_RestoreThread(static_cast<PyThreadState*>(state)); }});
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (kael_init_tensor(module) < 0 || kael_init_generator(module) < 0 || kael_init_bpe(module) < 0 ||
      kael_init_gpt_generate(module) < 0 ||
      kael_init_pyobject(module) < 0 ||
      kael_init_autograd(module) < 0 ||
      PyModule_AddStringConstant(module, "__version__", build_version()) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  // kael.return_types: the named tuples of ops with several results (generated).
  PyObject* return_types = make_return_types();
  const int added = return_types ? PyModule_AddObjectRef(module, "return_types", return_types) : -1;
  Py_XDECREF(return_types);
  if (added < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
