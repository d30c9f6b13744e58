// Factories and copies on the CPU.
#include <cmath>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"

namespace kael::native {

namespace {

void check_cpu(const char* op, const std::optional<Device>& device) {
  if (!device) return;
  check_device_available(op, *device);
  KAEL_CHECK(device->is_cpu(), op << ": device '" << device->str() << "' is not supported by this kernel");
}

Tensor filled(const char* op, IntArrayRef size, ScalarType dtype, const Scalar& value,
              const std::optional<Device>& device) {
  check_cpu(op, device);
  checked_numel(op, size);
  Tensor t = alloc_cpu(size, dtype);
  fill_cpu(t, value);
  return t;
}

ScalarType dtype_of_value(const Scalar& s) { return s.wrapped_dtype(); }

}  // namespace

Tensor empty_cpu(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  check_cpu("empty", device);
  checked_numel("empty", size);
  return alloc_cpu(size, dtype.value_or(kDefaultFloat));
}

Tensor zeros_cpu(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return filled("zeros", size, dtype.value_or(kDefaultFloat), Scalar(std::int64_t{0}), device);
}

Tensor ones_cpu(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return filled("ones", size, dtype.value_or(kDefaultFloat), Scalar(std::int64_t{1}), device);
}

Tensor full_cpu(IntArrayRef size, const Scalar& fill_value, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  return filled("full", size, dtype.value_or(dtype_of_value(fill_value)), fill_value, device);
}

Tensor arange_cpu(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  check_cpu("arange", device);
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const ScalarType out_dtype = dtype.value_or(integral ? ScalarType::Int64 : kDefaultFloat);
  const double s = start.to_double(), e = end.to_double(), d = step.to_double();
  KAEL_CHECK(d != 0, "arange: step must be nonzero");
  KAEL_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: " << start << " -> " << end);
  KAEL_CHECK((d > 0 && e >= s) || (d < 0 && e <= s),
             "arange: upper bound and larger bound inconsistent with step sign (start " << start << ", end " << end
                                                                                        << ", step " << step << ")");
  double count;
  if (integral) {
    const std::int64_t si = start.to<std::int64_t>(), ei = end.to<std::int64_t>(), di = step.to<std::int64_t>();
    count = std::ceil(static_cast<double>(ei - si) / static_cast<double>(di));
  } else {
    count = std::ceil((e - s) / d);
  }
  KAEL_CHECK(count >= 0 && count < 9.0e18, "arange: invalid size " << count);
  const std::int64_t n = static_cast<std::int64_t>(count);
  const std::int64_t sizes[] = {n};
  Tensor out = alloc_cpu(sizes, out_dtype);
  visit_dtype(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    if (integral && !is_floating(out_dtype)) {
      const std::int64_t si = start.to<std::int64_t>(), di = step.to<std::int64_t>();
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(si + i * di);
    } else {
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(s + static_cast<double>(i) * d);
    }
  });
  return out;
}

Tensor arange_end_cpu(const Scalar& end, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return arange_cpu(Scalar(std::int64_t{0}), end, Scalar(std::int64_t{1}), dtype, device);
}

Tensor eye_cpu(std::int64_t n, std::optional<std::int64_t> m, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  const std::int64_t cols = m.value_or(n);
  KAEL_CHECK_VALUE(n >= 0, "eye: n must be greater or equal to 0, got " << n);
  KAEL_CHECK_VALUE(cols >= 0, "eye: m must be greater or equal to 0, got " << cols);
  const std::int64_t size[] = {n, cols};
  Tensor out = filled("eye", size, dtype.value_or(kDefaultFloat), Scalar(std::int64_t{0}), device);
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (std::int64_t i = 0; i < std::min(n, cols); ++i) p[i * cols + i] = static_cast<T>(1);
  });
  return out;
}

Tensor empty_like_cpu(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return empty_cpu(self.sizes(), dtype.value_or(self.dtype()), device);
}

Tensor zeros_like_cpu(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return zeros_cpu(self.sizes(), dtype.value_or(self.dtype()), device);
}

Tensor ones_like_cpu(const Tensor& self, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ones_cpu(self.sizes(), dtype.value_or(self.dtype()), device);
}

Tensor full_like_cpu(const Tensor& self, const Scalar& fill_value, std::optional<ScalarType> dtype,
                     std::optional<Device> device) {
  return filled("full_like", self.sizes(), dtype.value_or(self.dtype()), fill_value, device);
}

Tensor clone_cpu(const Tensor& self) {
  // Keeps the memory layout of dense inputs (PyTorch's preserve_format).
  const OperandView v = view_of(self);
  Tensor out = self.is_contiguous() ? alloc_cpu(self.sizes(), self.dtype())
                                    : alloc_strided_cpu(self.sizes(), output_strides_like(self.sizes(), &v, 1),
                                                        self.dtype());
  copy_cpu(out, self);
  return out;
}

Tensor to_device_cpu(const Tensor& self, Device device, std::optional<ScalarType> dtype, bool copy) {
  check_cpu("to", device);
  const ScalarType target = dtype.value_or(self.dtype());
  if (target != self.dtype()) return to_dtype_cpu(self, target);
  return copy ? clone_cpu(self) : self;
}

}  // namespace kael::native
