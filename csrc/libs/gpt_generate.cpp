// The binding of kael_gpt's generation (Note [GPT] and Note [Decoder] in kael/gpt/gpt.h):
// _gpt_generate, which kael.GPT.generate calls, and _GptDecoder, the Decoder's step API for a
// server that batches requests as they come.
//
// Note [Generate's inputs]
// Every argument is read, checked and copied before any work (prompts, stop tokens, settings),
// so a later change to them (by on_token, by another thread while the loop runs without the
// GIL) changes nothing; the Decoder holds its own pinned views of the parameters' memory (Note
// [Concurrency] in kael/core/concurrency.h). The loop runs without the GIL; on_token runs with
// it, between steps. An exception raised by on_token reaches the caller as it is (the same
// object).
#include <Python.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "guard.h"
#include "kael/autograd/autograd.h"
#include "kael/gpt/gpt.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/empty.h"
#include "kael/ops/to.h"
#include "kael/runtime/generator.h"
#include "kael/runtime/philox.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

using i64 = std::int64_t;

// A Python int that is not a bool, as an int64; false with a TypeError (not an int) or a
// ValueError (out of range) set.
bool int_of(const char* fn, const char* what, PyObject* o, i64& out) {
  if (!PyLong_Check(o) || PyBool_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be an int, got %s", fn, what, Py_TYPE(o)->tp_name);
    return false;
  }
  int overflow = 0;
  out = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow != 0) {
    PyErr_Format(PyExc_ValueError, "%s: %s %R is out of range", fn, what, o);
    return false;
  }
  return !(out == -1 && PyErr_Occurred());
}

// A real number (int or float, not bool) as a double; false with a TypeError set.
bool real_of(const char* fn, const char* what, PyObject* o, double& out) {
  if (PyBool_Check(o) || !(PyFloat_Check(o) || PyLong_Check(o))) {
    PyErr_Format(PyExc_TypeError, "%s: %s must be a number, got %s", fn, what, Py_TYPE(o)->tp_name);
    return false;
  }
  out = PyFloat_AsDouble(o);
  return !(out == -1.0 && PyErr_Occurred());
}

// The config tuple (vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias,
// layer_norm_epsilon); checked by Config::validate later.
bool read_config(const char* fn, PyObject* obj, gpt::Config& config) {
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 8) {
    PyErr_Format(PyExc_TypeError,
                 "%s: config must be a tuple (vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias, "
                 "layer_norm_epsilon), got %R",
                 fn, obj);
    return false;
  }
  i64* sizes[] = {&config.vocab_size, &config.block_size, &config.n_layer, &config.n_head, &config.n_embd};
  const char* names[] = {"vocab_size", "block_size", "n_layer", "n_head", "n_embd"};
  for (int i = 0; i < 5; ++i)
    if (!int_of(fn, names[i], PyTuple_GET_ITEM(obj, i), *sizes[i])) return false;
  if (!real_of(fn, "dropout", PyTuple_GET_ITEM(obj, 5), config.dropout)) return false;
  const int bias = PyObject_IsTrue(PyTuple_GET_ITEM(obj, 6));
  if (bias < 0) return false;
  config.bias = bias != 0;
  return real_of(fn, "layer_norm_epsilon", PyTuple_GET_ITEM(obj, 7), config.layer_norm_epsilon);
}

// The parameters: a list or tuple of Tensors (held: the Tensor handles own their impls).
bool read_params(const char* fn, PyObject* obj, std::vector<Tensor>& out) {
  if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: params must be a list of Tensors, got %s", fn, Py_TYPE(obj)->tp_name);
    return false;
  }
  PyObject* items = PySequence_Tuple(obj);  // a snapshot: nothing below runs Python code, but be plain
  if (items == nullptr) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); ++i) {
    PyObject* p = PyTuple_GET_ITEM(items, i);
    if (!is_tensor(p)) {
      PyErr_Format(PyExc_TypeError, "%s: params[%zd] must be a Tensor, got %s", fn, i, Py_TYPE(p)->tp_name);
      Py_DECREF(items);
      return false;
    }
    out.push_back(tensor_of(p));
  }
  Py_DECREF(items);
  return true;
}

// A sequence of token ids (any iterable of ints), copied.
bool read_ids(const char* fn, const char* what, PyObject* obj, std::vector<i64>& out) {
  PyObject* items = PySequence_Tuple(obj);  // the snapshot later code walks (the original may change)
  if (items == nullptr) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s: %s must be a list of ints, got %s", fn, what, Py_TYPE(obj)->tp_name);
    }
    return false;
  }
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(items); ++i) {
    i64 v = 0;
    ok = int_of(fn, what, PyTuple_GET_ITEM(items, i), v);
    if (ok) out.push_back(v);
  }
  Py_DECREF(items);
  return ok;
}

bool check_ids(const char* fn, const char* what, const std::vector<i64>& ids, i64 vocab) {
  for (i64 t : ids) {
    if (t < 0 || t >= vocab) {
      PyErr_Format(PyExc_ValueError, "%s: %s has token id %lld, outside the vocabulary [0, %lld)", fn, what,
                   static_cast<long long>(t), static_cast<long long>(vocab));
      return false;
    }
  }
  return true;
}

// Sampling::validate's ValueError, as a Python one.
bool validate_sampling(const gpt::Sampling& s) {
  PyObject* ok = guarded([&] { s.validate(); });
  if (ok == nullptr) return false;
  Py_DECREF(ok);
  return true;
}

// temperature, top_k, top_p (checked), then seed: None draws one from kael's default generator
// (so kael.manual_seed makes it reproducible), the last thing read, after every check.
bool read_sampling(const char* fn, PyObject* temperature, PyObject* top_k, PyObject* top_p, PyObject* seed,
                   gpt::Sampling& s) {
  if (!real_of(fn, "temperature", temperature, s.temperature)) return false;
  if (top_k != Py_None) {
    i64 k = 0;
    if (!int_of(fn, "top_k", top_k, k)) return false;
    s.top_k = k;
  }
  if (top_p != Py_None) {
    double p = 0.0;
    if (!real_of(fn, "top_p", top_p, p)) return false;
    s.top_p = p;
  }
  if (seed != Py_None && (!PyLong_Check(seed) || PyBool_Check(seed))) {
    PyErr_Format(PyExc_TypeError, "%s: seed must be an int or None, got %s", fn, Py_TYPE(seed)->tp_name);
    return false;
  }
  if (!validate_sampling(s)) return false;
  if (seed == Py_None) {
    const random::Block bits = random::block(default_generator().next_stream(), 0);
    s.seed = random::u64(bits[0], bits[1]);
    return true;
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(seed);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: seed must be in [0, 2**64), got %R", fn, seed);
    return false;
  }
  s.seed = v;
  return true;
}

bool read_stop_tokens(const char* fn, PyObject* obj, i64 vocab, std::vector<i64>& out) {
  if (obj == Py_None) return true;
  return read_ids(fn, "stop_tokens", obj, out) && check_ids(fn, "stop_tokens", out, vocab);
}


// _gpt_generate(config, params, prompts, max_new_tokens, temperature, top_k, top_p, seed,
// on_token, stop_tokens, /)
// The prompts of generate: a (B, T) int64 tensor (every row of T tokens) or a list of non-empty
// lists of ints; false with a Python exception set.
bool read_prompts(const char* fn, PyObject* obj, std::vector<std::vector<i64>>& prompts) {
  if (is_tensor(obj)) {
    const Tensor& t = tensor_of(obj);
    if (t.dtype() != ScalarType::Int64) {
      PyErr_Format(PyExc_TypeError, "%s: prompts must be an int64 tensor, got %s", fn, dtype_name(t.dtype()));
      return false;
    }
    if (t.dim() != 2 || t.size(0) < 1 || t.size(1) < 1) {
      PyErr_Format(PyExc_ValueError, "%s: prompts must be a non-empty (batch, time) tensor, got shape %s", fn,
                   t.dim() == 2 ? (std::to_string(t.size(0)) + "x" + std::to_string(t.size(1))).c_str()
                                : (std::to_string(t.dim()) + "-d").c_str());
      return false;
    }
    PyObject* ok = guarded([&] {
      const Tensor c = kael::contiguous(t.device().is_cpu() ? t : kael::to(t, kCPU));
      const i64* p = c.data<i64>();
      const i64 b = c.size(0), n = c.size(1);
      for (i64 r = 0; r < b; ++r) prompts.emplace_back(p + r * n, p + (r + 1) * n);
    });
    if (ok == nullptr) return false;
    Py_DECREF(ok);
  } else {
    if (!PyList_Check(obj) && !PyTuple_Check(obj)) {
      PyErr_Format(PyExc_TypeError, "%s: prompts must be an int64 tensor or a list of lists of ints, got %s", fn,
                   Py_TYPE(obj)->tp_name);
      return false;
    }
    PyObject* rows = PySequence_Tuple(obj);
    if (rows == nullptr) return false;
    bool ok = PyTuple_GET_SIZE(rows) > 0;
    if (!ok) PyErr_Format(PyExc_ValueError, "%s: prompts must have at least one row, got an empty list", fn);
    for (Py_ssize_t r = 0; ok && r < PyTuple_GET_SIZE(rows); ++r) {
      PyObject* row = PyTuple_GET_ITEM(rows, r);
      if (!PyList_Check(row) && !PyTuple_Check(row)) {
        PyErr_Format(PyExc_TypeError, "%s: prompts[%zd] must be a list of ints, got %s", fn, r, Py_TYPE(row)->tp_name);
        ok = false;
        break;
      }
      prompts.emplace_back();
      ok = read_ids(fn, "a prompt's token", row, prompts.back());
      if (ok && prompts.back().empty()) {
        PyErr_Format(PyExc_ValueError, "%s: prompts[%zd] is empty; every prompt needs at least one token", fn, r);
        ok = false;
      }
    }
    Py_DECREF(rows);
    if (!ok) return false;
  }
  return true;
}

// generate's result: with tensor prompts, a (B, T + steps) int64 tensor of the prompts and what
// followed (a row that stopped early padded with its stop token); with lists, the generated ids
// of each row as a list of lists. A new reference, or nullptr with a Python exception set.
PyObject* generation_result(bool tensor_mode, const std::vector<std::vector<i64>>& prompts,
                            const std::vector<std::vector<i64>>& generated, const std::vector<i64>& stopped_with,
                            i64 steps) {
  const i64 batch = static_cast<i64>(prompts.size());
  if (tensor_mode) {
    const i64 t = static_cast<i64>(prompts[0].size());
    const i64 shape[] = {batch, t + steps};
    Tensor out = kael::empty(shape, ScalarType::Int64);
    i64* o = out.data<i64>();
    for (i64 r = 0; r < batch; ++r) {
      const auto& p = prompts[static_cast<std::size_t>(r)];
      const auto& g = generated[static_cast<std::size_t>(r)];
      i64* row = o + r * (t + steps);
      std::copy(p.begin(), p.end(), row);
      for (i64 j = 0; j < steps; ++j)
        row[t + j] = j < static_cast<i64>(g.size()) ? g[static_cast<std::size_t>(j)]
                                                     : stopped_with[static_cast<std::size_t>(r)];
    }
    return wrap(std::move(out));
  }
  PyObject* list = PyList_New(batch);
  if (list == nullptr) return nullptr;
  for (i64 r = 0; r < batch; ++r) {
    const auto& g = generated[static_cast<std::size_t>(r)];
    PyObject* row = PyList_New(static_cast<Py_ssize_t>(g.size()));
    if (row == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    for (std::size_t j = 0; j < g.size(); ++j) {
      PyObject* v = PyLong_FromLongLong(g[j]);
      if (v == nullptr) {
        Py_DECREF(row);
        Py_DECREF(list);
        return nullptr;
      }
      PyList_SET_ITEM(row, static_cast<Py_ssize_t>(j), v);
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(r), row);
  }
  return list;
}

PyObject* py_gpt_generate(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  constexpr const char* fn = "generate";
  if (nargs != 10) {
    PyErr_Format(PyExc_TypeError,
                 "_gpt_generate() takes 10 arguments (config, params, prompts, max_new_tokens, temperature, top_k, "
                 "top_p, seed, on_token, stop_tokens), got %zd",
                 nargs);
    return nullptr;
  }
  gpt::Config config;
  if (!read_config(fn, args[0], config)) return nullptr;
  std::vector<Tensor> params;
  if (!read_params(fn, args[1], params)) return nullptr;
  // The prompts: a (B, T) int64 tensor, or a list of lists of ints.
  const bool tensor_mode = is_tensor(args[2]);
  std::vector<std::vector<i64>> prompts;
  if (!read_prompts(fn, args[2], prompts)) return nullptr;
  i64 max_new_tokens = 0;
  if (!int_of(fn, "max_new_tokens", args[3], max_new_tokens)) return nullptr;
  if (max_new_tokens < 0) {
    PyErr_Format(PyExc_ValueError, "%s: max_new_tokens must be non-negative, got %lld", fn,
                 static_cast<long long>(max_new_tokens));
    return nullptr;
  }
  PyObject* on_token = args[8];
  if (on_token != Py_None && !PyCallable_Check(on_token)) {
    PyErr_Format(PyExc_TypeError, "%s: on_token must be callable or None, got %s", fn, Py_TYPE(on_token)->tp_name);
    return nullptr;
  }
  std::vector<i64> stop_tokens;
  if (!read_stop_tokens(fn, args[9], config.vocab_size, stop_tokens)) return nullptr;
  for (std::size_t r = 0; r < prompts.size(); ++r)
    if (!check_ids(fn, ("prompt " + std::to_string(r)).c_str(), prompts[r], config.vocab_size)) return nullptr;
  gpt::Weights weights;  // checked here, before seed=None draws
  {
    PyObject* ok = guarded([&] { weights = gpt::Weights::from_list(config, params); });
    if (ok == nullptr) return nullptr;
    Py_DECREF(ok);
  }
  // Sampling last: seed=None draws from the default generator once every check has passed.
  gpt::Sampling sampling;
  if (!read_sampling(fn, args[4], args[5], args[6], args[7], sampling)) return nullptr;

  Py_INCREF(on_token);  // held across the loop, whatever the callback does to its own references
  PyObject* result = guarded([&]() -> PyObject* {
    autograd::AutoGradMode no_grad(false);
    const i64 batch = static_cast<i64>(prompts.size());
    gpt::Decoder decoder(config, weights, batch);  // destroyed with the GIL held (its pins)
    for (i64 r = 0; r < batch; ++r) {
      gpt::Sampling row = sampling;
      row.stream = static_cast<std::uint64_t>(r);
      decoder.add(prompts[static_cast<std::size_t>(r)], row, stop_tokens, max_new_tokens);
    }
    std::vector<std::vector<i64>> generated(static_cast<std::size_t>(batch));
    std::vector<i64> stopped_with(static_cast<std::size_t>(batch), -1);
    i64 steps = 0;
    while (max_new_tokens > 0 && decoder.active() > 0) {
      std::vector<gpt::Decoder::Event> events;
      {
        GilRelease release(true);
        events = decoder.step();
      }
      ++steps;
      std::vector<i64> step_tokens(static_cast<std::size_t>(batch), -1);
      for (const auto& e : events) {
        if (e.token < 0) continue;
        generated[static_cast<std::size_t>(e.slot)].push_back(e.token);
        step_tokens[static_cast<std::size_t>(e.slot)] = e.token;
        if (e.finished && std::find(stop_tokens.begin(), stop_tokens.end(), e.token) != stop_tokens.end())
          stopped_with[static_cast<std::size_t>(e.slot)] = e.token;
      }
      if (on_token != Py_None) {
        const i64 shape[] = {batch};
        Tensor tokens = kael::empty(shape, ScalarType::Int64);
        std::copy(step_tokens.begin(), step_tokens.end(), tokens.data<i64>());
        PyObject* arg = wrap(std::move(tokens));
        if (arg == nullptr) return nullptr;
        PyObject* answer = PyObject_CallOneArg(on_token, arg);
        Py_DECREF(arg);
        if (answer == nullptr) return nullptr;  // the callback's exception, as it is
        const bool stop = answer == Py_False;
        Py_DECREF(answer);
        if (stop) break;
      }
    }
    return generation_result(tensor_mode, prompts, generated, stopped_with, steps);
  });
  Py_DECREF(on_token);
  return result;
}

// ---------------------------------------------------------------- _GptDecoder

struct PyDecoder {
  PyObject_HEAD
  gpt::Decoder* decoder;
  bool busy;  // a step runs (without the GIL): the other methods refuse meanwhile
};

bool check_idle(PyDecoder* self, const char* method) {
  if (self->decoder == nullptr) {
    PyErr_Format(PyExc_RuntimeError, "_GptDecoder.%s: the decoder is not initialised", method);
    return false;
  }
  if (self->busy) {
    PyErr_Format(PyExc_RuntimeError, "_GptDecoder.%s: a step is running in another thread", method);
    return false;
  }
  return true;
}

int decoder_init(PyObject* obj, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<PyDecoder*>(obj);
  static const char* keywords[] = {"config", "params", "max_batch", nullptr};
  PyObject *config_obj = nullptr, *params_obj = nullptr, *max_batch_obj = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:_GptDecoder", const_cast<char**>(keywords), &config_obj,
                                   &params_obj, &max_batch_obj))
    return -1;
  constexpr const char* fn = "_GptDecoder";
  gpt::Config config;
  std::vector<Tensor> params;
  i64 max_batch = 0;
  if (!read_config(fn, config_obj, config) || !read_params(fn, params_obj, params) ||
      !int_of(fn, "max_batch", max_batch_obj, max_batch))
    return -1;
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError, "_GptDecoder: a step is running in another thread");
    return -1;
  }
  return guarded([&]() -> int {
    autograd::AutoGradMode no_grad(false);
    auto decoder = std::make_unique<gpt::Decoder>(config, gpt::Weights::from_list(config, params), max_batch);
    delete self->decoder;
    self->decoder = decoder.release();
    return 0;
  });
}

PyObject* decoder_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* obj = type->tp_alloc(type, 0);
  if (obj != nullptr) {
    reinterpret_cast<PyDecoder*>(obj)->decoder = nullptr;
    reinterpret_cast<PyDecoder*>(obj)->busy = false;
  }
  return obj;
}

void decoder_dealloc(PyObject* obj) {
  delete reinterpret_cast<PyDecoder*>(obj)->decoder;  // with the GIL held (its pins)
  Py_TYPE(obj)->tp_free(obj);
}

// add(prompt, temperature, top_k, top_p, seed, stop_tokens, max_new_tokens, stream=0) -> slot: the
// sequence draws from the Philox stream (seed, stream) (generate's row r uses stream r).
PyObject* decoder_add(PyObject* obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<PyDecoder*>(obj);
  constexpr const char* fn = "_GptDecoder.add";
  if (nargs != 7 && nargs != 8) {
    PyErr_Format(PyExc_TypeError,
                 "%s() takes 7 or 8 arguments (prompt, temperature, top_k, top_p, seed, stop_tokens, max_new_tokens, "
                 "stream=0), got %zd",
                 fn, nargs);
    return nullptr;
  }
  if (!check_idle(self, "add")) return nullptr;
  const i64 vocab = self->decoder->config().vocab_size;
  std::vector<i64> prompt, stop_tokens;
  i64 max_new_tokens = 0;
  gpt::Sampling sampling;
  if (!read_ids(fn, "a prompt's token", args[0], prompt)) return nullptr;
  if (prompt.empty()) {
    PyErr_Format(PyExc_ValueError, "%s: the prompt is empty; it needs at least one token", fn);
    return nullptr;
  }
  if (!check_ids(fn, "the prompt", prompt, vocab) || !read_stop_tokens(fn, args[5], vocab, stop_tokens) ||
      !int_of(fn, "max_new_tokens", args[6], max_new_tokens))
    return nullptr;
  i64 stream = 0;
  if (nargs == 8 && !int_of(fn, "stream", args[7], stream)) return nullptr;
  if (stream < 0) {
    PyErr_Format(PyExc_ValueError, "%s: stream must be non-negative, got %lld", fn, static_cast<long long>(stream));
    return nullptr;
  }
  if (!read_sampling(fn, args[1], args[2], args[3], args[4], sampling)) return nullptr;
  sampling.stream = static_cast<std::uint64_t>(stream);
  return guarded([&]() -> PyObject* {
    return PyLong_FromLongLong(self->decoder->add(std::move(prompt), sampling, std::move(stop_tokens), max_new_tokens));
  });
}

PyObject* decoder_remove(PyObject* obj, PyObject* arg) {
  auto* self = reinterpret_cast<PyDecoder*>(obj);
  if (!check_idle(self, "remove")) return nullptr;
  i64 slot = 0;
  if (!int_of("_GptDecoder.remove", "slot", arg, slot)) return nullptr;
  return guarded([&] { self->decoder->remove(slot); });
}

// step(max_rows=None) -> [(slot, token, finished), ...], the step without the GIL.
PyObject* decoder_step(PyObject* obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<PyDecoder*>(obj);
  if (nargs > 1) {
    PyErr_Format(PyExc_TypeError, "_GptDecoder.step takes at most 1 argument (%zd given)", nargs);
    return nullptr;
  }
  i64 max_rows = std::numeric_limits<i64>::max();
  if (nargs == 1 && args[0] != Py_None && !int_of("_GptDecoder.step", "max_rows", args[0], max_rows)) return nullptr;
  // Checked after the argument's __index__, which may have called into this decoder.
  if (!check_idle(self, "step")) return nullptr;
  self->busy = true;
  std::vector<gpt::Decoder::Event> events;
  PyObject* ok = guarded([&] { events = self->decoder->step(max_rows); }, gil::Released{});
  self->busy = false;
  if (ok == nullptr) return nullptr;
  Py_DECREF(ok);
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(events.size()));
  if (list == nullptr) return nullptr;
  for (std::size_t i = 0; i < events.size(); ++i) {
    PyObject* item = Py_BuildValue("(LLO)", static_cast<long long>(events[i].slot),
                                   static_cast<long long>(events[i].token), events[i].finished ? Py_True : Py_False);
    if (item == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), item);
  }
  return list;
}

PyObject* decoder_active(PyObject* obj, void*) {
  auto* self = reinterpret_cast<PyDecoder*>(obj);
  if (!check_idle(self, "active")) return nullptr;
  return PyLong_FromLongLong(self->decoder->active());
}

PyObject* decoder_max_batch(PyObject* obj, void*) {
  auto* self = reinterpret_cast<PyDecoder*>(obj);
  if (self->decoder == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "_GptDecoder.max_batch: the decoder is not initialised");
    return nullptr;
  }
  return PyLong_FromLongLong(self->decoder->max_batch());
}

PyMethodDef decoder_methods[] = {
    {"add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&decoder_add)), METH_FASTCALL,
     "add(prompt, temperature, top_k, top_p, seed, stop_tokens, max_new_tokens, stream=0, /) -> int\n--\n\nAdds a "
     "sequence; its prompt is prefilled at the next step. Returns its slot."},
    {"remove", &decoder_remove, METH_O, "remove(slot, /)\n--\n\nDrops the sequence of a slot; the slot is free at once."},
    {"step", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&decoder_step)), METH_FASTCALL,
     "step(max_rows=None, /) -> list[tuple[int, int, bool]]\n--\n\nDraws one token for every decoding sequence "
     "and prefills new ones, oldest first, within max_rows rows in all (None: no limit; at least one prefill row): "
     "(slot, token, finished) each (token -1: none). Runs without the GIL."},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef decoder_getset[] = {
    {"active", &decoder_active, nullptr, "The number of sequences in the slots.", nullptr},
    {"max_batch", &decoder_max_batch, nullptr, "The number of slots.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject DecoderType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0).tp_name = "kael._C._GptDecoder",
    .tp_basicsize = sizeof(PyDecoder),
    .tp_dealloc = decoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "_GptDecoder(config, params, max_batch)\n--\n\nThe GPT's KV-cache decoder (Note [Decoder] in "
              "kael/gpt/gpt.h): max_batch slots; add, remove and step, for a server that batches requests.",
    .tp_methods = decoder_methods,
    .tp_getset = decoder_getset,
    .tp_init = decoder_init,
    .tp_new = decoder_new,
};

}  // namespace

void append_gpt_generate_functions(std::vector<PyMethodDef>& out) {
  out.push_back({"_gpt_generate", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&py_gpt_generate)),
                 METH_FASTCALL,
                 "_gpt_generate(config, params, prompts, max_new_tokens, temperature, top_k, top_p, seed, on_token, "
                 "stop_tokens, /)\n--\n\nTokens generated by the GPT with a KV cache (Note [Decoder] in "
                 "kael/gpt/gpt.h): a (B, T + n) int64 tensor for a (B, T) one, a list of the new tokens per row for "
                 "a list of lists."});
}

int kael_init_gpt_generate(PyObject* module) {
  if (PyType_Ready(&DecoderType) < 0) return -1;
  Py_INCREF(&DecoderType);
  if (PyModule_AddObject(module, "_GptDecoder", reinterpret_cast<PyObject*>(&DecoderType)) < 0) {
    Py_DECREF(&DecoderType);
    return -1;
  }
  return 0;
}

}  // namespace kael::python
