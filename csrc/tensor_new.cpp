// kael.tensor(data, dtype=None, device=None): a new tensor copied from nested sequences,
// Python numbers, or any object with the buffer protocol (NumPy arrays).
//
// Rules (PyTorch's): the shape comes from the first element at each depth and every element
// must agree ("expected sequence of length 2 at dim 1 (got 3)", ValueError); at most kMaxDims
// levels (Note [Maximum dims]); a list that contains itself is a TypeError. Without a dtype the
// elements' dtypes promote: Python bool/int/float give bool/int64/float32, NumPy scalars and
// 0-d tensors their own dtype. Complex numbers raise TypeError (kael has no complex dtype).
//
// Note [Nested sequences hold what they walk]
// Converting an element may call its __float__/__index__, which may mutate any list being
// walked (extend, clear, replace items). Every walk therefore holds a strong reference to each
// container and element it is visiting, re-reads the container's length before every item
// and after the last one, and raises when it changed: no item array is cached across a call
// into Python, and the output (sized from the shape) is written only within bounds.
#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "arg_parsing.h"
#include "guard.h"
#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/core/warning.h"
#include "kael/native/pointwise.h"
#include "kael/ops/clone.h"
#include "kael/ops/empty.h"
#include "kael/ops/to.h"
#include "tensor_new.h"

namespace kael::python {

namespace {

bool is_sequence(PyObject* o) { return PyList_Check(o) || PyTuple_Check(o); }

// A strong reference released at scope exit.
class Ref {
 public:
  explicit Ref(PyObject* o) : o_(o) { Py_XINCREF(o_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(o_); }
  PyObject* get() const { return o_; }

 private:
  PyObject* o_;
};

// ---- NumPy types, found once NumPy is imported (kael does not use NumPy's C API)

struct NumpyTypes {
  PyObject* ndarray = nullptr;
  PyObject* generic = nullptr;  // the base of every NumPy scalar type
};

// NumPy's types once `numpy` is in sys.modules (no NumPy objects exist before that); the
// references are kept for the life of the process.
const NumpyTypes& numpy_types() {
  static NumpyTypes types;
  static PyObject* name = PyUnicode_InternFromString("numpy");
  if (types.generic != nullptr) return types;
  if (name == nullptr) throw PythonError();
  PyObject* np = PyImport_GetModule(name);
  if (np == nullptr) {
    if (PyErr_Occurred()) throw PythonError();
    return types;
  }
  PyObject* ndarray = PyObject_GetAttrString(np, "ndarray");
  PyObject* generic = ndarray ? PyObject_GetAttrString(np, "generic") : nullptr;
  Py_DECREF(np);
  if (generic == nullptr || !PyType_Check(ndarray) || !PyType_Check(generic)) {
    Py_XDECREF(ndarray);
    Py_XDECREF(generic);
    PyErr_Clear();  // not NumPy as we know it: treat its objects as foreign
    return types;
  }
  types.ndarray = ndarray;
  types.generic = generic;
  return types;
}

bool is_numpy_scalar(PyObject* o) {
  const NumpyTypes& np = numpy_types();
  return np.generic != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(np.generic));
}

bool is_numpy(PyObject* o) {
  const NumpyTypes& np = numpy_types();
  return np.generic != nullptr && (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(np.ndarray)) ||
                                   PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(np.generic)));
}

// ---- buffer formats

// How a buffer's elements become a kael dtype: copied as is, or converted from a type kael
// does not have (uint16/uint32/uint64 to int64, long double to float64).
enum class Src : std::uint8_t { Same, UInt16, UInt32, UInt64, LongDouble };

struct BufferType {
  ScalarType dtype = ScalarType::Bool;
  Src src = Src::Same;
};

// Parses a struct-module format as PEP 3118 buffers give it (an optional byte-order/size
// prefix, then one type character) at the buffer's item size. Raises TypeError for formats
// kael cannot read, ValueError for a byte order other than the machine's.
BufferType buffer_type(const Py_buffer& v) {
  const char* format = v.format ? v.format : "B";
  std::string_view f(format);
  bool native_order = true;
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<' || f[0] == '>' || f[0] == '!')) {
    constexpr bool little = std::endian::native == std::endian::little;
    if (f[0] == '<') native_order = little;
    if (f[0] == '>' || f[0] == '!') native_order = !little;
    f.remove_prefix(1);
  }
  const Py_ssize_t size = v.itemsize;
  KAEL_CHECK_TYPE(!(f.size() == 2 && f[0] == 'Z'),
                  "tensor: complex buffer format '" << format << "' is not supported: kael has no complex dtype");
  KAEL_CHECK_TYPE(f.size() == 1, "tensor: unsupported buffer format '"
                                     << format << "' (item size " << size
                                     << "); supported: bool '?', integers 'bhilqn' and 'BHILQN', floating "
                                        "point 'e', 'f', 'd' and 'g'");
  KAEL_CHECK_VALUE(native_order || size == 1,
                   "tensor: buffer format '" << format
                                             << "' has a byte order different from the native byte order; "
                                                "conversion between byte orders is not supported");
  struct Option {
    Py_ssize_t bytes;
    BufferType type;
  };
  auto by_size = [&](std::initializer_list<Option> options) {
    for (const Option& o : options)
      if (o.bytes == size) return o.type;
    KAEL_CHECK_TYPE(false, "tensor: unsupported buffer format '" << format << "' with item size " << size);
    return BufferType{};
  };
  switch (f[0]) {
    case '?':
      return by_size({{1, {ScalarType::Bool}}});
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      return by_size({{1, {ScalarType::Int8}}, {2, {ScalarType::Int16}}, {4, {ScalarType::Int32}},
                      {8, {ScalarType::Int64}}});
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
      return by_size({{1, {ScalarType::UInt8}}, {2, {ScalarType::Int64, Src::UInt16}},
                      {4, {ScalarType::Int64, Src::UInt32}}, {8, {ScalarType::Int64, Src::UInt64}}});
    case 'e':
      return by_size({{2, {ScalarType::Float16}}});
    case 'f':
      return by_size({{4, {ScalarType::Float32}}});
    case 'd':
      return by_size({{8, {ScalarType::Float64}}});
    case 'g':
      return by_size({{static_cast<Py_ssize_t>(sizeof(long double)), {ScalarType::Float64, Src::LongDouble}}});
    default:
      break;
  }
  KAEL_CHECK_TYPE(false, "tensor: unsupported buffer format '" << format << "' (item size " << size << ")");
  return BufferType{};
}

// The dtype a Python object that is not a NumPy array gives its elements (PyTorch reads such
// buffers as sequences of Python numbers): bool, int64 or the default float.
ScalarType python_kind(ScalarType t) {
  if (t == ScalarType::Bool) return t;
  return is_floating(t) ? default_dtype() : ScalarType::Int64;
}

struct BufferGuard {
  Py_buffer view{};
  bool held = false;
  ~BufferGuard() {
    if (held) PyBuffer_Release(&view);
  }
};

// Calls f(element address) for every element in row-major order. A buffer without strides is
// C-contiguous (PEP 3118).
template <typename F>
void for_each_element(const Py_buffer& v, F&& f) {
  const int nd = v.ndim;
  std::vector<Py_ssize_t> strides(static_cast<std::size_t>(nd));
  for (int d = nd - 1; d >= 0; --d) {
    if (v.strides != nullptr) {
      strides[d] = v.strides[d];
    } else {
      strides[d] = d == nd - 1 ? v.itemsize : strides[d + 1] * v.shape[d + 1];
    }
  }
  std::vector<Py_ssize_t> idx(static_cast<std::size_t>(nd), 0);
  const char* p = static_cast<const char*>(v.buf);
  for (;;) {
    f(p);
    int d = nd - 1;
    for (; d >= 0; --d) {
      p += strides[d];
      if (++idx[d] < v.shape[d]) break;
      p -= strides[d] * v.shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

Tensor from_buffer(PyObject* data, bool numpy) {
  BufferGuard g;
  if (PyObject_GetBuffer(data, &g.view, PyBUF_RECORDS_RO) < 0) throw PythonError();
  g.held = true;
  const Py_buffer& v = g.view;
  KAEL_CHECK_TYPE(v.suboffsets == nullptr,
                  "tensor: buffers with suboffsets (arrays of pointers) are not supported, got "
                      << Py_TYPE(data)->tp_name);
  KAEL_CHECK_TYPE(v.ndim == 0 || v.shape != nullptr, "tensor: the buffer of " << Py_TYPE(data)->tp_name
                                                                              << " gives no shape");
  check_max_dims("tensor", v.ndim);
  const BufferType type = buffer_type(v);
  // PyTorch reads long doubles from Python floats (ctypes), but not from NumPy arrays
  KAEL_CHECK_TYPE(!numpy || type.src != Src::LongDouble,
                  "tensor: can't convert np.ndarray of type numpy.longdouble (buffer format '" << v.format << "')");
  DimVector shape;
  for (int i = 0; i < v.ndim; ++i) shape.push_back(v.shape[i]);
  Tensor out = kael::empty(shape, type.dtype, kCPU);
  const std::int64_t total = out.numel();
  if (total > 0) {
    char* dst = static_cast<char*>(out.data_ptr());
    switch (type.src) {
      case Src::Same: {
        const std::size_t isz = static_cast<std::size_t>(v.itemsize);
        for_each_element(v, [&](const char* p) {
          std::memcpy(dst, p, isz);
          dst += isz;
        });
        // Bools in foreign memory are bytes, which may hold other values than 0 and 1 (Note [Bool bytes])
        if (type.dtype == ScalarType::Bool) normalize_bool_bytes(out.data_ptr(), static_cast<std::size_t>(total));
        break;
      }
      case Src::UInt16:
      case Src::UInt32:
      case Src::UInt64: {
        auto* o = out.data<std::int64_t>();
        std::int64_t i = 0;
        for_each_element(v, [&](const char* p) {
          std::uint64_t u = 0;
          if (type.src == Src::UInt16) {
            std::uint16_t x;
            std::memcpy(&x, p, sizeof x);
            u = x;
          } else if (type.src == Src::UInt32) {
            std::uint32_t x;
            std::memcpy(&x, p, sizeof x);
            u = x;
          } else {
            std::memcpy(&u, p, sizeof u);
          }
          // kael has no uint64: values int64 cannot hold raise instead of wrapping
          // (docs/decisions/hostile-input.md)
          KAEL_CHECK_VALUE(u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                           "tensor: uint64 value " << u << " at element " << i
                                                   << " does not fit in int64 (kael has no uint64 dtype)");
          o[i++] = static_cast<std::int64_t>(u);
        });
        break;
      }
      case Src::LongDouble: {
        auto* o = out.data<double>();
        for_each_element(v, [&](const char* p) {
          long double x;
          std::memcpy(&x, p, sizeof x);
          *o++ = static_cast<double>(x);
        });
        break;
      }
    }
  }
  return out;
}

// ---- nested sequences

// The dtype an element gives (before promotion). Raises TypeError for complex numbers and
// objects that are not numbers.
ScalarType leaf_dtype(PyObject* o) {
  if (PyFloat_CheckExact(o)) return default_dtype();
  if (PyBool_Check(o)) return ScalarType::Bool;
  if (PyLong_Check(o)) return ScalarType::Int64;
  if (is_numpy_scalar(o)) {  // before float: numpy.float64 is a float subclass
    BufferGuard g;
    if (PyObject_GetBuffer(o, &g.view, PyBUF_RECORDS_RO) < 0) {
      PyErr_Clear();
      KAEL_CHECK_TYPE(false, "tensor: could not infer dtype of " << Py_TYPE(o)->tp_name);
    }
    g.held = true;
    return buffer_type(g.view).dtype;
  }
  if (PyFloat_Check(o)) return default_dtype();
  KAEL_CHECK_TYPE(!PyComplex_Check(o), "tensor: complex numbers are not supported (kael has no complex dtype), got "
                                           << Py_TYPE(o)->tp_name);
  if (is_tensor(o)) {
    const Tensor& t = tensor_of(o);
    KAEL_CHECK_VALUE(t.numel() == 1 && t.dim() == 0, "tensor: only 0-d tensors can be elements of a nested sequence");
    return t.dtype();
  }
  if (!PySequence_Check(o) && PyIndex_Check(o)) return ScalarType::Int64;
  if (!PySequence_Check(o) && Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) return default_dtype();
  KAEL_CHECK_TYPE(false, "tensor: could not infer dtype of " << Py_TYPE(o)->tp_name);
  return default_dtype();
}

// The shape, from the first element at each depth (no Python code runs here).
DimVector infer_shape(PyObject* data) {
  DimVector shape;
  PyObject* o = data;
  while (is_sequence(o)) {
    KAEL_CHECK_VALUE(static_cast<std::int64_t>(shape.size()) < kMaxDims,
                     "tensor: a tensor has at most " << kMaxDims << " dimensions (got nested sequences more than "
                                                     << kMaxDims << " levels deep)");
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    shape.push_back(n);
    if (n == 0) break;
    o = PySequence_Fast_GET_ITEM(o, 0);
  }
  return shape;
}

void check_length(Py_ssize_t expected, std::size_t dim, Py_ssize_t got) {
  KAEL_CHECK_VALUE(got == expected, "tensor: nested sequences have inconsistent sizes: expected sequence of length "
                                        << expected << " at dim " << dim << " (got " << got << ")");
}

// Calls leaf(element) for each element of the nested sequence `o` at `depth`, in row-major
// order, holding what it walks (Note [Nested sequences hold what they walk]).
template <typename Leaf>
void walk(PyObject* o, std::size_t depth, const DimVector& shape, Leaf& leaf) {
  const Ref hold(o);
  const Py_ssize_t n = shape[depth];
  const bool last = depth + 1 == shape.size();
  for (Py_ssize_t i = 0; i < n; ++i) {
    check_length(n, depth, PySequence_Fast_GET_SIZE(o));
    const Ref item(PySequence_Fast_GET_ITEM(o, i));
    if (last) {
      if (is_sequence(item.get())) {
        KAEL_CHECK_TYPE(item.get() != o, "tensor: self-referential lists are incompatible");
        KAEL_CHECK_VALUE(false, "tensor: nested sequences have inconsistent sizes: expected a number at dim "
                                    << depth + 1 << " (got a sequence of length "
                                    << PySequence_Fast_GET_SIZE(item.get()) << ")");
      }
      leaf(item.get());
    } else {
      KAEL_CHECK_VALUE(is_sequence(item.get()),
                       "tensor: nested sequences have inconsistent sizes: expected sequence of length "
                           << shape[depth + 1] << " at dim " << depth + 1 << " (got " << Py_TYPE(item.get())->tp_name
                           << ")");
      walk(item.get(), depth + 1, shape, leaf);
    }
  }
  check_length(n, depth, PySequence_Fast_GET_SIZE(o));  // the last element may have changed it
}

std::int64_t leaf_int64(PyObject* o) {
  PyObject* index = PyNumber_Index(o);
  if (index == nullptr) throw PythonError();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (v == -1 && PyErr_Occurred()) throw PythonError();
  KAEL_CHECK_VALUE(overflow == 0, "tensor: Overflow when unpacking long long: an integer does not fit in int64");
  return v;
}

double leaf_double(PyObject* o) {
  const double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) throw PythonError();
  return v;
}

// Stores one element as T. As PyTorch: NaN or out of range for an integer dtype raises
// ([-max, max] for unsigned ones); floats round (1e39 -> inf). Elements are read as PyTorch's
// store_scalar reads them: integer and bool dtypes take a float (or float subclass, such as
// numpy.float64) by value and anything else through __index__ (a float 0-d tensor, numpy.float32
// or an object with __float__ alone is a TypeError there), floating dtypes through __float__
// (Python's PyFloat_AsDouble, which falls back to __index__).
template <typename T>
void store(PyObject* o, T* out) {
  constexpr bool integral = std::is_integral_v<T>;  // bool included
  auto from_int = [&](std::int64_t v) {
    if constexpr (integral) {
      *out = Scalar(v).checked_to<T>("tensor");
    } else {
      *out = Scalar(v).to<T>();
    }
  };
  auto from_double = [&](double v) {
    if constexpr (integral) {
      *out = Scalar(v).checked_to<T>("tensor");
    } else {
      *out = Scalar(v).to<T>();
    }
  };
  if (PyFloat_CheckExact(o)) {
    from_double(PyFloat_AS_DOUBLE(o));
  } else if (PyBool_Check(o)) {
    *out = static_cast<T>(o == Py_True);
  } else if (PyLong_Check(o)) {
    from_int(leaf_int64(o));
  } else if (is_numpy_scalar(o)) {
    const ScalarType t = leaf_dtype(o);  // raises for complex and unsupported NumPy types
    if (t == ScalarType::Bool && (std::is_same_v<T, bool> || !integral)) {
      const int truth = PyObject_IsTrue(o);
      if (truth < 0) throw PythonError();
      *out = static_cast<T>(truth != 0);
    } else if (is_floating(t) && (!integral || PyFloat_Check(o))) {
      from_double(leaf_double(o));
    } else {
      // as PyTorch: numpy.bool_, numpy.float16 and numpy.float32 are no integers (TypeError
      // from __index__)
      from_int(leaf_int64(o));
    }
  } else if (PyFloat_Check(o)) {
    from_double(PyFloat_AS_DOUBLE(o));
  } else if (is_tensor(o)) {
    const Tensor& t = tensor_of(o);
    KAEL_CHECK_VALUE(t.numel() == 1 && t.dim() == 0, "tensor: only 0-d tensors can be elements of a nested sequence");
    if constexpr (integral) {
      // PyTorch reads it through Tensor.__index__
      KAEL_CHECK_TYPE(!is_floating(t.dtype()), "tensor: only integer tensors of a single element can be converted to "
                                               "an index, got a 0-d "
                                                   << t.dtype() << " tensor for dtype " << ScalarTypeOf<T>::value);
      from_int(t.item().to<std::int64_t>());
    } else {
      from_double(t.item().to<double>());
    }
  } else {
    KAEL_CHECK_TYPE(!PyComplex_Check(o), "tensor: complex numbers are not supported (kael has no complex dtype), got "
                                             << Py_TYPE(o)->tp_name);
    KAEL_CHECK_TYPE(!PySequence_Check(o), "tensor: could not convert " << Py_TYPE(o)->tp_name << " to a number");
    if constexpr (integral) {
      from_int(leaf_int64(o));  // __index__, or a TypeError from Python
    } else {
      from_double(leaf_double(o));  // __float__, then __index__, or a TypeError from Python
    }
  }
}

// PyTorch reads a buffer that is not a NumPy array (array.array, memoryview, bytearray, ctypes)
// as a sequence of Python numbers, so a value an integer dtype cannot hold raises as it does in
// a list (bytearray(b"\xc8") as int8). `t` holds the buffer's values in their own dtype.
void check_buffer_values(const Tensor& t, ScalarType want) {
  if (!is_integral(want, /*include_bool=*/false) || t.dtype() == want) return;
  visit_dtype(t.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<S, bool>) {  // 0 and 1 fit every dtype
      const S* p = t.data<S>();
      const std::int64_t n = t.numel();
      for (std::int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<S>) {
          check_convertible("tensor", Scalar(static_cast<std::int64_t>(p[i])), want);
        } else {
          check_convertible("tensor", Scalar(static_cast<double>(p[i])), want);
        }
      }
    }
  });
}

Tensor tensor_from(PyObject* data, std::optional<ScalarType> dtype) {
  if (is_tensor(data)) {
    warn(WarningKind::User,
         "tensor: to copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() "
         "rather than kael.tensor(sourceTensor)");
    Tensor t = kael::clone(tensor_of(data));
    return dtype ? kael::to(t, *dtype) : t;
  }
  // A NumPy scalar converted to another dtype is a number, checked as a list element is
  // (PyTorch: np.int64(70000) as int16 raises); NumPy arrays convert as `to` does.
  if (!is_sequence(data) && PyObject_CheckBuffer(data) && !PyBytes_Check(data) &&
      !(dtype && is_numpy_scalar(data))) {
    const bool numpy = is_numpy(data);
    Tensor t = from_buffer(data, numpy);
    // NumPy arrays keep their dtype; PyTorch reads other buffers (ctypes arrays, array.array,
    // memoryview, bytearray) as sequences of Python numbers (empty ones: the default float)
    const ScalarType want = dtype ? *dtype
                            : numpy       ? t.dtype()
                            : t.numel()   ? python_kind(t.dtype())
                                          : default_dtype();
    if (!numpy) check_buffer_values(t, want);
    return want == t.dtype() ? t : kael::to(t, want);
  }
  const DimVector shape = infer_shape(data);
  const bool scalar = shape.empty();
  std::optional<ScalarType> inferred;
  auto infer = [&](PyObject* o) {
    const ScalarType t = leaf_dtype(o);
    inferred = inferred ? promote_types(*inferred, t) : t;
  };
  if (scalar) {
    infer(data);
  } else {
    walk(data, 0, shape, infer);  // also checks the shape, before anything is allocated
  }
  const ScalarType out_dtype = dtype.value_or(inferred.value_or(default_dtype()));
  Tensor out = kael::empty(shape, out_dtype, kCPU);
  visit_dtype(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    T* const end = p + out.numel();
    auto fill = [&](PyObject* o) {
      KAEL_CHECK(p < end, "tensor: internal error: more elements than the shape holds");
      store<T>(o, p++);
    };
    if (scalar) {
      fill(data);
    } else {
      walk(data, 0, shape, fill);
    }
  });
  return out;
}

const ParamSpec kTensorParams[] = {{"data", ParamKind::Tensor, false, false, false},
                                   {"dtype", ParamKind::ScalarType, true, true, true},
                                   {"device", ParamKind::Device, true, true, true},
                                   {"requires_grad", ParamKind::Bool, false, true, true},
                                   {nullptr, ParamKind::Tensor, false, false, false}};
PyObject* kTensorInterned[5] = {};
const Signature kTensorSig = {
    "tensor", "tensor(data, *, ScalarType? dtype=None, Device? device=None, bool requires_grad=False)",
    kTensorParams, 4, false, false, -1, kTensorInterned};

}  // namespace

Match conv_numpy_scalar(PyObject* o, Scalar& out) {
  return guarded([&]() -> Match {
    if (!is_numpy_scalar(o)) return Match::No;
    BufferGuard g;
    if (PyObject_GetBuffer(o, &g.view, PyBUF_RECORDS_RO) < 0) {
      PyErr_Clear();
      return Match::No;
    }
    g.held = true;
    const std::string_view f(g.view.format ? g.view.format : "B");
    if (f.find('Z') != std::string_view::npos) return Match::No;  // complex: kael has no complex dtype
    ScalarType t = ScalarType::Bool;
    try {
      t = buffer_type(g.view).dtype;
    } catch (const kael::TypeError&) {
      return Match::No;  // a NumPy type kael cannot read (long double, strings, ...)
    }
    if (t == ScalarType::Bool) {
      const int truth = PyObject_IsTrue(o);
      if (truth < 0) return Match::Error;
      out = Scalar(truth != 0 ? 1.0 : 0.0);  // as PyTorch, which reads numpy.bool_ as a float
    } else if (is_floating(t)) {
      out = Scalar(leaf_double(o));
    } else {
      out = Scalar(leaf_int64(o));
    }
    return Match::Yes;
  });
}

bool is_complex_number(PyObject* o) {
  if (PyComplex_Check(o)) return true;
  if (!is_numpy_scalar(o)) return false;
  BufferGuard g;
  if (PyObject_GetBuffer(o, &g.view, PyBUF_RECORDS_RO) < 0) {
    PyErr_Clear();
    return false;
  }
  g.held = true;
  return g.view.format != nullptr && std::string_view(g.view.format).find('Z') != std::string_view::npos;
}

NumpyKind numpy_kind(PyObject* o) {
  const NumpyTypes& np = numpy_types();
  if (np.ndarray == nullptr) return NumpyKind::None;
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(np.ndarray))) return NumpyKind::Array;
  return is_numpy_scalar(o) ? NumpyKind::Scalar : NumpyKind::None;
}

PyObject* py_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Bound b;
  if (!bind(kTensorSig, args, nargs, kwnames, b)) {
    const Signature* sigs[] = {&kTensorSig};
    return raise_no_match(sigs, 1, nullptr, args, nargs, kwnames);
  }
  std::optional<ScalarType> dtype;
  std::optional<Device> device;
  bool requires_grad = false;
  if (conv_optional<ScalarType>(b.slot[1], dtype, conv_dtype) != Match::Yes ||
      conv_optional<Device>(b.slot[2], device, conv_device) != Match::Yes ||
      (b.slot[3] != nullptr && conv_bool(b.slot[3], requires_grad) != Match::Yes)) {
    if (!PyErr_Occurred()) {
      const Signature* sigs[] = {&kTensorSig};
      return raise_no_match(sigs, 1, nullptr, args, nargs, kwnames);
    }
    return nullptr;
  }
  return guarded([&] {
    Tensor t = tensor_from(b.slot[0], dtype);
    if (device && !device->is_cpu()) t = kael::to(t, *device);
    if (requires_grad) kael::autograd::set_requires_grad(t, true);
    return t;
  });
}

}  // namespace kael::python
