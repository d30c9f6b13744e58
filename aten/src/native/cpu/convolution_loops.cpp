// The convolution roles without oneDNN (convolution_roles.h): direct loops over contiguous
// tensors for any dtype but bool, accumulating in double for float64 and in float for the half
// types, and float64 through im2col and matmul.
#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#include <optional>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "../convolution_params.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/flatten.h"
#include "kael/ops/matmul.h"
#include "kael/ops/select.h"
#include "kael/ops/t.h"
#include "kael/ops/sum.h"
#include "kael/ops/view.h"
#include "kael/runtime/threads.h"
#include "layout.h"
#include "convolution_roles.h"

namespace kael::native::conv {

namespace {

// ---- direct loops (any dtype but bool), over contiguous tensors

template <typename T>
using Acc = opmath_t<T>;

// The range [lo, hi) of output positions o with 0 <= o * s - p + kk * d < in.
inline void valid_range(std::int64_t in, std::int64_t out, std::int64_t s, std::int64_t p, std::int64_t offset,
                        std::int64_t* lo, std::int64_t* hi) {
  // i = o * s + (offset - p), offset = kk * d
  const std::int64_t base = offset - p;
  std::int64_t l = base >= 0 ? 0 : (-base + s - 1) / s;
  std::int64_t h = in - base <= 0 ? 0 : (in - base + s - 1) / s;
  *lo = std::min(l, out);
  *hi = std::clamp(h, *lo, out);
}

// Calls f(kk0, kk1, kk2, od, oh, ow_lo, ow_hi, i_off) for each kernel tap and each output row
// that tap reaches: input offset i_off of output (od, oh, ow_lo) and a step of s[2] per ow.
template <typename F>
void for_each_tap_row(const Geometry& g, F&& f) {
  for (std::int64_t k0 = 0; k0 < g.k[0]; ++k0) {
    std::int64_t lo0, hi0;
    valid_range(g.in[0], g.out[0], g.s[0], g.p[0], k0 * g.d[0], &lo0, &hi0);
    for (std::int64_t k1 = 0; k1 < g.k[1]; ++k1) {
      std::int64_t lo1, hi1;
      valid_range(g.in[1], g.out[1], g.s[1], g.p[1], k1 * g.d[1], &lo1, &hi1);
      for (std::int64_t k2 = 0; k2 < g.k[2]; ++k2) {
        std::int64_t lo2, hi2;
        valid_range(g.in[2], g.out[2], g.s[2], g.p[2], k2 * g.d[2], &lo2, &hi2);
        if (lo2 >= hi2) continue;
        for (std::int64_t o0 = lo0; o0 < hi0; ++o0) {
          const std::int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
          for (std::int64_t o1 = lo1; o1 < hi1; ++o1) {
            const std::int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
            const std::int64_t i2 = lo2 * g.s[2] - g.p[2] + k2 * g.d[2];
            f((k0 * g.k[1] + k1) * g.k[2] + k2, (o0 * g.out[1] + o1) * g.out[2] + lo2, hi2 - lo2,
              (i0 * g.in[1] + i1) * g.in[2] + i2);
          }
        }
      }
    }
  }
}

template <typename T>
void loop_forward(const Geometry& g, const T* x, const T* w, T* y) {
  using A = Acc<T>;
  const std::int64_t icg = g.ic / g.g, ocg = g.oc / g.g, in_n = g.in_numel(), out_n = g.out_numel(),
                     kn = g.k_numel(), s2 = g.s[2];
  parallel_for(0, g.n * g.oc, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> acc(static_cast<std::size_t>(out_n));
    for (std::int64_t job = begin; job < end; ++job) {
      const std::int64_t n = job / g.oc, oc = job % g.oc, grp = oc / ocg;
      std::fill(acc.begin(), acc.end(), A(0));
      for (std::int64_t c = 0; c < icg; ++c) {
        const T* xp = x + (n * g.ic + grp * icg + c) * in_n;
        const T* wp = w + (oc * icg + c) * kn;
        for_each_tap_row(g, [&](std::int64_t kk, std::int64_t o, std::int64_t len, std::int64_t i) {
          const A wv = static_cast<A>(wp[kk]);
          A* __restrict ap = acc.data() + o;
          const T* __restrict xi = xp + i;
          if (s2 == 1) {  // the common case, vectorised
            for (std::int64_t j = 0; j < len; ++j) ap[j] += static_cast<A>(xi[j]) * wv;
          } else {
            for (std::int64_t j = 0; j < len; ++j) ap[j] += static_cast<A>(xi[j * s2]) * wv;
          }
        });
      }
      T* yp = y + (n * g.oc + oc) * out_n;
      for (std::int64_t j = 0; j < out_n; ++j) yp[j] = static_cast<T>(acc[j]);
    }
  });
}

template <typename T>
void loop_backward_data(const Geometry& g, const T* dy, const T* w, T* dx) {
  using A = Acc<T>;
  const std::int64_t icg = g.ic / g.g, ocg = g.oc / g.g, in_n = g.in_numel(), out_n = g.out_numel(),
                     kn = g.k_numel(), s2 = g.s[2];
  parallel_for(0, g.n * g.ic, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> acc(static_cast<std::size_t>(in_n));
    for (std::int64_t job = begin; job < end; ++job) {
      const std::int64_t n = job / g.ic, ic = job % g.ic, grp = ic / icg, c = ic % icg;
      std::fill(acc.begin(), acc.end(), A(0));
      for (std::int64_t oc = grp * ocg; oc < (grp + 1) * ocg; ++oc) {
        const T* dyp = dy + (n * g.oc + oc) * out_n;
        const T* wp = w + (oc * icg + c) * kn;
        for_each_tap_row(g, [&](std::int64_t kk, std::int64_t o, std::int64_t len, std::int64_t i) {
          const A wv = static_cast<A>(wp[kk]);
          const T* __restrict dyo = dyp + o;
          A* __restrict ai = acc.data() + i;
          if (s2 == 1) {
            for (std::int64_t j = 0; j < len; ++j) ai[j] += static_cast<A>(dyo[j]) * wv;
          } else {
            for (std::int64_t j = 0; j < len; ++j) ai[j * s2] += static_cast<A>(dyo[j]) * wv;
          }
        });
      }
      T* dxp = dx + (n * g.ic + ic) * in_n;
      for (std::int64_t j = 0; j < in_n; ++j) dxp[j] = static_cast<T>(acc[j]);
    }
  });
}

template <typename T>
void loop_backward_weights(const Geometry& g, const T* x, const T* dy, T* dw) {
  using A = Acc<T>;
  const std::int64_t icg = g.ic / g.g, ocg = g.oc / g.g, in_n = g.in_numel(), out_n = g.out_numel(),
                     kn = g.k_numel(), s2 = g.s[2];
  parallel_for(0, g.oc * icg, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<A> acc(static_cast<std::size_t>(kn));
    for (std::int64_t job = begin; job < end; ++job) {
      const std::int64_t oc = job / icg, c = job % icg, grp = oc / ocg;
      std::fill(acc.begin(), acc.end(), A(0));
      for (std::int64_t n = 0; n < g.n; ++n) {
        const T* xp = x + (n * g.ic + grp * icg + c) * in_n;
        const T* dyp = dy + (n * g.oc + oc) * out_n;
        for_each_tap_row(g, [&](std::int64_t kk, std::int64_t o, std::int64_t len, std::int64_t i) {
          A sum = A(0);
          const T* __restrict dyo = dyp + o;
          const T* __restrict xi = xp + i;
          if (s2 == 1) {
            for (std::int64_t j = 0; j < len; ++j) sum += static_cast<A>(dyo[j]) * static_cast<A>(xi[j]);
          } else {
            for (std::int64_t j = 0; j < len; ++j) sum += static_cast<A>(dyo[j]) * static_cast<A>(xi[j * s2]);
          }
          acc[kk] += sum;
        });
      }
      T* dwp = dw + job * kn;
      for (std::int64_t j = 0; j < kn; ++j) dwp[j] = static_cast<T>(acc[j]);
    }
  });
}

}  // namespace

void zero(const Tensor& t) {
  if (t.numel() > 0) std::memset(t.data_ptr(), 0, static_cast<std::size_t>(t.numel()) * t.element_size());
}

namespace {

// ---- float64 through matmul: the columns of the windows (im2col) of one image and group,
// times the group's weight rows; the data gradient scatters the columns back (col2im). kael's
// float64 matmul is many times faster than the direct loops on layers of any size.

// cols (icg * kn, out_n) <- the window elements of x's icg planes (zero where padding).
template <typename T>
void im2col(const Geometry& g, const T* x, T* cols) {
  const std::int64_t icg = g.ic / g.g, in_n = g.in_numel(), out_n = g.out_numel(), kn = g.k_numel(), s2 = g.s[2];
  std::fill(cols, cols + icg * kn * out_n, T(0));
  parallel_for(0, icg, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const T* xp = x + c * in_n;
      for_each_tap_row(g, [&](std::int64_t kk, std::int64_t o, std::int64_t len, std::int64_t i) {
        T* __restrict row = cols + (c * kn + kk) * out_n + o;
        const T* __restrict xi = xp + i;
        for (std::int64_t j = 0; j < len; ++j) row[j] = xi[j * s2];
      });
    }
  });
}

// dx's icg planes += the columns summed back onto the positions they were read from.
template <typename T>
void col2im(const Geometry& g, const T* cols, T* dx) {
  const std::int64_t icg = g.ic / g.g, in_n = g.in_numel(), out_n = g.out_numel(), kn = g.k_numel(), s2 = g.s[2];
  parallel_for(0, icg, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      T* dp = dx + c * in_n;
      for_each_tap_row(g, [&](std::int64_t kk, std::int64_t o, std::int64_t len, std::int64_t i) {
        const T* __restrict row = cols + (c * kn + kk) * out_n + o;
        T* __restrict di = dp + i;
        for (std::int64_t j = 0; j < len; ++j) di[j * s2] += row[j];
      });
    }
  });
}


}  // namespace

// a, b: the role's inputs (contiguous); c: its output (contiguous), all of g's shapes.
void run_loops(Role role, const Geometry& g, const Tensor& a, const Tensor& b, const Tensor& c) {
  visit_dtype(c.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) {
      KAEL_INTERNAL_ASSERT(false);
    } else {
      const T* pa = static_cast<const T*>(a.data_ptr());
      const T* pb = static_cast<const T*>(b.data_ptr());
      T* pc = static_cast<T*>(c.data_ptr());
      if (role == Role::Forward) loop_forward<T>(g, pa, pb, pc);
      if (role == Role::BackwardData) loop_backward_data<T>(g, pa, pb, pc);
      if (role == Role::BackwardWeights) loop_backward_weights<T>(g, pa, pb, pc);
    }
  });
}

// The three roles in float64 over im2col/col2im and matmul; a, b, c contiguous.
void run_gemm(Role role, const Geometry& g, const Tensor& a, const Tensor& b, const Tensor& c) {
  using T = double;
  const std::int64_t icg = g.ic / g.g, ocg = g.oc / g.g, K = icg * g.k_numel(), L = g.out_numel(),
                     in_n = g.in_numel();
  const DimVector col_shape{K, L};
  const Tensor cols = alloc_cpu(col_shape, ScalarType::Float64);
  T* colp = static_cast<T*>(cols.data_ptr());
  // the weight as (groups, ocg, K); an activation y as (n, groups, ocg, L)
  const Tensor& w = role == Role::BackwardWeights ? c : b;
  const DimVector w_shape{g.g, ocg, K}, y_shape{g.n, g.g, ocg, L};
  const Tensor w3 = kael::view(w, w_shape);
  if (role == Role::BackwardWeights) zero(c);
  if (role == Role::BackwardData) zero(c);
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t grp = 0; grp < g.g; ++grp) {
      const Tensor w_g = kael::select(w3, 0, grp);
      switch (role) {
        case Role::Forward: {
          im2col<T>(g, static_cast<const T*>(a.data_ptr()) + (n * g.ic + grp * icg) * in_n, colp);
          const Tensor r = kael::matmul(w_g, cols);  // (ocg, L)
          copy_cpu(kael::select(kael::select(kael::view(c, y_shape), 0, n), 0, grp), r);
          break;
        }
        case Role::BackwardData: {
          const Tensor dy_g = kael::select(kael::select(kael::view(a, y_shape), 0, n), 0, grp);
          const Tensor r = kael::matmul(kael::t(w_g), dy_g);  // (K, L), contiguous
          col2im<T>(g, static_cast<const T*>(r.data_ptr()), static_cast<T*>(c.data_ptr()) + (n * g.ic + grp * icg) * in_n);
          break;
        }
        case Role::BackwardWeights: {
          im2col<T>(g, static_cast<const T*>(a.data_ptr()) + (n * g.ic + grp * icg) * in_n, colp);
          const Tensor dy_g = kael::select(kael::select(kael::view(b, y_shape), 0, n), 0, grp);
          const Tensor r = kael::matmul(dy_g, kael::t(cols));  // (ocg, K), contiguous
          T* dw = static_cast<T*>(c.data_ptr()) + grp * ocg * K;
          const T* rp = static_cast<const T*>(r.data_ptr());
          for (std::int64_t j = 0; j < ocg * K; ++j) dw[j] += rp[j];
          break;
        }
      }
    }
}

}  // namespace kael::native::conv
