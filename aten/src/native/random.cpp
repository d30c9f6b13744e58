// Random ops built from the random kernels (CompositeImplicit/Explicit): factories, *_like,
// bernoulli, dropout and the fills of other distributions. They call registered ops only, so every device's kernels serve them.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/ops/bernoulli_.h"
#include "kael/ops/ceil.h"
#include "kael/ops/clamp.h"
#include "kael/ops/copy_.h"
#include "kael/ops/exp.h"
#include "kael/ops/log.h"
#include "kael/ops/log1p.h"
#include "kael/ops/neg.h"
#include "kael/ops/sub.h"
#include "kael/ops/tan.h"
#include "kael/ops/div.h"
#include "kael/ops/empty.h"
#include "kael/ops/empty_like.h"
#include "kael/ops/add.h"
#include "kael/ops/all.h"
#include "kael/ops/ge.h"
#include "kael/ops/normal.h"
#include "kael/ops/to.h"
#include "kael/native/pointwise.h"
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
  KAEL_CHECK_IMPLEMENTED(is_floating(t),
                         op << ": not implemented for dtype " << dtype_name(t) << " (a floating dtype is needed)");
  return t;
}

}  // namespace

Tensor rand(IntArrayRef size, std::optional<Generator> generator, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  Tensor t = kael::empty(size, floating_dtype("rand", dtype, default_dtype()), device);
  kael::uniform_(t, 0.0, 1.0, generator);
  return t;
}

Tensor randn(IntArrayRef size, std::optional<Generator> generator, std::optional<ScalarType> dtype,
             std::optional<Device> device) {
  Tensor t = kael::empty(size, floating_dtype("randn", dtype, default_dtype()), device);
  kael::normal_(t, 0.0, 1.0, generator);
  return t;
}

Tensor normal_float_float(double mean, double std, IntArrayRef size, std::optional<Generator> generator,
                          std::optional<ScalarType> dtype, std::optional<Device> device) {
  KAEL_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std " << std);
  Tensor t = kael::empty(size, floating_dtype("normal", dtype, default_dtype()), device);
  kael::normal_(t, mean, std, generator);
  return t;
}

// normal with tensor arguments: mean + std * z, z drawn as normal.float_float draws (so one seed
// gives the same z on every device), through registered ops (autograd: d/dmean = grad, d/dstd =
// grad * z, as PyTorch's (x - mean) / std where std > 0).
namespace {
Tensor normal_from(const char* op, const Operand& mean, const Operand& std, std::optional<Generator> generator) {
  const Tensor& like = mean.is_tensor() ? mean.tensor() : std.tensor();
  const ScalarType t = like.dtype();  // mean's dtype when it is a tensor, as PyTorch
  KAEL_CHECK_IMPLEMENTED(is_floating(t),
                         op << ": not implemented for dtype " << dtype_name(t) << " (a floating dtype is needed)");
  if (std.is_tensor()) {
    const bool nonnegative = kael::all(kael::ge(std.tensor(), Scalar(0.0)), std::nullopt, false).item().to<bool>();
    KAEL_CHECK(nonnegative, op << " expects all elements of std >= 0.0");
  } else {
    const double s = std.scalar().to<double>();
    KAEL_CHECK(s >= 0.0, op << " expects std >= 0.0, but found std " << s);
  }
  const DimVector shape = mean.is_tensor() && std.is_tensor()
                              ? broadcast_shapes(op, mean.tensor().sizes(), std.tensor().sizes())
                              : DimVector(like.sizes());
  const Tensor z = kael::normal(0.0, 1.0, shape, generator, t, like.device());
  const Tensor scaled = std.is_tensor() ? kael::mul(z, std.tensor().dtype() == t ? std.tensor() : kael::to(std.tensor(), t))
                                        : kael::mul(z, std.scalar());
  if (!mean.is_tensor()) {
    // PyTorch adds a number mean to a float32 result with its overflow check (float16 and
    // bfloat16 results compute in float and round to inf; float64 holds every double)
    if (t == ScalarType::Float32) check_convertible(op, mean.scalar(), t);
    return kael::add(scaled, mean.scalar());
  }
  return kael::add(mean.tensor(), scaled);
}
}  // namespace

Tensor normal_tensor_float(const Tensor& mean, double std, std::optional<Generator> generator) {
  return normal_from("normal", Operand(mean), Operand(Scalar(std)), generator);
}

Tensor normal_float_tensor(double mean, const Tensor& std, std::optional<Generator> generator) {
  return normal_from("normal", Operand(Scalar(mean)), Operand(std), generator);
}

Tensor normal_tensor_tensor(const Tensor& mean, const Tensor& std, std::optional<Generator> generator) {
  return normal_from("normal", Operand(mean), Operand(std), generator);
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
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         "bernoulli: not implemented for dtype " << dtype_name(self.dtype())
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

// ---- fills of other distributions: a transform of uniform_ (or normal_) draws, copied into self

namespace {

// Uniform draws in [0, 1) of self's shape: float64 for a float64 self, float32 otherwise (the
// transform then rounds once, in the copy).
Tensor uniform_draws(const Tensor& self, ScalarType dtype, std::optional<Generator> generator) {
  Tensor u = kael::empty(self.sizes(), dtype, self.device());
  kael::uniform_(u, 0.0, 1.0, generator);
  return u;
}

ScalarType draw_dtype(const Tensor& self) {
  return self.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}

void check_continuous(const char* op, const char* name, const Tensor& self) {
  KAEL_CHECK(is_floating(self.dtype()), op << ": " << name
                                           << " distribution is a continuous probability distribution. dtype must be a "
                                              "floating point but you specified "
                                           << dtype_name(self.dtype()));
}

}  // namespace

// -log(1 - u) / lambd: the exponential distribution of rate lambd (lambd = inf gives zeros).
const Tensor& exponential_(const Tensor& self, double lambd, std::optional<Generator> generator) {
  constexpr const char* op = "exponential_";
  KAEL_CHECK(lambd > 0, op << ": exponential_ expects lambda > 0.0, but found lambda=" << lambd);
  if (self.numel() == 0) return self;  // PyTorch's kernel, and its dtype check, run on elements only
  check_continuous(op, "Exponential", self);
  const Tensor u = uniform_draws(self, draw_dtype(self), generator);
  return kael::copy_(self, kael::div(kael::neg(kael::log1p(kael::neg(u))), Scalar(lambd)));
}

// exp of N(mean, std**2) draws.
const Tensor& log_normal_(const Tensor& self, double mean, double std, std::optional<Generator> generator) {
  constexpr const char* op = "log_normal_";
  KAEL_CHECK(std > 0, op << ": log_normal_ expects std > 0.0, but found std=" << std);
  if (self.numel() == 0) return self;
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         op << ": \"log_normal_cpu\" not implemented for '" << dtype_name(self.dtype()) << "'");
  Tensor z = kael::empty(self.sizes(), self.dtype(), self.device());
  kael::normal_(z, mean, std, generator);
  return kael::copy_(self, kael::exp(z));
}

// median + sigma * tan(pi * (u - 1/2)); the dtype is checked even without elements, as PyTorch's.
const Tensor& cauchy_(const Tensor& self, double median, double sigma, std::optional<Generator> generator) {
  constexpr const char* op = "cauchy_";
  KAEL_CHECK(sigma > 0, op << ": cauchy_ expects sigma > 0.0, but found sigma=" << sigma);
  check_continuous(op, "Cauchy", self);
  const Tensor u = uniform_draws(self, draw_dtype(self), generator);
  const Tensor angle = kael::mul(kael::sub(u, Scalar(0.5)), Scalar(std::numbers::pi));
  return kael::copy_(self, kael::add(kael::mul(kael::tan(angle), Scalar(sigma)), Scalar(median)));
}

// The number of Bernoulli(p) trials up to the first success (1, 2, ...): ceil(log(1 - u) /
// log(1 - p)) in float64, at least 1 (1 - u is in (0, 1], so the log is finite); integer dtypes
// take the count as a cast would, bool is refused.
const Tensor& geometric_(const Tensor& self, double p, std::optional<Generator> generator) {
  constexpr const char* op = "geometric_";
  KAEL_CHECK(p > 0 && p < 1, op << ": geometric_ expects p to be in (0, 1), but got p=" << p);
  if (self.numel() == 0) return self;
  KAEL_CHECK_IMPLEMENTED(self.dtype() != ScalarType::Bool, op << ": \"geometric_cpu\" not implemented for 'Bool'");
  const Tensor u = uniform_draws(self, ScalarType::Float64, generator);
  const Tensor trials = kael::ceil(kael::div(kael::log(kael::sub(Scalar(1.0), u)), Scalar(std::log1p(-p))));
  return kael::copy_(self, kael::clamp(trials, std::optional<Scalar>(Scalar(1.0)), std::optional<Scalar>()));
}

}  // namespace kael::native
