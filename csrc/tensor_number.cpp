// kael.Tensor's number protocol (a + b, a += b, -a, a @ b, int(a), ...) and comparisons: each
// operator is its op (Operand on both sides), with PyTorch's reading of a number on the left.
#include <Python.h>

#include <cstdint>

#include "arg_parsing.h"
#include "guard.h"
#include "kael_function.h"
#include "kael/core/error.h"
#include "kael/ops/abs.h"
#include "kael/ops/add.h"
#include "kael/ops/div.h"
#include "kael/ops/eq.h"
#include "kael/ops/floor_divide.h"
#include "kael/ops/ge.h"
#include "kael/ops/gt.h"
#include "kael/ops/le.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/logical_or.h"
#include "kael/ops/logical_xor.h"
#include "kael/ops/lt.h"
#include "kael/ops/matmul.h"
#include "kael/ops/mul.h"
#include "kael/ops/ne.h"
#include "kael/ops/neg.h"
#include "kael/ops/pow.h"
#include "kael/ops/reciprocal.h"
#include "kael/ops/remainder.h"
#include "kael/ops/sub.h"
#include "tensor_members.h"
#include "tensor_object.h"

namespace kael::python {

namespace {

// `function`: the kael function an operand's __kael_function__ override receives for this
// operator (kael.add for +; Note [__kael_function__]).
template <typename F>
PyObject* binary(PyObject* l, PyObject* r, F f, const char* function = nullptr) {
  if (function != nullptr && !(Py_IS_TYPE(l, &TensorType) && Py_IS_TYPE(r, &TensorType)) &&
      (has_kael_function(l) || has_kael_function(r))) [[unlikely]] {
    PyObject* args[] = {l, r};
    return call_kael_function(function, false, nullptr, args, 2, nullptr);
  }
  // A foreign operand (Match::No) means "return NotImplemented", so Python tries the other side.
  Operand a{Scalar()}, b{Scalar()};
  Match m = conv_operand(l, a, function);  // a complex number raises (t == 1j is not False)
  if (m == Match::Yes) m = conv_operand(r, b, function);
  if (m == Match::No) Py_RETURN_NOTIMPLEMENTED;
  if (m == Match::Error) return nullptr;
  return guarded([&]() -> Tensor { return f(a, b); }, gil::Op{large(a) || large(b)});
}

template <typename F>
PyObject* inplace(PyObject* self, PyObject* other, F f, const char* method = nullptr) {
  if (!is_tensor(self)) Py_RETURN_NOTIMPLEMENTED;
  if (method != nullptr && !(Py_IS_TYPE(self, &TensorType) && Py_IS_TYPE(other, &TensorType)) &&
      (has_kael_function(self) || has_kael_function(other))) [[unlikely]]
    return call_kael_function(method, true, self, &other, 1, nullptr);
  Operand b{Scalar()};
  const Match m = conv_operand(other, b, method);
  if (m == Match::No) Py_RETURN_NOTIMPLEMENTED;
  if (m == Match::Error) return nullptr;
  const Tensor& t = tensor_of(self);
  return guarded([&]() -> Tensor { return f(t, b); }, gil::Op{large(t)});
}

PyObject* nb_add(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::add(a, b); }, "add");
}
PyObject* nb_sub(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::sub(a, b); }, "sub");
}
// A number on the left is computed as torch's reflected operators compute it: `s * t` as
// mul(t, s) (so the number is read as mul's `other`, in float32 for a float16/bfloat16 t: Note
// [Numbers as PyTorch reads them] in docs/decisions/numbers.md), and `s / t` as reciprocal(t) * s
// (torch's __rtruediv__; 1e6 / float16(65504) is 15.26, not the inf of a number rounded to
// float16 first).
PyObject* nb_mul(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    return !a.is_tensor() && b.is_tensor() ? kael::mul(b, a) : kael::mul(a, b);
  }, "mul");
}
PyObject* nb_div(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    return !a.is_tensor() && b.is_tensor() ? kael::mul(kael::reciprocal(b.tensor()), a) : kael::div(a, b);
  }, "div");
}
PyObject* nb_pow(PyObject* l, PyObject* r, PyObject* mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::pow(a, b); }, "pow");
}
PyObject* nb_floordiv(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::floor_divide(a, b); }, "floor_divide");
}
PyObject* nb_mod(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) { return kael::remainder(a, b); }, "remainder");
}

// &, |, ^ and ~ are the logical ops on bool operands (a Python bool counts as one). kael has no
// bitwise kernels (docs/decisions/logical-operators.md), so other dtypes raise instead of computing something else.
bool is_bool_operand(const Operand& o) {
  return o.is_tensor() ? o.tensor().dtype() == ScalarType::Bool : o.scalar().is_bool();
}
void check_bool_operands(const char* op, const Operand& a, const Operand& b) {
  KAEL_CHECK(is_bool_operand(a) && is_bool_operand(b),
             op << ": bitwise operations are not implemented; kael computes & | ^ ~ on bool tensors only (got "
                << (a.is_tensor() ? dtype_name(a.tensor().dtype()) : "a number") << " and "
                << (b.is_tensor() ? dtype_name(b.tensor().dtype()) : "a number") << ")");
}
PyObject* nb_and(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    check_bool_operands("__and__", a, b);
    return kael::logical_and(a, b);
  }, "logical_and");
}
PyObject* nb_or(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    check_bool_operands("__or__", a, b);
    return kael::logical_or(a, b);
  }, "logical_or");
}
PyObject* nb_xor(PyObject* l, PyObject* r) {
  return binary(l, r, [](const Operand& a, const Operand& b) {
    check_bool_operands("__xor__", a, b);
    return kael::logical_xor(a, b);
  }, "logical_xor");
}
PyObject* nb_invert(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__invert__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> Tensor {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.dtype() == ScalarType::Bool, "__invert__: bitwise operations are not implemented; kael computes "
                                              "~ on bool tensors only (got " << dtype_name(t.dtype()) << ")");
    return kael::logical_not(t);
  }, gil::Op{false});
}
PyObject* nb_iand(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) {
    check_bool_operands("__iand__", Operand(a), b);
    return kael::logical_and_(a, b);
  }, "logical_and_");
}
PyObject* nb_ior(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) {
    check_bool_operands("__ior__", Operand(a), b);
    return kael::logical_or_(a, b);
  }, "logical_or_");
}
PyObject* nb_ixor(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) {
    check_bool_operands("__ixor__", Operand(a), b);
    return kael::logical_xor_(a, b);
  }, "logical_xor_");
}
PyObject* nb_ifloordiv(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::floor_divide_(a, b); }, "floor_divide_");
}
PyObject* nb_imod(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::remainder_(a, b); }, "remainder_");
}
PyObject* nb_iadd(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::add_(a, b); }, "add_");
}
PyObject* nb_isub(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::sub_(a, b); }, "sub_");
}
PyObject* nb_imul(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::mul_(a, b); }, "mul_");
}
PyObject* nb_idiv(PyObject* s, PyObject* o) {
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::div_(a, b); }, "div_");
}
PyObject* nb_ipow(PyObject* s, PyObject* o, PyObject* mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return inplace(s, o, [](const Tensor& a, const Operand& b) { return kael::pow_(a, b); }, "pow_");
}
PyObject* nb_matmul(PyObject* l, PyObject* r) {
  if (!(Py_IS_TYPE(l, &TensorType) && Py_IS_TYPE(r, &TensorType)) && (has_kael_function(l) || has_kael_function(r)))
      [[unlikely]] {
    PyObject* args[] = {l, r};
    return call_kael_function("matmul", false, nullptr, args, 2, nullptr);
  }
  if (!is_tensor(l) || !is_tensor(r)) Py_RETURN_NOTIMPLEMENTED;
  const Tensor& a = tensor_of(l);
  const Tensor& b = tensor_of(r);
  return guarded([&]() -> Tensor { return kael::matmul(a, b); }, gil::Op{large(a) || large(b)});
}
PyObject* nb_neg(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__neg__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> Tensor { return kael::neg(tensor_of(s)); }, gil::Op{false});
}
PyObject* nb_abs(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__abs__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> Tensor { return kael::abs(tensor_of(s)); }, gil::Op{false});
}
PyObject* nb_pos(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__pos__", true, s, nullptr, 0, nullptr);
  Py_INCREF(s);
  return s;
}

int nb_bool(PyObject* s) {
  if (self_overrides(s)) [[unlikely]] {
    PyObject* r = call_kael_function("__bool__", true, s, nullptr, 0, nullptr);
    const int truth = r == nullptr ? -1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    return truth;
  }
  return guarded([&] {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
    const Scalar v = t.item();
    return v.to<double>() != 0 ? 1 : 0;
  });
}

PyObject* nb_int(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__int__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.numel() == 1, "int: only one element tensors can be converted to Python scalars");
    const Scalar v = t.item();
    if (!v.is_floating()) return PyLong_FromLongLong(v.to<std::int64_t>());
    // As PyTorch: Python's int(float), exact at any size (int(tensor(3.4e38)) is a 39-digit int);
    // ValueError for NaN, OverflowError for an infinity
    return PyLong_FromDouble(v.to<double>());
  });
}

PyObject* nb_float(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__float__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK(t.numel() == 1, "float: only one element tensors can be converted to Python scalars");
    return PyFloat_FromDouble(t.item().to<double>());
  });
}

PyObject* nb_index(PyObject* s) {
  if (self_overrides(s)) [[unlikely]]
    return call_kael_function("__index__", true, s, nullptr, 0, nullptr);
  return guarded([&]() -> PyObject* {
    const Tensor& t = tensor_of(s);
    KAEL_CHECK_TYPE(is_integral(t.dtype(), /*include_bool=*/true) && t.numel() == 1,
                    "__index__: only integer tensors of a single element can be converted to an index");
    return PyLong_FromLongLong(t.item().to<std::int64_t>());
  });
}

}  // namespace

PyNumberMethods tensor_as_number = {
    .nb_add = nb_add,
    .nb_subtract = nb_sub,
    .nb_multiply = nb_mul,
    .nb_remainder = nb_mod,
    .nb_power = nb_pow,
    .nb_negative = nb_neg,
    .nb_positive = nb_pos,
    .nb_absolute = nb_abs,
    .nb_bool = nb_bool,
    .nb_invert = nb_invert,
    .nb_and = nb_and,
    .nb_xor = nb_xor,
    .nb_or = nb_or,
    .nb_int = nb_int,
    .nb_float = nb_float,
    .nb_inplace_add = nb_iadd,
    .nb_inplace_subtract = nb_isub,
    .nb_inplace_multiply = nb_imul,
    .nb_inplace_remainder = nb_imod,
    .nb_inplace_power = nb_ipow,
    .nb_inplace_and = nb_iand,
    .nb_inplace_xor = nb_ixor,
    .nb_inplace_or = nb_ior,
    .nb_floor_divide = nb_floordiv,
    .nb_true_divide = nb_div,
    .nb_inplace_floor_divide = nb_ifloordiv,
    .nb_inplace_true_divide = nb_idiv,
    .nb_index = nb_index,
    .nb_matrix_multiply = nb_matmul,
};

PyObject* tensor_richcompare(PyObject* l, PyObject* r, int op) {
  switch (op) {
    case Py_EQ:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::eq(a, b); }, "eq");
    case Py_NE:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::ne(a, b); }, "ne");
    case Py_LT:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::lt(a, b); }, "lt");
    case Py_LE:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::le(a, b); }, "le");
    case Py_GT:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::gt(a, b); }, "gt");
    case Py_GE:
      return binary(l, r, [](const Operand& a, const Operand& b) { return kael::ge(a, b); }, "ge");
    default:
      Py_RETURN_NOTIMPLEMENTED;
  }
}

}  // namespace kael::python
