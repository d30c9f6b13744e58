// The fused backward kernels of layer_norm and gelu (registry entries _layer_norm_backward_input,
// _layer_norm_backward_weight, _gelu_backward, _gelu_tanh_backward), which the derivative helpers
// call when the backward pass builds no graph (Note [Fused backward kernels] in
// aten/src/autograd/nn_formula_helpers.cpp). They compute as nn_ops.cpp's kernels do: in float for
// the half types, rows made contiguous first, every check before anything is written.
#include <cmath>
#include <optional>
#include <type_traits>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/math.h"
#include "kael/native/pointwise.h"
#include "nn_kernels.h"

namespace kael::native {

namespace {

using nn::check_cpu;
using nn::check_floating;
using nn::compute_dtype;
using nn::contiguous_as;
using nn::kLanes;
using nn::parallel_for;
using nn::store;

}  // namespace

// ---- layer_norm's backward (registry entries _layer_norm_backward_input and _weight)

namespace {

// mean and 1 / sqrt(var + eps) of a row of n elements, as standardize_rows computes them.
template <typename T>
void row_stats(const T* xr, std::int64_t n, double eps, T& mean, T& rstd) {
  T lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lanes[j] += xr[i + j];
  T s = 0;
  for (; i < n; ++i) s += xr[i];
  for (int j = 0; j < kLanes; ++j) s += lanes[j];
  mean = s / static_cast<T>(n);
  for (int j = 0; j < kLanes; ++j) lanes[j] = 0;
  i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const T c = xr[i + j] - mean;
      lanes[j] += c * c;
    }
  T ss = 0;
  for (; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
  for (int j = 0; j < kLanes; ++j) ss += lanes[j];
  rstd = T(1) / std::sqrt(ss / static_cast<T>(n) + static_cast<T>(eps));
}

// The sum of a[i] * b[i] (b null: of a[i]) for i < n, in independent lanes.
template <typename T>
T lane_sum(const T* a, const T* b, std::int64_t n) {
  T lanes[kLanes] = {};
  std::int64_t i = 0;
  if (b != nullptr) {
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += a[i + j] * b[i + j];
  } else {
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += a[i + j];
  }
  T s = 0;
  for (; i < n; ++i) s += b != nullptr ? a[i] * b[i] : a[i];
  for (int j = 0; j < kLanes; ++j) s += lanes[j];
  return s;
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row, g = grad * w (w may be null).
template <typename T>
void layer_norm_backward_rows(const T* x, const T* grad, const T* w, T* dx, std::int64_t rows, std::int64_t n,
                              double eps) {
  parallel_for(rows, 6 * n, [&](std::int64_t begin, std::int64_t end) {
    std::vector<T> buf(static_cast<std::size_t>(2 * n));
    T* g = buf.data();
    T* xhat = g + n;
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * n;
      const T* gr = grad + r * n;
      T* dr = dx + r * n;
      T mean, rstd;
      row_stats(xr, n, eps, mean, rstd);
      for (std::int64_t i = 0; i < n; ++i) xhat[i] = (xr[i] - mean) * rstd;
      if (w != nullptr) {
        for (std::int64_t i = 0; i < n; ++i) g[i] = gr[i] * w[i];
      } else {
        std::copy(gr, gr + n, g);
      }
      const T a = lane_sum<T>(g, nullptr, n) / static_cast<T>(n);
      const T b = lane_sum<T>(g, xhat, n) / static_cast<T>(n);
      for (std::int64_t i = 0; i < n; ++i) dr[i] = rstd * (g[i] - a - xhat[i] * b);
    }
  });
}

// dw[c] = sum over rows of grad * xhat, the sums in double: the rows' statistics first (in
// parallel over rows), then the columns split among the threads (each walks every row).
template <typename T>
void layer_norm_backward_weight_rows(const T* x, const T* grad, T* dw, std::int64_t rows, std::int64_t n, double eps) {
  std::vector<T> mean(static_cast<std::size_t>(rows)), rstd(static_cast<std::size_t>(rows));
  parallel_for(rows, 2 * n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) row_stats(x + r * n, n, eps, mean[r], rstd[r]);
  });
  parallel_for(n, 2 * rows, [&](std::int64_t c0, std::int64_t c1) {
    std::vector<double> acc(static_cast<std::size_t>(c1 - c0), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      const T* gr = grad + r * n;
      const T mr = mean[r], sr = rstd[r];
      for (std::int64_t c = c0; c < c1; ++c)
        acc[c - c0] += static_cast<double>(gr[c] * ((xr[c] - mr) * sr));
    }
    for (std::int64_t c = c0; c < c1; ++c) dw[c] = static_cast<T>(acc[c - c0]);
  });
}

}  // namespace

Tensor layer_norm_backward_input_cpu(const Tensor& grad, const Tensor& self, std::int64_t normalized_numel,
                                     const std::optional<Tensor>& weight, double eps) {
  constexpr const char* op = "layer_norm_backward";
  check_cpu(op, self);
  check_cpu(op, grad);
  check_floating(op, self);
  KAEL_CHECK(std::equal(grad.sizes().begin(), grad.sizes().end(), self.sizes().begin(), self.sizes().end()),
             op << ": expected grad of shape " << shape_str(self.sizes()) << ", got " << shape_str(grad.sizes()));
  const std::int64_t n = normalized_numel;
  KAEL_CHECK(n >= 1 && self.numel() % n == 0, op << ": bad normalized size " << n);
  if (weight) {
    check_cpu(op, *weight);
    KAEL_CHECK(weight->numel() == n, op << ": expected a weight of " << n << " elements, got " << weight->numel());
  }
  Tensor result = alloc_cpu(self.sizes(), self.dtype());
  if (self.numel() == 0) return result;
  const ScalarType acc_dtype = compute_dtype(self.dtype());
  const Tensor x = contiguous_as(self, acc_dtype);
  const Tensor g = contiguous_as(grad, acc_dtype);
  const Tensor w = weight ? contiguous_as(*weight, acc_dtype) : Tensor();
  const Tensor dx = self.dtype() == acc_dtype ? result : alloc_cpu(self.sizes(), acc_dtype);
  const std::int64_t rows = self.numel() / n;
  visit_dtype(acc_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      layer_norm_backward_rows<T>(x.data<T>(), g.data<T>(), w.defined() ? w.data<T>() : nullptr, dx.data<T>(), rows,
                                  n, eps);
    }
  });
  store(result, dx);
  return result;
}

Tensor layer_norm_backward_weight_cpu(const Tensor& grad, const Tensor& self, std::int64_t normalized_numel,
                                      double eps) {
  constexpr const char* op = "layer_norm_backward";
  check_cpu(op, self);
  check_cpu(op, grad);
  check_floating(op, self);
  KAEL_CHECK(std::equal(grad.sizes().begin(), grad.sizes().end(), self.sizes().begin(), self.sizes().end()),
             op << ": expected grad of shape " << shape_str(self.sizes()) << ", got " << shape_str(grad.sizes()));
  const std::int64_t n = normalized_numel;
  KAEL_CHECK(n >= 1 && self.numel() % n == 0, op << ": bad normalized size " << n);
  const DimVector shape{n};
  Tensor result = alloc_cpu(shape, grad.dtype());
  const ScalarType acc_dtype = compute_dtype(self.dtype());
  const Tensor x = contiguous_as(self, acc_dtype);
  const Tensor g = contiguous_as(grad, acc_dtype);
  const Tensor dw = grad.dtype() == acc_dtype ? result : alloc_cpu(shape, acc_dtype);
  const std::int64_t rows = self.numel() / n;
  visit_dtype(acc_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (rows == 0) std::fill(dw.data<T>(), dw.data<T>() + n, T(0));
      else layer_norm_backward_weight_rows<T>(x.data<T>(), g.data<T>(), dw.data<T>(), rows, n, eps);
    }
  });
  store(result, dw);
  return result;
}

// ---- gelu's backward (registry entries _gelu_backward and _gelu_tanh_backward)

Tensor gelu_backward_cpu(const Tensor& grad, const Tensor& self) {
  KAEL_CHECK(grad.device().is_cpu() && self.device().is_cpu() && grad.dtype() == self.dtype() &&
                 is_floating(self.dtype()) && grad.is_contiguous() && self.is_contiguous() &&
                 std::equal(grad.sizes().begin(), grad.sizes().end(), self.sizes().begin(), self.sizes().end()),
             "gelu_backward: expected contiguous floating CPU tensors of one shape and dtype");
  Tensor result = alloc_cpu(self.sizes(), self.dtype());
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_reduced_floating_v<T>) {
      // float16/bfloat16 compute in float32 and round once, as PyTorch's kernel
      using S = T;
      using C = std::conditional_t<is_reduced_floating_v<S>, float, S>;
      const S* g = grad.data<S>();
      const S* x = self.data<S>();
      S* out = result.data<S>();
      // math::gelu_grad written out with the always-inlined erf and exp, so that the loop
      // vectorises (a call of gelu_grad per element costs ~10 ns)
      parallel_for(self.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          const C a = static_cast<C>(x[i]);
          const C cdf = C(0.5) * (C(1) + math::erf(a * C(0.70710678118654752440)));
          const C pdf = math::exp(C(-0.5) * a * a) * C(0.39894228040143267794);  // 1 / sqrt(2 pi)
          out[i] = static_cast<S>(static_cast<C>(g[i]) * (cdf + a * pdf));
        }
      });
    }
  });
  return result;
}

// With y = sqrt(2 / pi) (x + 0.044715 x^3) and s = (1 + tanh(y)) / 2 = 1 / (1 + exp(-2 y)),
// gelu_tanh(x) = x s and its derivative is s + x s (1 - s) 2 y' = s (1 + x (1 - s) 2 y'), one exp
// per element (math::gelu_tanh_grad takes a tanh) in a loop that vectorises. -2 y = x (c1 + c3
// x^2) as vmath::gelu_tanh computes it, so 2 y' = -(c1 + 3 c3 x^2). Where exp(-2 y) overflows
// (x below about -10) s is 0 and so is the derivative; at x = +-inf the result is NaN, as
// math::gelu_tanh_grad's (inf * 0).
Tensor gelu_tanh_backward_cpu(const Tensor& grad, const Tensor& self) {
  KAEL_CHECK(grad.device().is_cpu() && self.device().is_cpu() && grad.dtype() == self.dtype() &&
                 is_floating(self.dtype()) && grad.is_contiguous() && self.is_contiguous() &&
                 std::equal(grad.sizes().begin(), grad.sizes().end(), self.sizes().begin(), self.sizes().end()),
             "gelu_tanh_backward: expected contiguous floating CPU tensors of one shape and dtype");
  Tensor result = alloc_cpu(self.sizes(), self.dtype());
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_reduced_floating_v<T>) {
      // float16/bfloat16 compute in float32 and round once, as PyTorch's kernel
      using S = T;
      using C = std::conditional_t<is_reduced_floating_v<S>, float, S>;
      const S* g = grad.data<S>();
      const S* x = self.data<S>();
      S* out = result.data<S>();
      constexpr C c1 = C(-2.0 * 0.79788456080286535588);             // -2 sqrt(2 / pi)
      constexpr C c3 = C(-2.0 * 0.79788456080286535588 * 0.044715);  // c1 0.044715
      parallel_for(self.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          const C a = static_cast<C>(x[i]);
          const C a2 = a * a;
          const C s = C(1) / (C(1) + math::exp(a * (c1 + c3 * a2)));
          out[i] = static_cast<S>(static_cast<C>(g[i]) * (s * (C(1) - a * (C(1) - s) * (c1 + C(3) * c3 * a2))));
        }
      });
    }
  });
  return result;
}

}  // namespace kael::native
