#pragma once
// Errors thrown by the core. Python maps them by class (see csrc/errors.cpp):
// IndexError -> IndexError, ValueError -> ValueError, TypeError -> TypeError,
// Error -> RuntimeError.
//
// Note [Error messages]
// A message starts with the op name and shows the offending values ("add: shapes [2] and [3]
// are not broadcastable"): that is message(), and all a Python user reads as str(e). Where the
// check is (file, line and condition) is location() ("check 'fits' failed at
// aten/src/native/composites.cpp:372"), which Python attaches as a note of the exception (shown
// under the message in a traceback). what() is both, for C++ callers:
//   <message> [kael check '<cond>' failed at <file>:<line>]

#include <sstream>
#include <stdexcept>
#include <string>

namespace kael {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message), message_(message) {}
  Error(const std::string& message, const std::string& location)
      : std::runtime_error(location.empty() ? message : message + " [kael " + location + "]"),
        message_(message),
        location_(location) {}
  const std::string& message() const noexcept { return message_; }
  const std::string& location() const noexcept { return location_; }

 private:
  std::string message_;
  std::string location_;
};
class IndexError : public Error {
 public:
  using Error::Error;
};
class ValueError : public Error {
 public:
  using Error::Error;
};
class TypeError : public Error {
 public:
  using Error::Error;
};
// The op has no kernel for this dtype (or device): Python's NotImplementedError (a RuntimeError),
// as torch's dtype dispatch raises it ("abs_cpu" not implemented for 'Bool').
class NotImplementedError : public Error {
 public:
  using Error::Error;
};

namespace detail {
// "check '<cond>' failed at <file>:<line>"
std::string check_location(const char* file, int line, const char* cond);

template <typename E>
[[noreturn]] void throw_check(const char* file, int line, const char* cond, const std::string& why) {
  throw E(why, check_location(file, line, cond));
}

// Builds the explanation from a stream expression; only runs on failure.
struct MessageBuilder {
  std::ostringstream out;
  template <typename T>
  MessageBuilder& operator<<(const T& value) {
    out << value;
    return *this;
  }
};
}  // namespace detail

}  // namespace kael

// The check macros evaluate `cond` once and build the message only when it fails.
// They are expressions of the form `if (!cond) throw ...;` and carry no braces of their own.
#define KAEL_CHECK_IMPL(ErrorType, cond, ...)                                                 \
  ((cond) ? static_cast<void>(0)                                                               \
          : ::kael::detail::throw_check<ErrorType>(                                            \
                __FILE__, __LINE__, #cond, (::kael::detail::MessageBuilder() << __VA_ARGS__).out.str()))

#define KAEL_CHECK(cond, ...) KAEL_CHECK_IMPL(::kael::Error, cond, __VA_ARGS__)
#define KAEL_CHECK_INDEX(cond, ...) KAEL_CHECK_IMPL(::kael::IndexError, cond, __VA_ARGS__)
#define KAEL_CHECK_VALUE(cond, ...) KAEL_CHECK_IMPL(::kael::ValueError, cond, __VA_ARGS__)
#define KAEL_CHECK_TYPE(cond, ...) KAEL_CHECK_IMPL(::kael::TypeError, cond, __VA_ARGS__)
#define KAEL_CHECK_IMPLEMENTED(cond, ...) KAEL_CHECK_IMPL(::kael::NotImplementedError, cond, __VA_ARGS__)

// Internal invariants (bugs in kael, not bad input).
#define KAEL_INTERNAL_ASSERT(cond) \
  KAEL_CHECK_IMPL(::kael::Error, cond, "internal assert failed; please report a bug")
