// Resampling on the CPU: _upsample_nearest2d, upsample_nearest_exact2d and _upsample_bilinear2d
// with their backward kernels, on planes as the pooling kernels (pooling.cpp's header says how),
// channels-last inputs of bilinear interpolation where they lie (docs/decisions/pooling.md).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "layout.h"
#include "nn_kernels.h"
#include "pool_common.h"

namespace kael::native {

using namespace pool;  // NOLINT: the shared helpers of pool_common.h

namespace {

using nn::parallel_for;

// ---- bilinear and nearest source indices (PyTorch's UpSample.h rules)

template <typename A>
A linear_scale(std::int64_t in, std::int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  return scale.has_value() && *scale > 0 ? static_cast<A>(1.0 / *scale) : static_cast<A>(in) / static_cast<A>(out);
}

template <typename A>
struct LinearTap {
  std::int64_t i0, i1;
  A l0, l1;
};

template <typename A>
LinearTap<A> linear_tap(A ratio, std::int64_t o, std::int64_t in, std::int64_t out, bool align_corners) {
  if (in == out) return {o, o, A(1), A(0)};
  A real = align_corners ? ratio * static_cast<A>(o) : ratio * (static_cast<A>(o) + A(0.5)) - A(0.5);
  if (!align_corners && real < A(0)) real = A(0);
  const std::int64_t i0 = std::min(static_cast<std::int64_t>(std::floor(real)), in - 1);
  const A l1 = std::min(std::max(real - static_cast<A>(i0), A(0)), A(1));
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), A(1) - l1, l1};
}

template <typename A>
std::vector<LinearTap<A>> linear_taps(std::int64_t in, std::int64_t out, bool align_corners,
                                      std::optional<double> scale) {
  const A ratio = linear_scale<A>(in, out, align_corners, scale);
  std::vector<LinearTap<A>> taps;
  taps.reserve(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) taps.push_back(linear_tap<A>(ratio, o, in, out, align_corners));
  return taps;
}

// The source index of output o: floor(o * s) (legacy 'nearest', with its shortcuts for the
// same size and twice the size) or floor((o + 0.5) * s) ('nearest-exact'), s in float32.
template <bool Exact>
std::int64_t nearest_source(std::int64_t o, std::int64_t in, std::int64_t out, std::optional<double> scale) {
  if (!Exact && out == in) return o;
  if (!Exact && out == 2 * in) return o >> 1;
  const float s = scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                                  : static_cast<float>(in) / static_cast<float>(out);
  const float src = Exact ? static_cast<float>((static_cast<double>(o) + 0.5) * static_cast<double>(s))
                          : static_cast<float>(o) * s;
  return std::min(static_cast<std::int64_t>(std::floor(src)), in - 1);
}

void check_upsample_input(const char* op, const Tensor& self, Pair out) {
  check_same_device(op, kCPU, self.device());
  KAEL_CHECK(self.dim() == 4, op << ": expected a 4-D (N, C, H, W) input, got " << shape_str(self.sizes()));
  const auto s = self.sizes();
  KAEL_CHECK(s[2] > 0 && s[3] > 0 && out.h > 0 && out.w > 0,
             op << ": Input and output sizes should be greater than 0, but got input (H: " << s[2] << ", W: " << s[3]
                << ") output (H: " << out.h << ", W: " << out.w << ")");
  check_dtype(op, self, false);
}

// Note [Channels-last bilinear interpolation]
// As max pooling (Note [Channels-last max pooling]): a channels-last float32/float64 input is
// interpolated where it lies, each output position reading its four taps as C-long runs, and the
// result is channels-last, as torch's; each element is computed with the planar loop's operations
// in the same order, so the values are the same bits. The backward pass adds the four weighted
// gradients into a channels-last result in the planar loop's order, one sample per task.
Tensor upsample_bilinear2d_channels_last(const Tensor& self, Pair o, bool align_corners, std::optional<double> scales_h,
                                         std::optional<double> scales_w) {
  const std::int64_t n = self.sizes()[0], c = self.sizes()[1], h = self.sizes()[2], w = self.sizes()[3];
  const DimVector shape{n, c, o.h, o.w};
  Tensor out = alloc_strided_cpu(shape, channels_last_strides(shape), self.dtype());
  UnlockedSection section;
  const Tensor& xo = section.own(self);
  const Tensor& oo = section.own(out);
  section.unlock();
  visit_dtype(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const auto th = linear_taps<T>(h, o.h, align_corners, scales_h);
      const auto tw = linear_taps<T>(w, o.w, align_corners, scales_w);
      const T* xp = xo.data<T>();
      T* op_ = oo.data<T>();
      parallel_for(n * o.h, o.w * c * 4, [&](std::int64_t r0_, std::int64_t r1_) {
        for (std::int64_t r = r0_; r < r1_; ++r) {
          const std::int64_t b_ = r / o.h, i = r % o.h;
          const LinearTap<T>& a = th[static_cast<std::size_t>(i)];
          const T* row0 = xp + (b_ * h + a.i0) * w * c;
          const T* row1 = xp + (b_ * h + a.i1) * w * c;
          T* dst = op_ + r * o.w * c;
          for (std::int64_t j = 0; j < o.w; ++j) {
            const LinearTap<T>& b = tw[static_cast<std::size_t>(j)];
            const T* p00 = row0 + b.i0 * c;
            const T* p01 = row0 + b.i1 * c;
            const T* p10 = row1 + b.i0 * c;
            const T* p11 = row1 + b.i1 * c;
            T* d = dst + j * c;
            for (std::int64_t ch = 0; ch < c; ++ch) {
              const T top = p00[ch] * b.l0 + p01[ch] * b.l1;
              const T bottom = p10[ch] * b.l0 + p11[ch] * b.l1;
              d[ch] = top * a.l0 + bottom * a.l1;
            }
          }
        }
      });
    }
  });
  return out;
}

Tensor upsample_bilinear2d_backward_channels_last(const Tensor& grad_output, Pair o, IntArrayRef input_size,
                                                  bool align_corners, std::optional<double> scales_h,
                                                  std::optional<double> scales_w) {
  const std::int64_t n = input_size[0], c = input_size[1], h = input_size[2], w = input_size[3];
  Tensor dst = alloc_strided_cpu(input_size, channels_last_strides(input_size), grad_output.dtype());
  fill_cpu(dst, Scalar(0.0));
  UnlockedSection section;
  const Tensor& go = section.own(grad_output);
  const Tensor& dso = section.own(dst);
  section.unlock();
  visit_dtype(grad_output.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const auto th = linear_taps<T>(h, o.h, align_corners, scales_h);
      const auto tw = linear_taps<T>(w, o.w, align_corners, scales_w);
      const T* gp = go.data<T>();
      T* dp = dso.data<T>();
      parallel_for(n, o.h * o.w * c * 4, [&](std::int64_t s0, std::int64_t s1) {
        for (std::int64_t b_ = s0; b_ < s1; ++b_)
          for (std::int64_t i = 0; i < o.h; ++i) {
            const LinearTap<T>& a = th[static_cast<std::size_t>(i)];
            T* row0 = dp + (b_ * h + a.i0) * w * c;
            T* row1 = dp + (b_ * h + a.i1) * w * c;
            const T* g = gp + (b_ * o.h + i) * o.w * c;
            for (std::int64_t j = 0; j < o.w; ++j) {
              const LinearTap<T>& b = tw[static_cast<std::size_t>(j)];
              T* p00 = row0 + b.i0 * c;
              T* p01 = row0 + b.i1 * c;
              T* p10 = row1 + b.i0 * c;
              T* p11 = row1 + b.i1 * c;
              const T* gj = g + j * c;
              for (std::int64_t ch = 0; ch < c; ++ch) {
                p00[ch] += a.l0 * b.l0 * gj[ch];
                p01[ch] += a.l0 * b.l1 * gj[ch];
                p10[ch] += a.l1 * b.l0 * gj[ch];
                p11[ch] += a.l1 * b.l1 * gj[ch];
              }
            }
          }
      });
    }
  });
  return dst;
}

}  // namespace

// ---- nearest and bilinear resampling

namespace {

template <bool Exact>
Tensor upsample_nearest_impl(const char* op, const Tensor& self, IntArrayRef output_size, std::optional<double> scales_h,
                              std::optional<double> scales_w) {
  const Pair o = pair_arg(op, "output_size", output_size);
  check_upsample_input(op, self, o);
  const Planes in = planes_of(self.sizes());
  Tensor r = in_compute_dtype(self, with_plane(in, o.h, o.w), false, [&](const Tensor& x, const Tensor& out, const Tensor&) {
    visit_compute(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        std::vector<std::int64_t> src_w(static_cast<std::size_t>(o.w));
        for (std::int64_t j = 0; j < o.w; ++j) src_w[static_cast<std::size_t>(j)] = nearest_source<Exact>(j, in.w, o.w, scales_w);
        const T* xp = x.data<T>();
        T* op_ = out.data<T>();
        parallel_for(in.planes, o.h * o.w, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p)
            for (std::int64_t i = 0; i < o.h; ++i) {
              const T* row = xp + p * in.h * in.w + nearest_source<Exact>(i, in.h, o.h, scales_h) * in.w;
              T* dst = op_ + (p * o.h + i) * o.w;
              for (std::int64_t j = 0; j < o.w; ++j) dst[j] = row[src_w[static_cast<std::size_t>(j)]];
            }
        });
      }
    });
  });
  return channels_last_like(self, r);
}

template <bool Exact>
Tensor upsample_nearest_backward_impl(const char* op, const Tensor& grad_output, IntArrayRef output_size, IntArrayRef input_size,
                                       std::optional<double> scales_h, std::optional<double> scales_w) {
  const Pair o = pair_arg(op, "output_size", output_size);
  KAEL_CHECK(input_size.size() == 4, op << ": input_size must have 4 elements, got " << shape_str(input_size));
  const Planes in = backward_planes(op, grad_output, input_size, o.h, o.w);
  Tensor r = in_compute_dtype(grad_output, input_size, true, [&](const Tensor& go, const Tensor& dst, const Tensor&) {
    visit_compute(go.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        std::vector<std::int64_t> src_w(static_cast<std::size_t>(o.w));
        for (std::int64_t j = 0; j < o.w; ++j) src_w[static_cast<std::size_t>(j)] = nearest_source<Exact>(j, in.w, o.w, scales_w);
        const T* gp = go.data<T>();
        T* dp = dst.data<T>();
        parallel_for(in.planes, o.h * o.w, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p)
            for (std::int64_t i = 0; i < o.h; ++i) {
              T* row = dp + p * in.h * in.w + nearest_source<Exact>(i, in.h, o.h, scales_h) * in.w;
              const T* g = gp + (p * o.h + i) * o.w;
              for (std::int64_t j = 0; j < o.w; ++j) row[src_w[static_cast<std::size_t>(j)]] += g[j];
            }
        });
      }
    });
  });
  return channels_last_like(grad_output, r);
}

}  // namespace

Tensor _upsample_nearest2d_cpu(const Tensor& self, IntArrayRef output_size, std::optional<double> scales_h,
                              std::optional<double> scales_w) {
  return upsample_nearest_impl<false>("_upsample_nearest2d", self, output_size, scales_h, scales_w);
}

Tensor _upsample_nearest2d_backward_cpu(const Tensor& grad_output, IntArrayRef output_size, IntArrayRef input_size,
                                       std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_nearest_backward_impl<false>("_upsample_nearest2d_backward", grad_output, output_size, input_size,
                                               scales_h, scales_w);
}

Tensor upsample_nearest_exact2d_cpu(const Tensor& self, IntArrayRef output_size, std::optional<double> scales_h,
                                    std::optional<double> scales_w) {
  return upsample_nearest_impl<true>("_upsample_nearest_exact2d", self, output_size, scales_h, scales_w);
}

Tensor upsample_nearest_exact2d_backward_cpu(const Tensor& grad_output, IntArrayRef output_size,
                                             IntArrayRef input_size, std::optional<double> scales_h,
                                             std::optional<double> scales_w) {
  return upsample_nearest_backward_impl<true>("_upsample_nearest_exact2d_backward", grad_output, output_size,
                                              input_size, scales_h, scales_w);
}

Tensor _upsample_bilinear2d_cpu(const Tensor& self, IntArrayRef output_size, bool align_corners,
                               std::optional<double> scales_h, std::optional<double> scales_w) {
  constexpr const char* op = "_upsample_bilinear2d";
  const Pair o = pair_arg(op, "output_size", output_size);
  check_upsample_input(op, self, o);
  const Planes in = planes_of(self.sizes());
  if (self.numel() > 0 && !self.is_contiguous() && channels_last_dense(self) &&
      (self.dtype() == ScalarType::Float32 || self.dtype() == ScalarType::Float64))
    return upsample_bilinear2d_channels_last(self, o, align_corners, scales_h, scales_w);
  Tensor r = in_compute_dtype(self, with_plane(in, o.h, o.w), false, [&](const Tensor& x, const Tensor& out, const Tensor&) {
    visit_compute(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        const auto th = linear_taps<T>(in.h, o.h, align_corners, scales_h);
        const auto tw = linear_taps<T>(in.w, o.w, align_corners, scales_w);
        const T* xp = x.data<T>();
        T* op_ = out.data<T>();
        parallel_for(in.planes, o.h * o.w * 4, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p)
            for (std::int64_t i = 0; i < o.h; ++i) {
              const LinearTap<T>& a = th[static_cast<std::size_t>(i)];
              const T* r0 = xp + (p * in.h + a.i0) * in.w;
              const T* r1 = xp + (p * in.h + a.i1) * in.w;
              T* dst = op_ + (p * o.h + i) * o.w;
              for (std::int64_t j = 0; j < o.w; ++j) {
                const LinearTap<T>& b = tw[static_cast<std::size_t>(j)];
                const T top = r0[b.i0] * b.l0 + r0[b.i1] * b.l1;
                const T bottom = r1[b.i0] * b.l0 + r1[b.i1] * b.l1;
                dst[j] = top * a.l0 + bottom * a.l1;
              }
            }
        });
      }
    });
  });
  return channels_last_like(self, r);
}

Tensor _upsample_bilinear2d_backward_cpu(const Tensor& grad_output, IntArrayRef output_size, IntArrayRef input_size,
                                        bool align_corners, std::optional<double> scales_h,
                                        std::optional<double> scales_w) {
  constexpr const char* op = "_upsample_bilinear2d_backward";
  const Pair o = pair_arg(op, "output_size", output_size);
  KAEL_CHECK(input_size.size() == 4, op << ": input_size must have 4 elements, got " << shape_str(input_size));
  const Planes in = backward_planes(op, grad_output, input_size, o.h, o.w);
  if (grad_output.numel() > 0 && !grad_output.is_contiguous() && channels_last_dense(grad_output) &&
      (grad_output.dtype() == ScalarType::Float32 || grad_output.dtype() == ScalarType::Float64))
    return upsample_bilinear2d_backward_channels_last(grad_output, o, input_size, align_corners, scales_h, scales_w);
  Tensor r = in_compute_dtype(grad_output, input_size, true, [&](const Tensor& go, const Tensor& dst, const Tensor&) {
    visit_compute(go.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        const auto th = linear_taps<T>(in.h, o.h, align_corners, scales_h);
        const auto tw = linear_taps<T>(in.w, o.w, align_corners, scales_w);
        const T* gp = go.data<T>();
        T* dp = dst.data<T>();
        parallel_for(in.planes, o.h * o.w * 4, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p)
            for (std::int64_t i = 0; i < o.h; ++i) {
              const LinearTap<T>& a = th[static_cast<std::size_t>(i)];
              T* r0 = dp + (p * in.h + a.i0) * in.w;
              T* r1 = dp + (p * in.h + a.i1) * in.w;
              const T* g = gp + (p * o.h + i) * o.w;
              for (std::int64_t j = 0; j < o.w; ++j) {
                const LinearTap<T>& b = tw[static_cast<std::size_t>(j)];
                r0[b.i0] += a.l0 * b.l0 * g[j];
                r0[b.i1] += a.l0 * b.l1 * g[j];
                r1[b.i0] += a.l1 * b.l0 * g[j];
                r1[b.i1] += a.l1 * b.l1 * g[j];
              }
            }
        });
      }
    });
  });
  return channels_last_like(grad_output, r);
}

}  // namespace kael::native
