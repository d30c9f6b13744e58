// Scans along one dim on the CPU: cumsum and cumprod.
//
// x: any shape and strides, already in the output dtype (set-up converts it, as PyTorch's
// integer up-cast does); out: x's shape, contiguous. Each line along dim is scanned in order
// with an accumulator of double for float32/float64, float for float16/bfloat16 (PyTorch's CPU
// accumulators) and wrapping uint64 for integers; lines are spread over threads
// (reduce_engine.h), so results do not depend on the thread count.
#include "kael/core/concurrency.h"
#include "kael/core/convert.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/native/reduce.h"
#include "reduce_engine.h"

namespace kael::native {

namespace {

template <typename T>
using scan_acc_t = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double,
                                      std::conditional_t<is_reduced_floating_v<T>, float, std::uint64_t>>;

template <typename Acc, typename T>
Acc scan_value(T v) {
  if constexpr (std::is_same_v<Acc, std::uint64_t>) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
  } else {
    return static_cast<Acc>(static_cast<opmath_t<T>>(v));
  }
}

Tensor scan(const char* op, const Tensor& self, std::int64_t dim, std::optional<ScalarType> dtype, bool product) {
  const ScalarType t = integer_upcast_dtype(self, dtype);
  KAEL_CHECK_IMPLEMENTED(t != ScalarType::Bool, op << ": not implemented for dtype bool");
  LineSetup s = setup_lines(op, self, dim, t, t, /*with_indices=*/false);
  UnlockedSection section;
  if (section.active()) s.input = section.own(s.input);
  section.unlock();
  const Tensor& x = s.input;
  const LinePlan in = make_line_plan(x, x.dim() == 0 ? 0 : s.dim);
  const LinePlan out = make_line_plan(s.out, s.out.dim() == 0 ? 0 : s.dim);
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = scan_acc_t<T>;
    const T* xd = x.data<T>();
    T* od = s.out.data<T>();
    const std::int64_t n = in.length, xs = in.stride, os = out.stride;
    auto line = [&](std::int64_t, std::int64_t x_offset, std::int64_t out_offset) {
      const T* src = xd + x_offset;
      T* dst = od + out_offset;
      Acc acc = product ? Acc(1) : Acc(0);
      for (std::int64_t k = 0; k < n; ++k) {
        if (product) {
          acc *= scan_value<Acc>(src[k * xs]);
        } else {
          acc += scan_value<Acc>(src[k * xs]);
        }
        dst[k * os] = convert<T>(acc);
      }
    };
    for_each_line(in, out, n, line);
  });
  return s.out;
}

}  // namespace

Tensor cumsum_cpu(const Tensor& self, std::int64_t dim, std::optional<ScalarType> dtype) {
  return scan("cumsum", self, dim, dtype, /*product=*/false);
}

Tensor cumprod_cpu(const Tensor& self, std::int64_t dim, std::optional<ScalarType> dtype) {
  return scan("cumprod", self, dim, dtype, /*product=*/true);
}

}  // namespace kael::native
