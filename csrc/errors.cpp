// C++ exceptions -> Python exceptions, by class; kael warnings -> Python warnings (errors.h).
#include <cstring>
#include <new>
#include <stdexcept>

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

void translate_current_exception() {
  try {
    throw;
  } catch (const PythonError&) {
    // the Python exception is already set
  } catch (const kael::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const kael::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const kael::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const kael::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
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
