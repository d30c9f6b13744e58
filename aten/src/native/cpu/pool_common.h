#pragma once
// What the pooling, resampling and patch kernels share (pooling.cpp, resample.cpp, patches.cpp):
// plane geometry, argument checks, the compute dtype and the channels-last copy of a result
// (docs/decisions/pooling.md).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/core/tensor.h"
#include "kael/native/pointwise.h"
#include "layout.h"

namespace kael::native::pool {

struct Pair {
  std::int64_t h, w;
};

inline Pair pair_arg(const char* op, const char* name, IntArrayRef v) {
  KAEL_CHECK(v.size() == 2, op << ": " << name << " must have 2 elements, got " << shape_str(v));
  // Bounded so that the geometry's products (kernel * dilation, kernel_h * kernel_w) cannot overflow.
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  KAEL_CHECK(v[0] >= -kMax && v[0] <= kMax && v[1] >= -kMax && v[1] <= kMax,
             op << ": " << name << " values must lie within +-" << kMax << ", got " << shape_str(v));
  return {v[0], v[1]};
}

// The plane geometry of a (C, H, W) or (N, C, H, W) input: the leading dims, the number of
// planes and the plane's size. `allow_empty_batch`: N may be 0 (the other dims may not).
struct Planes {
  DimVector lead;
  std::int64_t planes = 1, h = 0, w = 0;
};

inline Planes planes_of(IntArrayRef sizes) {
  Planes p;
  const std::size_t d = sizes.size();
  for (std::size_t i = 0; i + 2 < d; ++i) {
    p.lead.push_back(sizes[i]);
    p.planes *= sizes[i];
  }
  p.h = sizes[d - 2];
  p.w = sizes[d - 1];
  return p;
}

inline void check_pool_input(const char* op, const Tensor& self) {
  check_same_device(op, kCPU, self.device());
  const auto s = self.sizes();
  bool ok = self.dim() == 3 || self.dim() == 4;
  for (std::int64_t i = self.dim() == 4 ? 1 : 0; ok && i < self.dim(); ++i) ok = s[i] != 0;
  KAEL_CHECK(ok, op << ": Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got: "
                    << shape_str(s));
}

inline void check_dtype(const char* op, const Tensor& t, bool integers) {
  const ScalarType d = t.dtype();
  KAEL_CHECK_IMPLEMENTED(is_floating(d) || (integers && d != ScalarType::Bool),
                         op << ": not implemented for dtype " << d);
}

inline DimVector with_plane(const Planes& p, std::int64_t h, std::int64_t w) {
  DimVector out = p.lead;
  out.push_back(h);
  out.push_back(w);
  return out;
}

inline Tensor contiguous_of(const Tensor& t) { return t.is_contiguous() ? t : snapshot_cpu(t); }

// Note [Channels-last results]
// torch lays out every pooling and resampling result of a channels-last (N, C, H, W) input
// channels-last. Max pooling and bilinear interpolation walk such an input where it lies (Note
// [Channels-last max pooling], Note [Channels-last bilinear interpolation]); the average and
// adaptive pools and nearest resampling compute on planes, as for any other layout, and their
// result is then copied into channels-last strides (the same values; one copy of the result,
// where the input's contiguous copy was made already). Backward kernels do the same for a
// channels-last incoming gradient.
inline Tensor channels_last_like(const Tensor& layout, const Tensor& out) {
  if (out.dim() != 4 || out.numel() == 0 || layout.dim() != 4 || layout.is_contiguous() || !channels_last_dense(layout))
    return out;
  Tensor dst = alloc_strided_cpu(out.sizes(), channels_last_strides(out.sizes()), out.dtype());
  copy_cpu(dst, out);
  return dst;
}
// Runs f(TypeTag<T>) for the storage dtype of `t`; float16/bfloat16 are not computed here (the
// callers convert them to float32 first, where a sum is involved).
template <typename F>
inline void visit_compute(ScalarType t, F&& f) {
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) f(tag);
  });
}

inline ScalarType compute_dtype(ScalarType t) { return is_reduced_floating(t) ? ScalarType::Float32 : t; }
// Checks a backward's input_size against the gradient's leading dims.
inline Planes backward_planes(const char* op, const Tensor& grad_output, IntArrayRef input_size, std::int64_t oh,
                       std::int64_t ow) {
  check_same_device(op, kCPU, grad_output.device());
  KAEL_CHECK(input_size.size() == 3 || input_size.size() == 4,
             op << ": input_size must have 3 or 4 elements, got " << shape_str(input_size));
  const Planes p = planes_of(input_size);
  const DimVector expected = with_plane(p, oh, ow);
  KAEL_CHECK(grad_output.sizes().size() == expected.size() &&
                 std::equal(expected.begin(), expected.end(), grad_output.sizes().begin()),
             op << ": expected grad_output of shape " << shape_str(expected) << ", got "
                << shape_str(grad_output.sizes()));
  check_dtype(op, grad_output, false);
  return p;
}

// Runs body(src, dst, extra) with src = `in` as a contiguous tensor of the compute dtype and dst
// a new contiguous result of shape `shape` in that dtype, zero-filled when `zero`; returns dst
// converted to `in`'s dtype. The body runs without the caller's lock when the call allows it
// (Note [Concurrency]), on the call's own copies of src, dst and `extra` (another tensor it reads).
template <typename F>
inline Tensor in_compute_dtype(const Tensor& in, IntArrayRef shape, bool zero, F&& body, const Tensor& extra = Tensor()) {
  const ScalarType cd = compute_dtype(in.dtype());
  Tensor src = in.dtype() == cd ? contiguous_of(in) : to_dtype_cpu(in, cd);
  const Tensor dst = alloc_cpu(shape, cd);
  if (zero) fill_cpu(dst, Scalar(0.0));
  if (dst.numel() > 0 && src.numel() > 0) {
    UnlockedSection section;
    const Tensor& s = section.own(src);
    const Tensor& d = section.own(dst);
    const Tensor& e = extra.defined() ? section.own(extra) : extra;
    section.unlock();
    body(s, d, e);
  }
  return cd == in.dtype() ? dst : to_dtype_cpu(dst, in.dtype());
}

}  // namespace kael::native::pool
