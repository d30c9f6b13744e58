// C++ exceptions -> Python exceptions, by class; kael warnings -> Python warnings (errors.h).
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/intrusive_ptr.h"
#include "kael/core/warning.h"
#include "errors.h"

namespace kael::python {

// Note [Warnings]
// kael::warn() may run without the GIL (inside a call that released it), so the handler only
// appends to a per-thread buffer. flush_warnings() runs with the GIL when the call returns to
// Python and raises each as a Python warning; a warning turned into an error by the warnings
// filter makes the call fail with that error. A call that fails issues its warnings too, from
// translate_exception(), so none is left for the next call to raise (PyTorch's warning handler
// does the same); there a warning the filter turns into an error is dropped, and the call's own
// error propagates.
namespace {

struct PendingWarning {
  WarningKind kind;
  std::string message;
};

std::vector<PendingWarning>& pending() {
  thread_local std::vector<PendingWarning> warnings;
  return warnings;
}

// Checked after every call: a plain initial-exec flag, so the common case (no warning) costs
// one load and no __tls_get_addr.
bool& pending_flag() {
  static thread_local bool flag KAEL_FAST_TLS = false;
  return flag;
}

void buffer_warning(WarningKind kind, const std::string& message) {
  pending().push_back({kind, message});
  pending_flag() = true;
}

}  // namespace

bool has_pending_warnings() { return pending_flag(); }

bool flush_warnings() {
  pending_flag() = false;
  std::vector<PendingWarning> warnings = std::exchange(pending(), {});
  bool ok = true;
  for (const PendingWarning& w : warnings) {
    if (!ok) break;
    PyObject* category = w.kind == WarningKind::Deprecation ? PyExc_DeprecationWarning : PyExc_UserWarning;
    ok = PyErr_WarnEx(category, w.message.c_str(), 1) == 0;
  }
  return ok;
}

void install_warning_handler() { set_warning_handler(buffer_warning); }

namespace {

// Note [Error messages] (kael/core/error.h): str(e) is the message, which starts with the op
// name; where the check is rides along as the exception's note (PEP 678), shown in tracebacks.
PyObject* decode(const std::string& text) {
  return PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
}

void set_kael_error(PyObject* type, const kael::Error& e) {
  PyObject* message = decode(e.message());
  if (message == nullptr) return;
  PyObject* exc = PyObject_CallOneArg(type, message);
  Py_DECREF(message);
  if (exc == nullptr) return;
  if (!e.location().empty()) {
    PyObject* note = decode("kael " + e.location());
    PyObject* added = note != nullptr ? PyObject_CallMethod(exc, "add_note", "O", note) : nullptr;
    Py_XDECREF(note);
    if (added == nullptr)
      PyErr_Clear();  // the message is what matters; a note that cannot be added is left out
    Py_XDECREF(added);
  }
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
}

void translate_current_exception() {
  try {
    throw;
  } catch (const PythonError&) {
    // the Python exception is already set
  } catch (const kael::IndexError& e) {
    set_kael_error(PyExc_IndexError, e);
  } catch (const kael::ValueError& e) {
    set_kael_error(PyExc_ValueError, e);
  } catch (const kael::TypeError& e) {
    set_kael_error(PyExc_TypeError, e);
  } catch (const kael::NotImplementedError& e) {
    set_kael_error(PyExc_NotImplementedError, e);
  } catch (const kael::Error& e) {
    set_kael_error(PyExc_RuntimeError, e);
  } catch (const std::bad_alloc& e) {
    // kael's allocator says what it was asked (aten/src/core/allocator.cpp); a bare
    // std::bad_alloc from elsewhere is Python's own MemoryError()
    if (std::strcmp(e.what(), std::bad_alloc().what()) != 0)
      PyErr_SetString(PyExc_MemoryError, e.what());
    else
      PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "kael: unknown C++ exception");
  }
}

}  // namespace

void flush_warnings_of_failed_call() {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* error = PyErr_GetRaisedException();
#else
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
#endif
  if (!flush_warnings()) PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(error);
#else
  PyErr_Restore(type, value, traceback);
#endif
}

void translate_exception() {
  translate_current_exception();
  if (has_pending_warnings()) flush_warnings_of_failed_call();
}

}  // namespace kael::python
