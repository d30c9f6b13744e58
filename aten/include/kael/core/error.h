#pragma once
// Errors thrown by the core. Python maps them by class (see csrc/errors.cpp):
// IndexError -> IndexError, ValueError -> ValueError, TypeError -> TypeError,
// Error -> RuntimeError. Messages read
//   kael error at <file>:<line>: check '<cond>' failed: <why>
// and <why> starts with the op name ("add: shapes [2] and [3] are not broadcastable").

#include <sstream>
#include <stdexcept>
#include <string>

namespace kael {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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

namespace detail {
std::string format_check(const char* file, int line, const char* cond, const std::string& why);

template <typename E>
[[noreturn]] void throw_check(const char* file, int line, const char* cond, const std::string& why) {
  throw E(format_check(file, line, cond, why));
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

// Internal invariants (bugs in kael, not bad input).
#define KAEL_INTERNAL_ASSERT(cond) \
  KAEL_CHECK_IMPL(::kael::Error, cond, "internal assert failed; please report a bug")
