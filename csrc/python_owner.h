#pragma once
// Storage over memory a Python object owns (see Note [Allocators and storage]).
//
// Note [Python-owned storage]
// kael borrows the bytes of a Python object (a buffer exporter now; NumPy and DLPack
// capsules later) without copying: the Storage is external, and its deleter holds the
// owner alive until the last view dies. That can happen on any thread: a tensor may be
// dropped by a kernel that released the GIL, or by a thread Python never saw. The
// deleters here therefore take the GIL (PyGILState_Ensure, which also creates a thread
// state on a foreign thread) before touching the owner, and do nothing once the
// interpreter is finalizing (the owner is leaked rather than released without a runtime).

#include <Python.h>

#include "kael/core/storage.h"

namespace kael::python {

// Runs a Python-releasing deleter safely from any thread; `release` runs with the GIL held.
// Returns without calling `release` when the interpreter is gone or finalizing.
template <typename F>
void with_gil_for_release(F&& release) noexcept {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  const PyGILState_STATE state = PyGILState_Ensure();
  release();
  PyGILState_Release(state);
}

// Storage::ExternalDeleter whose context is a strong reference to a PyObject.
void release_pyobject(void* owner) noexcept;

// A CPU Storage over `nbytes` at `data` that keeps `owner` (a new reference is taken) alive.
IntrusivePtr<Storage> storage_owned_by(PyObject* owner, void* data, std::size_t nbytes);

// A CPU Storage over the bytes of a buffer view: the view (moved into the storage) is
// released with PyBuffer_Release, under the GIL, when the last tensor over it dies.
IntrusivePtr<Storage> storage_from_buffer(Py_buffer& view);

}  // namespace kael::python
