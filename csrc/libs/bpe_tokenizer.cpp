// kael.BpeTokenizer: the Python face of kael::text::BpeTokenizer (Note [BPE tokenizer] in
// kael/text/bpe.h). Special tokens follow tiktoken's encode(): allowed_special (default none)
// turns those specials' texts into their ids, disallowed_special (default "all": every special
// not allowed) raises ValueError when its text occurs, and a special in neither is plain text.
#include <Python.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "kael/core/error.h"
#include "kael/runtime/threads.h"
#include "bpe_args.h"

namespace kael::python {

namespace {

using namespace bpe;  // the binding's own helpers (bpe_args.h)

extern PyTypeObject BpeTokenizerType;

#define KAEL_FASTCALL(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&f))

// ---------------------------------------------------------------- construction

PyObject* bpe_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) return nullptr;
  reinterpret_cast<PyBpe*>(self)->tok = nullptr;
  reinterpret_cast<PyBpe*>(self)->pattern = nullptr;
  return self;
}

void bpe_dealloc(PyObject* self) {
  auto* p = reinterpret_cast<PyBpe*>(self);
  delete p->tok;
  Py_XDECREF(p->pattern);
  Py_TYPE(self)->tp_free(self);
}

// BpeTokenizer(mergeable_ranks, special_tokens=None, pattern=None): tiktoken's Encoding data.
int bpe_init(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"mergeable_ranks", "special_tokens", "pattern", nullptr};
  const char* op = "BpeTokenizer";
  // Other threads may be encoding with the tokenizer without the GIL: it is never replaced.
  if (reinterpret_cast<PyBpe*>(self)->tok != nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "BpeTokenizer: __init__ of a tokenizer that is already initialised");
    return -1;
  }
  PyObject *ranks_arg = nullptr, *specials_arg = nullptr, *pattern_arg = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:BpeTokenizer", const_cast<char**>(keywords), &ranks_arg,
                                   &specials_arg, &pattern_arg))
    return -1;
  if (!PyDict_Check(ranks_arg)) {
    PyErr_Format(PyExc_TypeError, "%s: mergeable_ranks must be a dict of bytes to int, got %s", op,
                 Py_TYPE(ranks_arg)->tp_name);
    return -1;
  }
  // Each key and value is held while it is read: a rank's __index__ may change the dict.
  std::vector<std::pair<std::string, Rank>> ranks;
  const Py_ssize_t size = PyDict_GET_SIZE(ranks_arg);
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(ranks_arg, &pos, &key, &value)) {
    const Held held_key(key), held_value(value);
    if (!PyBytes_Check(key)) {
      PyErr_Format(PyExc_TypeError, "%s: mergeable_ranks keys must be bytes, got %s", op, Py_TYPE(key)->tp_name);
      return -1;
    }
    std::int64_t rank = 0;
    if (!id_of(op, value, rank) || dict_changed(op, "mergeable_ranks", ranks_arg, size)) return -1;
    if (rank < 0 || rank >= 0x7FFFFFFF) {
      PyErr_Format(PyExc_ValueError, "%s: the rank of %R is %lld, expected 0..2**31-2", op, key,
                   static_cast<long long>(rank));
      return -1;
    }
    ranks.emplace_back(std::string(PyBytes_AS_STRING(key), static_cast<std::size_t>(PyBytes_GET_SIZE(key))),
                       static_cast<Rank>(rank));
  }
  std::vector<std::pair<std::string, Rank>> specials;
  if (!specials_of(op, specials_arg, specials)) return -1;
  PyObject* pattern = pattern_of(op, pattern_arg);
  if (pattern == nullptr) return -1;
  auto* p = reinterpret_cast<PyBpe*>(self);
  if (p->tok != nullptr) {  // the ids' __index__ may have called __init__ meanwhile
    Py_DECREF(pattern);
    PyErr_SetString(PyExc_RuntimeError, "BpeTokenizer: __init__ of a tokenizer that is already initialised");
    return -1;
  }
  try {
    p->tok = new BpeTokenizer(std::move(ranks), std::move(specials));
  } catch (...) {
    Py_DECREF(pattern);
    translate_exception();
    return -1;
  }
  Py_XSETREF(p->pattern, pattern);
  return 0;
}

PyObject* m_from_tiktoken(PyObject* cls, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.from_tiktoken";
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"path", "special_tokens", "pattern"}, 3, 1, a)) return nullptr;
  std::vector<std::pair<std::string, Rank>> specials;
  bool gpt2_specials = false;
  if (a[1] == nullptr || a[1] == Py_None) {
    bool saved = false;
    if (!saved_specials(op, a[0], specials, saved)) return nullptr;
    gpt2_specials = !saved;
  } else if (!specials_of(op, a[1], specials)) {
    return nullptr;
  }
  PyObject* pattern = pattern_of(op, a[2]);
  if (pattern == nullptr) return nullptr;
  std::string contents;
  PyObject* name = PyObject_Str(a[0]);
  if (name == nullptr || !read_file(a[0], contents)) {
    Py_XDECREF(name);
    Py_DECREF(pattern);
    return nullptr;
  }
  const char* name_utf8 = PyUnicode_AsUTF8(name);
  const std::string source = name_utf8 != nullptr ? name_utf8 : "<file>";
  Py_DECREF(name);
  PyErr_Clear();
  BpeTokenizer* tok = nullptr;
  if (!without_gil([&] {
        tok = new BpeTokenizer(gpt2_specials ? BpeTokenizer::from_tiktoken_gpt2_specials(contents, source)
                                             : BpeTokenizer::from_tiktoken(contents, std::move(specials), source));
      })) {
    Py_DECREF(pattern);
    return nullptr;
  }
  std::unique_ptr<BpeTokenizer> owned(tok);
  return make(reinterpret_cast<PyTypeObject*>(cls), std::move(*owned), pattern);
}

PyObject* m_from_vocab_merges(PyObject* cls, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.from_vocab_merges";
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"vocab_json", "merges_txt"}, 2, 2, a)) return nullptr;
  std::string vocab_text, merges;
  if (!read_file(a[0], vocab_text) || !read_file(a[1], merges)) return nullptr;
  PyObject* json = PyImport_ImportModule("json");
  if (json == nullptr) return nullptr;
  PyObject* vocab = nullptr;
  PyObject* source = PyUnicode_DecodeUTF8(vocab_text.data(), static_cast<Py_ssize_t>(vocab_text.size()), "strict");
  if (source != nullptr) {
    vocab = PyObject_CallMethod(json, "loads", "O", source);
    Py_DECREF(source);
  }
  Py_DECREF(json);
  if (vocab == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) return nullptr;  // JSONDecodeError, UnicodeDecodeError
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_Format(PyExc_ValueError, "%s: %R is not valid JSON: %S", op, a[0], value != nullptr ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return nullptr;
  }
  if (!PyDict_Check(vocab)) {
    PyErr_Format(PyExc_ValueError, "%s: %R must hold a JSON object of token to id, got %s", op, a[0],
                 Py_TYPE(vocab)->tp_name);
    Py_DECREF(vocab);
    return nullptr;
  }
  std::vector<std::pair<std::string, std::int64_t>> entries;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(vocab, &pos, &key, &value)) {
    // json.loads made the dict: its keys are str and its ids ints, so reading them runs no Python
    // code. A token is UTF-8 (a lone surrogate from a \ud800 escape raises UnicodeEncodeError).
    OwnedUtf8 text;
    std::int64_t id = 0;
    if (!PyLong_Check(value) || PyBool_Check(value)) {
      PyErr_Format(PyExc_ValueError, "%s: the id of %R in %R is %R, expected an int", op, key, a[0], value);
      Py_DECREF(vocab);
      return nullptr;
    }
    if (!utf8_of(op, key, Surrogates::Strict, text) || !id_of(op, value, id)) {
      Py_DECREF(vocab);
      return nullptr;
    }
    entries.emplace_back(std::string(text.view()), id);
  }
  Py_DECREF(vocab);
  BpeTokenizer* tok = nullptr;
  if (!without_gil([&] { tok = new BpeTokenizer(BpeTokenizer::from_vocab_merges(entries, merges)); })) return nullptr;
  std::unique_ptr<BpeTokenizer> owned(tok);
  PyObject* pattern = PyUnicode_FromString(kael::text::kGpt2Pattern);
  if (pattern == nullptr) return nullptr;
  return make(reinterpret_cast<PyTypeObject*>(cls), std::move(*owned), pattern);
}

PyObject* m_train(PyObject* cls, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.train";
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"text_or_iterator", "vocab_size", "special_tokens"}, 3, 2, a))
    return nullptr;
  std::int64_t vocab_size = 0;
  if (PyBool_Check(a[1]) || !PyLong_Check(a[1])) {
    PyErr_Format(PyExc_TypeError, "%s: vocab_size must be an int, got %s", op, Py_TYPE(a[1])->tp_name);
    return nullptr;
  }
  if (!id_of(op, a[1], vocab_size)) return nullptr;
  std::vector<std::string> specials;
  if (a[2] != nullptr && a[2] != Py_None) {
    if (PyUnicode_Check(a[2]) || PyDict_Check(a[2])) {
      PyErr_Format(PyExc_TypeError,
                   "%s: special_tokens must be a sequence of str (their ids follow the merges), got %s", op,
                   Py_TYPE(a[2])->tp_name);
      return nullptr;
    }
    PyObject* seq = PySequence_Fast(a[2], "special_tokens");
    if (seq == nullptr) return nullptr;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      // A special's text is UTF-8, as in special_tokens= of the constructor.
      OwnedUtf8 text;
      if (!utf8_of(op, PySequence_Fast_GET_ITEM(seq, i), Surrogates::Strict, text)) {
        Py_DECREF(seq);
        return nullptr;
      }
      specials.emplace_back(text.view());
    }
    Py_DECREF(seq);
  }
  const std::size_t nspecial = specials.size();
  if (vocab_size < static_cast<std::int64_t>(256 + nspecial) || vocab_size >= 0x7FFFFFF0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: vocab_size must be at least 256 + the number of special tokens (%zu) and below 2**31, got %lld",
                 op, 256 + nspecial, static_cast<long long>(vocab_size));
    return nullptr;
  }
  std::unique_ptr<kael::text::BpeTrainer> trainer;
  try {
    trainer = std::make_unique<kael::text::BpeTrainer>(std::move(specials));
  } catch (...) {
    translate_exception();
    return nullptr;
  }
  auto add = [&](PyObject* text) {
    OwnedUtf8 utf8;
    if (!utf8_of(op, text, Surrogates::Replace, utf8)) return false;
    const std::string_view s = utf8.view();
    if (static_cast<Py_ssize_t>(s.size()) >= kReleaseGilBytes) return without_gil([&] { trainer->add_text(s); });
    try {
      trainer->add_text(s);
    } catch (...) {
      translate_exception();
      return false;
    }
    return true;
  };
  if (PyUnicode_Check(a[0])) {
    if (!add(a[0])) return nullptr;
  } else {
    PyObject* it = PyObject_GetIter(a[0]);
    if (it == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s: expected a str or an iterable of str, got %s", op, Py_TYPE(a[0])->tp_name);
      return nullptr;
    }
    while (PyObject* item = PyIter_Next(it)) {
      const bool ok = add(item);
      Py_DECREF(item);
      if (!ok) {
        Py_DECREF(it);
        return nullptr;
      }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return nullptr;
  }
  BpeTokenizer* tok = nullptr;
  if (!without_gil([&] { tok = new BpeTokenizer(trainer->train(static_cast<std::size_t>(vocab_size))); })) return nullptr;
  std::unique_ptr<BpeTokenizer> owned(tok);
  PyObject* pattern = PyUnicode_FromString(kael::text::kGpt2Pattern);
  if (pattern == nullptr) return nullptr;
  return make(reinterpret_cast<PyTypeObject*>(cls), std::move(*owned), pattern);
}

// ---------------------------------------------------------------- encoding

PyObject* m_encode(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.encode";
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"text", "allowed_special", "disallowed_special"}, 1, 1, a)) return nullptr;
  SpecialPolicy policy;
  if (!policy_of(op, a[1], a[2], *tok, policy)) return nullptr;
  TextArg arg;
  if (!text_of(op, a[0], policy, arg)) return nullptr;
  std::size_t which = 0;
  if (!policy.disallowed.empty() && find_disallowed(arg.search_view(), policy, which) != std::string_view::npos) {
    raise_disallowed(policy.disallowed[which]);
    return nullptr;
  }
  const std::string_view text = arg.encoded.view();
  std::vector<Rank> ids;
  bool ok = true;
  if (static_cast<Py_ssize_t>(text.size()) >= kReleaseGilBytes) {
    ok = without_gil([&] { ids = tok->encode(text, policy.allowed); });
  } else {
    try {
      ids = tok->encode(text, policy.allowed);
    } catch (...) {
      translate_exception();
      ok = false;
    }
  }
  return ok ? id_list(ids) : nullptr;
}

PyObject* m_encode_ordinary(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.encode_ordinary";
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"text"}, 1, 1, a)) return nullptr;
  OwnedUtf8 text;
  if (!utf8_of(op, a[0], Surrogates::Replace, text)) return nullptr;
  std::vector<Rank> ids;
  const bool ok = without_gil([&] { ids = tok->encode_ordinary(text.view()); });
  return ok ? id_list(ids) : nullptr;
}

// pretokenize: the pieces GPT-2's pattern cuts text into (no special-token handling).
PyObject* m_pretokenize(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.pretokenize";
  if (tokenizer_of(self) == nullptr) return nullptr;
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"text"}, 1, 1, a)) return nullptr;
  OwnedUtf8 utf8;
  if (!utf8_of(op, a[0], Surrogates::Replace, utf8)) return nullptr;
  const std::string_view text = utf8.view();
  PyObject* out = PyList_New(0);
  for (std::size_t pos = 0; out != nullptr && pos < text.size();) {
    const std::size_t end = kael::text::gpt2_piece_end(text, pos);
    PyObject* piece = PyUnicode_DecodeUTF8(text.data() + pos, static_cast<Py_ssize_t>(end - pos), "strict");
    if (piece == nullptr || PyList_Append(out, piece) < 0) Py_CLEAR(out);
    Py_XDECREF(piece);
    pos = end;
  }
  return out;
}

// encode_batch: every text is encoded on kael threads without the GIL, each text by one thread.
PyObject* m_encode_batch(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.encode_batch";
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"texts", "num_threads", "allowed_special", "disallowed_special"}, 2, 1, a))
    return nullptr;
  std::int64_t threads = kael::get_num_threads();
  if (a[1] != nullptr && a[1] != Py_None) {
    if (PyBool_Check(a[1]) || !PyLong_Check(a[1])) {
      PyErr_Format(PyExc_TypeError, "%s: num_threads must be an int or None, got %s", op, Py_TYPE(a[1])->tp_name);
      return nullptr;
    }
    if (!id_of(op, a[1], threads)) return nullptr;
    if (threads < 1 || threads > 1024) {
      PyErr_Format(PyExc_ValueError, "%s: num_threads must be in 1..1024, got %lld", op, static_cast<long long>(threads));
      return nullptr;
    }
  }
  SpecialPolicy policy;
  if (!policy_of(op, a[2], a[3], *tok, policy)) return nullptr;
  if (PyUnicode_Check(a[0])) {
    PyErr_Format(PyExc_TypeError, "%s: expected a list of str, got a str (use encode)", op);
    return nullptr;
  }
  PyObject* seq = PySequence_Fast(a[0], "texts");
  if (seq == nullptr) return nullptr;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  // Each text holds its own reference: another thread may change the list while the GIL is released.
  std::vector<TextArg> texts(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    const Held held(item);
    if (!text_of(op, item, policy, texts[static_cast<std::size_t>(i)])) {
      Py_DECREF(seq);
      return nullptr;
    }
  }
  Py_DECREF(seq);
  std::vector<std::vector<Rank>> results(texts.size());
  std::vector<std::size_t> disallowed_at(texts.size(), std::string_view::npos);
  std::vector<std::size_t> disallowed_which(texts.size(), 0);
  const bool ok = without_gil([&] {
    std::atomic<std::size_t> next{0};
    std::exception_ptr error;
    std::atomic<bool> failed{false};
    auto work = [&] {
      try {
        for (std::size_t i = next++; i < texts.size() && !failed; i = next++) {
          if (!policy.disallowed.empty()) {
            disallowed_at[i] = find_disallowed(texts[i].search_view(), policy, disallowed_which[i]);
            if (disallowed_at[i] != std::string_view::npos) continue;
          }
          results[i] = tok->encode(texts[i].encoded.view(), policy.allowed);
        }
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    };
    const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(threads), texts.size());
    std::vector<std::thread> pool;
    try {
      for (std::size_t t = 1; t < workers; ++t) pool.emplace_back(work);
    } catch (const std::system_error&) {
      // No more threads to be had: the ones started and this one share the texts.
    }
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
  });
  if (!ok) return nullptr;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (disallowed_at[i] != std::string_view::npos) {
      raise_disallowed(policy.disallowed[disallowed_which[i]]);
      return nullptr;
    }
  }
  PyObject* out = PyList_New(static_cast<Py_ssize_t>(results.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < results.size(); ++i) {
    PyObject* l = id_list(results[i]);
    if (l == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), l);
  }
  return out;
}

// ---------------------------------------------------------------- decoding and lookups

bool decoded_bytes(const char* op, PyObject* self, PyObject* ids_arg, std::string& out) {
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return false;
  std::vector<std::int64_t> ids;
  if (!ids_of(op, ids_arg, ids)) return false;
  try {
    out = tok->decode_bytes(ids, op);
  } catch (...) {
    translate_exception();
    return false;
  }
  return true;
}

PyObject* m_decode_bytes(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.decode_bytes";
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"ids"}, 1, 1, a)) return nullptr;
  std::string bytes;
  if (!decoded_bytes(op, self, a[0], bytes)) return nullptr;
  return PyBytes_FromStringAndSize(bytes.data(), static_cast<Py_ssize_t>(bytes.size()));
}

// decode: the bytes read as UTF-8 with Python's error handler (tiktoken's errors="replace").
PyObject* m_decode(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const char* op = "BpeTokenizer.decode";
  std::vector<PyObject*> a;
  if (!parse_args(op, args, nargs, kwnames, {"ids", "errors"}, 2, 1, a)) return nullptr;
  if (a[1] != nullptr && !PyUnicode_Check(a[1])) {
    PyErr_Format(PyExc_TypeError, "%s: errors must be a str, got %s", op, Py_TYPE(a[1])->tp_name);
    return nullptr;
  }
  std::string bytes;
  if (!decoded_bytes(op, self, a[0], bytes)) return nullptr;
  // The handler's name is read after the ids (whose reading runs Python code), as tiktoken's
  // bytes.decode(errors=...) does; a name with a NUL is refused, as bytes.decode does.
  OwnedUtf8 errors;
  if (a[1] != nullptr) {
    if (!utf8_of(op, a[1], Surrogates::Strict, errors)) return nullptr;
    if (errors.view().find('\0') != std::string_view::npos) {
      PyErr_Format(PyExc_ValueError, "%s: errors holds an embedded null character", op);
      return nullptr;
    }
  }
  // A str's UTF-8 ends in a NUL, which PyUnicode_DecodeUTF8 reads the name up to.
  return PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()),
                              errors.holds() ? errors.view().data() : "replace");
}

PyObject* m_id_to_token(PyObject* self, PyObject* id_arg) {
  const char* op = "BpeTokenizer.id_to_token";
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  std::int64_t id = 0;
  if (!id_of(op, id_arg, id)) return nullptr;
  try {
    const std::string& b = tok->token_bytes(id, op);
    return PyBytes_FromStringAndSize(b.data(), static_cast<Py_ssize_t>(b.size()));
  } catch (...) {
    translate_exception();
    return nullptr;
  }
}

PyObject* m_token_to_id(PyObject* self, PyObject* token) {
  const char* op = "BpeTokenizer.token_to_id";
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  // A str is its UTF-8, lone surrogates raising UnicodeEncodeError (tiktoken's encode_single_token).
  OwnedUtf8 bytes;
  if (PyBytes_Check(token)) {
    bytes = OwnedUtf8::of_bytes(token);
  } else if (PyUnicode_Check(token)) {
    if (!utf8_of(op, token, Surrogates::Strict, bytes)) return nullptr;
  } else {
    PyErr_Format(PyExc_TypeError, "%s: expected bytes or str, got %s", op, Py_TYPE(token)->tp_name);
    return nullptr;
  }
  const std::int64_t id = tok->token_id(bytes.view());
  if (id < 0) {
    PyObject* msg = PyUnicode_FromFormat("%s: %R is not a token of this vocabulary", op, token);
    if (msg != nullptr) {
      PyErr_SetObject(PyExc_KeyError, msg);
      Py_DECREF(msg);
    }
    return nullptr;
  }
  return PyLong_FromLongLong(id);
}

PyObject* get_special_tokens(PyObject* self, void*);

// save(path): the ranks in tiktoken's format at path, the special tokens beside them (Note [Saved
// special tokens]).
PyObject* m_save(PyObject* self, PyObject* path_arg) {
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  PyObject* side = specials_path(path_arg);
  if (side == nullptr) return nullptr;
  std::string json_text;
  PyObject* specials = get_special_tokens(self, nullptr);
  PyObject* json = specials != nullptr ? PyImport_ImportModule("json") : nullptr;
  PyObject* dumped = json != nullptr ? PyObject_CallMethod(json, "dumps", "O", specials) : nullptr;
  Py_XDECREF(json);
  Py_XDECREF(specials);
  if (dumped != nullptr) {
    OwnedUtf8 utf8;  // json.dumps writes ASCII
    if (utf8_of("BpeTokenizer.save", dumped, Surrogates::Strict, utf8)) json_text = std::string(utf8.view()) + "\n";
    Py_DECREF(dumped);
  }
  const bool ok = !PyErr_Occurred() && write_file(path_arg, tok->to_tiktoken()) && write_file(side, json_text);
  Py_DECREF(side);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

Py_ssize_t bpe_len(PyObject* self) {
  const BpeTokenizer* tok = tokenizer_of(self);
  return tok == nullptr ? -1 : static_cast<Py_ssize_t>(tok->vocab_size());
}

PyObject* get_vocab_size(PyObject* self, void*) {
  const BpeTokenizer* tok = tokenizer_of(self);
  return tok == nullptr ? nullptr : PyLong_FromSize_t(tok->vocab_size());
}

PyObject* get_special_tokens(PyObject* self, void*) {
  const BpeTokenizer* tok = tokenizer_of(self);
  if (tok == nullptr) return nullptr;
  PyObject* out = PyDict_New();
  if (out == nullptr) return nullptr;
  for (const auto& [text, id] : tok->specials()) {
    PyObject* k = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict");
    PyObject* v = PyLong_FromUnsignedLong(id);
    if (k == nullptr || v == nullptr || PyDict_SetItem(out, k, v) < 0) {
      Py_XDECREF(k);
      Py_XDECREF(v);
      Py_DECREF(out);
      return nullptr;
    }
    Py_DECREF(k);
    Py_DECREF(v);
  }
  return out;
}

PyObject* get_pattern(PyObject* self, void*) {
  if (tokenizer_of(self) == nullptr) return nullptr;
  PyObject* p = reinterpret_cast<PyBpe*>(self)->pattern;
  Py_INCREF(p);
  return p;
}

PyObject* get_unicode_version(PyObject*, void*) { return PyUnicode_FromString(kael::text::unicode_version()); }

PyObject* bpe_repr(PyObject* self) {
  const BpeTokenizer* tok = reinterpret_cast<PyBpe*>(self)->tok;
  if (tok == nullptr) return PyUnicode_FromString("<BpeTokenizer (not initialised)>");
  return PyUnicode_FromFormat("<BpeTokenizer vocab_size=%zu special_tokens=%zu>", tok->vocab_size(),
                              tok->specials().size());
}

PyMethodDef bpe_methods[] = {
    {"from_tiktoken", KAEL_FASTCALL(m_from_tiktoken), METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_tiktoken($type, path, special_tokens=None, pattern=None)\n--\n\n"
     "Loads tiktoken's rank file (one 'base64-token rank' per line). special_tokens {str: id}; None means those that "
     "save() wrote beside the file (path + '.special_tokens.json'), else GPT-2's '<|endoftext|>': 50256 for a file "
     "that reaches that id and leaves it free (GPT-2's), the id after the largest rank for a smaller one; pass {} or "
     "your own for other vocabularies. pattern: None or GPT-2's pre-tokenisation pattern."},
    {"from_vocab_merges", KAEL_FASTCALL(m_from_vocab_merges), METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "from_vocab_merges($type, vocab_json, merges_txt)\n--\n\n"
     "Loads GPT-2's encoder.json / vocab.json and vocab.bpe / merges.txt; vocabulary entries that are neither a "
     "byte nor a merge become special tokens."},
    {"train", KAEL_FASTCALL(m_train), METH_FASTCALL | METH_KEYWORDS | METH_CLASS,
     "train($type, text_or_iterator, vocab_size, special_tokens=None)\n--\n\n"
     "Learns byte-level BPE merges from a str or an iterable of str until there are vocab_size tokens (256 bytes, "
     "the merges, then the special tokens, a sequence of str)."},
    {"encode", KAEL_FASTCALL(m_encode), METH_FASTCALL | METH_KEYWORDS,
     "encode($self, text, *, allowed_special=(), disallowed_special='all')\n--\n\n"
     "Token ids of text, with tiktoken's special-token semantics."},
    {"encode_ordinary", KAEL_FASTCALL(m_encode_ordinary), METH_FASTCALL | METH_KEYWORDS,
     "encode_ordinary($self, text)\n--\n\nToken ids of text, special tokens' texts encoded as ordinary text."},
    {"pretokenize", KAEL_FASTCALL(m_pretokenize), METH_FASTCALL | METH_KEYWORDS,
     "pretokenize($self, text)\n--\n\nThe pieces GPT-2's pre-tokenisation pattern cuts text into."},
    {"encode_batch", KAEL_FASTCALL(m_encode_batch), METH_FASTCALL | METH_KEYWORDS,
     "encode_batch($self, texts, num_threads=None, *, allowed_special=(), disallowed_special='all')\n--\n\n"
     "encode() of each text, in parallel on num_threads threads (default: kael.get_num_threads()) without the GIL."},
    {"decode", KAEL_FASTCALL(m_decode), METH_FASTCALL | METH_KEYWORDS,
     "decode($self, ids, errors='replace')\n--\n\nThe text of token ids; invalid UTF-8 is handled by the errors "
     "handler of bytes.decode (replaced by U+FFFD, as tiktoken does)."},
    {"decode_bytes", KAEL_FASTCALL(m_decode_bytes), METH_FASTCALL | METH_KEYWORDS,
     "decode_bytes($self, ids)\n--\n\nThe bytes of token ids."},
    {"id_to_token", m_id_to_token, METH_O, "id_to_token($self, id, /)\n--\n\nThe bytes of one token id."},
    {"token_to_id", m_token_to_id, METH_O,
     "token_to_id($self, token, /)\n--\n\nThe id of a token's bytes (or a special token's str); KeyError if none."},
    {"save", m_save, METH_O,
     "save($self, path, /)\n--\n\nWrites the ranks in tiktoken's format to path (tiktoken's load_tiktoken_bpe reads "
     "it) and the special tokens beside them, as a JSON object {text: id} in path + '.special_tokens.json'; "
     "from_tiktoken(path) loads both back."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef bpe_getset[] = {
    {"vocab_size", get_vocab_size, nullptr, "One more than the largest token id.", nullptr},
    {"special_tokens", get_special_tokens, nullptr, "The special tokens: {text: id}.", nullptr},
    {"pattern", get_pattern, nullptr, "The pre-tokenisation pattern (GPT-2's).", nullptr},
    {"unicode_version", get_unicode_version, nullptr, "The Unicode version of the pre-tokeniser's tables.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PySequenceMethods bpe_sequence = {
    .sq_length = bpe_len,
};

PyTypeObject BpeTokenizerType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael.BpeTokenizer",
    .tp_basicsize = sizeof(PyBpe),
    .tp_dealloc = bpe_dealloc,
    .tp_repr = bpe_repr,
    .tp_as_sequence = &bpe_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "BpeTokenizer(mergeable_ranks, special_tokens=None, pattern=None)\n--\n\n"
              "Byte-level BPE as GPT-2's (tiktoken's): mergeable_ranks {bytes: rank}, special_tokens {str: id}.",
    .tp_methods = bpe_methods,
    .tp_getset = bpe_getset,
    .tp_init = bpe_init,
    .tp_new = bpe_new,
};

}  // namespace

int kael_init_bpe(PyObject* module) {
  if (PyType_Ready(&BpeTokenizerType) < 0) return -1;
  Py_INCREF(&BpeTokenizerType);
  if (PyModule_AddObject(module, "BpeTokenizer", reinterpret_cast<PyObject*>(&BpeTokenizerType)) < 0) {
    Py_DECREF(&BpeTokenizerType);
    return -1;
  }
  return 0;
}

}  // namespace kael::python
