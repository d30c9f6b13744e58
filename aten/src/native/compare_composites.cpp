// Comparisons over whole tensors, written in terms of registered ops: isin (membership of each
// element in a set of values), equal and allclose (one Python bool for two tensors), and
// float_power (pow in float64). Each runs at every key, so autograd, a Python key and every
// device see the ops it calls.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/any.h"
#include "kael/ops/clamp.h"
#include "kael/ops/eq.h"
#include "kael/ops/index_select.h"
#include "kael/ops/isclose.h"
#include "kael/ops/isnan.h"
#include "kael/ops/logical_not.h"
#include "kael/ops/masked_select.h"
#include "kael/ops/ne.h"
#include "kael/ops/pow.h"
#include "kael/ops/reshape.h"
#include "kael/ops/searchsorted.h"
#include "kael/ops/sort.h"
#include "kael/ops/to.h"
#include "kael/ops/zeros_like.h"

namespace kael::native {

// ---------------------------------------------------------------- isin

namespace {
// bool elements or test values: PyTorch's isin has no kernel for them
void check_not_bool(bool is_bool) {
  KAEL_CHECK(!is_bool, "isin: Unsupported input type encountered for isin(): Bool");
}
}  // namespace

// Whether each element is among test_elements: both in their promoted dtype, the test values
// sorted (NaN left out: it equals nothing), each element looked up by binary search.
// assume_unique changes nothing here (PyTorch's hint for its own kernels).
Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique, bool invert) {
  (void)assume_unique;
  check_not_bool(elements.dtype() == ScalarType::Bool || test_elements.dtype() == ScalarType::Bool);
  const Operand a(elements), b(test_elements);
  const ScalarType common = result_type({&a, &b});
  const Tensor e = kael::to(elements, common);
  const std::int64_t flat[] = {-1};
  Tensor t = kael::reshape(kael::to(test_elements, common), IntArrayRef(flat));
  if (is_floating(common)) t = kael::masked_select(t, kael::logical_not(kael::isnan(t)));
  Tensor found;
  if (t.numel() == 0) {
    found = kael::zeros_like(e, ScalarType::Bool);
  } else {
    const Tensor sorted = std::get<0>(kael::sort(t));
    const Tensor values = kael::reshape(e, IntArrayRef(flat));
    const Tensor pos = kael::clamp(kael::searchsorted(sorted, values), std::optional<Scalar>(),
                                   std::optional<Scalar>(Scalar(t.numel() - 1)));
    found = kael::reshape(kael::eq(kael::index_select(sorted, 0, pos), values), e.sizes());
  }
  return invert ? kael::logical_not(found) : found;
}

// One test value: the elements equal to it (NaN equals nothing).
Tensor isin_tensor_scalar(const Tensor& elements, const Scalar& test_element, bool assume_unique, bool invert) {
  (void)assume_unique;
  check_not_bool(elements.dtype() == ScalarType::Bool || test_element.is_bool());
  return invert ? kael::ne(elements, test_element) : kael::eq(elements, test_element);
}

// One element: a 0-d bool, whether any test value equals it.
Tensor isin_scalar_tensor(const Scalar& element, const Tensor& test_elements, bool assume_unique, bool invert) {
  (void)assume_unique;
  check_not_bool(element.is_bool() || test_elements.dtype() == ScalarType::Bool);
  const Tensor found = kael::any(kael::eq(test_elements, element), std::nullopt);
  return invert ? kael::logical_not(found) : found;
}

// ---------------------------------------------------------------- equal, allclose

// Same shape and every element equal (NaN equals nothing), in the promoted dtype.
bool equal(const Tensor& self, const Tensor& other) {
  if (!std::equal(self.sizes().begin(), self.sizes().end(), other.sizes().begin(), other.sizes().end())) return false;
  return !kael::any(kael::ne(self, other), std::nullopt).item().to<bool>();
}

// Every element of isclose(self, other) true (the two broadcast together).
bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return !kael::any(kael::logical_not(kael::isclose(self, other, rtol, atol, equal_nan)), std::nullopt).item().to<bool>();
}

// ---------------------------------------------------------------- float_power

// pow with both sides in float64, as PyTorch's float_power (whose result is always float64).
Tensor float_power(const Tensor& self, const Tensor& exponent) {
  return kael::pow(kael::to(self, ScalarType::Float64), kael::to(exponent, ScalarType::Float64));
}

Tensor float_power_tensor_scalar(const Tensor& self, const Scalar& exponent) {
  return kael::pow(kael::to(self, ScalarType::Float64), Scalar(exponent.to<double>()));
}

Tensor float_power_scalar(const Scalar& self, const Tensor& exponent) {
  return kael::pow(Scalar(self.to<double>()), kael::to(exponent, ScalarType::Float64));
}

namespace {
void check_float_power_base(const Tensor& self) {
  KAEL_CHECK(self.dtype() == ScalarType::Float64, "float_power_: the base given to float_power_ has dtype "
                                                      << torch_type_name(self.dtype())
                                                      << " but the operation's result requires dtype Double");
}
}  // namespace

const Tensor& float_power_(const Tensor& self, const Tensor& exponent) {
  check_float_power_base(self);
  return kael::pow_(self, kael::to(exponent, ScalarType::Float64));
}

const Tensor& float_power__scalar(const Tensor& self, const Scalar& exponent) {
  check_float_power_base(self);
  return kael::pow_(self, Scalar(exponent.to<double>()));
}

}  // namespace kael::native
