// Device-independent factories (CompositeImplicit): each calls registered ops (empty, fill_,
// arange.start), so autograd and the Python key see those, and every device's kernels serve it.
#include <cstdint>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/arange.h"
#include "kael/ops/empty.h"
#include "kael/ops/fill_.h"
#include "kael/ops/full.h"

namespace kael::native {

Tensor zeros(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return kael::full(size, Scalar(std::int64_t{0}), dtype.value_or(default_dtype()), device);
}

Tensor ones(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return kael::full(size, Scalar(std::int64_t{1}), dtype.value_or(default_dtype()), device);
}

Tensor full(IntArrayRef size, const Scalar& fill_value, std::optional<ScalarType> dtype, std::optional<Device> device) {
  const ScalarType type = dtype.value_or(fill_value.wrapped_dtype());
  check_convertible("full", fill_value, type);  // before anything is allocated
  Tensor t = kael::empty(size, type, device);
  kael::fill_(t, fill_value);
  return t;
}

Tensor empty_like(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return kael::empty(self.sizes(), dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor zeros_like(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return kael::full(self.sizes(), Scalar(std::int64_t{0}), dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor ones_like(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return kael::full(self.sizes(), Scalar(std::int64_t{1}), dtype.value_or(self.dtype()), device.value_or(self.device()));
}

Tensor full_like(const Tensor& self, const Scalar& fill_value, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return kael::full(self.sizes(), fill_value, dtype.value_or(self.dtype()), device.value_or(self.device()));
}

const Tensor& zero_(const Tensor& self) { return kael::fill_(self, Scalar(std::int64_t{0})); }

Tensor arange_end(const Scalar& end, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return kael::arange(Scalar(std::int64_t{0}), end, Scalar(std::int64_t{1}), dtype, device);
}

}  // namespace kael::native
