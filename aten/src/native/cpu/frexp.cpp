// frexp: mantissa and exponent of each element (two results, so a hand-written kernel).
#include <cmath>
#include <tuple>
#include <type_traits>

#include "kael/core/error.h"
#include "kael/core/half.h"
#include "kael/native/declarations.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/empty.h"

namespace kael::native {

namespace {

template <typename S>
void frexp_loop(const Tensor& in, const Tensor& mantissa, const Tensor& exponent) {
  const S* src = static_cast<const S*>(in.data_ptr());
  S* m = static_cast<S*>(mantissa.data_ptr());
  std::int32_t* e = static_cast<std::int32_t*>(exponent.data_ptr());
  const std::int64_t n = in.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    int exp = 0;
    bool finite = true;
    if constexpr (std::is_same_v<S, float> || std::is_same_v<S, double>) {
      m[i] = std::frexp(src[i], &exp);
      finite = std::isfinite(src[i]);
    } else {  // float16/bfloat16: exact in float, whose frexp gives the same pair
      const float v = static_cast<float>(src[i]);
      m[i] = S(std::frexp(v, &exp));
      finite = std::isfinite(v);
    }
    // inf and NaN: the C library leaves the exponent unspecified; PyTorch reports 0.
    e[i] = finite ? exp : 0;
  }
}

}  // namespace

std::tuple<Tensor, Tensor> frexp_cpu(const Tensor& self) {
  const ScalarType t = self.dtype();
  KAEL_CHECK(is_floating(t), "frexp: only supports floating-point dtypes (got " << t << ")");
  const Tensor in = kael::contiguous(self);
  Tensor mantissa = kael::empty(self.sizes(), t, self.device());
  Tensor exponent = kael::empty(self.sizes(), ScalarType::Int32, self.device());
  switch (t) {
    case ScalarType::Float32:
      frexp_loop<float>(in, mantissa, exponent);
      break;
    case ScalarType::Float64:
      frexp_loop<double>(in, mantissa, exponent);
      break;
    case ScalarType::Float16:
      frexp_loop<Half>(in, mantissa, exponent);
      break;
    case ScalarType::BFloat16:
      frexp_loop<BFloat16>(in, mantissa, exponent);
      break;
    default:
      KAEL_INTERNAL_ASSERT(false);
  }
  return {mantissa, exponent};
}

}  // namespace kael::native
