// The geometry of a convolution and the argument checks that conv1d/conv2d/conv_transpose*d and
// the convolution op share (aten/src/native/convolution.cpp, cpu/convolution.cpp). Messages follow
// PyTorch's, prefixed with the name of the op the user called.
#pragma once

#include <limits>
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "kael/core/error.h"
#include "kael/core/tensor.h"

namespace kael::native::conv {

constexpr int kMaxSpatial = 3;

inline std::string list_str(IntArrayRef v) {
  std::ostringstream s;
  s << "[";
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

// (a x b x c), as PyTorch prints per-channel sizes.
inline std::string sizes_x(const std::int64_t* v, int n) {
  std::ostringstream s;
  s << "(";
  for (int i = 0; i < n; ++i) s << (i ? " x " : "") << v[i];
  s << ")";
  return s.str();
}

// A parameter list of one entry or of `nd` entries, expanded to nd.
inline DimVector expand_param(const char* op, const char* name, IntArrayRef v, int nd) {
  KAEL_CHECK(v.size() == 1 || static_cast<int>(v.size()) == nd,
             op << ": expected " << name << " to be a single integer value or a list of " << nd
                << " values to match the convolution dimensions, but got " << name << "=" << list_str(v));
  // Bounded so that the geometry's products (kernel * dilation) cannot overflow.
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  for (const std::int64_t x : v)
    KAEL_CHECK(x >= -kMax && x <= kMax, op << ": " << name << " values must lie within +-" << kMax << ", got " << name
                                           << "=" << list_str(v));
  DimVector r(static_cast<std::size_t>(nd), v[0]);
  for (int i = 0; i < nd && v.size() > 1; ++i) r[i] = v[i];
  return r;
}

// The geometry in the sense of the plain convolution it is: x (n, ic, in...) * w (oc, ic / g,
// k...) -> y (n, oc, out...). A transposed convolution is that convolution's data gradient: its
// input is y, its output x, its weight w as it is (PyTorch's (C_in, C_out / groups, k...) is
// (oc, ic / g, k...) here).
struct Geometry {
  int nd = 0;
  std::int64_t n = 0, g = 1, ic = 0, oc = 0;
  std::int64_t in[kMaxSpatial] = {1, 1, 1}, out[kMaxSpatial] = {1, 1, 1}, k[kMaxSpatial] = {1, 1, 1};
  std::int64_t s[kMaxSpatial] = {1, 1, 1}, p[kMaxSpatial] = {0, 0, 0}, d[kMaxSpatial] = {1, 1, 1};
  std::int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  std::int64_t out_numel() const { return out[0] * out[1] * out[2]; }
  std::int64_t k_numel() const { return k[0] * k[1] * k[2]; }
};

// Checks the arguments of a batched convolution (input of rank weight.dim()) and returns its
// geometry. bias may be null.
inline Geometry check_and_geometry(const char* op, const Tensor& input, const Tensor& weight, const Tensor* bias,
                                   IntArrayRef stride_in, IntArrayRef padding_in, IntArrayRef dilation_in,
                                   bool transposed, IntArrayRef output_padding_in, std::int64_t groups) {
  KAEL_CHECK(weight.dim() >= 3 && weight.dim() <= 2 + kMaxSpatial,
             op << ": expected a weight of 3 to " << 2 + kMaxSpatial << " dims, got one of size "
                << list_str(weight.sizes()));
  const int nd = static_cast<int>(weight.dim()) - 2;
  KAEL_CHECK(input.dim() == weight.dim(), op << ": expected a " << weight.dim() << "-D input to match the "
                                             << weight.dim() << "-D weight of size " << list_str(weight.sizes())
                                             << ", but got input of size: " << list_str(input.sizes()));
  KAEL_CHECK(input.dtype() == weight.dtype(), op << ": expected input and weight to have the same dtype, but got "
                                                 << input.dtype() << " and " << weight.dtype());
  KAEL_CHECK(bias == nullptr || bias->dtype() == input.dtype(),
             op << ": expected input and bias to have the same dtype, but got " << input.dtype() << " and "
                << bias->dtype());
  KAEL_CHECK(input.device() == weight.device() && (bias == nullptr || bias->device() == input.device()),
             op << ": expected input, weight and bias on the same device");
  const DimVector stride = expand_param(op, "stride", stride_in, nd);
  const DimVector padding = expand_param(op, "padding", padding_in, nd);
  const DimVector dilation = expand_param(op, "dilation", dilation_in, nd);
  const DimVector output_padding = expand_param(op, "output_padding", output_padding_in, nd);
  for (int i = 0; i < nd; ++i) {
    KAEL_CHECK(stride[i] > 0, op << ": non-positive stride is not supported, got stride=" << list_str(stride));
    KAEL_CHECK(padding[i] >= 0, op << ": negative padding is not supported, got padding=" << list_str(padding));
    KAEL_CHECK(dilation[i] > 0,
               op << ": non-positive dilation is not supported, got dilation=" << list_str(dilation));
    KAEL_CHECK(output_padding[i] >= 0,
               op << ": negative output padding is not supported, got output_padding=" << list_str(output_padding));
  }
  KAEL_CHECK(groups > 0, op << ": non-positive groups is not supported, got groups=" << groups);
  if (transposed) {
    for (int i = 0; i < nd; ++i)
      KAEL_CHECK(output_padding[i] < stride[i] || output_padding[i] < dilation[i],
                 op << ": output padding must be smaller than either stride or dilation, but got output_padding="
                    << list_str(output_padding) << ", stride=" << list_str(stride)
                    << ", dilation=" << list_str(dilation));
  }  // (a plain convolution ignores output_padding, as PyTorch's convolution does)
  const std::int64_t w0 = weight.sizes()[0];
  KAEL_CHECK(w0 >= groups, op << ": Given groups=" << groups << ", expected weight to be at least " << groups
                              << " at dimension 0, but got weight of size " << list_str(weight.sizes()) << " instead");
  KAEL_CHECK(w0 % groups == 0, op << ": Given groups=" << groups << ", expected weight to be divisible by " << groups
                                  << " at dimension 0, but got weight of size " << list_str(weight.sizes())
                                  << " instead");
  const std::int64_t in_channels = input.sizes()[1];
  if (!transposed) {
    KAEL_CHECK(in_channels == weight.sizes()[1] * groups,
               op << ": Given groups=" << groups << ", weight of size " << list_str(weight.sizes())
                  << ", expected input" << list_str(input.sizes()) << " to have " << weight.sizes()[1] * groups
                  << " channels, but got " << in_channels << " channels instead");
  } else {
    KAEL_CHECK(in_channels == w0, op << ": Given transposed=1, weight of size " << list_str(weight.sizes())
                                     << ", expected input" << list_str(input.sizes()) << " to have " << w0
                                     << " channels, but got " << in_channels << " channels instead");
  }
  // As PyTorch: an empty input must be empty in its batch or channel dim (its result is then
  // empty too), and a non-empty one needs a non-empty weight.
  if (input.numel() == 0)
    KAEL_CHECK(input.sizes()[0] == 0 || in_channels == 0,
               op << ": Only zero batch or zero channel inputs are supported, but got input shape: "
                  << list_str(input.sizes()));
  else
    KAEL_CHECK(weight.numel() > 0, op << ": expected a non-empty weight for a non-empty input, but got weight of size "
                                      << list_str(weight.sizes()));
  const std::int64_t out_channels = transposed ? weight.sizes()[1] * groups : w0;
  if (bias != nullptr)
    KAEL_CHECK(bias->dim() == 1 && bias->sizes()[0] == out_channels,
               op << ": Given weight of size " << list_str(weight.sizes())
                  << ", expected bias to be 1-dimensional with " << out_channels << " elements, but got bias of size "
                  << list_str(bias->sizes()) << " instead");

  Geometry geo;
  geo.nd = nd;
  geo.n = input.sizes()[0];
  geo.g = groups;
  std::int64_t padded[kMaxSpatial], kernel[kMaxSpatial], in_sp[kMaxSpatial], out_sp[kMaxSpatial];
  for (int i = 0; i < nd; ++i) {
    geo.k[i] = weight.sizes()[2 + i];
    geo.s[i] = stride[i];
    geo.p[i] = padding[i];
    geo.d[i] = dilation[i];
    kernel[i] = dilation[i] * (geo.k[i] - 1) + 1;
    in_sp[i] = input.sizes()[2 + i];
  }
  if (!transposed) {
    geo.ic = in_channels;
    geo.oc = w0;
    for (int i = 0; i < nd; ++i) padded[i] = in_sp[i] + 2 * padding[i];
    bool fits = true;
    for (int i = 0; i < nd; ++i) fits = fits && padded[i] >= kernel[i];
    KAEL_CHECK(fits, op << ": Calculated padded input size per channel: " << sizes_x(padded, nd)
                        << ". Kernel size: " << sizes_x(kernel, nd)
                        << ". Kernel size can't be greater than actual input size");
    for (int i = 0; i < nd; ++i) {
      geo.in[i] = in_sp[i];
      geo.out[i] = (padded[i] - kernel[i]) / stride[i] + 1;
    }
  } else {
    geo.oc = in_channels;
    geo.ic = out_channels;
    bool positive = true;
    for (int i = 0; i < nd; ++i) {
      out_sp[i] = (in_sp[i] - 1) * stride[i] - 2 * padding[i] + kernel[i] + output_padding[i];
      positive = positive && out_sp[i] >= 0;
    }
    KAEL_CHECK(positive, op << ": Given input size per channel: " << sizes_x(in_sp, nd)
                            << ". Calculated output size per channel: " << sizes_x(out_sp, nd)
                            << ". Output size is too small");
    for (int i = 0; i < nd; ++i) {
      geo.out[i] = in_sp[i];
      geo.in[i] = out_sp[i];
    }
  }
  return geo;
}

// The dtypes each kind of convolution computes (as PyTorch's CPU kernels): every dtype but bool;
// a transposed one the floating dtypes and int64.
inline void check_dtype(const char* op, ScalarType t, bool transposed) {
  KAEL_CHECK_IMPLEMENTED(t != ScalarType::Bool && (!transposed || is_floating(t) || t == ScalarType::Int64),
                         op << ": not implemented for dtype " << t);
}

}  // namespace kael::native::conv
