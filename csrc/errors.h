#pragma once
// C++ exceptions and kael warnings as Python exceptions and warnings (csrc/errors.cpp). Bindings
// do not call these themselves: they run their C++ code through guarded() (csrc/guard.h).

#include <Python.h>

namespace kael::python {

// Thrown from code that already set a Python exception.
struct PythonError {};

// Translates the C++ exception being handled into a Python exception (by class: kael::IndexError
// is IndexError, kael::ValueError ValueError, kael::TypeError TypeError, other kael::Error and
// std::exception RuntimeError, std::bad_alloc MemoryError; PythonError keeps the exception set),
// then issues the warnings the failed call raised (see Note [Warnings]).
void translate_exception();

// Raises the warnings kael::warn() buffered on this thread (see Note [Warnings]); false when
// one of them became an exception.
bool has_pending_warnings();
bool flush_warnings();
// Issues the pending warnings while a Python exception is set, keeping that exception.
void flush_warnings_of_failed_call();
void install_warning_handler();

}  // namespace kael::python
