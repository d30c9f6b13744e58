// Random ops built from the random kernels (CompositeImplicit/Explicit): factories, *_like,
// bernoulli and dropout. They call registered ops only, so every device's kernels serve them.
#include <cstdint>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/bernoulli_.h"
#include "kael/ops/div.h"
#include "kael/ops/empty.h"
#include "kael/ops/empty_like.h"
#include "kael/ops/mul.h"
#include "kael/ops/normal_.h"
#include "kael/ops/random_.h"
#include "kael/ops/uniform_.h"
#include "kael/ops/zeros.h"

namespace kael::native {

namespace {

// The floating dtype of a uniform or normal factory, checked before anything is allocated.
ScalarType floating_dtype(const char* op, std::optional<ScalarType> dtype, ScalarType fallback) {
  const ScalarType t = dtype.value_or(fallback);
  KAEL_CHECK(is_floating(t), op << ": not implemented for dtype " << dtype_name(t) << " (a floating dtype is needed)");
  return t;
}

}  // namespace

Tensor rand(IntArrayRef size, std::optional<Generator> generator, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  Tensor t = kael::empty(size, floating_dtype("rand", dtype, kDefaultFloat), device);
  kael::uniform_(t, 0.0, 1.0, generator);
  return t;
}

Tensor randn(IntArrayRef size, std::optional<Generator> generator, std::optional<ScalarType> dtype,
             std::optional<Device> device) {
  Tensor t = kael::empty(size, floating_dtype("randn", dtype, kDefaultFloat), device);
  kael::normal_(t, 0.0, 1.0, generator);
  return t;
}

Tensor normal_float_float(double mean, double std, IntArrayRef size, std::optional<Generator> generator,
                          std::optional<ScalarType> dtype, std::optional<Device> device) {
  KAEL_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std " << std);
  Tensor t = kael::empty(size, floating_dtype("normal", dtype, kDefaultFloat), device);
  kael::normal_(t, mean, std, generator);
  return t;
}

Tensor randint_low(std::int64_t low, std::int64_t high, IntArrayRef size, std::optional<Generator> generator,
                   std::optional<ScalarType> dtype, std::optional<Device> device) {
  KAEL_CHECK(low < high, "randint: random_ expects 'from' to be less than 'to', but got from=" << low << " >= to=" << high);
  Tensor t = kael::empty(size, dtype.value_or(ScalarType::Int64), device);
  kael::random_(t, low, high, generator);
  return t;
}

Tensor randint(std::int64_t high, IntArrayRef size, std::optional<Generator> generator, std::optional<ScalarType> dtype,
               std::optional<Device> device) {
  return randint_low(0, high, size, generator, dtype, device);
}

Tensor rand_like(const Tensor& self, std::optional<Generator> generator, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  Tensor t = kael::empty_like(self, floating_dtype("rand_like", dtype, self.dtype()), device);
  kael::uniform_(t, 0.0, 1.0, generator);
  return t;
}

Tensor randn_like(const Tensor& self, std::optional<Generator> generator, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  Tensor t = kael::empty_like(self, floating_dtype("randn_like", dtype, self.dtype()), device);
  kael::normal_(t, 0.0, 1.0, generator);
  return t;
}

Tensor randint_like_low(const Tensor& self, std::int64_t low, std::int64_t high, std::optional<Generator> generator,
                        std::optional<ScalarType> dtype, std::optional<Device> device) {
  KAEL_CHECK(low < high,
             "randint_like: random_ expects 'from' to be less than 'to', but got from=" << low << " >= to=" << high);
  Tensor t = kael::empty_like(self, dtype, device);
  kael::random_(t, low, high, generator);
  return t;
}

Tensor randint_like(const Tensor& self, std::int64_t high, std::optional<Generator> generator,
                    std::optional<ScalarType> dtype, std::optional<Device> device) {
  return randint_like_low(self, 0, high, generator, dtype, device);
}

Tensor bernoulli(const Tensor& self, std::optional<Generator> generator) {
  KAEL_CHECK(is_floating(self.dtype()), "bernoulli: not implemented for dtype " << dtype_name(self.dtype())
                                                                              << " (a floating dtype is needed)");
  Tensor t = kael::empty_like(self, std::nullopt, std::nullopt);
  kael::bernoulli_(t, self, generator);
  return t;
}

Tensor bernoulli_p(const Tensor& self, double p, std::optional<Generator> generator) {
  KAEL_CHECK(p >= 0 && p <= 1, "bernoulli expects p to be in [0, 1], but got p=" << p);
  Tensor t = kael::empty_like(self, std::nullopt, std::nullopt);
  kael::bernoulli_(t, p, generator);
  return t;
}

// PyTorch's CPU dropout (_dropout_impl): input itself when nothing is dropped, input * 0 when
// everything is, else input * (bernoulli(1 - p) / (1 - p)).
Tensor dropout(const Tensor& self, double p, bool train) {
  KAEL_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got " << p);
  if (p == 0 || !train || self.numel() == 0) return self;
  if (p == 1) return kael::mul(self, kael::zeros(IntArrayRef{}, self.dtype(), self.device()));
  Tensor noise = kael::empty_like(self, std::nullopt, std::nullopt);
  kael::bernoulli_(noise, 1 - p, std::nullopt);
  kael::div_(noise, Scalar(1 - p));
  return kael::mul(self, noise);
}

}  // namespace kael::native
