// clamp: composite of clamp_min and clamp_max, so autograd, a Python key and every device see
// those two pointwise ops.
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/clamp_max.h"
#include "kael/ops/clamp_min.h"
#include "kael/ops/to.h"
#include "kael/native/pointwise.h"

namespace kael::native {

namespace {

template <typename Bound>
Tensor clamp_impl(const Tensor& self, const std::optional<Bound>& min, const std::optional<Bound>& max) {
  KAEL_CHECK(min.has_value() || max.has_value(), "clamp: At least one of 'min' or 'max' must not be None");
  if (!max) return kael::clamp_min(self, *min);
  if (!min) return kael::clamp_max(self, *max);
  return kael::clamp_max(kael::clamp_min(self, *min), *max);
}

}  // namespace

Tensor clamp(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  // As clamp.Tensor below: one result type over self and both numbers, self converted to it
  // first (an int bound with a float one on a uint8 tensor: clamp(u8, -7, 4.0) computes in
  // float32 from -7, not from -7 wrapped to the uint8 249).
  if (min && max) {
    const Operand a(self), lo(*min), hi(*max);
    const ScalarType common = result_type({&a, &lo, &hi});
    if (common != self.dtype()) return clamp_impl(kael::to(self, common), min, max);
  }
  return clamp_impl(self, min, max);
}

Tensor clamp_tensor(const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  // PyTorch promotes self, min and max together (one TensorIterator over the three), not
  // pairwise: self is converted to that dtype first, so that clamp_min and clamp_max both compute
  // in it (a 0-d float64 min with an int64 self and a float16 max gives float16, not float64).
  if (min && max) {
    const Operand a(self), lo(*min), hi(*max);
    const ScalarType common = result_type({&a, &lo, &hi});
    // (torch's clamp kernel with both bounds has no bool form; clamp_min/clamp_max alone do)
    KAEL_CHECK_IMPLEMENTED(common != ScalarType::Bool, "clamp: not implemented for dtype bool with both bounds");
    if (common != self.dtype()) return clamp_impl(kael::to(self, common), min, max);
  }
  return clamp_impl(self, min, max);
}

const Tensor& clamp_(const Tensor& self, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  KAEL_CHECK(min.has_value() || max.has_value(), "clamp_: At least one of 'min' or 'max' must not be None");
  return write_in_place("clamp_", self, clamp_impl(in_place_source(self), min, max));
}

const Tensor& clamp_tensor_(const Tensor& self, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  KAEL_CHECK(min.has_value() || max.has_value(), "clamp_: At least one of 'min' or 'max' must not be None");
  const Tensor none;
  return write_in_place("clamp_", self,
                        clamp_tensor(in_place_source(self, {min ? &*min : &none, max ? &*max : &none}), min, max));
}

}  // namespace kael::native
