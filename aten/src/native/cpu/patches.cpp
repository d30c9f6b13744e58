// im2col and col2im on the CPU (the sliding blocks of nn.Unfold and nn.Fold), on planes as the
// pooling kernels (pooling.cpp's header says how; docs/decisions/pooling.md).
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

// ---- im2col / col2im

struct PatchGeometry {
  Pair k, d, p, s;
  std::int64_t h = 0, w = 0, bh = 0, bw = 0;  // image size, blocks along each dim
};

PatchGeometry patch_geometry(const char* op, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                             IntArrayRef stride) {
  PatchGeometry g;
  g.k = pair_arg(op, "kernel_size", kernel_size);
  g.d = pair_arg(op, "dilation", dilation);
  g.p = pair_arg(op, "padding", padding);
  g.s = pair_arg(op, "stride", stride);
  KAEL_CHECK(g.k.h > 0 && g.k.w > 0, op << ": kernel size should be greater than zero, but got kernel_height: "
                                        << g.k.h << " kernel_width: " << g.k.w);
  KAEL_CHECK(g.s.h > 0 && g.s.w > 0, op << ": stride should be greater than zero, but got stride_height: " << g.s.h
                                        << " stride_width: " << g.s.w);
  KAEL_CHECK(g.d.h > 0 && g.d.w > 0, op << ": dilation should be greater than zero, but got dilation_height: "
                                        << g.d.h << " dilation_width: " << g.d.w);
  KAEL_CHECK(g.p.h >= 0 && g.p.w >= 0, op << ": padding should be non-negative, but got pad_height: " << g.p.h
                                          << " pad_width: " << g.p.w);
  return g;
}

void set_blocks(const char* op, PatchGeometry& g, std::int64_t h, std::int64_t w) {
  g.h = h;
  g.w = w;
  g.bh = (h + 2 * g.p.h - (g.d.h * (g.k.h - 1) + 1)) / g.s.h + 1;
  g.bw = (w + 2 * g.p.w - (g.d.w * (g.k.w - 1) + 1)) / g.s.w + 1;
  const bool neg_h = h + 2 * g.p.h - (g.d.h * (g.k.h - 1) + 1) < 0, neg_w = w + 2 * g.p.w - (g.d.w * (g.k.w - 1) + 1) < 0;
  KAEL_CHECK(g.bh >= 1 && g.bw >= 1 && !neg_h && !neg_w,
             op << ": Given input with spatial size (" << h << ", " << w << "), kernel_size=(" << g.k.h << ", " << g.k.w
                << "), dilation=(" << g.d.h << ", " << g.d.w << "), padding=(" << g.p.h << ", " << g.p.w
                << "), calculated shape of the array of sliding blocks as (" << (neg_h ? 0 : g.bh) << ", "
                << (neg_w ? 0 : g.bw) << "), but its components must be at least one.");
}

// Walks every (channel-plane row r = (i, j) of the kernel, block b) pair of one image plane:
// f(col_offset, image_offset or -1 for padding).
template <typename F>
void for_each_patch_element(const PatchGeometry& g, F&& f) {
  for (std::int64_t i = 0; i < g.k.h; ++i) {
    for (std::int64_t j = 0; j < g.k.w; ++j) {
      const std::int64_t row = (i * g.k.w + j) * g.bh * g.bw;
      for (std::int64_t by = 0; by < g.bh; ++by) {
        const std::int64_t y = by * g.s.h - g.p.h + i * g.d.h;
        const bool y_in = y >= 0 && y < g.h;
        for (std::int64_t bx = 0; bx < g.bw; ++bx) {
          const std::int64_t x = bx * g.s.w - g.p.w + j * g.d.w;
          f(row + by * g.bw + bx, y_in && x >= 0 && x < g.w ? y * g.w + x : -1);
        }
      }
    }
  }
}

}  // namespace

// ---- im2col / col2im

Tensor im2col_cpu(const Tensor& self, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                  IntArrayRef stride) {
  constexpr const char* op = "im2col";
  PatchGeometry g = patch_geometry(op, kernel_size, dilation, padding, stride);
  check_pool_input(op, self);
  check_dtype(op, self, false);
  const bool batched = self.dim() == 4;
  const std::int64_t n = batched ? self.sizes()[0] : 1, c = self.sizes()[batched ? 1 : 0];
  set_blocks(op, g, self.sizes()[self.dim() - 2], self.sizes()[self.dim() - 1]);
  const std::int64_t rows = c * g.k.h * g.k.w, blocks = g.bh * g.bw;
  DimVector shape;
  if (batched) shape.push_back(n);
  shape.push_back(rows);
  shape.push_back(blocks);
  Tensor out = alloc_cpu(shape, self.dtype());
  if (out.numel() == 0) return out;
  Tensor x = contiguous_of(self);
  UnlockedSection section;
  const Tensor& xo = section.own(x);
  const Tensor& oo = section.own(out);
  section.unlock();
  visit_compute(self.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = xo.data<T>();
    T* dp = oo.data<T>();
    const std::int64_t plane_cols = g.k.h * g.k.w * blocks;
    parallel_for(n * c, plane_cols, [&](std::int64_t p0, std::int64_t p1) {
      for (std::int64_t p = p0; p < p1; ++p) {
        const T* img = xp + p * g.h * g.w;
        T* col = dp + p * plane_cols;
        for_each_patch_element(g, [&](std::int64_t ci, std::int64_t ii) { col[ci] = ii < 0 ? T(0) : img[ii]; });
      }
    });
  });
  return out;
}

Tensor col2im_cpu(const Tensor& self, IntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
                  IntArrayRef padding, IntArrayRef stride) {
  constexpr const char* op = "col2im";
  check_same_device(op, kCPU, self.device());
  const Pair os = pair_arg(op, "output_size", output_size);
  PatchGeometry g = patch_geometry(op, kernel_size, dilation, padding, stride);
  const auto s = self.sizes();
  bool ok = self.dim() == 2 || self.dim() == 3;
  for (std::int64_t i = self.dim() == 3 ? 1 : 0; ok && i < self.dim(); ++i) ok = s[i] != 0;
  KAEL_CHECK(ok, op << ": Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                       "dimensions for input, but got: "
                    << shape_str(s));
  check_dtype(op, self, false);
  KAEL_CHECK(os.h > 0 && os.w > 0, op << ": Expected output spatial size to be positive, but got: output_size=("
                                      << os.h << ", " << os.w << ").");
  const bool batched = self.dim() == 3;
  const std::int64_t rows = s[batched ? 1 : 0], blocks = s[batched ? 2 : 1], n = batched ? s[0] : 1;
  const std::int64_t kk = g.k.h * g.k.w;
  KAEL_CHECK(rows % kk == 0, op << ": Expected size of input's dimension " << (batched ? 1 : 0)
                                << " to be divisible by the product of kernel_size, but got input.size("
                                << (batched ? 1 : 0) << ")=" << rows << " and kernel_size=(" << g.k.h << ", " << g.k.w
                                << ").");
  g.h = os.h;
  g.w = os.w;
  g.bh = (os.h + 2 * g.p.h - (g.d.h * (g.k.h - 1) + 1)) / g.s.h + 1;
  g.bw = (os.w + 2 * g.p.w - (g.d.w * (g.k.w - 1) + 1)) / g.s.w + 1;
  KAEL_CHECK(g.bh >= 1 && g.bw >= 1 && g.bh * g.bw == blocks,
             op << ": Given output_size=(" << os.h << ", " << os.w << "), kernel_size=(" << g.k.h << ", " << g.k.w
                << "), dilation=(" << g.d.h << ", " << g.d.w << "), padding=(" << g.p.h << ", " << g.p.w
                << "), stride=(" << g.s.h << ", " << g.s.w << "), expected size of input's dimension "
                << (batched ? 2 : 1) << " to match the calculated number of sliding blocks " << g.bh << " * " << g.bw
                << " = " << g.bh * g.bw << ", but got input.size(" << (batched ? 2 : 1) << ")=" << blocks << ".");
  const std::int64_t c = rows / kk;
  DimVector shape;
  if (batched) shape.push_back(n);
  shape.push_back(c);
  shape.push_back(os.h);
  shape.push_back(os.w);
  return in_compute_dtype(self, shape, true, [&](const Tensor& col, const Tensor& dst, const Tensor&) {
    visit_compute(col.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!is_reduced_floating_v<T>) {
        const T* cp = col.data<T>();
        T* dp = dst.data<T>();
        const std::int64_t plane_cols = kk * blocks;
        parallel_for(n * c, plane_cols, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p) {
            T* img = dp + p * g.h * g.w;
            const T* cc = cp + p * plane_cols;
            for_each_patch_element(g, [&](std::int64_t ci, std::int64_t ii) {
              if (ii >= 0) img[ii] += cc[ci];
            });
          }
        });
      }
    });
  });
}

}  // namespace kael::native
