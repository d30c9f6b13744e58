// Factories and copies on the CPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/copy_.h"
#include "kael/ops/empty.h"
#include "kael/ops/empty_strided.h"
#include "kael/ops/fill_.h"

namespace kael::native {

namespace {

void check_cpu(const char* op, const std::optional<Device>& device) {
  if (!device) return;
  check_device_available(op, *device);
  KAEL_CHECK(device->is_cpu(), op << ": device '" << device->str() << "' is not supported by this kernel");
}

}  // namespace

Tensor empty_cpu(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  check_cpu("empty", device);
  checked_numel("empty", size);
  Tensor t = alloc_cpu(size, dtype.value_or(default_dtype()));
  // a reused block may hold any bytes, which are no bools (Note [Bool bytes])
  if (t.dtype() == ScalarType::Bool) normalize_bool_bytes(t.data_ptr(), static_cast<std::size_t>(t.numel()));
  return t;
}

Tensor empty_strided_cpu(IntArrayRef size, IntArrayRef stride, std::optional<ScalarType> dtype,
                         std::optional<Device> device) {
  check_cpu("empty_strided", device);
  KAEL_CHECK(size.size() == stride.size(), "empty_strided: mismatch in length of strides and shape ("
                                               << size.size() << " sizes, " << stride.size() << " strides)");
  const std::int64_t numel = checked_numel("empty_strided", size);
  // As PyTorch (TensorImpl::set_sizes_and_strides): a negative stride stands for the stride a
  // contiguous layout would give that dim after the later ones (1 for the last), and it is taken
  // only where it moves to no element: a dim of size 1, or an empty tensor. Elsewhere it is
  // refused (PyTorch: "Storage size calculation overflowed"); kael has no negative strides.
  DimVector strides(stride);
  for (std::size_t i = strides.size(); i-- > 0;) {
    if (strides[i] >= 0) continue;
    KAEL_CHECK(size[i] == 1 || numel == 0, "empty_strided: negative strides are not supported (got "
                                               << shape_str(stride) << " for size " << shape_str(size) << ")");
    std::int64_t st = 1;
    KAEL_CHECK(i + 1 == strides.size() ||
                   !__builtin_mul_overflow(std::max<std::int64_t>(size[i + 1], 1), strides[i + 1], &st),
               "empty_strided: storage size calculation overflowed for size " << shape_str(size) << " and strides "
                                                                              << shape_str(stride));
    strides[i] = st;
  }
  return alloc_strided_cpu(size, strides, dtype.value_or(default_dtype()));
}

// Note [arange semantics]: PyTorch's rules, checked against it case by case in test_factories.py.
//  - The bounds are checked in double: a nonzero step, finite ends, ends consistent with the
//    step's sign.
//  - int64 results count in int64 with every argument truncated (0.5, 3.7 -> 0 1 2), so that
//    ranges beyond 2^53 stay exact; the span is taken in uint64 so no difference can overflow.
//  - Every other dtype takes its length from the double arguments; integral ones compute values
//    in int64 from the truncated start and step (which may truncate to 0: arange(0, 1, 0.2,
//    dtype=int32) is five zeros) and wrap them into the dtype, as a C++ cast does.
//  - bool has no arange.
Tensor arange_cpu(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  check_cpu("arange", device);
  const bool integral = !start.is_floating() && !end.is_floating() && !step.is_floating();
  const ScalarType out_dtype = dtype.value_or(integral ? ScalarType::Int64 : default_dtype());
  KAEL_CHECK_IMPLEMENTED(out_dtype != ScalarType::Bool, "arange: not implemented for dtype bool");
  const double s = start.to_double(), e = end.to_double(), d = step.to_double();
  KAEL_CHECK(d != 0, "arange: step must be nonzero");
  KAEL_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: " << start << " -> " << end);
  KAEL_CHECK((d > 0 && e >= s) || (d < 0 && e <= s),
             "arange: upper bound and lower bound inconsistent with step sign (start "
                 << start << ", end " << end << ", step " << step << ")");
  const bool int_values = !is_floating(out_dtype);
  if (is_reduced_floating(out_dtype)) {  // counted in float from start and step, which PyTorch checks
    check_convertible("arange", start, ScalarType::Float32);
    check_convertible("arange", step, ScalarType::Float32);
  }
  std::int64_t si = 0, di = 0;
  if (int_values) {
    check_convertible("arange", start, ScalarType::Int64);
    check_convertible("arange", step, ScalarType::Int64);
    si = start.to<std::int64_t>();
    di = step.to<std::int64_t>();
  }
  std::uint64_t count;
  if (out_dtype == ScalarType::Int64) {
    check_convertible("arange", end, ScalarType::Int64);
    const std::int64_t ei = end.to<std::int64_t>();
    KAEL_CHECK_VALUE(di != 0, "arange: step must be nonzero (got " << step << ", which is 0 as an int64)");
    const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
    // truncation keeps the order of the ends, so the span has the step's sign or is empty
    const std::uint64_t span = di > 0 ? (ei > si ? u(ei) - u(si) : 0) : (si > ei ? u(si) - u(ei) : 0);
    const std::uint64_t stride = di > 0 ? u(di) : std::uint64_t{0} - u(di);
    count = span / stride + (span % stride != 0 ? 1 : 0);
  } else {
    const double c = std::ceil((e - s) / d);
    KAEL_CHECK(c >= 0 && c < 9.2e18, "arange: invalid size, possible overflow? (" << c << " elements)");
    count = static_cast<std::uint64_t>(c);
  }
  KAEL_CHECK(count <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
             "arange: invalid size, possible overflow? (" << count << " elements)");
  const std::int64_t n = static_cast<std::int64_t>(count);
  const std::int64_t sizes[] = {n};
  checked_numel("arange", sizes);
  Tensor out = alloc_cpu(sizes, out_dtype);
  visit_dtype(out_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    if (int_values) {
      // wrapping uint64 arithmetic is int64 arithmetic modulo 2^64, as in PyTorch's int64 loop
      const auto first = static_cast<std::uint64_t>(si), inc = static_cast<std::uint64_t>(di);
      for (std::int64_t i = 0; i < n; ++i)
        p[i] = convert<T>(static_cast<std::int64_t>(first + static_cast<std::uint64_t>(i) * inc));
    } else if constexpr (sizeof(T) == 2) {  // float16 and bfloat16 count in float, as PyTorch does
      const float sf = static_cast<float>(s), df = static_cast<float>(d);
      for (std::int64_t i = 0; i < n; ++i) p[i] = convert<T>(sf + static_cast<float>(i) * df);
    } else {
      for (std::int64_t i = 0; i < n; ++i) p[i] = convert<T>(s + static_cast<double>(i) * d);
    }
  });
  return out;
}

// ---------------------------------------------------------------- linspace, logspace

namespace {

// An index as the element type S converts it (through float for float16/bfloat16).
template <typename S>
S index_as(std::int64_t i) {
  if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
    return static_cast<S>(i);
  } else {
    return S(static_cast<float>(i));
  }
}

// PyTorch's recipe (values from both ends, so the last is exactly end): in the element type for
// floating dtypes (float16/bfloat16 rounded after every step, as their arithmetic does), in
// double for integers (then truncated).
template <typename S>
void linspace_fill(S* out, std::int64_t steps, const Scalar& start_s, const Scalar& end_s) {
  if constexpr (std::is_integral_v<S>) {
    const double start = static_cast<double>(start_s.checked_to<S>("linspace"));
    const double end = static_cast<double>(end_s.checked_to<S>("linspace"));
    const double step = (end - start) / static_cast<double>(steps - 1);
    const std::int64_t halfway = steps / 2;
    for (std::int64_t i = 0; i < steps; ++i) {
      const double v = i < halfway ? start + step * static_cast<double>(i)
                                   : end - step * static_cast<double>(steps - i - 1);
      out[i] = static_cast<S>(v);
    }
  } else {
    const S start = start_s.checked_to<S>("linspace");
    const S end = end_s.checked_to<S>("linspace");
    const S step = S((opmath_t<S>(end) - opmath_t<S>(start)) / opmath_t<S>(index_as<S>(steps - 1)));
    const std::int64_t halfway = steps / 2;
    for (std::int64_t i = 0; i < steps; ++i) {
      if (i < halfway) {
        const S offset = S(opmath_t<S>(step) * opmath_t<S>(index_as<S>(i)));
        out[i] = S(opmath_t<S>(start) + opmath_t<S>(offset));
      } else {
        const S offset = S(opmath_t<S>(step) * opmath_t<S>(index_as<S>(steps - i - 1)));
        out[i] = S(opmath_t<S>(end) - opmath_t<S>(offset));
      }
    }
  }
}

template <typename S>
void logspace_fill(S* out, std::int64_t steps, const Scalar& start_s, const Scalar& end_s, double base) {
  // As torch's kernel: the exponents converted to the dtype (checked), their difference taken in
  // it (rounded to S for floats), the step and each exponent in double, from the start for the
  // first half and from the end for the second (so that the middle of a symmetric range is
  // exact), and pow in double rounded (floats) or truncated (integers; beyond S's range x86's
  // truncation, Note [Conversions between dtypes]) to S.
  const S start = start_s.checked_to<S>("logspace");
  const S end = end_s.checked_to<S>("logspace");
  double span;
  if constexpr (std::is_integral_v<S>) {
    span = static_cast<double>(end) - static_cast<double>(start);
  } else {
    span = static_cast<double>(S(opmath_t<S>(end) - opmath_t<S>(start)));
  }
  const double step = span / static_cast<double>(steps - 1);
  const double first = static_cast<double>(opmath_t<S>(start)), last = static_cast<double>(opmath_t<S>(end));
  const std::int64_t halfway = steps / 2;
  for (std::int64_t i = 0; i < steps; ++i) {
    // the product rounded before the sum, as torch's build computes it: the compiler would
    // otherwise fuse the two into an FMA where the target has one, and the middle exponent of
    // logspace(-5, 5, 7) would be -2.6e-16 (10^e = 0.9999999999999994) rather than 0
    double offset = step * static_cast<double>(i < halfway ? i : steps - i - 1);
    __asm__("" : "+m"(offset));
    const double e = i < halfway ? first + offset : last - offset;
    const double v = std::pow(base, e);
    if constexpr (std::is_integral_v<S>) {
      // torch's kernel assigns the double to S: x86's cvttsd2si, through a 32-bit integer for
      // the narrower types, gives the minimum integer for NaN and values beyond its range
      using W = std::conditional_t<sizeof(S) == 8, std::int64_t, std::int32_t>;
      const bool fits = v > -static_cast<double>(std::numeric_limits<W>::max()) - 2.0 &&
                        v < static_cast<double>(std::numeric_limits<W>::max()) + 1.0;
      const W w = fits ? static_cast<W>(v) : std::numeric_limits<W>::min();
      out[i] = static_cast<S>(w);
    } else {
      out[i] = S(v);
    }
  }
}

Tensor spaced(const char* op, const Scalar& start, const Scalar& end, std::int64_t steps,
              std::optional<ScalarType> dtype, std::optional<Device> device, std::optional<double> base) {
  check_cpu(op, device);
  KAEL_CHECK(steps >= 0, op << ": number of steps must be non-negative (got " << steps << ")");
  const ScalarType t = dtype.value_or(default_dtype());
  KAEL_CHECK_IMPLEMENTED(t != ScalarType::Bool, op << ": not implemented for dtype bool");
  const std::int64_t size[] = {steps};
  Tensor out = kael::empty(size, t);
  if (steps == 0) return out;
  if (steps == 1) {
    const Scalar first = base ? Scalar(std::pow(*base, start.to_double())) : start;
    kael::fill_(out, first);  // fill_'s checked conversion: a value beyond the dtype raises, as in torch
    return out;
  }
  switch (t) {
#define KAEL_SPACED_CASE(S, name)                                                             \
  case ScalarType::name:                                                                      \
    if (base) {                                                                               \
      logspace_fill<S>(static_cast<S*>(out.data_ptr()), steps, start, end, *base);           \
    } else {                                                                                  \
      linspace_fill<S>(static_cast<S*>(out.data_ptr()), steps, start, end);                  \
    }                                                                                         \
    break;
    KAEL_SPACED_CASE(std::uint8_t, UInt8)
    KAEL_SPACED_CASE(std::int8_t, Int8)
    KAEL_SPACED_CASE(std::int16_t, Int16)
    KAEL_SPACED_CASE(std::int32_t, Int32)
    KAEL_SPACED_CASE(std::int64_t, Int64)
    KAEL_SPACED_CASE(Half, Float16)
    KAEL_SPACED_CASE(BFloat16, BFloat16)
    KAEL_SPACED_CASE(float, Float32)
    KAEL_SPACED_CASE(double, Float64)
#undef KAEL_SPACED_CASE
    default:
      KAEL_INTERNAL_ASSERT(false);
  }
  return out;
}

}  // namespace

Tensor linspace_cpu(const Scalar& start, const Scalar& end, std::int64_t steps, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  return spaced("linspace", start, end, steps, dtype, device, std::nullopt);
}

Tensor logspace_cpu(const Scalar& start, const Scalar& end, std::int64_t steps, double base,
                    std::optional<ScalarType> dtype, std::optional<Device> device) {
  return spaced("logspace", start, end, steps, dtype, device, base);
}

Tensor eye_cpu(std::int64_t n, std::optional<std::int64_t> m, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  const std::int64_t cols = m.value_or(n);
  KAEL_CHECK(n >= 0, "eye: n must be greater or equal to 0, got " << n);
  KAEL_CHECK(cols >= 0, "eye: m must be greater or equal to 0, got " << cols);
  check_cpu("eye", device);
  const std::int64_t size[] = {n, cols};
  checked_numel("eye", size);
  Tensor out = alloc_cpu(size, dtype.value_or(default_dtype()));
  fill_cpu(out, Scalar(std::int64_t{0}));
  visit_dtype(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (std::int64_t i = 0; i < std::min(n, cols); ++i) p[i * cols + i] = static_cast<T>(1);
  });
  return out;
}

const Tensor& copy_cpu_(const Tensor& self, const Tensor& src, bool /*non_blocking*/) {
  KAEL_CHECK(src.device().is_cpu(), "copy_: copying from " << src.device() << " is not supported by this kernel");
  self.impl()->storage()->check_write();  // Note [Inference tensors]
  copy_cpu_op(self, src);  // checks overlap (Note [Memory overlap]) before it writes
  self.bump_version();
  return self;
}

const Tensor& fill_cpu_(const Tensor& self, const Scalar& value) {
  self.impl()->storage()->check_write();  // Note [Inference tensors]
  {
    UnlockedSection section;  // Note [Concurrency] in kael/core/concurrency.h
    const Tensor& dst = section.own(self);
    section.unlock();
    fill_cpu(dst, value);
  }
  self.bump_version();
  return self;
}

Tensor to_device_cpu(const Tensor& self, Device device, std::optional<ScalarType> dtype, bool /*non_blocking*/,
                     bool copy) {
  check_cpu("to", device);
  const ScalarType target = dtype.value_or(self.dtype());
  if (target == self.dtype() && !copy) return self;
  // PyTorch's preserve_format: a dense input keeps its strides (a channels-last or transposed
  // tensor converts to one laid out the same way, so the ops that read both walk them together);
  // any other gets dense strides in its memory order, as a pointwise op's output would.
  const OperandView view = view_of(self);
  const DimVector strides = is_non_overlapping_and_dense(self) ? DimVector(self.strides())
                                                               : output_strides_like(self.sizes(), &view, 1);
  Tensor out = kael::empty_strided(self.sizes(), strides, target, device);
  kael::copy_(out, self);
  return out;
}

}  // namespace kael::native
