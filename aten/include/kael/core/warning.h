#pragma once
// Warnings from the core. C++ code calls kael::warn(); where they go is up to the
// thread's handler: the default prints to stderr; the Python extension buffers them and
// raises them as Python warnings once the call returns to Python with the GIL held, so that
// warnings.simplefilter("error") and pytest.warns work (see Note [Warnings] in csrc/errors.cpp).

#include <string>

namespace kael {

enum class WarningKind { User, Deprecation };

using WarningHandler = void (*)(WarningKind kind, const std::string& message);

// Emits a warning; messages start with the op name, like error messages.
void warn(WarningKind kind, const std::string& message);

// Sets the process-wide handler (nullptr restores the default) and returns the previous one.
WarningHandler set_warning_handler(WarningHandler handler);

}  // namespace kael
