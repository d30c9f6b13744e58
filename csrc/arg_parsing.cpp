// See Note [Argument parsing].
#include "arg_parsing.h"

#include <string>
#include <string_view>

#include "kael/core/error.h"
#include "pyobject.h"

namespace kael::python {

namespace {

bool is_int_like(PyObject* o) {
  if (PyLong_Check(o)) return !PyBool_Check(o);
  return !is_tensor(o) && PyIndex_Check(o);
}

void intern_names(const Signature& sig) {
  if (sig.nparams == 0 || sig.interned[0] != nullptr) return;
  for (int i = 0; i < sig.nparams; ++i) sig.interned[i] = PyUnicode_InternFromString(sig.params[i].name);
}

int find_keyword(const Signature& sig, PyObject* name) {
  for (int i = 0; i < sig.nparams; ++i)
    if (sig.interned[i] == name) return i;
  for (int i = 0; i < sig.nparams; ++i)
    if (PyUnicode_Compare(sig.interned[i], name) == 0) return i;
  return -1;
}

const char* type_name(PyObject* o) {
  if (is_tensor(o)) return "Tensor";
  return Py_TYPE(o)->tp_name;
}

}  // namespace

namespace {
// Whether parameter i is among the call's keywords.
bool has_keyword(const Signature& sig, int i, PyObject* kwnames) {
  if (kwnames == nullptr) return false;
  intern_names(sig);
  const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t j = 0; j < nkw; ++j)
    if (find_keyword(sig, PyTuple_GET_ITEM(kwnames, j)) == i) return true;
  return false;
}
}  // namespace

bool bind(const Signature& sig, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Bound& out) {
  out.name = sig.name;
  int positional = 0;
  while (positional < sig.nparams && !sig.params[positional].kwonly) ++positional;
  Py_ssize_t first_free = 0;
  const int k = sig.varargs_tensorlist;
  if (sig.varargs_intlist && nargs >= 1 && (nargs > 1 || is_int_like(args[0]))) {
    out.varargs = args;
    out.nvarargs = nargs;
    first_free = 1;
  } else if (k >= 0 && (nargs > k + 1 || (nargs == k + 1 && is_tensor(args[k])) ||
                        (nargs == k && !has_keyword(sig, k, kwnames)))) {
    // the tensors of the last positional Tensor[] given one by one (one tensor alone, or none)
    for (int i = 0; i < k; ++i) out.slot[i] = args[i];
    out.varargs = args + k;
    out.nvarargs = nargs - k;
    out.varargs_index = k;
    first_free = k + 1;
  } else {
    if (nargs > positional) return false;
    for (Py_ssize_t i = 0; i < nargs; ++i) out.slot[i] = args[i];
    first_free = nargs;
  }
  if (kwnames != nullptr) {
    intern_names(sig);
    const Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t j = 0; j < nkw; ++j) {
      const int i = find_keyword(sig, PyTuple_GET_ITEM(kwnames, j));
      if (i < 0 || i < first_free || out.slot[i] != nullptr) return false;
      out.slot[i] = args[nargs + j];
    }
  }
  for (int i = static_cast<int>(first_free); i < sig.nparams; ++i)
    if (out.slot[i] == nullptr && !sig.params[i].has_default) return false;
  return true;
}

Match conv_tensor(PyObject* o, const Tensor*& out) {
  if (!is_tensor(o)) return Match::No;
  out = &tensor_of(o);
  return Match::Yes;
}

PyObject* wrap_result(std::vector<Tensor> list, PyTypeObject*) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(list.size()));
  if (out == nullptr) return nullptr;
  for (std::size_t i = 0; i < list.size(); ++i) {
    PyObject* item = wrap(std::move(list[i]));
    if (item == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

Match conv_tensorlist(const Bound& b, int index, std::vector<Tensor>& out) {
  if (b.varargs == nullptr || b.varargs_index != index) return conv_tensorlist(b.slot[index], out);
  // The caller's argument array holds the items for the call.
  out.clear();
  out.reserve(static_cast<std::size_t>(b.nvarargs));
  for (Py_ssize_t i = 0; i < b.nvarargs; ++i) {
    if (!is_tensor(b.varargs[i])) return Match::No;
    out.push_back(tensor_of(b.varargs[i]));
  }
  return Match::Yes;
}

Match conv_tensorlist(PyObject* o, std::vector<Tensor>& out) {
  // Items are only type-checked (no Python code runs), and each kept Tensor owns its impl, so
  // a list that changes after the call cannot affect it.
  if (!PyTuple_Check(o) && !PyList_Check(o)) return Match::No;
  out.clear();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  out.reserve(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(o, i);
    if (!is_tensor(item)) return Match::No;
    out.push_back(tensor_of(item));
  }
  return Match::Yes;
}

Match conv_string(PyObject* o, std::string& out) {
  if (!PyUnicode_Check(o)) return Match::No;
  Py_ssize_t n = 0;
  const char* text = PyUnicode_AsUTF8AndSize(o, &n);
  if (text == nullptr) return Match::Error;
  out.assign(text, static_cast<std::size_t>(n));
  return Match::Yes;
}

Match conv_scalar(PyObject* o, Scalar& out, const char* op) {
  if (PyBool_Check(o)) {
    out = Scalar(o == Py_True);
    return Match::Yes;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) {
      PyErr_Format(PyExc_RuntimeError, "value %R cannot be converted to int64 without overflow", o);
      return Match::Error;
    }
    out = Scalar(static_cast<std::int64_t>(v));
    return Match::Yes;
  }
  if (PyFloat_Check(o)) {
    out = Scalar(PyFloat_AS_DOUBLE(o));
    return Match::Yes;
  }
  if (is_complex_number(o)) {
    PyErr_Format(PyExc_TypeError, "%s%scomplex numbers are not supported (kael has no complex dtype), got %s",
                 op ? op : "", op ? ": " : "", Py_TYPE(o)->tp_name);
    return Match::Error;
  }
  if (is_tensor(o) || PySequence_Check(o)) return Match::No;  // arrays have __len__
  if (const Match m = conv_numpy_scalar(o, out); m != Match::No) return m;
  if (PyIndex_Check(o)) {  // numpy integers
    const Py_ssize_t v = PyNumber_AsSsize_t(o, PyExc_OverflowError);
    if (v == -1 && PyErr_Occurred()) return Match::Error;
    out = Scalar(static_cast<std::int64_t>(v));
    return Match::Yes;
  }
  // numpy floating scalars: __float__ and no __len__ (arrays have __len__; so does any object
  // that says it is a container, even one whose __len__ raises)
  const PySequenceMethods* sq = Py_TYPE(o)->tp_as_sequence;
  const PyMappingMethods* mp = Py_TYPE(o)->tp_as_mapping;
  const bool has_len = (sq != nullptr && sq->sq_length != nullptr) || (mp != nullptr && mp->mp_length != nullptr);
  if (Py_TYPE(o)->tp_as_number != nullptr && Py_TYPE(o)->tp_as_number->nb_float != nullptr && !has_len &&
      !PyMapping_Check(o)) {
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return Match::Error;
    out = Scalar(v);
    return Match::Yes;
  }
  return Match::No;
}

Match conv_scalar_or_0d_tensor(PyObject* o, Scalar& out, const char* op) {
  if (!is_tensor(o)) return conv_scalar(o, out, op);
  const Tensor& t = tensor_of(o);
  if (t.dim() != 0) return Match::No;
  return guarded([&] {
    out = t.item();
    return Match::Yes;
  });
}

Match conv_operand(PyObject* o, Operand& out, const char* op) {
  if (is_tensor(o)) {
    out.borrow(tensor_of(o));  // the caller's arguments keep the tensor alive for the call
    return Match::Yes;
  }
  Scalar s;
  const Match m = conv_scalar(o, s, op);
  if (m == Match::Yes) out = Operand(s);
  return m;
}

Match conv_int(PyObject* o, std::int64_t& out) {
  if (!is_int_like(o)) return Match::No;
  int overflow = 0;
  PyObject* index = PyNumber_Index(o);
  if (index == nullptr) return Match::Error;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow != 0) {
    PyErr_Format(PyExc_OverflowError, "value %R does not fit in int64", o);
    return Match::Error;
  }
  out = v;
  return Match::Yes;
}

Match conv_float(PyObject* o, double& out) {
  if (PyFloat_Check(o)) {
    out = PyFloat_AS_DOUBLE(o);
    return Match::Yes;
  }
  std::int64_t i = 0;
  const Match m = conv_int(o, i);
  if (m == Match::Yes) out = static_cast<double>(i);
  return m;
}

Match conv_float_or_0d_tensor(PyObject* o, double& out) {
  if (!is_tensor(o)) return conv_float(o, out);
  const Tensor& t = tensor_of(o);
  if (t.dim() != 0) return Match::No;
  return guarded([&] {
    out = t.item().to_double();
    return Match::Yes;
  });
}

Match conv_bool(PyObject* o, bool& out) {
  if (!PyBool_Check(o)) return Match::No;
  out = o == Py_True;
  return Match::Yes;
}

// Note [Size lists hold their items]
// Converting an item may call its __index__, which may mutate the list being read (clear it,
// extend it): the list's item array may be freed or moved. A list whose items are all exact
// ints is read in place (no Python code runs); otherwise it is copied to a tuple first, which
// holds every item for the conversion. More than kMaxDims entries are rejected before any
// conversion, so a long list costs one length check. One int stands for a list only where the
// type has a size (int[2] stride=1), or as the spread arguments of a list that is the only
// positional parameter (x.view(2, 3), x.flip(0)), as in PyTorch's parser: tile(x, 2) is a TypeError.
Match conv_intlist(const Bound& b, int index, PyObject* o, DimVector& out, bool one_int) {
  out.clear();
  const char* name = b.name ? b.name : "argument";
  if (index == b.varargs_index && b.varargs != nullptr) {
    // The caller's argument array holds the items for the call.
    if (b.nvarargs > kMaxDims) {
      PyErr_Format(PyExc_ValueError, "%s: a tensor has at most %d dimensions (got %zd)", name,
                   static_cast<int>(kMaxDims), b.nvarargs);
      return Match::Error;
    }
    for (Py_ssize_t i = 0; i < b.nvarargs; ++i) {
      std::int64_t v = 0;
      const Match m = conv_int(b.varargs[i], v);
      if (m != Match::Yes) return m;
      out.push_back(v);
    }
    return Match::Yes;
  }
  std::int64_t single = 0;
  if (is_int_like(o)) {
    if (!one_int) return Match::No;
    const Match m = conv_int(o, single);
    if (m == Match::Yes) out.push_back(single);
    return m;
  }
  if (!PyTuple_Check(o) && !PyList_Check(o)) return Match::No;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  if (n > kMaxDims) {
    PyErr_Format(PyExc_ValueError, "%s: a tensor has at most %d dimensions (got %zd)", name,
                 static_cast<int>(kMaxDims), n);
    return Match::Error;
  }
  PyObject* held = nullptr;  // a tuple copy of a list whose items may run Python code
  if (PyList_Check(o)) {
    for (Py_ssize_t i = 0; i < n && held == nullptr; ++i) {
      if (!PyLong_CheckExact(PyList_GET_ITEM(o, i))) {
        held = PyList_AsTuple(o);
        if (held == nullptr) return Match::Error;
        o = held;
      }
    }
  }
  PyObject** items = PySequence_Fast_ITEMS(o);
  Match m = Match::Yes;
  for (Py_ssize_t i = 0; i < n && m == Match::Yes; ++i) {
    std::int64_t v = 0;
    m = conv_int(items[i], v);
    if (m == Match::Yes) out.push_back(v);
  }
  Py_XDECREF(held);
  return m;
}

Match conv_dtype(PyObject* o, ScalarType& out) {
  if (Py_IS_TYPE(o, &DtypeType)) {
    out = dtype_of_object(o);
    return Match::Yes;
  }
  if (!PyUnicode_Check(o)) return Match::No;
  Py_ssize_t size = 0;
  const char* name = PyUnicode_AsUTF8AndSize(o, &size);
  if (name == nullptr) return Match::Error;
  if (auto t = parse_dtype(std::string_view(name, static_cast<std::size_t>(size)))) {
    out = *t;
    return Match::Yes;
  }
  PyErr_Format(PyExc_ValueError, "dtype: unknown dtype name %R (expected one of %s)", o, detail::kScalarTypeNameList);
  return Match::Error;
}

Match conv_device(PyObject* o, Device& out) {
  if (is_device_object(o)) {  // kael.device: its str() names it
    PyObject* name = PyObject_Str(o);
    if (name == nullptr) return Match::Error;
    const Match m = conv_device(name, out);
    Py_DECREF(name);
    return m;
  }
  if (!PyUnicode_Check(o)) return Match::No;
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(o, &size);
  if (data == nullptr) return Match::Error;
  const std::string_view name(data, static_cast<std::size_t>(size));  // all of it, NUL bytes included
  if (parse_dtype(name)) return Match::No;  // t.to("float32") means a dtype
  return guarded([&] {
    out = parse_device(name);
    return Match::Yes;
  });
}

PyObject* raise_no_match(const Signature* const* sigs, int count, PyObject* self, PyObject* const* args,
                         Py_ssize_t nargs, PyObject* kwnames) {
  (void)self;
  // One signature: name the positional Tensor argument that is not one, in PyTorch's words
  // ("is_signed(): argument 'input' (position 1) must be Tensor, not int"). Only a type check,
  // so no Python code runs here.
  if (count == 1) {
    const Signature& sig = *sigs[0];
    for (Py_ssize_t i = 0; i < nargs && i < sig.nparams && !sig.params[i].kwonly; ++i) {
      const ParamSpec& p = sig.params[i];
      if (p.kind == ParamKind::Tensor && !is_tensor(args[i]) && !(p.optional && args[i] == Py_None)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' (position %zd) must be Tensor, not %s", sig.name, p.name,
                     i + 1, type_name(args[i]));
        return nullptr;
      }
    }
  }
  std::string got;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (i) got += ", ";
    got += type_name(args[i]);
  }
  if (kwnames != nullptr) {
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(kwnames); ++j) {
      if (!got.empty()) got += ", ";
      const char* kw = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, j));
      got += kw ? kw : "?";
      got += "=";
      got += type_name(args[nargs + j]);
    }
  }
  std::string msg = std::string(sigs[0]->name) + "() received an invalid combination of arguments - got (" + got +
                    "), but expected " + (count > 1 ? "one of:" : "");
  for (int i = 0; i < count; ++i) {
    msg += "\n * ";
    msg += sigs[i]->is_method ? "Tensor." : "";
    msg += sigs[i]->text;
  }
  // Tensor.to also says what it takes, in the chapter's words
  if (std::string_view(sigs[0]->name) == "to") msg += "\nto() expects a dtype, a device name or a tensor";
  PyErr_SetString(PyExc_TypeError, msg.c_str());
  return nullptr;
}

}  // namespace kael::python
