// The binding of kael.__config__ (kael/__config__.py): _build_config() -> dict of how this
// extension was built, from the header CMake writes at configure time (csrc/build_config.h.in),
// and what oneDNN reports at run time (its version and the ISA its kernels dispatch to, which
// the CPU and ONEDNN_MAX_CPU_ISA decide).
#include <Python.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <string>
#include <vector>

#include "kael_build_config.h"

namespace kael::python {

const char* build_version() { return KAEL_CONFIG_VERSION; }  // _C.__version__ (module.cpp)

namespace {

const char* dnnl_runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_OMP: return "OpenMP";
    case DNNL_RUNTIME_TBB: return "TBB";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "unknown";
  }
}

// Adds key -> value to dict, stealing the reference to value; false (with the error set) if it fails.
bool put(PyObject* dict, const char* key, PyObject* value) {
  if (value == nullptr) return false;
  const int rc = PyDict_SetItemString(dict, key, value);
  Py_DECREF(value);
  return rc == 0;
}

PyObject* py_build_config(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  const dnnl_version_t* v = dnnl_version();
  const std::string dnnl_runtime_version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  const char* isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  const bool ok =
      put(d, "version", PyUnicode_FromString(KAEL_CONFIG_VERSION)) &&
      put(d, "compiler_id", PyUnicode_FromString(KAEL_CONFIG_COMPILER_ID)) &&
      put(d, "compiler_version", PyUnicode_FromString(KAEL_CONFIG_COMPILER_VERSION)) &&
      put(d, "compiler", PyUnicode_FromString(KAEL_CONFIG_COMPILER)) &&
      put(d, "build_type", PyUnicode_FromString(KAEL_CONFIG_BUILD_TYPE)) &&
      put(d, "cxx_flags", PyUnicode_FromString(KAEL_CONFIG_CXX_FLAGS)) &&
      put(d, "cpu_arch", PyUnicode_FromString(KAEL_CONFIG_CPU_ARCH)) &&
      put(d, "sanitizers", PyUnicode_FromString(KAEL_CONFIG_SANITIZERS)) &&
      put(d, "system", PyUnicode_FromString(KAEL_CONFIG_SYSTEM)) &&
      put(d, "cmake_version", PyUnicode_FromString(KAEL_CONFIG_CMAKE_VERSION)) &&
      put(d, "dnnl_build_version", PyUnicode_FromString(KAEL_CONFIG_DNNL_VERSION)) &&
      put(d, "dnnl_version", PyUnicode_FromString(dnnl_runtime_version.c_str())) &&
      put(d, "dnnl_hash", PyUnicode_FromString(v->hash != nullptr ? v->hash : "")) &&
      put(d, "dnnl_cpu_runtime", PyUnicode_FromString(dnnl_runtime_name(v->cpu_runtime))) &&
      put(d, "dnnl_cpu_isa", PyUnicode_FromString(isa != nullptr ? isa : "unknown")) &&
      put(d, "mpi", PyBool_FromLong(KAEL_CONFIG_MPI)) &&
      put(d, "mpi_version", PyUnicode_FromString(KAEL_CONFIG_MPI_VERSION)) &&
      put(d, "cuda_kernels", PyBool_FromLong(KAEL_CONFIG_CUDA_KERNELS));
  if (!ok) {
    Py_DECREF(d);
    return nullptr;
  }
  return d;
}

}  // namespace

void append_build_config_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_build_config", py_build_config, METH_NOARGS,
                 "_build_config()\n--\n\nHow this extension was built (compiler, flags, build type, oneDNN, MPI, "
                 "CUDA kernels; from CMake) and the oneDNN it runs on (version, threading runtime, the ISA "
                 "its kernels dispatch to). kael.__config__.show() prints it."});
}

}  // namespace kael::python
