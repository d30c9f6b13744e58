#pragma once
// Note [Owned UTF-8]
// A pointer into a Python object's bytes (PyUnicode_AsUTF8AndSize's cached UTF-8, a bytes object's
// PyBytes_AS_STRING) is valid only while a reference keeps that object alive. A borrowed reference
// is not enough once Python code runs (an iterator's next item, an __index__, a generator) or once
// the object is a temporary (a generator's fresh string, a replacement string for lone surrogates):
// the view then reads freed memory. OwnedUtf8 holds the view together with the strong reference
// that keeps its buffer alive: move-only, the reference released when it is destroyed (with the
// GIL held), and view() refused on a temporary, so the safe form is the only one that compiles.
#include <Python.h>

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

namespace kael::python {

// What utf8_of does with lone surrogates, which UTF-8 cannot hold.
enum class Surrogates {
  Strict,   // raise UnicodeEncodeError (Python's, as str.encode("utf-8") and tiktoken do)
  Replace,  // U+FFFD, as tiktoken's encode does (UTF-16 with surrogatepass, decoded with "replace")
  Pass,     // encoded as they are ("surrogatepass"): equal texts give equal bytes, code point for code point
};

class OwnedUtf8 {
 public:
  OwnedUtf8() noexcept = default;
  OwnedUtf8(OwnedUtf8&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)), view_(std::exchange(other.view_, {})) {}
  OwnedUtf8& operator=(OwnedUtf8&& other) noexcept {
    OwnedUtf8 old(std::move(*this));
    owner_ = std::exchange(other.owner_, nullptr);
    view_ = std::exchange(other.view_, {});
    return *this;
  }
  OwnedUtf8(const OwnedUtf8&) = delete;
  OwnedUtf8& operator=(const OwnedUtf8&) = delete;
  ~OwnedUtf8() { Py_XDECREF(owner_); }

  // The bytes, valid while this object lives (not on a temporary: it would dangle at once).
  std::string_view view() const& noexcept { return view_; }
  std::string_view view() const&& = delete;
  // Whether it holds a text (a default-constructed or moved-from one does not).
  bool holds() const noexcept { return owner_ != nullptr; }
  // The object that keeps the bytes alive: the str itself where its UTF-8 needed no change.
  PyObject* owner() const noexcept { return owner_; }

  // Takes over `owner` (a new reference) and the bytes it keeps alive.
  static OwnedUtf8 adopt(PyObject* owner, const char* data, Py_ssize_t size) noexcept {
    OwnedUtf8 out;
    out.owner_ = owner;
    out.view_ = std::string_view(data, static_cast<std::size_t>(size));
    return out;
  }

  // A bytes object's contents (`bytes` must pass PyBytes_Check); never fails.
  static OwnedUtf8 of_bytes(PyObject* bytes) noexcept {
    Py_INCREF(bytes);
    return adopt(bytes, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
  }

 private:
  PyObject* owner_ = nullptr;
  std::string_view view_;
};

// The safe form is the only one: no copies (two owners of one reference), moves that leave nothing
// behind, and no view of a temporary.
template <typename T>
concept ViewsATemporary = requires { std::declval<T&&>().view(); };
static_assert(!std::is_copy_constructible_v<OwnedUtf8> && !std::is_copy_assignable_v<OwnedUtf8>);
static_assert(std::is_nothrow_move_constructible_v<OwnedUtf8> && std::is_nothrow_move_assignable_v<OwnedUtf8>);
static_assert(!ViewsATemporary<OwnedUtf8>);

// A str's UTF-8 (str subclasses included) into `out`; false with a Python exception set: TypeError
// "<op>: expected a str, got <type>" for anything else, UnicodeEncodeError for lone surrogates
// under Surrogates::Strict.
inline bool utf8_of(const char* op, PyObject* text, Surrogates surrogates, OwnedUtf8& out) {
  out = OwnedUtf8();
  if (!PyUnicode_Check(text)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a str, got %s", op, Py_TYPE(text)->tp_name);
    return false;
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text, &size);
  if (data != nullptr) {
    Py_INCREF(text);  // the UTF-8 is cached in the str and lives as long as it does
    out = OwnedUtf8::adopt(text, data, size);
    return true;
  }
  if (surrogates == Surrogates::Strict || !PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return false;
  PyErr_Clear();
  if (surrogates == Surrogates::Pass) {
    PyObject* bytes = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (bytes == nullptr) return false;
    out = OwnedUtf8::adopt(bytes, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
    return true;
  }
  PyObject* utf16 = PyUnicode_AsEncodedString(text, "utf-16", "surrogatepass");
  if (utf16 == nullptr) return false;
  PyObject* replaced = PyUnicode_Decode(PyBytes_AS_STRING(utf16), PyBytes_GET_SIZE(utf16), "utf-16", "replace");
  Py_DECREF(utf16);
  if (replaced == nullptr) return false;
  data = PyUnicode_AsUTF8AndSize(replaced, &size);
  if (data == nullptr) {
    Py_DECREF(replaced);
    return false;
  }
  out = OwnedUtf8::adopt(replaced, data, size);
  return true;
}

}  // namespace kael::python
