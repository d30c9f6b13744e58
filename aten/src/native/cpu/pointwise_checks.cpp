// Argument checks of pointwise ops (the 'check:' key of native_functions.yaml): rules that
// depend on the kinds of the operands rather than on the compute dtype alone.
#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/to.h"

namespace kael::native {

namespace {

bool is_bool(const Operand& o) {
  return o.is_tensor() ? o.tensor().dtype() == ScalarType::Bool : o.scalar().is_bool();
}

void check_alpha(const char* op, const Operand& self, const Operand& other, const Scalar& alpha) {
  if (!alpha.is_floating() && !alpha.is_bool()) return;
  const ScalarType t = result_type({&self, &other});
  KAEL_CHECK(!alpha.is_bool() || t == ScalarType::Bool,
             op << ": Boolean alpha only supported for Boolean results (got alpha=" << alpha << " for a " << t
                << " result)");
  KAEL_CHECK(is_floating(t) || !alpha.is_floating(),
             op << ": for integral input tensors, argument alpha must not be a floating point number (got " << alpha
                << ")");
}

// PyTorch raises for an integer division by zero; the divisor's elements are read here, before
// any output is written.
void divisor_check(const char* op, const Operand& self, const Operand& other) {
  const ScalarType t = result_type({&self, &other});
  // bool has no kernel: the dtype dispatch's NotImplementedError comes first, as in torch
  if (is_floating(t) || t == ScalarType::Bool) return;
  // an empty result divides nothing (broadcasting never drops a non-empty operand's elements)
  if ((self.is_tensor() && self.tensor().numel() == 0) || (other.is_tensor() && other.tensor().numel() == 0)) return;
  if (!other.is_tensor()) {
    // the number as the kernel sees it: converted (wrapping) to the compute dtype, where 256 is 0
    // in uint8 and 2**32 is 0 in int32, as PyTorch converts it before its check
    bool zero = other.scalar().to_double() == 0;
    if (!zero && !other.scalar().is_floating()) {
      const std::int64_t v = other.scalar().to<std::int64_t>();
      visit_dtype(t, [&](auto tag) {
        using S = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<S> && !std::is_same_v<S, bool>) zero = static_cast<S>(v) == S(0);
      });
    }
    KAEL_CHECK(!zero, op << ": ZeroDivisionError (integer division by zero)");
    return;
  }
  // The divisor as the kernel sees it: converted to the compute dtype, where 2**32 is 0 in int32.
  const Tensor divisor = kael::contiguous(kael::to(other.tensor(), t));
  bool zero = false;
  visit_dtype(divisor.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* p = divisor.data<S>();
    for (std::int64_t i = 0, n = divisor.numel(); i < n && !zero; ++i) {
      if constexpr (std::is_same_v<S, bool>) {
        zero = !load_bool(p + i);  // a bool divisor's byte (Note [Bool bytes])
      } else {
        zero = p[i] == S(0);
      }
    }
  });
  KAEL_CHECK(!zero, op << ": ZeroDivisionError (integer division by zero)");
}

}  // namespace

// A number operand is converted to the result dtype with PyTorch's overflow check, as torch's
// where and clamp kernels read it: where(c, int8_t, 128), clamp(int8_t, min=128) and
// clamp(float16_t, max=1e6) raise where add(int8_t, 128) wraps. With `half_unchecked`, a
// float16/bfloat16 result takes the number rounded without a check (torch's where makes it a 0-d
// tensor of that dtype first: where(c, float16_t, 1e6) is inf, as an assignment rounds).
void check_number_operands(const char* op, std::initializer_list<const Operand*> operands, bool half_unchecked) {
  const ScalarType t = result_type(operands);
  if (half_unchecked && is_reduced_floating(t)) return;
  for (const Operand* o : operands)
    if (!o->is_tensor()) check_convertible(op, o->scalar(), t);
}

// clamp_min/clamp_max of a bool tensor: bool tensor bounds compute (max/min of bools), a number
// bound is refused, as PyTorch's clamp_min/clamp_max scalar kernels have no bool form. A number
// bound is range-checked against the result dtype; a number self (kael takes one where torch
// takes none) is computed with as in every other op: clamp_min(3.4e38, float16_t) is inf.
void clamp_bound_check(const char* op, const Operand& self, const Operand& bound) {
  const ScalarType t = result_type({&self, &bound});
  KAEL_CHECK_IMPLEMENTED(bound.is_tensor() || t != ScalarType::Bool,
                         op << ": not implemented for dtype bool with a number bound");
  if (!bound.is_tensor()) check_convertible(op, bound.scalar(), t);
}
void clamp_min_check(const Operand& self, const Operand& min) { clamp_bound_check("clamp_min", self, min); }
void clamp_max_check(const Operand& self, const Operand& max) { clamp_bound_check("clamp_max", self, max); }

void fmod_check(const Operand& self, const Operand& other) { divisor_check("fmod", self, other); }
void remainder_check(const Operand& self, const Operand& other) { divisor_check("remainder", self, other); }
void floor_divide_check(const Operand& self, const Operand& other) { divisor_check("floor_divide", self, other); }

ScalarType result_type(std::initializer_list<const Operand*> operands) {
  ResultTypeState state;
  for (const Operand* o : operands) {
    if (o->is_tensor()) {
      state.add_tensor(o->tensor().dtype(), o->tensor().dim() == 0);
    } else {
      state.add_wrapped(o->scalar().wrapped_dtype());
    }
  }
  return state.result();
}

void add_check(const Operand& self, const Operand& other, const Scalar& alpha) {
  check_alpha("add", self, other, alpha);
}

// neg and relu refuse bool with torch's RuntimeError and message before the dtype dispatch
// (NotImplementedError) would.
void neg_check(const Tensor& self) {
  KAEL_CHECK(self.dtype() != ScalarType::Bool,
             "neg: Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a "
             "mask, use the `~` or `logical_not()` operator instead.");
}

void relu_check(const Tensor& self) {
  KAEL_CHECK(self.dtype() != ScalarType::Bool, "relu: Boolean inputs not supported for relu");
}

void sub_check(const Operand& self, const Operand& other, const Scalar& alpha) {
  KAEL_CHECK(!is_bool(self) && !is_bool(other),
             "sub: subtraction with a bool tensor is not supported; to invert a mask use logical_not()");
  check_alpha("sub", self, other, alpha);
}

void pow_check(const Operand& self, const Operand& exponent) {
  // PyTorch computes bool ** Python bool, but not a bool base with a bool tensor exponent.
  KAEL_CHECK_IMPLEMENTED(!(exponent.is_tensor() && is_bool(self) && is_bool(exponent)),
                         "pow: not implemented for a bool base with a bool tensor exponent");
  const bool negative_int = !exponent.is_tensor() && exponent.scalar().is_integral() &&
                            exponent.scalar().to<std::int64_t>() < 0;
  KAEL_CHECK(!(negative_int && !is_floating(result_type({&self, &exponent}))),
             "pow: integers to negative integer powers are not allowed (exponent " << exponent.scalar() << ")");
}

}  // namespace kael::native
