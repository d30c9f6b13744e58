// kael.tensor(data, dtype=None, device=None): a new tensor copied from nested sequences,
// Python numbers, or any object with the buffer protocol (NumPy arrays).
//
// Rules: ragged input -> ValueError "nested sequences have inconsistent sizes"; nesting deeper
// than 32 levels -> ValueError (a self-referencing list hits this limit); integers stay int64
// with all 64 bits; any float makes float32 unless dtype is given; bools alone give bool.
#include <cstring>
#include <limits>
#include <vector>

#include "arg_parsing.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/pointwise.h"
#include "kael/ops/clone.h"
#include "kael/ops/empty.h"
#include "kael/ops/to.h"

namespace kael::python {

namespace {

constexpr int kMaxNesting = 32;

enum class Kind { Bool = 0, Int = 1, Float = 2 };

bool is_sequence(PyObject* o) { return PyList_Check(o) || PyTuple_Check(o); }

struct Inference {
  DimVector shape;
  Kind kind = Kind::Bool;
  bool any_leaf = false;
};

Kind leaf_kind(PyObject* o) {
  if (PyBool_Check(o)) return Kind::Bool;
  if (PyLong_Check(o)) return Kind::Int;
  if (PyFloat_Check(o)) return Kind::Float;
  if (is_tensor(o)) {
    const Tensor& t = tensor_of(o);
    KAEL_CHECK_VALUE(t.numel() == 1 && t.dim() == 0, "tensor: only 0-d tensors can be elements of a nested sequence");
    return is_floating(t.dtype()) ? Kind::Float : (t.dtype() == ScalarType::Bool ? Kind::Bool : Kind::Int);
  }
  if (!PySequence_Check(o) && PyIndex_Check(o)) return Kind::Int;  // numpy integers
  if (!PySequence_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) return Kind::Float;
  KAEL_CHECK_TYPE(false, "tensor: could not infer dtype of " << Py_TYPE(o)->tp_name);
  return Kind::Float;
}

// Shape from the first element at each depth; then every element is checked against it.
void infer_shape(PyObject* o, int depth, Inference& inf) {
  KAEL_CHECK_VALUE(depth <= kMaxNesting, "tensor: nested sequences are deeper than " << kMaxNesting << " levels");
  if (!is_sequence(o)) return;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  inf.shape.push_back(n);
  if (n > 0) infer_shape(PySequence_Fast_ITEMS(o)[0], depth + 1, inf);
}

void check(PyObject* o, std::size_t depth, Inference& inf) {
  if (depth == inf.shape.size()) {
    KAEL_CHECK_VALUE(!is_sequence(o), "tensor: nested sequences have inconsistent sizes (a sequence at depth "
                                          << depth << " where a number was expected)");
    const Kind k = leaf_kind(o);
    if (static_cast<int>(k) > static_cast<int>(inf.kind)) inf.kind = k;
    inf.any_leaf = true;
    return;
  }
  KAEL_CHECK_VALUE(is_sequence(o), "tensor: nested sequences have inconsistent sizes (a number at depth "
                                       << depth << " where a sequence of length " << inf.shape[depth]
                                       << " was expected)");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  KAEL_CHECK_VALUE(n == inf.shape[depth], "tensor: nested sequences have inconsistent sizes (length "
                                              << n << " at depth " << depth << ", expected " << inf.shape[depth]
                                              << ")");
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; ++i) check(items[i], depth + 1, inf);
}

template <typename T>
void fill_from(PyObject* o, std::size_t depth, std::size_t ndim, T*& out) {
  if (depth == ndim) {
    if (is_tensor(o)) {
      *out++ = tensor_of(o).item().to<T>();
      return;
    }
    if (PyBool_Check(o)) {
      *out++ = static_cast<T>(o == Py_True);
    } else if (PyLong_Check(o) || (!PyFloat_Check(o) && PyIndex_Check(o))) {
      int overflow = 0;
      PyObject* index = PyNumber_Index(o);
      if (index == nullptr) throw PythonError();
      const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
      Py_DECREF(index);
      KAEL_CHECK(overflow == 0, "tensor: integer value does not fit in int64 (overflow)");
      // As PyTorch: out of range for an integer dtype raises ([-max, max] for unsigned ones)
      if constexpr (std::is_integral_v<T>) {
        *out++ = Scalar(static_cast<std::int64_t>(v)).checked_to<T>("tensor");
      } else {
        *out++ = Scalar(static_cast<std::int64_t>(v)).to<T>();
      }
    } else {
      const double v = PyFloat_AsDouble(o);
      if (v == -1.0 && PyErr_Occurred()) throw PythonError();
      // As PyTorch: NaN or out of range for an integer dtype raises; floats round (1e39 -> inf).
      if constexpr (std::is_integral_v<T>) {
        *out++ = Scalar(v).checked_to<T>("tensor");
      } else {
        *out++ = Scalar(v).to<T>();
      }
    }
    return;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  for (Py_ssize_t i = 0; i < n; ++i) fill_from(items[i], depth + 1, ndim, out);
}

ScalarType kind_dtype(Kind k) {
  switch (k) {
    case Kind::Bool:
      return ScalarType::Bool;
    case Kind::Int:
      return ScalarType::Int64;
    case Kind::Float:
      break;
  }
  return kDefaultFloat;
}

// ---- buffer protocol (NumPy)

struct BufferGuard {
  Py_buffer view{};
  bool held = false;
  ~BufferGuard() {
    if (held) PyBuffer_Release(&view);
  }
};

// The dtype of a buffer: a format of one of kael's dtypes (codegen/enums.py) at its item size
// is copied as is; other integer formats (uint16, uint32, uint64) are converted to int64.
std::optional<ScalarType> buffer_dtype(const Py_buffer& v, bool& integral_other) {
  integral_other = false;
  const char* f = v.format ? v.format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (std::strlen(f) != 1) return std::nullopt;
  const char c = *f == 'l' && v.itemsize == 8 ? 'q' : *f;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    const auto t = static_cast<ScalarType>(i);
    if (detail::kScalarTypeBufferFormat[i][0] == c && v.itemsize == itemsize(t)) return t;
  }
  switch (c) {
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
      integral_other = true;
      return ScalarType::Int64;
    default:
      return std::nullopt;
  }
}

// "bool ('?'), uint8 ('B'), ...": the formats kael reads, for messages.
std::string buffer_formats() {
  std::string s;
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (detail::kScalarTypeBufferFormat[i][0] == '\0') continue;
    if (!s.empty()) s += ", ";
    s += std::string(detail::kScalarTypeNames[i]) + " ('" + detail::kScalarTypeBufferFormat[i] + "')";
  }
  return s + ", and the unsigned integer formats 'H', 'I', 'L', 'Q' (as int64)";
}

template <typename Src>
void copy_buffer_typed(const char* p, const Py_buffer& v, int dim, std::int64_t*& out_i) {
  if (dim == v.ndim) {
    *out_i++ = static_cast<std::int64_t>(*reinterpret_cast<const Src*>(p));
    return;
  }
  for (Py_ssize_t i = 0; i < v.shape[dim]; ++i) copy_buffer_typed<Src>(p + i * v.strides[dim], v, dim + 1, out_i);
}

Tensor from_buffer(PyObject* data) {
  BufferGuard g;
  if (PyObject_GetBuffer(data, &g.view, PyBUF_RECORDS_RO) < 0) throw PythonError();
  g.held = true;
  const Py_buffer& v = g.view;
  bool integral_other = false;
  auto dtype = buffer_dtype(v, integral_other);
  KAEL_CHECK_TYPE(dtype.has_value(), "tensor: unsupported buffer format '" << (v.format ? v.format : "B")
                                                                           << "' (itemsize " << v.itemsize
                                                                           << "); supported: " << buffer_formats());
  DimVector shape;
  for (int i = 0; i < v.ndim; ++i) shape.push_back(v.shape[i]);
  Tensor out = kael::empty(shape, *dtype, kCPU);
  if (out.numel() == 0) return out;
  if (integral_other) {
    std::int64_t* o = out.data<std::int64_t>();
    const char fmt = v.format[std::strlen(v.format) - 1];
    const char* base = static_cast<const char*>(v.buf);
    switch (fmt) {
      case 'H': copy_buffer_typed<std::uint16_t>(base, v, 0, o); break;
      case 'I': copy_buffer_typed<std::uint32_t>(base, v, 0, o); break;
      case 'L': copy_buffer_typed<unsigned long>(base, v, 0, o); break;
      default: copy_buffer_typed<std::uint64_t>(base, v, 0, o); break;
    }
    return out;
  }
  // Same element type: copy rows with the source's byte strides (which may be negative).
  const std::int64_t isz = v.itemsize;
  char* dst = static_cast<char*>(out.data_ptr());
  std::vector<Py_ssize_t> idx(v.ndim, 0);
  const std::int64_t total = out.numel();
  for (std::int64_t e = 0; e < total; ++e) {
    const char* src = static_cast<const char*>(v.buf);
    for (int d = 0; d < v.ndim; ++d) src += idx[d] * v.strides[d];
    std::memcpy(dst + e * isz, src, isz);
    for (int d = v.ndim - 1; d >= 0; --d) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  // NumPy bools are bytes, which may hold other values than 0 and 1 (Note [Bool bytes])
  if (*dtype == ScalarType::Bool) normalize_bool_bytes(dst, static_cast<std::size_t>(total));
  return out;
}

Tensor tensor_from(PyObject* data, std::optional<ScalarType> dtype) {
  if (is_tensor(data)) {
    warn(WarningKind::User,
         "tensor: to copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
         "rather than kael.tensor(sourceTensor)");
    Tensor t = kael::clone(tensor_of(data));
    return dtype ? kael::to(t, *dtype) : t;
  }
  if (!is_sequence(data) && PyObject_CheckBuffer(data) && !PyBytes_Check(data) && !PyByteArray_Check(data)) {
    Tensor t = from_buffer(data);
    return dtype ? kael::to(t, *dtype) : t;
  }
  Inference inf;
  infer_shape(data, 0, inf);
  check(data, 0, inf);
  const ScalarType out_dtype = dtype.value_or(inf.any_leaf ? kind_dtype(inf.kind) : kDefaultFloat);
  Tensor out = kael::empty(inf.shape, out_dtype, kCPU);
  visit_dtype(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    fill_from<T>(data, 0, inf.shape.size(), p);
  });
  return out;
}

const ParamSpec kTensorParams[] = {{"data", ParamKind::Tensor, false, false, false},
                                   {"dtype", ParamKind::ScalarType, true, true, true},
                                   {"device", ParamKind::Device, true, true, true},
                                   {nullptr, ParamKind::Tensor, false, false, false}};
PyObject* kTensorInterned[4] = {};
const Signature kTensorSig = {"tensor", "tensor(data, *, ScalarType? dtype=None, Device? device=None)",
                              kTensorParams, 3, false, false, kTensorInterned};

}  // namespace

PyObject* py_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Bound b;
  if (!bind(kTensorSig, args, nargs, kwnames, b)) {
    const Signature* sigs[] = {&kTensorSig};
    return raise_no_match(sigs, 1, nullptr, args, nargs, kwnames);
  }
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
  if (conv_optional<ScalarType>(b.slot[1], dtype, conv_dtype) != Match::Yes ||
      conv_optional<Device>(b.slot[2], device, conv_device) != Match::Yes) {
    if (!PyErr_Occurred()) {
      const Signature* sigs[] = {&kTensorSig};
      return raise_no_match(sigs, 1, nullptr, args, nargs, kwnames);
    }
    return nullptr;
  }
  try {
    Tensor t = tensor_from(b.slot[0], dtype);
    if (device && !device->is_cpu()) t = kael::to(t, *device);
    if (has_pending_warnings() && !flush_warnings()) return nullptr;
    return wrap(std::move(t));
  } catch (...) {
    translate_exception();
    return nullptr;
  }
}

}  // namespace kael::python
