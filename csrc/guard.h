#pragma once
// Note [Guarded calls]
// Every binding runs the C++ code that may throw through one call, guarded(body, gil), which
//   - applies the GIL policy to the body: gil::Hold (the default: the body holds the GIL and
//     may touch Python objects), gil::Op{large} (an op: its loops run without the GIL once its
//     set-up is done when `large`, Note [Concurrency] in kael/core/concurrency.h), or
//     gil::Released (the whole body runs without the GIL and touches no Python object: the
//     autograd engine, whose hooks and Python Functions take the GIL back);
//   - returns the body's result to Python: a PyObject* as it is; a Tensor, a std::vector<Tensor>
//     (a tuple) or a std::tuple of Tensors (a named tuple of `tuple_type`) wrapped; void as None;
//     an int as it is, for slots and setters (-1 on error); a Match as it is, for converters;
//   - issues the warnings kael::warn() buffered during the call as Python warnings (Note
//     [Warnings] in csrc/errors.cpp): a warning that the warnings filter turns into an error
//     makes the call fail with it; a call that fails issues them too, keeping its own error
//     (converters leave them to the call they are part of);
//   - translates a C++ exception into the Python exception of its class (translate_exception(),
//     csrc/errors.h); a body that set a Python exception itself throws PythonError or returns
//     its error value (nullptr, a negative int, Match::Error).
// There is no other try/catch around C++ code in the bindings.

#include <Python.h>

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "errors.h"
#include "kael/core/concurrency.h"
#include "kael/core/tensor.h"
#include "tensor_object.h"

namespace kael::python {

// A converter's answer (csrc/arg_parsing.h): not of its type (No), converted (Yes), or a Python
// exception set (Error).
enum class Match : std::uint8_t { No, Yes, Error };

// Releases the GIL for its lifetime when `release` is true.
class GilRelease {
 public:
  explicit GilRelease(bool release) : state_(release ? PyEval_SaveThread() : nullptr) {}
  ~GilRelease() {
    if (state_) PyEval_RestoreThread(state_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

// What the body of a guarded call does with the GIL (Note [Guarded calls]); each is its own
// type, so a call site instantiates only its own path.
namespace gil {
// The body holds the GIL throughout and may touch Python objects.
struct Hold {
  template <typename F>
  decltype(auto) run(F& body) const {
    return body();
  }
};
// An op: its loops run without the GIL once its set-up is done when `large`.
struct Op {
  bool large;
  template <typename F>
  decltype(auto) run(F& body) const {
    AllowUnlock unlock(large);
    return body();
  }
};
// The body runs without the GIL and touches no Python object.
struct Released {
  template <typename F>
  decltype(auto) run(F& body) const {
    GilRelease release(true);
    return body();
  }
};
}  // namespace gil

// The Python object of an op's result: a Tensor, a bool, an int, a tuple for Tensor[], a named tuple of
// `tuple_type` (kael.return_types.<op>) for several named results, a plain tuple for several
// unnamed ones (tuple_type null: var_mean's (Tensor, Tensor)).
inline PyObject* wrap_result(Tensor t, PyTypeObject*) { return wrap(std::move(t)); }
// A bool or int an op returns (is_nonzero, numel), carried out of a guarded body in this wrapper
// since guarded() hands integral results back as they are (a slot's int).
template <typename T>
struct ValueResult {
  ValueResult(T v) : value(v) {}  // NOLINT: implicit, so that the body returns the op's value
  T value;
};
inline PyObject* wrap_result(ValueResult<bool> r, PyTypeObject*) { return PyBool_FromLong(r.value ? 1 : 0); }
inline PyObject* wrap_result(ValueResult<std::int64_t> r, PyTypeObject*) { return PyLong_FromLongLong(r.value); }
PyObject* wrap_result(std::vector<Tensor> list, PyTypeObject*);  // csrc/arg_parsing.cpp
template <typename... Ts>
PyObject* wrap_result(std::tuple<Ts...> results, PyTypeObject* tuple_type) {
  PyObject* out = tuple_type != nullptr ? PyStructSequence_New(tuple_type)
                                        : PyTuple_New(static_cast<Py_ssize_t>(sizeof...(Ts)));
  if (out == nullptr) return nullptr;
  Py_ssize_t i = 0;
  bool ok = true;
  std::apply(
      [&](auto&... e) {
        ((ok = ok && [&] {
           PyObject* item = wrap(std::move(e));
           if (item == nullptr) return false;
           if (tuple_type != nullptr) {
             PyStructSequence_SetItem(out, i++, item);
           } else {
             PyTuple_SET_ITEM(out, i++, item);
           }
           return true;
         }()),
         ...);
      },
      results);
  if (!ok) {
    Py_DECREF(out);
    return nullptr;
  }
  return out;
}

namespace guard_detail {

// A result the body returns as it is (PyObject*, an int of a slot or setter, a converter's Match),
// and its error value.
template <typename R>
inline constexpr bool kReturnedAsIs = std::is_same_v<R, PyObject*> || std::is_integral_v<R> || std::is_same_v<R, Match>;

template <typename R>
constexpr R error_value() {
  if constexpr (std::is_same_v<R, PyObject*>) return nullptr;
  else if constexpr (std::is_same_v<R, Match>) return Match::Error;
  else return R(-1);
}

template <typename R>
bool failed(R r) {
  if constexpr (std::is_same_v<R, PyObject*>) return r == nullptr;
  else if constexpr (std::is_same_v<R, Match>) return r == Match::Error;
  else return r < 0;
}

// The warnings of a call that returns to Python with `r`; false when one became an exception.
template <typename R>
bool issue_warnings(R r) {
  if constexpr (std::is_same_v<R, Match>) {
    return true;  // a converter: the call it is part of issues them
  } else {
    if (!has_pending_warnings()) [[likely]] return true;
    if (failed(r)) {
      flush_warnings_of_failed_call();
      return true;
    }
    return flush_warnings();
  }
}

}  // namespace guard_detail

// Note [Guarded calls].
template <typename F, typename Gil = gil::Hold>
auto guarded(F&& body, Gil gil = {}, PyTypeObject* tuple_type = nullptr) {
  using R = std::invoke_result_t<F&>;
  static_assert(!std::is_same_v<R, bool>, "guarded(): a body returns a PyObject*, an int, a Match, void or a C++ value");
  using Out = std::conditional_t<guard_detail::kReturnedAsIs<R>, R, PyObject*>;
  try {
    if constexpr (std::is_void_v<R>) {
      gil.run(body);
      return has_pending_warnings() && !flush_warnings() ? nullptr : Py_NewRef(Py_None);
    } else if constexpr (guard_detail::kReturnedAsIs<R>) {
      R r = gil.run(body);
      if (!guard_detail::issue_warnings(r)) [[unlikely]] {
        if constexpr (std::is_same_v<R, PyObject*>) Py_DECREF(r);
        return guard_detail::error_value<R>();
      }
      return r;
    } else {
      R result = gil.run(body);
      if (has_pending_warnings() && !flush_warnings()) return static_cast<PyObject*>(nullptr);
      return wrap_result(std::move(result), tuple_type);
    }
  } catch (...) {
    translate_exception();
    return guard_detail::error_value<Out>();
  }
}

}  // namespace kael::python
