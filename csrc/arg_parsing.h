#pragma once
// Helpers the generated argument parsers call (codegen/templates/python_shard.cpp.j2).
//
// Note [Argument parsing]
// Each signature has one generated parser. bind() places positional and keyword arguments
// into slots without converting them; typed converters then turn each slot into a C++
// value. A converter answers No when the object is not of its type (so the next overload
// is tried), Yes, or Error with a Python exception set (a known type with a bad value, such
// as dtype="float33"). When no overload matches, the TypeError lists every signature.

#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/core/tensor.h"
#include "kael/python/param_kind.h"
#include "kael/runtime/generator.h"
#include "guard.h"
#include "kael_function.h"
#include "tensor_object.h"

namespace kael::python {

struct ParamSpec {
  const char* name;
  ParamKind kind;
  bool optional;
  bool kwonly;
  bool has_default;
};

struct Signature {
  const char* name;  // Python name, e.g. "add"
  const char* text;  // as users read it: "add(Tensor input, Tensor other, *, Scalar alpha=1)"
  const ParamSpec* params;
  int nparams;
  bool is_method;        // `self` is bound and not among params
  bool varargs_intlist;  // the single positional int[] may be spread: view(2, 3)
  // the index of the last positional parameter when it is a Tensor[] whose tensors may be
  // spread: meshgrid(a, b), einsum("i,i", a, b); -1 for none
  int varargs_tensorlist;
  PyObject** interned;   // names as interned str, filled on first use
};

struct Bound {
  const char* name = nullptr;  // the signature's Python name, for messages
  PyObject* slot[kMaxParams] = {};
  PyObject* const* varargs = nullptr;  // spread int[] or Tensor[] arguments, when used
  Py_ssize_t nvarargs = 0;
  int varargs_index = 0;  // the parameter they are the items of
};

// Places arguments into slots; false when they do not fit the signature.
bool bind(const Signature& sig, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, Bound& out);

// A NumPy scalar as a Scalar, as PyTorch reads one (an integer, or a double; numpy.bool_ too): No for other
// objects and for NumPy scalars kael has no dtype for (complex), Error with a Python exception.
Match conv_numpy_scalar(PyObject* o, Scalar& out);
// Whether `o` is a complex number: a Python complex (numpy.complex128 is one) or a NumPy complex
// scalar (numpy.complex64, numpy.clongdouble).
bool is_complex_number(PyObject* o);

Match conv_tensor(PyObject* o, const Tensor*& out);
// A number where kael takes one (a Scalar, an Operand): a complex number is an Error, the TypeError
// "<op>: complex numbers are not supported (kael has no complex dtype), got complex", not No, so
// an operator (t == 1j) raises instead of returning NotImplemented (which would make == False).
// `op` names the function in that message (nullptr: the message starts with "complex").
Match conv_operand(PyObject* o, Operand& out, const char* op = nullptr);
Match conv_scalar(PyObject* o, Scalar& out, const char* op = nullptr);
// A Scalar parameter in whose place another overload of the op takes a Tensor (clamp's min and
// max): also a 0-d tensor, read as the number it holds, as PyTorch's parser does. Codegen tries
// the Tensor overload first, so this is reached only when the other bounds do not fit it
// (clamp(t, 1, kael.tensor(2.))).
Match conv_scalar_or_0d_tensor(PyObject* o, Scalar& out, const char* op = nullptr);
Match conv_int(PyObject* o, std::int64_t& out);
Match conv_float(PyObject* o, double& out);
// A float parameter that another overload of the op takes as a Tensor (normal's mean and std): also
// a 0-d tensor, read as the number it holds, as PyTorch's parser reads one; the Tensor overloads
// are tried first.
Match conv_float_or_0d_tensor(PyObject* o, double& out);
Match conv_bool(PyObject* o, bool& out);
Match conv_intlist(const Bound& b, int index, PyObject* o, DimVector& out, bool one_int);
Match conv_dtype(PyObject* o, ScalarType& out);
Match conv_device(PyObject* o, Device& out);
Match conv_tensorlist(PyObject* o, std::vector<Tensor>& out);  // a list or tuple of tensors
// The tensors of parameter `index`: its slot (a list or tuple), or the spread arguments.
Match conv_tensorlist(const Bound& b, int index, std::vector<Tensor>& out);
Match conv_string(PyObject* o, std::string& out);
Match conv_generator(PyObject* o, Generator& out);  // a kael.Generator (generator.cpp)

// Optional parameters: a missing slot or None leaves `out` empty.
template <typename T, typename Conv>
Match conv_optional(PyObject* o, std::optional<T>& out, Conv conv) {
  if (o == nullptr || o == Py_None) return Match::Yes;
  T value{};
  const Match m = conv(o, value);
  if (m == Match::Yes) out = value;
  return m;
}

// Raises the TypeError that lists every signature of a name; returns nullptr.
PyObject* raise_no_match(const Signature* const* sigs, int count, PyObject* self, PyObject* const* args,
                         Py_ssize_t nargs, PyObject* kwnames);

// Whether a call over these operands is large enough to release the GIL (gil: auto).
inline constexpr std::int64_t kGilReleaseElements = 1 << 16;
inline bool large(const Tensor& t) { return t.numel() >= kGilReleaseElements; }
inline bool large(const Operand& o) { return o.is_tensor() && large(o.tensor()); }

}  // namespace kael::python
