// kael.Generator: a Python handle to a kael::Generator (Note [Random streams] in
// kael/runtime/generator.h), and the converter of `Generator?` parameters.
#include <Python.h>

#include <cstring>
#include <new>

#include "arg_parsing.h"
#include "kael/ops/empty.h"
#include "kael/runtime/generator.h"

namespace kael::python {

namespace {

struct PyGenerator {
  PyObject_HEAD
  Generator gen;
};

const Generator& gen_of(PyObject* o) { return reinterpret_cast<PyGenerator*>(o)->gen; }

PyObject* generator_new(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (self == nullptr) return nullptr;
  new (&reinterpret_cast<PyGenerator*>(self)->gen) Generator();
  return self;
}

// Generator(device='cpu'): kael generates on the host, so 'cpu' is the only device.
int generator_init(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* keywords[] = {"device", nullptr};
  const char* device = "cpu";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|s:Generator", const_cast<char**>(keywords), &device)) return -1;
  if (std::strcmp(device, "cpu") != 0) {
    PyErr_Format(PyExc_RuntimeError, "Generator: device '%s' is not supported: kael generates random numbers on the "
                 "host (expected 'cpu')", device);
    return -1;
  }
  return 0;
}

void generator_dealloc(PyObject* self) {
  reinterpret_cast<PyGenerator*>(self)->gen.~Generator();
  Py_TYPE(self)->tp_free(self);
}

// A seed as PyTorch takes it: an int in [-2^63, 2^64); negative ones wrap to uint64.
bool seed_of(PyObject* o, std::uint64_t& out) {
  if (!PyLong_Check(o) || PyBool_Check(o)) {
    PyErr_Format(PyExc_TypeError, "manual_seed: expected an int seed, got %s", Py_TYPE(o)->tp_name);
    return false;
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) return false;
    out = static_cast<std::uint64_t>(v);
    return true;
  }
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (!(u == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
      out = u;
      return true;
    }
    PyErr_Clear();
  }
  PyErr_Format(PyExc_ValueError, "manual_seed: the seed must be in [-2**63, 2**64), got %R", o);
  return false;
}

PyObject* m_manual_seed(PyObject* self, PyObject* seed) {
  std::uint64_t s = 0;
  if (!seed_of(seed, s)) return nullptr;
  gen_of(self).manual_seed(s);
  Py_INCREF(self);
  return self;
}

PyObject* m_seed(PyObject* self, PyObject*) { return PyLong_FromUnsignedLongLong(gen_of(self).seed()); }

PyObject* m_initial_seed(PyObject* self, PyObject*) { return PyLong_FromUnsignedLongLong(gen_of(self).initial_seed()); }

constexpr std::int64_t kStateBytes = 16;

PyObject* m_get_state(PyObject* self, PyObject*) {
  return guarded([&]() -> PyObject* {
    const PhiloxStream s = gen_of(self).get_state();
    const std::int64_t size[] = {kStateBytes};
    Tensor t = kael::empty(size, ScalarType::UInt8, std::nullopt);
    auto* p = t.data<std::uint8_t>();
    for (int i = 0; i < 8; ++i) {
      p[i] = static_cast<std::uint8_t>(s.seed >> (8 * i));
      p[8 + i] = static_cast<std::uint8_t>(s.offset >> (8 * i));
    }
    return wrap(std::move(t));
  });
}

PyObject* m_set_state(PyObject* self, PyObject* state) {
  if (!is_tensor(state)) {
    PyErr_Format(PyExc_TypeError, "set_state: expected a uint8 tensor, but got %s", Py_TYPE(state)->tp_name);
    return nullptr;
  }
  const Tensor& t = tensor_of(state);
  if (t.dtype() != ScalarType::UInt8) {
    PyErr_Format(PyExc_TypeError, "set_state: the RNG state must be a uint8 tensor, got %s", dtype_name(t.dtype()));
    return nullptr;
  }
  if (t.dim() != 1 || t.numel() != kStateBytes || !t.device().is_cpu()) {
    PyErr_Format(PyExc_RuntimeError, "set_state: expected a 1-d CPU state of %d bytes, but got %lld elements",
                 static_cast<int>(kStateBytes), static_cast<long long>(t.numel()));
    return nullptr;
  }
  const auto* base = t.data<std::uint8_t>();
  const std::int64_t stride = t.stride(0);
  PhiloxStream s;
  for (int i = 0; i < 8; ++i) {
    s.seed |= static_cast<std::uint64_t>(base[i * stride]) << (8 * i);
    s.offset |= static_cast<std::uint64_t>(base[(8 + i) * stride]) << (8 * i);
  }
  gen_of(self).set_state(s);
  Py_INCREF(self);
  return self;
}

PyObject* get_device(PyObject*, void*) { return PyUnicode_FromString("cpu"); }

PyMethodDef generator_methods[] = {
    {"manual_seed", m_manual_seed, METH_O,
     "manual_seed($self, seed, /)\n--\n\nSeeds the generator (an int in [-2**63, 2**64)), rewinds its stream and returns "
     "it."},
    {"seed", m_seed, METH_NOARGS, "seed($self, /)\n--\n\nSeeds the generator from a non-deterministic source and returns the seed."},
    {"initial_seed", m_initial_seed, METH_NOARGS, "initial_seed($self, /)\n--\n\nThe seed the generator was last seeded with."},
    {"get_state", m_get_state, METH_NOARGS,
     "get_state($self, /)\n--\n\nThe generator's state as a uint8 tensor of 16 bytes (seed and offset, little-endian)."},
    {"set_state", m_set_state, METH_O,
     "set_state($self, new_state, /)\n--\n\nRestores a state from get_state() and returns the generator."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef generator_getset[] = {
    {"device", get_device, nullptr, "The device the generator's numbers are made for: 'cpu'.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject GeneratorType = {
    .ob_base = PyVarObject_HEAD_INIT(nullptr, 0)
    .tp_name = "kael.Generator",
    .tp_basicsize = sizeof(PyGenerator),
    .tp_dealloc = generator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Generator(device='cpu')\n--\n\nA random stream (Philox4x32-10): pass it as generator= to random ops.",
    .tp_methods = generator_methods,
    .tp_getset = generator_getset,
    .tp_init = generator_init,
    .tp_new = generator_new,
};

}  // namespace

Match conv_generator(PyObject* o, Generator& out) {
  if (!PyObject_TypeCheck(o, &GeneratorType)) return Match::No;
  out = gen_of(o);
  return Match::Yes;
}

int kael_init_generator(PyObject* module) {
  if (PyType_Ready(&GeneratorType) < 0) return -1;
  Py_INCREF(&GeneratorType);
  if (PyModule_AddObject(module, "Generator", reinterpret_cast<PyObject*>(&GeneratorType)) < 0) return -1;
  // The default generator: a Python handle sharing kael::default_generator()'s state.
  PyObject* d = GeneratorType.tp_alloc(&GeneratorType, 0);
  if (d == nullptr) return -1;
  new (&reinterpret_cast<PyGenerator*>(d)->gen) Generator(default_generator());
  if (PyModule_AddObject(module, "default_generator", d) < 0) return -1;
  return 0;
}

}  // namespace kael::python
