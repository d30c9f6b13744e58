// The binding of kael.BpeTokenizer (bpe_tokenizer.cpp, bpe_args.cpp): the object's layout and
// the conversions of its arguments (paths and files, token ids, special tokens and the policy of
// encode() over them, the pattern, keyword arguments).
#pragma once

#include <Python.h>

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kael/text/bpe.h"
#include "py_utf8.h"
#include "tensor_object.h"

namespace kael::python::bpe {

using kael::text::BpeTokenizer;
using kael::text::Rank;

struct PyBpe {
  PyObject_HEAD
  BpeTokenizer* tok;
  PyObject* pattern;  // str
};

// Text at or above this many bytes is encoded without the GIL.
constexpr Py_ssize_t kReleaseGilBytes = 1 << 14;

inline const BpeTokenizer* tokenizer_of(PyObject* self) {
  const BpeTokenizer* t = reinterpret_cast<PyBpe*>(self)->tok;
  if (t == nullptr) PyErr_SetString(PyExc_RuntimeError, "BpeTokenizer: the tokenizer was not initialised");
  return t;
}

// Runs f without the GIL (f must not touch Python objects); C++ exceptions come back as Python ones.
template <typename F>
bool without_gil(F&& f) {
  std::exception_ptr error;
  Py_BEGIN_ALLOW_THREADS
  try {
    f();
  } catch (...) {
    error = std::current_exception();
  }
  Py_END_ALLOW_THREADS
  if (!error) return true;
  try {
    std::rethrow_exception(error);
  } catch (...) {
    translate_exception();
  }
  return false;
}

// Holds a new reference to a borrowed object for a scope: PyDict_Next's key and value are
// borrowed, and the Python code an item's conversion runs (an __index__) may drop the dict's.
class Held {
 public:
  explicit Held(PyObject* o) noexcept : p_(o) { Py_INCREF(o); }
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;
  ~Held() { Py_DECREF(p_); }

 private:
  PyObject* p_;
};

// What encode() needs from allowed_special / disallowed_special, as tiktoken resolves them.
struct SpecialPolicy {
  std::vector<bool> allowed;
  std::vector<std::string> disallowed;  // texts whose presence is an error (surrogatepass UTF-8)
};

// A text to encode: its UTF-8 with lone surrogates replaced (what tiktoken encodes) and, where
// it has lone surrogates and disallowed specials are looked for, its code points as they are
// (where tiktoken looks for them).
struct TextArg {
  OwnedUtf8 encoded;
  OwnedUtf8 searched;  // holds nothing where it would equal `encoded`
  std::string_view search_view() const& { return searched.holds() ? searched.view() : encoded.view(); }
  std::string_view search_view() const&& = delete;
};

// Python code run while a dict is read (an id's __index__) changed its size: refused, as Python's
// own iteration over a dict does.
bool dict_changed(const char* op, const char* name, PyObject* dict, Py_ssize_t size);

// Reads a file (path: str, bytes or os.PathLike). With `missing` given, a file that does not exist
// sets it and is not an error.
bool read_file(PyObject* path_arg, std::string& out, bool* missing = nullptr);

bool write_file(PyObject* path_arg, std::string_view contents);

// The path of the specials beside the ranks at path_arg, as a str (a new reference).
PyObject* specials_path(PyObject* path_arg);

bool id_of(const char* op, PyObject* o, std::int64_t& out);

// The ids are read as they are iterated, each converted at once, as tiktoken (pyo3) reads them:
// an id's __index__ may change the list they come from (clear it, grow it, replace it), and the
// iterator re-reads the list's length at every step and holds each item it hands out, so the
// reader never leaves the list; an endless iterable of bad items fails at its first one.
bool ids_of(const char* op, PyObject* ids, std::vector<std::int64_t>& out);

// {str: int} special tokens (None: none). A special's text is UTF-8: lone surrogates raise
// UnicodeEncodeError, as tiktoken's Encoding does. Each key and value is held while it is read (an
// id's __index__ may change the dict).
bool specials_of(const char* op, PyObject* o, std::vector<std::pair<std::string, Rank>>& out);

// The special tokens saved beside the ranks at path_arg (Note [Saved special tokens]); `found`
// says whether there were any.
bool saved_specials(const char* op, PyObject* path_arg, std::vector<std::pair<std::string, Rank>>& out, bool& found);

// pattern=None or GPT-2's pattern (the only one kael's matcher implements); a new reference.
PyObject* pattern_of(const char* op, PyObject* o);

PyObject* make(PyTypeObject* type, BpeTokenizer&& tok, PyObject* pattern);

bool policy_of(const char* op, PyObject* allowed_arg, PyObject* disallowed_arg, const BpeTokenizer& tok,
               SpecialPolicy& out);

// The leftmost disallowed text in text (the longest of those starting there), or npos.
std::size_t find_disallowed(std::string_view text, const SpecialPolicy& policy, std::size_t& which);

bool text_of(const char* op, PyObject* o, const SpecialPolicy& policy, TextArg& out);

void raise_disallowed(const std::string& token);

PyObject* id_list(const std::vector<Rank>& ids);

// Keyword arguments of a METH_FASTCALL | METH_KEYWORDS method: fills `slots` (named `names`,
// the first `npos` of which may come by position).
bool parse_args(const char* op, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                std::initializer_list<const char*> names, Py_ssize_t npos, Py_ssize_t nrequired,
                std::vector<PyObject*>& slots);

}  // namespace kael::python::bpe
