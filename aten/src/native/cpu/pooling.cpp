// Pooling ops on the CPU: max_pool2d_with_indices, avg_pool2d, adaptive_avg_pool2d,
// adaptive_max_pool2d and max_unpool2d, with the backward kernels (docs/decisions/pooling.md;
// resampling is in resample.cpp, im2col/col2im in patches.cpp, what they share in pool_common.h).
//
// Every op works on planes: the last two dims of a (C, H, W) or (N, C, H, W) tensor, read from
// a contiguous copy when the input is not contiguous (channels_last included); the result is
// contiguous. Work is split over the N * C planes, which are independent in the forward and
// the backward kernels alike, so no two threads write one element. float16/bfloat16 inputs are
// computed in float32 and rounded once; max pooling compares in the storage type's value
// (exact for every dtype). All checks run before anything is allocated or written.
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

// PyTorch's pooling output size: floor (or ceil) of (in + 2 pad - dilation (k - 1) - 1) / stride
// + 1, where a last window that would start in the right padding is dropped in ceil mode.
std::int64_t pool_out(std::int64_t in, std::int64_t k, std::int64_t pad, std::int64_t stride, std::int64_t dil,
                      bool ceil_mode) {
  const std::int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  std::int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

struct PoolGeometry {
  Planes in;
  Pair k, s, p, d;
  std::int64_t oh = 0, ow = 0;
};

PoolGeometry pool_geometry(const char* op, IntArrayRef input_size, IntArrayRef kernel_size, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  PoolGeometry g;
  g.k = pair_arg(op, "kernel_size", kernel_size);
  g.s = stride.empty() ? g.k : pair_arg(op, "stride", stride);
  g.p = pair_arg(op, "padding", padding);
  g.d = pair_arg(op, "dilation", dilation);
  KAEL_CHECK(g.k.h > 0 && g.k.w > 0,
             op << ": kernel size should be greater than zero, but got kH: " << g.k.h << " kW: " << g.k.w);
  KAEL_CHECK(g.s.h > 0 && g.s.w > 0,
             op << ": stride should be greater than zero, but got dH: " << g.s.h << " dW: " << g.s.w);
  KAEL_CHECK(g.d.h > 0 && g.d.w > 0,
             op << ": dilation should be greater than zero, but got dilationH: " << g.d.h << " dilationW: " << g.d.w);
  KAEL_CHECK(g.p.h >= 0 && g.p.w >= 0,
             op << ": pad must be non-negative, but got padH: " << g.p.h << " padW: " << g.p.w);
  const bool half_h = g.p.h <= ((g.k.h - 1) * g.d.h + 1) / 2, half_w = g.p.w <= ((g.k.w - 1) * g.d.w + 1) / 2;
  KAEL_CHECK(half_h && half_w, op << ": pad should be at most half of effective kernel size, but got pad="
                                  << (half_h ? g.p.w : g.p.h) << ", kernel_size=" << (half_h ? g.k.w : g.k.h)
                                  << " and dilation=" << (half_h ? g.d.w : g.d.h));
  g.in = planes_of(input_size);
  g.oh = pool_out(g.in.h, g.k.h, g.p.h, g.s.h, g.d.h, ceil_mode);
  g.ow = pool_out(g.in.w, g.k.w, g.p.w, g.s.w, g.d.w, ceil_mode);
  const std::int64_t c = input_size.size() == 4 ? input_size[1] : input_size[0];
  KAEL_CHECK(g.oh >= 1 && g.ow >= 1, op << ": Given input size: (" << c << "x" << g.in.h << "x" << g.in.w
                                        << "). Calculated output size: (" << c << "x" << g.oh << "x" << g.ow
                                        << "). Output size is too small");
  return g;
}

template <typename T>
bool is_nan_value(T v) {
  if constexpr (std::is_integral_v<T>) {
    (void)v;
    return false;
  } else {
    return std::isnan(static_cast<opmath_t<T>>(v));
  }
}

template <typename T>
using acc_t = std::conditional_t<std::is_integral_v<T>, std::int64_t, opmath_t<T>>;

template <typename T>
acc_t<T> lowest_value() {
  if constexpr (std::is_integral_v<T>)
    return std::numeric_limits<acc_t<T>>::lowest();
  else
    return -std::numeric_limits<acc_t<T>>::infinity();
}

// Scans the rows [h0, h1) step dh and columns [w0, w1) step dw of a plane for the largest value:
// a NaN always takes over (so the last NaN wins), otherwise only a strictly larger value (so the
// first of equal values wins); an all -inf window keeps its first element's index. PyTorch's rule.
template <typename T>
void window_max(const T* plane, std::int64_t width, std::int64_t h0, std::int64_t h1, std::int64_t dh, std::int64_t w0,
                std::int64_t w1, std::int64_t dw, T* out, std::int64_t* index) {
  using A = acc_t<T>;
  A best = lowest_value<T>();
  std::int64_t best_i = h0 * width + w0;
  for (std::int64_t ih = h0; ih < h1; ih += dh) {
    const T* row = plane + ih * width;
    for (std::int64_t iw = w0; iw < w1; iw += dw) {
      const A v = static_cast<A>(row[iw]);
      if (v > best || is_nan_value(v)) {
        best = v;
        best_i = ih * width + iw;
      }
    }
  }
  *out = static_cast<T>(best);
  *index = best_i;
}

// The index range of window i of an adaptive pool: [floor(i * in / out), ceil((i + 1) * in / out)).
std::int64_t adaptive_start(std::int64_t i, std::int64_t out, std::int64_t in) { return (i * in) / out; }
std::int64_t adaptive_end(std::int64_t i, std::int64_t out, std::int64_t in) { return ((i + 1) * in + out - 1) / out; }

Pair adaptive_output(const char* op, IntArrayRef output_size) {
  const Pair o = pair_arg(op, "output_size", output_size);
  KAEL_CHECK(o.h >= 0 && o.w >= 0, op << ": output_size must be non-negative, got " << shape_str(output_size));
  return o;
}

// `spatial_only`: only H and W must be non-empty (adaptive_avg_pool2d), else every dim but N.
void check_adaptive_input(const char* op, const Tensor& self, bool spatial_only) {
  check_same_device(op, kCPU, self.device());
  const auto s = self.sizes();
  KAEL_CHECK(self.dim() == 3 || self.dim() == 4, op << ": Expected 3D or 4D tensor, but got " << shape_str(s));
  for (std::int64_t i = spatial_only ? self.dim() - 2 : 1; i < self.dim(); ++i)
    KAEL_CHECK(s[i] > 0, op << ": Expected input to have non-zero size for non-batch dimensions, but input has sizes "
                            << shape_str(s) << " with dimension " << i << " being empty");
}

// Note [Channels-last max pooling]
// A channels-last (N, C, H, W) input is pooled where it lies, the channels innermost: each output
// position scans its window once, comparing C-long runs, and the values and indices are written
// channels-last, as torch's are (indices are still h * W + w within each channel's plane). A
// row-major input keeps the planar loops. The backward pass of such indices adds each gradient
// into a channels-last result the same way.
std::tuple<Tensor, Tensor> max_pool2d_channels_last(const Tensor& self, const PoolGeometry& g, const DimVector& shape) {
  const DimVector strides = channels_last_strides(shape);
  Tensor out = alloc_strided_cpu(shape, strides, self.dtype());
  Tensor idx = alloc_strided_cpu(shape, strides, ScalarType::Int64);
  const std::int64_t n = self.sizes()[0], c = self.sizes()[1], h = g.in.h, w = g.in.w;
  UnlockedSection section;
  const Tensor& xo = section.own(self);
  const Tensor& oo = section.own(out);
  const Tensor& io = section.own(idx);
  section.unlock();
  visit_compute(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* xp = xo.data<T>();
    T* op_ = oo.data<T>();
    std::int64_t* ip = io.data<std::int64_t>();
    parallel_for(n * g.oh, g.ow * c * g.k.h * g.k.w, [&](std::int64_t r0, std::int64_t r1) {
      std::vector<A> best(static_cast<std::size_t>(c));
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t b = r / g.oh, oh = r % g.oh;
        std::int64_t h0 = oh * g.s.h - g.p.h;
        const std::int64_t h1 = std::min(h0 + (g.k.h - 1) * g.d.h + 1, h);
        while (h0 < 0) h0 += g.d.h;
        for (std::int64_t ow = 0; ow < g.ow; ++ow) {
          std::int64_t w0 = ow * g.s.w - g.p.w;
          const std::int64_t w1 = std::min(w0 + (g.k.w - 1) * g.d.w + 1, w);
          while (w0 < 0) w0 += g.d.w;
          const std::int64_t o = ((b * g.oh + oh) * g.ow + ow) * c;
          std::int64_t* oi = ip + o;
          std::fill(best.begin(), best.end(), lowest_value<T>());
          std::fill(oi, oi + c, h0 * w + w0);  // (an all -inf window keeps its first element's index)
          for (std::int64_t ih = h0; ih < h1; ih += g.d.h) {
            for (std::int64_t iw = w0; iw < w1; iw += g.d.w) {
              const T* src = xp + ((b * h + ih) * w + iw) * c;
              const std::int64_t at = ih * w + iw;
              for (std::int64_t ch = 0; ch < c; ++ch) {  // window_max's rule, per channel
                const A v = static_cast<A>(src[ch]);
                if (v > best[ch] || is_nan_value(v)) {
                  best[ch] = v;
                  oi[ch] = at;
                }
              }
            }
          }
          for (std::int64_t ch = 0; ch < c; ++ch) op_[o + ch] = static_cast<T>(best[ch]);
        }
      }
    });
  });
  return {out, idx};
}

}  // namespace

// ---- max pooling

std::tuple<Tensor, Tensor> max_pool2d_with_indices_cpu(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride,
                                                       IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  constexpr const char* op = "max_pool2d";
  check_pool_input(op, self);
  check_dtype(op, self, true);
  const PoolGeometry g = pool_geometry(op, self.sizes(), kernel_size, stride, padding, dilation, ceil_mode);
  const DimVector shape = with_plane(g.in, g.oh, g.ow);
  if (self.numel() > 0 && !self.is_contiguous() && channels_last_dense(self))
    return max_pool2d_channels_last(self, g, shape);
  Tensor out = alloc_cpu(shape, self.dtype());
  Tensor idx = alloc_cpu(shape, ScalarType::Int64);
  if (out.numel() == 0) return {out, idx};
  Tensor x = contiguous_of(self);
  UnlockedSection section;
  const Tensor& xo = section.own(x);
  const Tensor& oo = section.own(out);
  const Tensor& io = section.own(idx);
  section.unlock();
  visit_compute(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = xo.data<T>();
    T* op_ = oo.data<T>();
    std::int64_t* ip = io.data<std::int64_t>();
    const std::int64_t in_plane = g.in.h * g.in.w, out_plane = g.oh * g.ow;
    parallel_for(g.in.planes, out_plane * g.k.h * g.k.w, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        const T* plane = xp + p * in_plane;
        for (std::int64_t oh = 0; oh < g.oh; ++oh) {
          std::int64_t h0 = oh * g.s.h - g.p.h;
          const std::int64_t h1 = std::min(h0 + (g.k.h - 1) * g.d.h + 1, g.in.h);
          while (h0 < 0) h0 += g.d.h;
          for (std::int64_t ow = 0; ow < g.ow; ++ow) {
            std::int64_t w0 = ow * g.s.w - g.p.w;
            const std::int64_t w1 = std::min(w0 + (g.k.w - 1) * g.d.w + 1, g.in.w);
            while (w0 < 0) w0 += g.d.w;
            const std::int64_t o = p * out_plane + oh * g.ow + ow;
            window_max(plane, g.in.w, h0, h1, g.d.h, w0, w1, g.d.w, op_ + o, ip + o);
          }
        }
      }
    });
  });
  return {out, idx};
}

std::tuple<Tensor, Tensor> adaptive_max_pool2d_cpu(const Tensor& self, IntArrayRef output_size) {
  constexpr const char* op = "adaptive_max_pool2d";
  check_adaptive_input(op, self, false);
  check_dtype(op, self, false);
  const Pair o = adaptive_output(op, output_size);
  const Planes in = planes_of(self.sizes());
  const DimVector shape = with_plane(in, o.h, o.w);
  Tensor out = alloc_cpu(shape, self.dtype());
  Tensor idx = alloc_cpu(shape, ScalarType::Int64);
  if (out.numel() == 0) return {out, idx};
  Tensor x = contiguous_of(self);
  UnlockedSection section;
  const Tensor& xo = section.own(x);
  const Tensor& oo = section.own(out);
  const Tensor& io = section.own(idx);
  section.unlock();
  visit_compute(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = xo.data<T>();
    T* op_ = oo.data<T>();
    std::int64_t* ip = io.data<std::int64_t>();
    const std::int64_t in_plane = in.h * in.w, out_plane = o.h * o.w;
    parallel_for(in.planes, in_plane, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        for (std::int64_t oh = 0; oh < o.h; ++oh) {
          const std::int64_t h0 = adaptive_start(oh, o.h, in.h), h1 = adaptive_end(oh, o.h, in.h);
          for (std::int64_t ow = 0; ow < o.w; ++ow) {
            const std::int64_t w0 = adaptive_start(ow, o.w, in.w), w1 = adaptive_end(ow, o.w, in.w);
            const std::int64_t at = p * out_plane + oh * o.w + ow;
            window_max(xp + p * in_plane, in.w, h0, h1, 1, w0, w1, 1, op_ + at, ip + at);
          }
        }
      }
    });
  });
  return {channels_last_like(self, out), channels_last_like(self, idx)};
}

Tensor max_pool2d_with_indices_backward_cpu(const Tensor& grad_output, const Tensor& indices, IntArrayRef input_size) {
  constexpr const char* op = "max_pool2d_with_indices_backward";
  KAEL_CHECK(indices.dtype() == ScalarType::Int64, op << ": indices must be int64, got " << indices.dtype());
  KAEL_CHECK(indices.dim() >= 2, op << ": indices must have at least 2 dims, got " << shape_str(indices.sizes()));
  const std::int64_t oh = indices.sizes()[indices.dim() - 2], ow = indices.sizes()[indices.dim() - 1];
  const Planes in = backward_planes(op, grad_output, input_size, oh, ow);
  KAEL_CHECK(indices.sizes().size() == grad_output.sizes().size() &&
                 std::equal(indices.sizes().begin(), indices.sizes().end(), grad_output.sizes().begin()),
             op << ": indices of shape " << shape_str(indices.sizes()) << " do not match grad_output of shape "
                << shape_str(grad_output.sizes()));
  const std::int64_t in_plane = in.h * in.w, out_plane = oh * ow;
  if (indices.numel() > 0 && indices.dim() == 4 && !indices.is_contiguous() && channels_last_dense(indices) &&
      (grad_output.dtype() == ScalarType::Float32 || grad_output.dtype() == ScalarType::Float64)) {
    // Note [Channels-last max pooling]: indices from a channels-last forward pass
    const std::int64_t* checked = indices.data<std::int64_t>();
    for (std::int64_t i = 0; i < indices.numel(); ++i)
      KAEL_CHECK_INDEX(checked[i] >= 0 && checked[i] < in_plane,
                       op << ": index " << checked[i] << " out of range for a plane of " << in.h << "x" << in.w);
    const std::int64_t n = input_size[0], c = input_size[1];
    const DimVector in_strides = channels_last_strides(input_size);
    Tensor dst = alloc_strided_cpu(input_size, in_strides, grad_output.dtype());
    fill_cpu(dst, Scalar(0.0));
    Tensor g = grad_output;
    if (!std::equal(g.strides().begin(), g.strides().end(), indices.strides().begin(), indices.strides().end())) {
      g = alloc_strided_cpu(grad_output.sizes(), indices.strides(), grad_output.dtype());
      copy_cpu(g, grad_output);
    }
    UnlockedSection section;
    const Tensor& go = section.own(g);
    const Tensor& io = section.own(indices);
    const Tensor& dso = section.own(dst);
    section.unlock();
    visit_dtype(grad_output.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        const T* gp = go.data<T>();
        const std::int64_t* ipx = io.data<std::int64_t>();
        T* dp = dso.data<T>();
        parallel_for(n, out_plane * c, [&](std::int64_t b0, std::int64_t b1) {  // samples never share a plane
          for (std::int64_t b = b0; b < b1; ++b)
            for (std::int64_t pos = 0; pos < out_plane; ++pos) {
              const std::int64_t o = (b * out_plane + pos) * c;
              T* base = dp + b * in_plane * c;
              for (std::int64_t ch = 0; ch < c; ++ch) base[ipx[o + ch] * c + ch] += gp[o + ch];
            }
        });
      }
    });
    return dst;
  }
  const Tensor ix = contiguous_of(indices);
  const std::int64_t* checked = ix.data<std::int64_t>();
  for (std::int64_t i = 0; i < ix.numel(); ++i)
    KAEL_CHECK_INDEX(checked[i] >= 0 && checked[i] < in_plane,
                     op << ": index " << checked[i] << " out of range for a plane of " << in.h << "x" << in.w);
  Tensor r = in_compute_dtype(grad_output, input_size, true, [&](const Tensor& g, const Tensor& dst, const Tensor& ix_own) {
    visit_compute(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        const std::int64_t* ipx = ix_own.data<std::int64_t>();
        const T* gp = g.data<T>();
        T* dp = dst.data<T>();
        parallel_for(in.planes, out_plane, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p)
            for (std::int64_t i = 0; i < out_plane; ++i) dp[p * in_plane + ipx[p * out_plane + i]] += gp[p * out_plane + i];
        });
      }
    });
  }, ix);
  return channels_last_like(indices, r);
}

Tensor max_unpool2d_cpu(const Tensor& self, const Tensor& indices, IntArrayRef output_size) {
  constexpr const char* op = "max_unpool2d";
  check_same_device(op, kCPU, self.device());
  check_dtype(op, self, false);
  KAEL_CHECK(indices.dtype() == ScalarType::Int64, op << ": elements in indices should be type int64 but got: "
                                                      << indices.dtype());
  KAEL_CHECK(self.dim() == 3 || self.dim() == 4,
             op << ": Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with " << self.dim()
                << " dimensions.");
  KAEL_CHECK(self.sizes().size() == indices.sizes().size() &&
                 std::equal(self.sizes().begin(), self.sizes().end(), indices.sizes().begin()),
             op << ": Expected shape of indices to be same as that of the input tensor (" << shape_str(self.sizes())
                << ") but got indices tensor with shape: " << shape_str(indices.sizes()));
  const Pair o = pair_arg(op, "output_size", output_size);
  for (std::int64_t i = 1; i < self.dim(); ++i)
    KAEL_CHECK(self.sizes()[i] > 0, op << ": Expected input to have non-zero size for non-batch dimensions, but got "
                                       << shape_str(self.sizes()));
  const Planes in = planes_of(self.sizes());
  const std::int64_t out_plane = o.h * o.w, in_plane = in.h * in.w;
  const Tensor ix = contiguous_of(indices);
  const std::int64_t* checked = ix.data<std::int64_t>();
  for (std::int64_t i = 0; i < ix.numel(); ++i)
    KAEL_CHECK(checked[i] >= 0 && checked[i] < out_plane, op << ": Found an invalid max index: " << checked[i]
                                                     << " (output volumes are of size " << o.h << "x" << o.w << ")");
  Tensor out = alloc_cpu(with_plane(in, o.h, o.w), self.dtype());
  fill_cpu(out, Scalar(0.0));
  if (self.numel() == 0) return out;
  Tensor x = contiguous_of(self);
  UnlockedSection section;
  const Tensor& xo = section.own(x);
  const Tensor& oo = section.own(out);
  const Tensor& io = section.own(ix);
  section.unlock();
  visit_compute(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = xo.data<T>();
    T* dp = oo.data<T>();
    const std::int64_t* ipx = io.data<std::int64_t>();
    parallel_for(in.planes, in_plane, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p)
        for (std::int64_t i = 0; i < in_plane; ++i) dp[p * out_plane + ipx[p * in_plane + i]] = xp[p * in_plane + i];
    });
  });
  return out;
}

// ---- average pooling

namespace {

// The window of output (oh, ow) clipped to the image, and its divisor (PyTorch's rule: the
// window clipped to the padded image counts when count_include_pad).
struct AvgWindow {
  std::int64_t h0, h1, w0, w1, divisor;
};

AvgWindow avg_window(const PoolGeometry& g, std::int64_t oh, std::int64_t ow, bool count_include_pad,
                     std::optional<std::int64_t> divisor_override) {
  std::int64_t h0 = oh * g.s.h - g.p.h, w0 = ow * g.s.w - g.p.w;
  std::int64_t h1 = std::min(h0 + g.k.h, g.in.h + g.p.h), w1 = std::min(w0 + g.k.w, g.in.w + g.p.w);
  const std::int64_t pool_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<std::int64_t>(h0, 0);
  w0 = std::max<std::int64_t>(w0, 0);
  h1 = std::min(h1, g.in.h);
  w1 = std::min(w1, g.in.w);
  const std::int64_t div = divisor_override ? *divisor_override
                                            : (count_include_pad ? pool_size : (h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, div};
}

PoolGeometry avg_geometry(const char* op, IntArrayRef input_size, IntArrayRef kernel_size, IntArrayRef stride,
                          IntArrayRef padding, bool ceil_mode, std::optional<std::int64_t> divisor_override) {
  const std::int64_t one[2] = {1, 1};
  if (divisor_override) KAEL_CHECK(*divisor_override != 0, op << ": divisor must be not zero");
  return pool_geometry(op, input_size, kernel_size, stride, padding, IntArrayRef(one, 2), ceil_mode);
}

}  // namespace

Tensor avg_pool2d_cpu(const Tensor& self, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                      bool ceil_mode, bool count_include_pad, std::optional<std::int64_t> divisor_override) {
  constexpr const char* op = "avg_pool2d";
  check_pool_input(op, self);
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()) || self.dtype() == ScalarType::Int64,
                         op << ": not implemented for dtype " << self.dtype());
  const PoolGeometry g = avg_geometry(op, self.sizes(), kernel_size, stride, padding, ceil_mode, divisor_override);
  Tensor r = in_compute_dtype(self, with_plane(g.in, g.oh, g.ow), false, [&](const Tensor& x, const Tensor& out, const Tensor&) {
    visit_compute(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!is_reduced_floating_v<T>) {
        using A = acc_t<T>;
        const T* xp = x.data<T>();
        T* op_ = out.data<T>();
        const std::int64_t in_plane = g.in.h * g.in.w, out_plane = g.oh * g.ow;
        parallel_for(g.in.planes, out_plane * g.k.h * g.k.w, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p) {
            const T* plane = xp + p * in_plane;
            for (std::int64_t oh = 0; oh < g.oh; ++oh)
              for (std::int64_t ow = 0; ow < g.ow; ++ow) {
                const AvgWindow win = avg_window(g, oh, ow, count_include_pad, divisor_override);
                A sum = 0;
                for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                  for (std::int64_t iw = win.w0; iw < win.w1; ++iw) sum += static_cast<A>(plane[ih * g.in.w + iw]);
                const bool empty = win.h0 >= win.h1 || win.w0 >= win.w1;
                op_[p * out_plane + oh * g.ow + ow] = empty ? T(0) : static_cast<T>(sum / static_cast<A>(win.divisor));
              }
          }
        });
      }
    });
  });
  return channels_last_like(self, r);
}

Tensor avg_pool2d_backward_cpu(const Tensor& grad_output, IntArrayRef input_size, IntArrayRef kernel_size,
                               IntArrayRef stride, IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<std::int64_t> divisor_override) {
  constexpr const char* op = "avg_pool2d_backward";
  KAEL_CHECK(input_size.size() == 3 || input_size.size() == 4,
             op << ": input_size must have 3 or 4 elements, got " << shape_str(input_size));
  const PoolGeometry g = avg_geometry(op, input_size, kernel_size, stride, padding, ceil_mode, divisor_override);
  backward_planes(op, grad_output, input_size, g.oh, g.ow);
  Tensor r = in_compute_dtype(grad_output, input_size, true, [&](const Tensor& go, const Tensor& dst, const Tensor&) {
    visit_compute(go.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        const T* gp = go.data<T>();
        T* dp = dst.data<T>();
        const std::int64_t in_plane = g.in.h * g.in.w, out_plane = g.oh * g.ow;
        parallel_for(g.in.planes, out_plane * g.k.h * g.k.w, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p) {
            T* plane = dp + p * in_plane;
            for (std::int64_t oh = 0; oh < g.oh; ++oh)
              for (std::int64_t ow = 0; ow < g.ow; ++ow) {
                const AvgWindow win = avg_window(g, oh, ow, count_include_pad, divisor_override);
                const T v = gp[p * out_plane + oh * g.ow + ow] / static_cast<T>(win.divisor);
                for (std::int64_t ih = win.h0; ih < win.h1; ++ih)
                  for (std::int64_t iw = win.w0; iw < win.w1; ++iw) plane[ih * g.in.w + iw] += v;
              }
          }
        });
      }
    });
  });
  return channels_last_like(grad_output, r);
}

// ---- adaptive average pooling

Tensor adaptive_avg_pool2d_cpu(const Tensor& self, IntArrayRef output_size) {
  constexpr const char* op = "adaptive_avg_pool2d";
  check_adaptive_input(op, self, true);
  check_dtype(op, self, false);
  const Pair o = adaptive_output(op, output_size);
  const Planes in = planes_of(self.sizes());
  Tensor r = in_compute_dtype(self, with_plane(in, o.h, o.w), false, [&](const Tensor& x, const Tensor& out, const Tensor&) {
    visit_compute(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        const T* xp = x.data<T>();
        T* op_ = out.data<T>();
        const std::int64_t in_plane = in.h * in.w, out_plane = o.h * o.w;
        parallel_for(in.planes, in_plane, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p) {
            const T* plane = xp + p * in_plane;
            for (std::int64_t oh = 0; oh < o.h; ++oh) {
              const std::int64_t h0 = adaptive_start(oh, o.h, in.h), h1 = adaptive_end(oh, o.h, in.h);
              for (std::int64_t ow = 0; ow < o.w; ++ow) {
                const std::int64_t w0 = adaptive_start(ow, o.w, in.w), w1 = adaptive_end(ow, o.w, in.w);
                T sum = 0;
                for (std::int64_t ih = h0; ih < h1; ++ih)
                  for (std::int64_t iw = w0; iw < w1; ++iw) sum += plane[ih * in.w + iw];
                op_[p * out_plane + oh * o.w + ow] = sum / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
              }
            }
          }
        });
      }
    });
  });
  return channels_last_like(self, r);
}

Tensor adaptive_avg_pool2d_backward_cpu(const Tensor& grad_output, IntArrayRef input_size) {
  constexpr const char* op = "adaptive_avg_pool2d_backward";
  KAEL_CHECK(grad_output.dim() >= 2, op << ": grad_output must have at least 2 dims, got "
                                        << shape_str(grad_output.sizes()));
  const std::int64_t oh_n = grad_output.sizes()[grad_output.dim() - 2], ow_n = grad_output.sizes()[grad_output.dim() - 1];
  const Planes in = backward_planes(op, grad_output, input_size, oh_n, ow_n);
  Tensor r = in_compute_dtype(grad_output, input_size, true, [&](const Tensor& go, const Tensor& dst, const Tensor&) {
    visit_compute(go.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (kael::is_floating_v<T> && !is_reduced_floating_v<T>) {
        const T* gp = go.data<T>();
        T* dp = dst.data<T>();
        const std::int64_t in_plane = in.h * in.w, out_plane = oh_n * ow_n;
        parallel_for(in.planes, in_plane, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p) {
            T* plane = dp + p * in_plane;
            for (std::int64_t oh = 0; oh < oh_n; ++oh) {
              const std::int64_t h0 = adaptive_start(oh, oh_n, in.h), h1 = adaptive_end(oh, oh_n, in.h);
              for (std::int64_t ow = 0; ow < ow_n; ++ow) {
                const std::int64_t w0 = adaptive_start(ow, ow_n, in.w), w1 = adaptive_end(ow, ow_n, in.w);
                const T v = gp[p * out_plane + oh * ow_n + ow] / static_cast<T>(h1 - h0) / static_cast<T>(w1 - w0);
                for (std::int64_t ih = h0; ih < h1; ++ih)
                  for (std::int64_t iw = w0; iw < w1; ++iw) plane[ih * in.w + iw] += v;
              }
            }
          }
        });
      }
    });
  });
  return channels_last_like(grad_output, r);
}

}  // namespace kael::native
