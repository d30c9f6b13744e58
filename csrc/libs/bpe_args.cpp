// Argument conversions of kael.BpeTokenizer's binding (bpe_args.h).
#include "bpe_args.h"

#include <cerrno>
#include <cstdio>
#include <new>

namespace kael::python::bpe {


// Python code run while a dict is read (an id's __index__) changed its size: refused, as Python's
// own iteration over a dict does.
bool dict_changed(const char* op, const char* name, PyObject* dict, Py_ssize_t size) {
  if (PyDict_GET_SIZE(dict) == size) return false;
  PyErr_Format(PyExc_RuntimeError, "%s: %s changed size while it was read", op, name);
  return true;
}

namespace {
// A path argument (str or os.PathLike) as bytes for the file system.
PyObject* fs_path(PyObject* path) {
  PyObject* out = nullptr;
  if (!PyUnicode_FSConverter(path, &out)) return nullptr;
  return out;
}
}  // namespace

// Reads a file (path: str, bytes or os.PathLike). With `missing` given, a file that does not exist
// sets it and is not an error.
bool read_file(PyObject* path_arg, std::string& out, bool* missing) {
  PyObject* path = fs_path(path_arg);
  if (path == nullptr) return false;
  std::FILE* f = std::fopen(PyBytes_AS_STRING(path), "rb");
  const int error = errno;
  Py_DECREF(path);
  if (f == nullptr) {
    if (missing != nullptr && error == ENOENT) {
      *missing = true;
      return true;
    }
    errno = error;
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_arg);
    return false;
  }
  char buffer[1 << 16];
  std::size_t n = 0;
  out.clear();
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) out.append(buffer, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) {
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_arg);
    return false;
  }
  return true;
}

bool write_file(PyObject* path_arg, std::string_view contents) {
  PyObject* path = fs_path(path_arg);
  if (path == nullptr) return false;
  std::FILE* f = std::fopen(PyBytes_AS_STRING(path), "wb");
  Py_DECREF(path);
  if (f == nullptr) {
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_arg);
    return false;
  }
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_arg);
    return false;
  }
  return true;
}

// Note [Saved special tokens]
// tiktoken's file holds the mergeable ranks only (tiktoken's own load_tiktoken_bpe refuses any
// other line), so save(path) writes the special tokens beside it, as the JSON object {text: id} in
// path + ".special_tokens.json" ({} for none), and from_tiktoken(path) with special_tokens=None
// reads them from there. A file without one (GPT-2's own) gets GPT-2's "<|endoftext|>"
// (BpeTokenizer::from_tiktoken_gpt2_specials: 50256 for GPT-2's file).
constexpr char kSpecialsSuffix[] = ".special_tokens.json";

// The path of the specials beside the ranks at path_arg, as a str (a new reference).
PyObject* specials_path(PyObject* path_arg) {
  PyObject* path = fs_path(path_arg);
  if (path == nullptr) return nullptr;
  PyObject* side = PyBytes_FromFormat("%s%s", PyBytes_AS_STRING(path), kSpecialsSuffix);
  Py_DECREF(path);
  if (side == nullptr) return nullptr;
  PyObject* out = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(side), PyBytes_GET_SIZE(side));
  Py_DECREF(side);
  return out;
}

bool id_of(const char* op, PyObject* o, std::int64_t& out) {
  if (PyBool_Check(o) || !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: token ids must be ints, got %s", op, Py_TYPE(o)->tp_name);
    return false;
  }
  PyObject* index = PyNumber_Index(o);
  if (index == nullptr) return false;
  int overflow = 0;
  out = PyLong_AsLongLongAndOverflow(index, &overflow);
  if (overflow != 0) {
    PyErr_Format(PyExc_ValueError, "%s: token id %R is out of range", op, index);
    Py_DECREF(index);
    return false;
  }
  Py_DECREF(index);
  return !(out == -1 && PyErr_Occurred());
}

// The ids are read as they are iterated, each converted at once, as tiktoken (pyo3) reads them:
// an id's __index__ may change the list they come from (clear it, grow it, replace it), and the
// iterator re-reads the list's length at every step and holds each item it hands out, so the
// reader never leaves the list; an endless iterable of bad items fails at its first one.
bool ids_of(const char* op, PyObject* ids, std::vector<std::int64_t>& out) {
  PyObject* it = PyObject_GetIter(ids);
  if (it == nullptr) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s: expected a sequence of int token ids, got %s", op, Py_TYPE(ids)->tp_name);
    }
    return false;
  }
  out.clear();
  while (PyObject* item = PyIter_Next(it)) {
    std::int64_t id = 0;
    const bool ok = id_of(op, item, id);
    Py_DECREF(item);
    if (ok) {
      try {
        out.push_back(id);
      } catch (const std::bad_alloc&) {
        PyErr_NoMemory();
      }
    }
    if (PyErr_Occurred()) {
      Py_DECREF(it);
      return false;
    }
  }
  Py_DECREF(it);
  return !PyErr_Occurred();
}

// {str: int} special tokens (None: none). A special's text is UTF-8: lone surrogates raise
// UnicodeEncodeError, as tiktoken's Encoding does. Each key and value is held while it is read (an
// id's __index__ may change the dict).
bool specials_of(const char* op, PyObject* o, std::vector<std::pair<std::string, Rank>>& out) {
  if (o == nullptr || o == Py_None) return true;
  if (!PyDict_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: special_tokens must be a dict of str to int, got %s", op, Py_TYPE(o)->tp_name);
    return false;
  }
  const Py_ssize_t size = PyDict_GET_SIZE(o);
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(o, &pos, &key, &value)) {
    const Held held_key(key), held_value(value);
    if (!PyUnicode_Check(key)) {
      PyErr_Format(PyExc_TypeError, "%s: special token names must be str, got %s", op, Py_TYPE(key)->tp_name);
      return false;
    }
    OwnedUtf8 text;
    if (!utf8_of(op, key, Surrogates::Strict, text)) return false;
    std::int64_t id = 0;
    if (!id_of(op, value, id) || dict_changed(op, "special_tokens", o, size)) return false;
    if (id < 0 || id >= 0x7FFFFFFF) {
      PyErr_Format(PyExc_ValueError, "%s: the id of special token %R is %lld, expected 0..2**31-2", op, key,
                   static_cast<long long>(id));
      return false;
    }
    out.emplace_back(std::string(text.view()), static_cast<Rank>(id));
  }
  return true;
}

// The special tokens saved beside the ranks at path_arg (Note [Saved special tokens]); `found`
// says whether there were any.
bool saved_specials(const char* op, PyObject* path_arg, std::vector<std::pair<std::string, Rank>>& out, bool& found) {
  found = false;
  PyObject* side = specials_path(path_arg);
  if (side == nullptr) return false;
  std::string contents;
  bool missing = false;
  if (!read_file(side, contents, &missing) || missing) {
    Py_DECREF(side);
    return missing;
  }
  found = true;
  PyObject* parsed = nullptr;
  PyObject* json = PyImport_ImportModule("json");
  if (json != nullptr) {
    PyObject* text = PyUnicode_DecodeUTF8(contents.data(), static_cast<Py_ssize_t>(contents.size()), "strict");
    if (text != nullptr) parsed = PyObject_CallMethod(json, "loads", "O", text);
    Py_XDECREF(text);
    Py_DECREF(json);
  }
  if (parsed == nullptr && PyErr_ExceptionMatches(PyExc_ValueError)) {  // JSONDecodeError, UnicodeDecodeError
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_Format(PyExc_ValueError, "%s: %R is not valid JSON: %S", op, side, value != nullptr ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
  } else if (parsed != nullptr && !PyDict_Check(parsed)) {
    PyErr_Format(PyExc_ValueError, "%s: %R must hold a JSON object of special token to id, got %s", op, side,
                 Py_TYPE(parsed)->tp_name);
  }
  const bool ok = parsed != nullptr && PyDict_Check(parsed) && specials_of(op, parsed, out);
  Py_XDECREF(parsed);
  Py_DECREF(side);
  return ok;
}

// pattern=None or GPT-2's pattern (the only one kael's matcher implements); a new reference.
PyObject* pattern_of(const char* op, PyObject* o) {
  if (o == nullptr || o == Py_None) return PyUnicode_FromString(kael::text::kGpt2Pattern);
  if (!PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: pattern must be a str or None, got %s", op, Py_TYPE(o)->tp_name);
    return nullptr;
  }
  OwnedUtf8 text;
  if (!utf8_of(op, o, Surrogates::Strict, text)) return nullptr;
  if (!kael::text::is_gpt2_pattern(text.view())) {
    PyErr_Format(PyExc_ValueError,
                 "%s: pattern %R is not supported: kael's pre-tokeniser implements GPT-2's pattern '%s' (or None)", op,
                 o, kael::text::kGpt2Pattern);
    return nullptr;
  }
  Py_INCREF(o);
  return o;
}

PyObject* make(PyTypeObject* type, BpeTokenizer&& tok, PyObject* pattern) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) {
    Py_DECREF(pattern);
    return nullptr;
  }
  auto* p = reinterpret_cast<PyBpe*>(self);
  try {
    p->tok = new BpeTokenizer(std::move(tok));
  } catch (...) {
    Py_DECREF(pattern);
    Py_DECREF(self);
    translate_exception();
    return nullptr;
  }
  p->pattern = pattern;
  return self;
}

namespace {
// The specials to look for: "all", or an iterable of str (a str other than "all" is an error).
// mask[i] is set for specials()[i] in the set; `texts` gets every string of the set. As in
// tiktoken, allowed specials must be UTF-8 (Surrogates::Strict: lone surrogates raise
// UnicodeEncodeError) and disallowed ones are looked for code point for code point
// (Surrogates::Pass: a lone surrogate matches only itself).
bool special_set(const char* op, const char* name, PyObject* o, Surrogates surrogates, const BpeTokenizer& tok,
                 std::vector<bool>& mask, std::vector<std::string>* texts, bool& all) {
  const auto& specials = tok.specials();
  mask.assign(specials.size(), false);
  all = false;
  if (PyUnicode_Check(o)) {
    if (PyUnicode_CompareWithASCIIString(o, "all") != 0) {
      PyErr_Format(PyExc_ValueError, "%s: %s must be 'all' or a set of str, got %R", op, name, o);
      return false;
    }
    all = true;
    mask.assign(specials.size(), true);
    return true;
  }
  PyObject* it = PyObject_GetIter(o);
  if (it == nullptr) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: %s must be 'all' or a set of str, got %s", op, name, Py_TYPE(o)->tp_name);
    return false;
  }
  while (PyObject* item = PyIter_Next(it)) {
    if (!PyUnicode_Check(item)) {
      PyErr_Format(PyExc_TypeError, "%s: %s must hold str, got %s", op, name, Py_TYPE(item)->tp_name);
      Py_DECREF(item);
      Py_DECREF(it);
      return false;
    }
    // The text holds its own reference to the item (or to its surrogatepass bytes): the iterator
    // may have made the item for this step alone (a generator's fresh string).
    OwnedUtf8 text;
    const bool ok = utf8_of(op, item, surrogates, text);
    Py_DECREF(item);
    if (!ok) {
      Py_DECREF(it);
      return false;
    }
    for (std::size_t k = 0; k < specials.size(); ++k)
      if (specials[k].first == text.view()) mask[k] = true;
    if (texts != nullptr && !text.view().empty()) texts->emplace_back(text.view());
  }
  Py_DECREF(it);
  return !PyErr_Occurred();
}
}  // namespace


bool policy_of(const char* op, PyObject* allowed_arg, PyObject* disallowed_arg, const BpeTokenizer& tok,
               SpecialPolicy& out) {
  bool all = false;
  if (allowed_arg == nullptr) {
    out.allowed.assign(tok.specials().size(), false);
  } else if (!special_set(op, "allowed_special", allowed_arg, Surrogates::Strict, tok, out.allowed, nullptr, all)) {
    return false;
  }
  out.disallowed.clear();
  std::vector<bool> mask;
  std::vector<std::string> texts;
  if (disallowed_arg == nullptr || PyUnicode_Check(disallowed_arg)) {
    if (disallowed_arg != nullptr &&
        !special_set(op, "disallowed_special", disallowed_arg, Surrogates::Pass, tok, mask, nullptr, all))
      return false;
    // "all": every special that is not allowed.
    for (std::size_t k = 0; k < tok.specials().size(); ++k)
      if (!out.allowed[k]) out.disallowed.push_back(tok.specials()[k].first);
    return true;
  }
  if (!special_set(op, "disallowed_special", disallowed_arg, Surrogates::Pass, tok, mask, &texts, all)) return false;
  out.disallowed = std::move(texts);
  return true;
}

// The leftmost disallowed text in text (the longest of those starting there), or npos.
std::size_t find_disallowed(std::string_view text, const SpecialPolicy& policy, std::size_t& which) {
  std::size_t best = std::string_view::npos;
  for (std::size_t k = 0; k < policy.disallowed.size(); ++k) {
    const std::size_t at = text.find(policy.disallowed[k]);
    if (at != std::string_view::npos &&
        (at < best || (at == best && policy.disallowed[k].size() > policy.disallowed[which].size()))) {
      best = at;
      which = k;
    }
  }
  return best;
}


bool text_of(const char* op, PyObject* o, const SpecialPolicy& policy, TextArg& out) {
  if (!utf8_of(op, o, Surrogates::Replace, out.encoded)) return false;
  if (policy.disallowed.empty() || out.encoded.owner() == o) return true;
  return utf8_of(op, o, Surrogates::Pass, out.searched);
}

void raise_disallowed(const std::string& token) {
  PyObject* t = PyUnicode_DecodeUTF8(token.data(), static_cast<Py_ssize_t>(token.size()), "surrogatepass");
  if (t == nullptr) return;
  PyErr_Format(PyExc_ValueError,
               "Encountered text corresponding to disallowed special token %R.\n"
               "If you want this text to be encoded as a special token, pass it to `allowed_special`, e.g. "
               "`allowed_special={%R, ...}`.\n"
               "If you want this text to be encoded as normal text, disable the check for this token by passing "
               "`disallowed_special=(enc.special_tokens_set - {%R})`.\n"
               "To disable this check for all special tokens, pass `disallowed_special=()`.\n",
               t, t, t);
  Py_DECREF(t);
}

PyObject* id_list(const std::vector<Rank>& ids) {
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(ids.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    PyObject* v = PyLong_FromUnsignedLong(ids[i]);
    if (v == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), v);
  }
  return out;
}

// Keyword arguments of a METH_FASTCALL | METH_KEYWORDS method: fills `slots` (named `names`,
// the first `npos` of which may come by position).
bool parse_args(const char* op, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                std::initializer_list<const char*> names, Py_ssize_t npos, Py_ssize_t nrequired,
                std::vector<PyObject*>& slots) {
  const std::vector<const char*> list(names);
  slots.assign(list.size(), nullptr);
  if (nargs > npos) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %zd positional arguments (%zd given)", op, npos, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) slots[static_cast<std::size_t>(i)] = args[i];
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    std::size_t found = list.size();
    for (std::size_t j = 0; j < list.size(); ++j)
      if (PyUnicode_CompareWithASCIIString(key, list[j]) == 0) found = j;
    if (found == list.size()) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", op, key);
      return false;
    }
    if (slots[found] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", op, list[found]);
      return false;
    }
    slots[found] = args[nargs + k];
  }
  for (Py_ssize_t i = 0; i < nrequired; ++i) {
    if (slots[static_cast<std::size_t>(i)] == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", op, list[static_cast<std::size_t>(i)]);
      return false;
    }
  }
  return true;
}

}  // namespace kael::python::bpe
