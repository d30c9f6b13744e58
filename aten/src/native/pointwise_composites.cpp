// Pointwise ops with rules beyond a formula: the argument checks of where and lerp, and the
// composites masked_fill, nan_to_num, gelu and broadcast_tensors, written in terms of
// registered ops so that autograd, a Python key and every device see those.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kael/autograd/autograd.h"
#include "kael/core/error.h"
#include "kael/core/half.h"
#include "kael/core/mem_overlap.h"
#include "kael/core/warning.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/_gelu.h"
#include "kael/ops/_gelu_tanh.h"
#include "kael/ops/_nan_to_num.h"
#include "kael/ops/abs.h"
#include "kael/ops/any.h"
#include "kael/ops/add.h"
#include "kael/ops/eq.h"
#include "kael/ops/isfinite.h"
#include "kael/ops/le.h"
#include "kael/ops/logical_and.h"
#include "kael/ops/logical_or.h"
#include "kael/ops/mul.h"
#include "kael/ops/ne.h"
#include "kael/ops/nonzero_numpy.h"
#include "kael/ops/sub.h"
#include "kael/ops/clone.h"
#include "kael/ops/copy_.h"
#include "kael/ops/expand.h"
#include "kael/ops/full.h"
#include "kael/ops/narrow.h"
#include "kael/ops/to.h"
#include "kael/ops/where.h"
#include "kael/ops/div.h"
#include "kael/ops/floor_divide.h"
#include "kael/ops/fmod.h"
#include "kael/ops/trunc.h"
#include "kael/ops/round.h"
#include "kael/ops/_round_decimals.h"
#include "kael/ops/square.h"
#include "kael/ops/pow.h"

namespace kael::native {

// ---------------------------------------------------------------- where, lerp

// pointwise_checks.cpp
void check_number_operands(const char* op, std::initializer_list<const Operand*> operands, bool half_unchecked);

void where_check(const Operand& condition, const Operand& self, const Operand& other) {
  KAEL_CHECK_TYPE(condition.is_tensor(), "where: condition must be a tensor, got the number " << condition.scalar());
  check_number_operands("where", {&self, &other}, true);  // where(c, int8_t, 128) raises, as in PyTorch
  const ScalarType t = condition.tensor().dtype();
  if (t == ScalarType::UInt8) {
    warn(WarningKind::User,
         "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a future "
         "version of kael. Use a boolean condition instead.");
    return;
  }
  KAEL_CHECK(t == ScalarType::Bool,
             "where: expected condition to be a boolean tensor, but got a tensor with dtype " << t);
}

void lerp_check(const Operand& self, const Operand& end, const Operand& weight) {
  KAEL_CHECK_TYPE(self.is_tensor() && end.is_tensor(),
                  "lerp: input and end must be tensors (only weight may be a number)");
  const ScalarType t = self.tensor().dtype();
  KAEL_CHECK(end.tensor().dtype() == t,
             "lerp: expected dtype " << t << " for `end` but got dtype " << end.tensor().dtype());
  // A weight tensor with dimensions shares input's dtype; a 0-d one may be any float type.
  if (weight.is_tensor() && weight.tensor().dim() > 0) {
    KAEL_CHECK(weight.tensor().dtype() == t,
               "lerp: expected dtype " << t << " for `weight` but got dtype " << weight.tensor().dtype());
  }
  KAEL_CHECK_IMPLEMENTED(is_floating(t),
                         "lerp: not implemented for dtype " << t << " (input and end must be floating point)");
  // a number weight is read in the compute type with PyTorch's overflow check (lerp(t, e, 1e39) raises)
  if (!weight.is_tensor()) check_convertible("lerp", weight.scalar(), is_reduced_floating(t) ? ScalarType::Float32 : t);
}

// PyTorch's heaviside takes two tensors of one dtype (no promotion).
void heaviside_check(const Operand& self, const Operand& values) {
  KAEL_CHECK_TYPE(self.is_tensor() && values.is_tensor(),
                  "heaviside: input and values must be tensors, got " << (self.is_tensor() ? "a tensor" : "a number")
                                                                       << " and "
                                                                       << (values.is_tensor() ? "a tensor" : "a number"));
  KAEL_CHECK(self.tensor().dtype() == values.tensor().dtype(),
             "heaviside is not yet implemented for tensors with different dtypes (input "
                 << self.tensor().dtype() << ", values " << values.tensor().dtype() << ")");
}

namespace {
// value as PyTorch's addcmul/addcdiv kernels read it: checked against the type they compute in
// (the result's, t; float32 for float16/bfloat16).
void check_value(const char* op, ScalarType t, const Scalar& value) {
  if (t == ScalarType::Bool) return;  // no kernel: the dtype check raises
  const ScalarType compute = is_reduced_floating(t) ? ScalarType::Float32 : t;
  check_convertible(op, value, compute);
}
}  // namespace

void addcmul_check(const Operand& self, const Operand& tensor1, const Operand& tensor2, const Scalar& value) {
  check_value("addcmul", result_type({&self, &tensor1, &tensor2}), value);
}

void addcdiv_check(const Operand& self, const Operand& tensor1, const Operand& tensor2, const Scalar& value) {
  // A number stands for a tensor of the dtype the op computes in (a wrapped number), as for the
  // other pointwise ops that take numbers where torch takes only tensors.
  const ScalarType compute = result_type({&self, &tensor1, &tensor2});
  const auto integral = [&](const Operand& o) { return !is_floating(o.is_tensor() ? o.tensor().dtype() : compute); };
  KAEL_CHECK(!(integral(tensor1) && integral(tensor2)),
             "addcdiv: Integer division with addcdiv is no longer supported, and in a future release addcdiv will "
             "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
             "(input + value * kael.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + "
             "value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
             "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  check_value("addcdiv", compute, value);
}

// ---------------------------------------------------------------- masked_fill

namespace {

void check_mask(const char* op, const Tensor& mask) {
  KAEL_CHECK(mask.dtype() == ScalarType::Bool,
             op << ": only supports boolean masks, but got mask with dtype " << mask.dtype());
}

// value as a 0-d tensor of self's dtype: a Scalar is converted with PyTorch's overflow check.
Tensor fill_value(const char* op, const Tensor& self, const Scalar& value) {
  check_convertible(op, value, self.dtype());
  return kael::full({}, value, self.dtype(), self.device());
}

Tensor fill_value(const char* op, const Tensor& self, const Tensor& value) {
  KAEL_CHECK(value.dim() == 0, op << ": only supports a 0-dimensional value tensor, but got tensor with "
                                  << value.dim() << " dimension(s).");
  // As PyTorch, which fills with value.item(): the value is converted with a number's overflow
  // check (NaN, an infinity or 1e30 into int64 raise instead of storing INT64_MIN).
  check_convertible(op, value.item(), self.dtype());
  return kael::to(value, self.dtype());
}

// where(mask, value, self) computes in self's dtype: the 0-d value and the bool mask never
// promote a dimensioned self, and a 0-d self meets a 0-d value of its own dtype.
Tensor masked_fill_impl(const char* op, const Tensor& self, const Tensor& mask, const Tensor& value) {
  check_mask(op, mask);
  return kael::where(mask, value, self);
}

const Tensor& masked_fill_inplace(const char* op, const Tensor& self, const Tensor& mask, const Tensor& value) {
  check_mask(op, mask);
  const DimVector shape = broadcast_shapes(op, self.sizes(), mask.sizes());
  KAEL_CHECK(IntArrayRef(shape).size() == self.sizes().size() &&
                 std::equal(shape.begin(), shape.end(), self.sizes().begin()),
             op << ": mask of shape " << shape_str(mask.sizes()) << " does not broadcast to input's shape "
                << shape_str(self.sizes()));
  if (has_internal_overlap(self) == MemOverlap::Yes) {
    // As PyTorch: a warning, then value is written where mask is set and nowhere else, so a
    // memory location gets value when any element that refers to it is masked (whatever the
    // order). That is the fill of self with each expanded dim (stride 0) narrowed to one
    // element, masked by any() of the mask over those dims; copying where()'s result instead
    // would write an unmasked element's old value over a masked one.
    warn(WarningKind::User,
         std::string("Use of ") + op +
             " on expanded tensors is deprecated. Please clone() the tensor before performing this operation. "
             "This also applies to advanced indexing e.g. tensor[mask] = scalar");
    DimVector expanded;
    Tensor compact = self;
    for (std::int64_t d = 0; d < self.dim(); ++d) {
      if (self.strides()[d] == 0 && self.sizes()[d] > 1) {
        expanded.push_back(d);
        compact = kael::narrow(compact, d, 0, 1);
      }
    }
    masked_fill_inplace(op, compact, kael::any(kael::expand(mask, self.sizes()), IntArrayRef(expanded), true), value);
    return self;
  }
  // Computed out of place, then copied: the copy checks self against the mask for overlap.
  kael::copy_(self, kael::where(mask, value, self));
  return self;
}

}  // namespace

Tensor masked_fill(const Tensor& self, const Tensor& mask, const Scalar& value) {
  return masked_fill_impl("masked_fill", self, mask, fill_value("masked_fill", self, value));
}

Tensor masked_fill_tensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return masked_fill_impl("masked_fill", self, mask, fill_value("masked_fill", self, value));
}

const Tensor& masked_fill_(const Tensor& self, const Tensor& mask, const Scalar& value) {
  return masked_fill_inplace("masked_fill_", self, mask, fill_value("masked_fill_", self, value));
}

const Tensor& masked_fill__tensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  return masked_fill_inplace("masked_fill_", self, mask, fill_value("masked_fill_", self, value));
}

// ---------------------------------------------------------------- nan_to_num

namespace {

// v as the dtype stores it: a finite value beyond the dtype's range becomes infinite, as a
// rounding cast does (PyTorch converts these replacements unchecked).
double stored_value(double v, ScalarType dtype) {
  if (!std::isfinite(v)) return v;
  switch (dtype) {
    case ScalarType::Float32:
    case ScalarType::Float16:
    case ScalarType::BFloat16: {
      // float32's overflow threshold: values from max + half an ulp round to infinity.
      const double limit = static_cast<double>(std::numeric_limits<float>::max()) + std::ldexp(1.0, 103);
      float f = 0;
      if (std::fabs(v) >= limit) {
        f = std::copysign(std::numeric_limits<float>::infinity(), static_cast<float>(v > 0 ? 1 : -1));
      } else if (std::fabs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
        f = std::copysign(std::numeric_limits<float>::max(), static_cast<float>(v > 0 ? 1 : -1));
      } else {
        f = static_cast<float>(v);
      }
      if (dtype == ScalarType::Float16) return static_cast<double>(static_cast<float>(Half(f)));
      if (dtype == ScalarType::BFloat16) return static_cast<double>(static_cast<float>(BFloat16(f)));
      return static_cast<double>(f);
    }
    default:
      return v;
  }
}

double lowest_of(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float16:
      return -65504.0;
    case ScalarType::BFloat16:
      return -static_cast<double>(static_cast<float>(BFloat16::from_bits(0x7f7f)));
    case ScalarType::Float32:
      return static_cast<double>(std::numeric_limits<float>::lowest());
    default:
      return std::numeric_limits<double>::lowest();
  }
}

Tensor nan_to_num_impl(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                       std::optional<double> neginf) {
  const ScalarType t = self.dtype();
  if (!is_floating(t)) return kael::_nan_to_num(self, Scalar(std::int64_t{0}), Scalar(std::int64_t{0}),
                                                Scalar(std::int64_t{0}));
  const double lowest = lowest_of(t);
  return kael::_nan_to_num(self, Scalar(stored_value(nan.value_or(0.0), t)),
                           Scalar(stored_value(posinf.value_or(-lowest), t)),
                           Scalar(stored_value(neginf.value_or(lowest), t)));
}

}  // namespace

Tensor nan_to_num(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf) {
  return nan_to_num_impl(self, nan, posinf, neginf);
}

const Tensor& nan_to_num_(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf) {
  if (!is_floating(self.dtype())) return self;  // nothing to replace: nothing is written (as torch)
  kael::copy_(self, nan_to_num_impl(self, nan, posinf, neginf));
  return self;
}

// ---------------------------------------------------------------- gelu

Tensor gelu(const Tensor& self, std::string_view approximate) {
  if (approximate == "none") return kael::_gelu(self);
  if (approximate == "tanh") return kael::_gelu_tanh(self);
  KAEL_CHECK(false, "gelu: approximate argument must be either none or tanh (got '" << approximate << "')");
  __builtin_unreachable();
}

// ---------------------------------------------------------------- broadcast_tensors

std::vector<Tensor> broadcast_tensors(TensorList tensors) {
  DimVector shape;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    shape = i == 0 ? DimVector(tensors[0].sizes()) : broadcast_shapes("broadcast_tensors", shape, tensors[i].sizes());
  }
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(kael::expand(t, shape));
  return out;
}

// ---------------------------------------------------------------- isclose

// where(condition) alone: nonzero(condition, as_tuple=True), as PyTorch's overload.
std::vector<Tensor> where_condition(const Tensor& condition) { return kael::nonzero_numpy(condition); }

// PyTorch's steps, op for op, so that every intermediate is rounded as there (a float16
// tolerance is computed in float16).
Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  KAEL_CHECK(self.dtype() == other.dtype(),
             "isclose: expected both tensors to have the same dtype, got " << self.dtype() << " and " << other.dtype());
  KAEL_CHECK(!(std::isnan(rtol) || rtol < 0), "isclose: rtol must be greater than or equal to zero, but got " << rtol);
  KAEL_CHECK(!(std::isnan(atol) || atol < 0), "isclose: atol must be greater than or equal to zero, but got " << atol);
  Tensor close = kael::eq(self, other);
  if (equal_nan && is_floating(self.dtype())) {
    close = kael::logical_or(close, kael::logical_and(kael::ne(self, self), kael::ne(other, other)));
  }
  if (rtol == 0 && atol == 0) return close;
  // integers and bools compare in the default float dtype (no uint8 difference wraps)
  const Tensor cast_self = is_floating(self.dtype()) ? self : kael::to(self, default_dtype());
  const Tensor cast_other = is_floating(other.dtype()) ? other : kael::to(other, default_dtype());
  const Tensor allowed = kael::add(Scalar(atol), kael::abs(kael::mul(Scalar(rtol), cast_other)));
  const Tensor actual = kael::abs(kael::sub(cast_self, cast_other));
  return kael::logical_or(close, kael::logical_and(kael::isfinite(actual), kael::le(actual, allowed)));
}

// ---------------------------------------------------------------- div with a rounding mode

namespace {
// As PyTorch: None is true division; 'floor' is floor_divide; 'trunc' rounds the quotient toward
// zero, trunc(a / b) for floating results and, for integers (which keep their dtype, and raise on
// a zero divisor), the exact quotient of a - fmod(a, b), which b divides.
Tensor div_rounded(const Operand& self, const Operand& other, std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode) return kael::div(self, other);
  if (*rounding_mode == "floor") return kael::floor_divide(self, other);
  KAEL_CHECK(*rounding_mode == "trunc", "div: expected rounding_mode to be one of None, 'trunc', or 'floor' but found '"
                                            << *rounding_mode << "'");
  if (is_floating(result_type({&self, &other}))) return kael::trunc(kael::div(self, other));
  return kael::floor_divide(kael::sub(self, kael::fmod(self, other)), other);
}
}  // namespace

const Tensor& write_in_place(const char* op, const Tensor& self, const Tensor& result) {
  KAEL_CHECK(can_cast(result.dtype(), self.dtype()), op << ": result type " << result.dtype()
                                                        << " can't be cast to the desired output type " << self.dtype());
  KAEL_CHECK(std::ranges::equal(result.sizes(), self.sizes()), op << ": output with shape " << shape_str(self.sizes())
                                                                   << " doesn't match the broadcast shape "
                                                                   << shape_str(result.sizes()));
  kael::copy_(self, result);
  return self;
}

Tensor in_place_source(const Tensor& self, std::initializer_list<const Tensor*> others) {
  if (!autograd::GradMode::is_enabled()) return self;
  bool records = autograd::requires_grad(self);
  for (const Tensor* t : others) records = records || (t->defined() && autograd::requires_grad(*t));
  return records ? kael::clone(self) : self;
}

const Tensor& div__mode(const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode) return kael::div_(self, other);  // the generated in-place forms
  if (*rounding_mode == "floor") return kael::floor_divide_(self, other);
  return write_in_place("div_", self, div_rounded(in_place_source(self, {&other}), other, rounding_mode));
}

const Tensor& div__scalar_mode(const Tensor& self, const Scalar& other,
                               std::optional<std::string_view> rounding_mode) {
  if (!rounding_mode) return kael::div_(self, other);
  if (*rounding_mode == "floor") return kael::floor_divide_(self, other);
  return write_in_place("div_", self, div_rounded(in_place_source(self), other, rounding_mode));
}

// pow_(self, 2): square's in-place form (a bool self raises there: its square is int64)
const Tensor& square_(const Tensor& self) { return kael::pow_(self, Scalar(std::int64_t{2})); }

// ---------------------------------------------------------------- round(decimals=)

namespace {
// _round_decimals's scale: 10**|decimals| (in double; infinite past float's range for the types
// that compute in float, as PyTorch's float 10**decimals is, so that the kernel reads inf, not an
// out-of-range conversion), negated for negative decimals.
Scalar decimal_scale(const char* op, ScalarType t, std::int64_t decimals) {
  KAEL_CHECK_IMPLEMENTED(is_floating(t),
                         op << ": not implemented for dtype " << t
                            << " with decimals (round(x) without decimals returns integers unchanged)");
  double p = std::pow(10.0, std::fabs(static_cast<double>(decimals)));
  if (t != ScalarType::Float64 && p > static_cast<double>(std::numeric_limits<float>::max()))
    p = std::numeric_limits<double>::infinity();
  return Scalar(decimals < 0 ? -p : p);
}
}  // namespace

Tensor round_decimals(const Tensor& self, std::int64_t decimals) {
  const Scalar scale = decimal_scale("round", self.dtype(), decimals);
  return decimals == 0 ? kael::round(self) : kael::_round_decimals(self, scale);
}

const Tensor& round_decimals_(const Tensor& self, std::int64_t decimals) {
  const Scalar scale = decimal_scale("round_", self.dtype(), decimals);
  return decimals == 0 ? kael::round_(self) : kael::_round_decimals_(self, scale);
}

// ---------------------------------------------------------------- fill_(Tensor)

// As PyTorch: value is a 0-d tensor of any dtype and device, converted to self's dtype; through
// copy_ (so autograd sees value), from a copy of value when value is an element of self.
const Tensor& fill_tensor_(const Tensor& self, const Tensor& value) {
  KAEL_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with " << value.dim()
                                                                                                    << " dimensions.");
  kael::copy_(self, may_share_memory(self, value) ? kael::clone(value) : value);
  return self;
}

Tensor div_mode(const Tensor& self, const Tensor& other, std::optional<std::string_view> rounding_mode) {
  return div_rounded(self, other, rounding_mode);
}

Tensor div_scalar_mode(const Tensor& self, const Scalar& other, std::optional<std::string_view> rounding_mode) {
  return div_rounded(self, other, rounding_mode);
}

}  // namespace kael::native
