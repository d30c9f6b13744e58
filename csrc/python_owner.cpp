// Storage over Python-owned memory (Note [Python-owned storage]) and kael.frombuffer, the
// zero-copy view of a buffer-protocol object.
#include "python_owner.h"

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "arg_parsing.h"
#include "guard.h"
#include "kael/core/error.h"
#include "tensor_object.h"

namespace kael::python {

void release_pyobject(void* owner) noexcept {
  with_gil_for_release([owner] { Py_DECREF(static_cast<PyObject*>(owner)); });
}

IntrusivePtr<Storage> storage_owned_by(PyObject* owner, void* data, std::size_t nbytes) {
  IntrusivePtr<Storage> s = Storage::external(data, nbytes, kCPU, &release_pyobject, owner);
  Py_INCREF(owner);  // the storage's reference, once it exists
  return s;
}

namespace {

void release_buffer(void* context) noexcept {
  auto* view = static_cast<Py_buffer*>(context);
  with_gil_for_release([view] { PyBuffer_Release(view); });
  delete view;
}

// Releases a buffer view on scope exit unless it was handed over.
struct BufferGuard {
  Py_buffer view{};
  bool held = false;
  ~BufferGuard() {
    if (held) PyBuffer_Release(&view);
  }
};

}  // namespace

IntrusivePtr<Storage> storage_from_buffer(Py_buffer& view) {
  auto owned = std::make_unique<Py_buffer>(view);
  auto s = Storage::external(view.buf, static_cast<std::size_t>(view.len), kCPU, &release_buffer, owned.get());
  owned.release();  // the storage owns the view now
  view = Py_buffer{};
  return s;
}

namespace {

// kael.frombuffer(buffer, *, dtype, count=-1, offset=0): a 1-D tensor over the buffer's bytes,
// sharing them (PyTorch's torch.frombuffer, with its checks and messages).
PyObject* py_frombuffer(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"buffer", "dtype", "count", "offset", nullptr};
  PyObject* obj = nullptr;
  PyObject* dtype_obj = nullptr;
  long long count = -1, offset = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OLL:frombuffer", const_cast<char**>(keywords), &obj,
                                   &dtype_obj, &count, &offset))
    return nullptr;
  if (dtype_obj == nullptr) {
    PyErr_SetString(PyExc_TypeError, "frombuffer() missing required keyword argument 'dtype'");
    return nullptr;
  }
  ScalarType dtype{};
  const Match m = conv_dtype(dtype_obj, dtype);
  if (m == Match::Error) return nullptr;
  if (m == Match::No) {
    PyErr_Format(PyExc_TypeError, "frombuffer: dtype must be a kael.dtype, got %s", Py_TYPE(dtype_obj)->tp_name);
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    KAEL_CHECK_VALUE(PyObject_CheckBuffer(obj), "frombuffer: object does not implement Python buffer protocol (got "
                                                    << Py_TYPE(obj)->tp_name << ")");
    BufferGuard g;
    bool writable = true;
    if (PyObject_GetBuffer(obj, &g.view, PyBUF_WRITABLE) < 0) {
      PyErr_Clear();
      writable = false;
      if (PyObject_GetBuffer(obj, &g.view, PyBUF_SIMPLE) < 0) {
        // as PyTorch: a RuntimeError (the exporter's own reason follows)
        PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyErr_Format(PyExc_RuntimeError, "frombuffer: could not retrieve buffer from object: %S",
                     value ? value : Py_None);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        throw PythonError{};
      }
    }
    g.held = true;
    const auto len = static_cast<long long>(g.view.len);
    const auto elsize = static_cast<long long>(itemsize(dtype));
    KAEL_CHECK_VALUE(len > 0 && count != 0,
                     "frombuffer: both buffer length (" << len << ") and count (" << count << ") must not be 0");
    KAEL_CHECK_VALUE(offset >= 0 && offset < len, "frombuffer: offset (" << offset
                                                                          << " bytes) must be non-negative and no "
                                                                             "greater than buffer length ("
                                                                          << len << " bytes) minus 1");
    KAEL_CHECK_VALUE(count > 0 || (len - offset) % elsize == 0,
                     "frombuffer: buffer length (" << len - offset << " bytes) after offset (" << offset
                                                   << " bytes) must be a multiple of element size (" << elsize
                                                   << ")");
    const long long n = count > 0 ? count : (len - offset) / elsize;
    KAEL_CHECK_VALUE(n <= (len - offset) / elsize,
                     "frombuffer: requested buffer length (" << n << " * " << elsize << " bytes) after offset ("
                                                             << offset
                                                             << " bytes) must not be greater than actual buffer "
                                                                "length ("
                                                             << len << " bytes)");
    char* data = static_cast<char*>(g.view.buf) + offset;
    // kael's kernels load elements with aligned accesses; PyTorch accepts any address.
    KAEL_CHECK_VALUE(reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(elsize) == 0,
                     "frombuffer: the data at offset " << offset << " is not aligned to the element size ("
                                                       << elsize << " bytes) of " << dtype);
    // (bool bytes other than 0 and 1 are taken as they are, as torch's: Note [Bool bytes])
    if (!writable &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "frombuffer: the given buffer is not writable, and kael does not support non-writable "
                     "tensors; writing to the tensor writes to the buffer. You may want to copy the buffer to "
                     "protect its data or make it writable before converting it to a tensor.",
                     1) < 0)
      return nullptr;
    g.view.buf = data;
    g.view.len = static_cast<Py_ssize_t>(n * elsize);
    IntrusivePtr<Storage> storage = storage_from_buffer(g.view);
    g.held = false;
    const std::int64_t sizes[] = {n};
    return wrap(Tensor(TensorImpl::make(std::move(storage), dtype, DimVector(IntArrayRef(sizes)),
                                        contiguous_strides(IntArrayRef(sizes)), 0)));
  });
}

// Test hooks: a reference to a tensor held by C++ alone, dropped later with the GIL released,
// on this thread or on a thread Python never saw (see Note [Python-owned storage]).
constexpr const char* kNativeRefName = "kael._C._native_ref";

void native_ref_destructor(PyObject* capsule) {
  delete static_cast<Tensor*>(PyCapsule_GetContext(capsule));
}

PyObject* py_native_ref(PyObject*, PyObject* arg) {
  if (!is_tensor(arg)) {
    PyErr_Format(PyExc_TypeError, "_native_ref: expected a Tensor, got %s", Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  auto* held = new Tensor(tensor_of(arg));
  PyObject* capsule = PyCapsule_New(held, kNativeRefName, &native_ref_destructor);
  if (capsule == nullptr || PyCapsule_SetContext(capsule, held) < 0) {
    delete held;
    Py_XDECREF(capsule);
    return nullptr;
  }
  return capsule;
}

PyObject* py_drop_native_ref(PyObject*, PyObject* args) {
  PyObject* capsule = nullptr;
  int on_new_thread = 1;
  if (!PyArg_ParseTuple(args, "O!|p:_drop_native_ref", &PyCapsule_Type, &capsule, &on_new_thread)) return nullptr;
  if (!PyCapsule_IsValid(capsule, kNativeRefName)) {
    PyErr_SetString(PyExc_TypeError, "_drop_native_ref: expected a capsule from _native_ref");
    return nullptr;
  }
  auto* held = static_cast<Tensor*>(PyCapsule_GetContext(capsule));
  if (held == nullptr) {
    PyErr_SetString(PyExc_ValueError, "_drop_native_ref: the reference was already dropped");
    return nullptr;
  }
  PyCapsule_SetContext(capsule, nullptr);
  Py_BEGIN_ALLOW_THREADS
  if (on_new_thread) {
    std::thread([held] { delete held; }).join();
  } else {
    delete held;
  }
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

}  // namespace

void append_owner_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"frombuffer", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_frombuffer)),
                 METH_VARARGS | METH_KEYWORDS,
                 "frombuffer(buffer, *, dtype, count=-1, offset=0)\n--\n\nA 1-D tensor that shares the memory of an "
                 "object implementing the buffer protocol; the object is kept alive while the tensor or a view "
                 "of it exists."});
  out.push_back({"_native_ref", py_native_ref, METH_O,
                 "_native_ref(tensor, /)\n--\n\nTest hook: a capsule holding a C++ reference to the tensor."});
  out.push_back({"_drop_native_ref", py_drop_native_ref, METH_VARARGS,
                 "_drop_native_ref(capsule, on_new_thread=True, /)\n--\n\nTest hook: drops the C++ reference with the GIL "
                 "released, on a new native thread or on this one."});
}

}  // namespace kael::python
