// kael.save_safetensors, kael.load_safetensors, kael.read_safetensors_metadata: the bindings of
// kael/io/safetensors.h. File I/O runs without the GIL (Note [Concurrency]).
#include <Python.h>

#include <string>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/io/safetensors.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

// Holds a new reference; drops it on scope exit.
struct Ref {
  PyObject* p = nullptr;
  ~Ref() { Py_XDECREF(p); }
};

// The path as bytes of the file-system encoding (str, bytes or os.PathLike), or false with a
// TypeError set.
bool path_arg(const char* op, PyObject* obj, std::string& out) {
  Ref bytes;
  if (!PyUnicode_FSConverter(obj, &bytes.p)) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s: path must be a str, bytes or os.PathLike, got %s", op,
                   Py_TYPE(obj)->tp_name);
    }
    return false;
  }
  out.assign(PyBytes_AS_STRING(bytes.p), static_cast<std::size_t>(PyBytes_GET_SIZE(bytes.p)));
  return true;
}

bool utf8_arg(PyObject* s, std::string& out) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s, &n);
  if (p == nullptr) return false;
  out.assign(p, static_cast<std::size_t>(n));
  return true;
}

// Sets the Python exception of the C++ exception being handled: OSError (with errno and the
// file name, so FileNotFoundError and friends) for file-system failures, else by class.
void translate(PyObject* path) {
  try {
    throw;
  } catch (const io::FileError& e) {
    Ref exc;
    exc.p = PyObject_CallFunction(PyExc_OSError, "isO", e.error_number(), e.what(), path);
    if (exc.p != nullptr) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.p)), exc.p);
  } catch (...) {
    translate_exception();
  }
}

PyObject* string_dict(const io::StringPairs& pairs) {
  Ref out;
  out.p = PyDict_New();
  if (out.p == nullptr) return nullptr;
  for (const auto& [k, v] : pairs) {
    Ref key, value;
    key.p = PyUnicode_DecodeUTF8(k.data(), static_cast<Py_ssize_t>(k.size()), "strict");
    value.p = key.p ? PyUnicode_DecodeUTF8(v.data(), static_cast<Py_ssize_t>(v.size()), "strict") : nullptr;
    if (value.p == nullptr || PyDict_SetItem(out.p, key.p, value.p) < 0) return nullptr;
  }
  PyObject* r = out.p;
  out.p = nullptr;
  return r;
}

PyObject* py_save_safetensors(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"tensors", "path", "metadata", nullptr};
  PyObject *tensors = nullptr, *path = nullptr, *metadata = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:save_safetensors", const_cast<char**>(keywords), &tensors,
                                   &path, &metadata))
    return nullptr;
  if (!PyDict_Check(tensors)) {
    PyErr_Format(PyExc_TypeError, "save_safetensors: tensors must be a dict of str to Tensor, got %s",
                 Py_TYPE(tensors)->tp_name);
    return nullptr;
  }
  if (metadata != Py_None && !PyDict_Check(metadata)) {
    PyErr_Format(PyExc_TypeError, "save_safetensors: metadata must be a dict of str to str or None, got %s",
                 Py_TYPE(metadata)->tp_name);
    return nullptr;
  }
  std::string file;
  if (!path_arg("save_safetensors", path, file)) return nullptr;
  io::NamedTensors named;
  named.reserve(static_cast<std::size_t>(PyDict_Size(tensors)));
  Py_ssize_t pos = 0;
  PyObject *key = nullptr, *value = nullptr;
  while (PyDict_Next(tensors, &pos, &key, &value)) {
    if (!PyUnicode_Check(key)) {
      PyErr_Format(PyExc_TypeError, "save_safetensors: tensor names must be str, got %s", Py_TYPE(key)->tp_name);
      return nullptr;
    }
    if (!is_tensor(value)) {
      PyErr_Format(PyExc_TypeError, "save_safetensors: the value of %R must be a Tensor, got %s", key,
                   Py_TYPE(value)->tp_name);
      return nullptr;
    }
    std::string name;
    if (!utf8_arg(key, name)) return nullptr;
    named.emplace_back(std::move(name), tensor_of(value));
  }
  io::StringPairs pairs;
  if (metadata != Py_None) {
    pos = 0;
    while (PyDict_Next(metadata, &pos, &key, &value)) {
      if (!PyUnicode_Check(key) || !PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, "save_safetensors: metadata must map str to str, got %s: %s",
                     Py_TYPE(key)->tp_name, Py_TYPE(value)->tp_name);
        return nullptr;
      }
      std::string k, v;
      if (!utf8_arg(key, k) || !utf8_arg(value, v)) return nullptr;
      pairs.emplace_back(std::move(k), std::move(v));
    }
  }
  try {
    AllowUnlock allow(true);
    io::save_safetensors(named, file, metadata == Py_None ? nullptr : &pairs);
  } catch (...) {
    translate(path);
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* py_load_safetensors(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"path", "mmap", nullptr};
  PyObject* path = nullptr;
  int mmap = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|p:load_safetensors", const_cast<char**>(keywords), &path, &mmap))
    return nullptr;
  std::string file;
  if (!path_arg("load_safetensors", path, file)) return nullptr;
  io::NamedTensors named;
  try {
    AllowUnlock allow(true);
    named = io::load_safetensors(file, mmap != 0);
  } catch (...) {
    translate(path);
    return nullptr;
  }
  Ref out;
  out.p = PyDict_New();
  if (out.p == nullptr) return nullptr;
  for (auto& [name, t] : named) {
    Ref key, value;
    key.p = PyUnicode_DecodeUTF8(name.data(), static_cast<Py_ssize_t>(name.size()), "strict");
    value.p = key.p ? wrap(std::move(t)) : nullptr;
    if (value.p == nullptr || PyDict_SetItem(out.p, key.p, value.p) < 0) return nullptr;
  }
  PyObject* r = out.p;
  out.p = nullptr;
  return r;
}

PyObject* py_read_safetensors_metadata(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"path", nullptr};
  PyObject* path = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:read_safetensors_metadata", const_cast<char**>(keywords), &path))
    return nullptr;
  std::string file;
  if (!path_arg("read_safetensors_metadata", path, file)) return nullptr;
  io::StringPairs pairs;
  try {
    AllowUnlock allow(true);
    pairs = io::read_safetensors_metadata(file);
  } catch (...) {
    translate(path);
    return nullptr;
  }
  return string_dict(pairs);
}

}  // namespace

void append_safetensors_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"save_safetensors", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_save_safetensors)),
                 METH_VARARGS | METH_KEYWORDS,
                 "save_safetensors(tensors, path, metadata=None)\n--\n\nWrites a dict of str to Tensor to a "
                 "safetensors file, byte for byte as the safetensors package does; metadata is a dict of str to "
                 "str stored as the header's __metadata__."});
  out.push_back({"load_safetensors", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_load_safetensors)),
                 METH_VARARGS | METH_KEYWORDS,
                 "load_safetensors(path, mmap=False)\n--\n\nThe tensors of a safetensors file as a dict of str to "
                 "Tensor. mmap=True maps the file copy-on-write and returns tensors sharing the mapping."});
  out.push_back({"read_safetensors_metadata",
                 reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_read_safetensors_metadata)),
                 METH_VARARGS | METH_KEYWORDS,
                 "read_safetensors_metadata(path)\n--\n\nThe __metadata__ of a safetensors file as a dict of str "
                 "to str (empty when it has none); the whole header is checked."});
}

}  // namespace kael::python
