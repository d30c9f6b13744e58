// Batch normalization on the CPU: native_batch_norm and the gradients of its input and weight.
//
// Note [Batch norm layouts]
// An (N, C, *) input is walked in one of two layouts, with no copy when it is dense in either:
// - planes: contiguous (N, C, inner) with inner > 1, each channel a run of `inner` elements per
//   sample; reductions run along the runs, the work split over channels;
// - rows: (rows, C) with C innermost: channels-last tensors (NHWC, NDHWC) and 2-d input; each row
//   updates every channel's accumulators, so the loops run along C, the work split over blocks of
//   rows of a fixed size (the result does not depend on the thread count).
// Any other input is made contiguous first. The output (and the input's gradient) is laid out as
// the input is walked: a channels-last input gives a channels-last output, as in PyTorch.
//
// Statistics are accumulated in double (float32 and float64 input) from two passes (the mean,
// then the sum of squared deviations), as PyTorch's CPU kernel does; float16/bfloat16 input is
// converted to float32 first. The output is x * alpha + beta per channel, alpha = invstd * weight
// and beta = bias - mean * alpha, PyTorch's order. All checks run before anything is written; the
// running statistics are written last, after every read of the input.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/mem_overlap.h"
#include "kael/native/declarations.h"
#include "kael/native/pointwise.h"
#include "kael/ops/contiguous.h"
#include "layout.h"
#include "nn_kernels.h"

namespace kael::native {

namespace {

constexpr const char* kOp = "native_batch_norm";

struct Layout {
  bool rows = false;      // (outer, C) with C innermost; else planes (outer, C, inner)
  std::int64_t outer = 0;  // N for planes, rows for rows
  std::int64_t channels = 0;
  std::int64_t inner = 1;
  std::int64_t count() const { return outer * inner; }  // elements per channel
};

// x in a layout the kernels walk (itself when dense in one), and that layout.
Tensor arrange(const Tensor& x, Layout& layout) {
  std::int64_t per_sample = x.numel() == 0 ? 0 : 1;  // (an empty tensor's other dims' product may overflow)
  for (std::int64_t d = 2; d < x.dim() && per_sample != 0; ++d) per_sample *= x.sizes()[d];
  layout.channels = x.sizes()[1];
  if (!x.is_contiguous() && channels_last_dense(x)) {
    layout.rows = true;
    layout.outer = x.sizes()[0] * per_sample;
    layout.inner = 1;
    return x;
  }
  layout.rows = per_sample == 1;
  layout.outer = x.sizes()[0];
  layout.inner = per_sample;
  return x.is_contiguous() ? x : kael::contiguous(x);
}

// t (dense) converted to dtype with the same strides (t itself when it has that dtype).
Tensor as_dtype_keeping_layout(const Tensor& t, ScalarType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = alloc_strided_cpu(t.sizes(), t.strides(), dtype);
  copy_cpu(out, t);
  return out;
}

// t laid out as `like` (dense, same sizes) in dtype: t itself when it already is.
Tensor match_layout(const Tensor& t, const Tensor& like, ScalarType dtype) {
  const bool same = t.dtype() == dtype &&
                    std::equal(t.strides().begin(), t.strides().end(), like.strides().begin(), like.strides().end());
  if (same) return t;
  Tensor out = alloc_strided_cpu(like.sizes(), like.strides(), dtype);
  copy_cpu(out, t);
  return out;
}

ScalarType compute_dtype(ScalarType t) { return is_reduced_floating(t) ? ScalarType::Float32 : t; }


void check_input(const char* op, const Tensor& self) {
  check_same_device(op, kCPU, self.device());
  KAEL_CHECK(self.dim() >= 2, op << ": expected an input of 2 dims or more (N, C, *), got a " << self.dim()
                                 << "-D tensor of size " << shape_str(self.sizes()));
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         op << ": \"batch_norm\" not implemented for '" << torch_type_name(self.dtype())
                            << "' (dtype " << self.dtype() << ")");
}

// A per-channel tensor (weight, bias, running statistics, saved statistics): C elements, on the
// CPU, of the parameters' dtype.
void check_param(const char* op, const char* name, const Tensor& t, std::int64_t channels, ScalarType param_dtype) {
  check_same_device(op, kCPU, t.device());
  KAEL_CHECK(t.numel() == channels, op << ": " << name << " should contain " << channels << " elements not "
                                        << t.numel());
  KAEL_CHECK(t.dtype() == param_dtype, op << ": mixed dtype (CPU): all inputs must share same datatype (" << name
                                          << " is " << t.dtype() << ", expected " << param_dtype << ")");
}

// The values of a per-channel tensor (any shape of C elements, any strides) as T.
template <typename T>
std::vector<T> values_of(const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : snapshot_cpu(t);
  std::vector<T> out(static_cast<std::size_t>(c.numel()));
  visit_dtype(c.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* p = c.data<S>();
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(p[i]);
  });
  return out;
}

// t[i] <- v[i] (t any shape of C elements, any non-overlapping strides), converted to t's dtype.
void write_values(const Tensor& t, const std::vector<double>& v) {
  Tensor src = alloc_cpu(t.sizes(), ScalarType::Float64);
  std::copy(v.begin(), v.end(), src.data<double>());
  copy_cpu(t, src);
  t.bump_version();
}

// ---- reductions per channel

constexpr int kLanes = 8;

template <typename T>
double sum_run(const T* p, std::int64_t n) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(p[i + j]);
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(p[i]);
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

template <typename T>
double squares_run(const T* p, std::int64_t n, double m) {
  double acc[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const double d = static_cast<double>(p[i + j]) - m;
      acc[j] += d * d;
    }
  double s = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(p[i]) - m;
    s += d * d;
  }
  for (int j = 0; j < kLanes; ++j) s += acc[j];
  return s;
}

// sum(dy) and sum((x - m) * dy) over a run.
template <typename T>
void dot_run(const T* x, const T* dy, std::int64_t n, double m, double& sum_dy, double& dot) {
  double g[kLanes] = {}, d[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const double v = static_cast<double>(dy[i + j]);
      g[j] += v;
      d[j] += (static_cast<double>(x[i + j]) - m) * v;
    }
  double gs = 0, ds = 0;
  for (; i < n; ++i) {
    const double v = static_cast<double>(dy[i]);
    gs += v;
    ds += (static_cast<double>(x[i]) - m) * v;
  }
  for (int j = 0; j < kLanes; ++j) {
    gs += g[j];
    ds += d[j];
  }
  sum_dy = gs;
  dot = ds;
}

// Rows per block of the rows layout's reductions (fixed: the sums do not depend on the threads).
std::int64_t block_rows(std::int64_t channels) { return std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(channels, 1)); }

// The rows layout's sums run over lanes: W = m * C consecutive elements (m rows, m = 64 / C at
// least 1) read as one flat run, lane j holding channel j % C, so that the inner loop is W long
// however few the channels (C = 8: 64 lanes rather than 8).
constexpr std::int64_t kLaneWidth = 64;
std::int64_t lane_rows(std::int64_t channels) {
  return std::max<std::int64_t>(1, kLaneWidth / std::max<std::int64_t>(channels, 1));
}

// out[k * C + c] = sum over the channel's elements of K quantities computed together.
// planes: plane_run(c, o, acc) adds the run of sample o, channel c into acc[0..K);
// rows: lanes(offset, width, acc) adds the `width` elements from flat offset `offset` (a whole
// number of rows) into acc[k * W + j] (j < width, channel j % C).
template <int K, typename PlaneRun, typename Lanes>
std::vector<double> channel_sums(const Layout& L, PlaneRun&& plane_run, Lanes&& lanes) {
  const std::int64_t C = L.channels;
  std::vector<double> out(static_cast<std::size_t>(K * C), 0.0);
  if (!L.rows) {
    nn::parallel_for(C, L.count(), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) {
        double acc[K] = {};
        for (std::int64_t o = 0; o < L.outer; ++o) plane_run(c, o, acc);
        for (int k = 0; k < K; ++k) out[static_cast<std::size_t>(k * C + c)] = acc[k];
      }
    });
    return out;
  }
  const std::int64_t m = lane_rows(C), W = m * C;
  const std::int64_t per_block = (block_rows(C) + m - 1) / m * m;  // whole lane groups; fixed, so the
  const std::int64_t blocks = (L.outer + per_block - 1) / per_block;  // sums do not depend on threads
  std::vector<double> partial(static_cast<std::size_t>(blocks * K * W), 0.0);
  nn::parallel_for(blocks, per_block * C, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) {
      double* acc = partial.data() + b * K * W;
      const std::int64_t r0 = b * per_block, r1 = std::min(L.outer, (b + 1) * per_block);
      std::int64_t r = r0;
      if (W == kLaneWidth) {
        // The usual case (C divides 64): a width known when compiling and accumulators on the
        // stack, which the compiler keeps in registers across the block.
        alignas(64) double local[K * kLaneWidth] = {};
        for (; r + m <= r1; r += m) lanes(r * C, std::integral_constant<std::int64_t, kLaneWidth>{}, local);
        for (std::int64_t i = 0; i < K * kLaneWidth; ++i) acc[i] += local[i];
      }
      for (; r + m <= r1; r += m) lanes(r * C, W, acc);
      for (; r < r1; ++r) lanes(r * C, C, acc);
    }
  });
  for (std::int64_t b = 0; b < blocks; ++b)
    for (int k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < W; ++j)
        out[static_cast<std::size_t>(k * C + j % C)] += partial[static_cast<std::size_t>((b * K + k) * W + j)];
  return out;
}

// A per-channel vector repeated over the W lanes of channel_sums.
template <typename T>
std::vector<T> repeated_lanes(const T* v, std::int64_t C) {
  const std::int64_t W = lane_rows(C) * C;
  std::vector<T> out(static_cast<std::size_t>(W));
  for (std::int64_t j = 0; j < W; ++j) out[static_cast<std::size_t>(j)] = v[j % C];
  return out;
}

// Per-channel mean and sum of squared deviations of x (two passes).
template <typename T>
void moments(const T* x, const Layout& L, std::vector<double>& mean, std::vector<double>& m2) {
  const std::int64_t C = L.channels, I = L.inner;
  const double n = static_cast<double>(L.count());
  mean = channel_sums<1>(
      L, [&](std::int64_t c, std::int64_t o, double* acc) { acc[0] += sum_run(x + (o * C + c) * I, I); },
      [&](std::int64_t off, auto width, double* acc) {
        const T* xr = x + off;
        for (std::int64_t j = 0; j < width; ++j) acc[j] += static_cast<double>(xr[j]);
      });
  for (double& m : mean) m /= n;
  const double* mp = mean.data();
  const std::vector<double> mean_lanes = L.rows ? repeated_lanes(mp, C) : std::vector<double>();
  const double* ml = mean_lanes.data();
  m2 = channel_sums<1>(
      L, [&](std::int64_t c, std::int64_t o, double* acc) { acc[0] += squares_run(x + (o * C + c) * I, I, mp[c]); },
      [&](std::int64_t off, auto width, double* acc) {
        const T* xr = x + off;
        for (std::int64_t j = 0; j < width; ++j) {
          const double d = static_cast<double>(xr[j]) - ml[j];
          acc[j] += d * d;
        }
      });
}

// sum(dy) (first C) and sum((x - mean) * dy) (next C) per channel.
template <typename T>
std::vector<double> grad_sums(const T* x, const T* dy, const Layout& L, const std::vector<T>& mean) {
  const std::int64_t C = L.channels, I = L.inner;
  const T* mp = mean.data();
  std::vector<double> mean_d(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) mean_d[c] = static_cast<double>(mp[c]);
  const std::vector<double> mean_lanes = L.rows ? repeated_lanes(mean_d.data(), C) : std::vector<double>();
  const double* ml = mean_lanes.data();
  const std::int64_t W = lane_rows(C) * C;
  return channel_sums<2>(
      L,
      [&](std::int64_t c, std::int64_t o, double* acc) {
        double g = 0, d = 0;
        const std::int64_t off = (o * C + c) * I;
        dot_run(x + off, dy + off, I, static_cast<double>(mp[c]), g, d);
        acc[0] += g;
        acc[1] += d;
      },
      [&](std::int64_t off, auto width, double* acc) {
        const T* xr = x + off;
        const T* gr = dy + off;
        double* g = acc;
        double* d = acc + W;
        for (std::int64_t j = 0; j < width; ++j) {
          const double v = static_cast<double>(gr[j]);
          g[j] += v;
          d[j] += (static_cast<double>(xr[j]) - ml[j]) * v;
        }
      });
}

// Visits every element once, in the layout: planes as plane_run(c, offset, n) for each run of n
// elements of channel c from flat offset `offset`; rows as row(offset) for each row of C elements.
template <typename PlaneRun, typename Row>
void for_each_element(const Layout& L, PlaneRun&& plane_run, Row&& row) {
  const std::int64_t C = L.channels, I = L.inner;
  if (!L.rows) {
    nn::parallel_for(L.outer * C, I, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t p = begin; p < end; ++p) plane_run(p % C, p * I, I);
    });
    return;
  }
  nn::parallel_for(L.outer, C, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) row(r * C);
  });
}

template <typename T>
void normalize(const T* x, T* y, const Layout& L, const std::vector<T>& alpha, const std::vector<T>& beta) {
  const std::int64_t C = L.channels;
  const T* a = alpha.data();
  const T* b = beta.data();
  for_each_element(
      L,
      [&](std::int64_t c, std::int64_t off, std::int64_t n) {
        const T ac = a[c], bc = b[c];
        const T* xs = x + off;
        T* ys = y + off;
        for (std::int64_t i = 0; i < n; ++i) ys[i] = xs[i] * ac + bc;
      },
      [&](std::int64_t off) {
        const T* xs = x + off;
        T* ys = y + off;
        for (std::int64_t c = 0; c < C; ++c) ys[c] = xs[c] * a[c] + b[c];
      });
}

// A fresh tensor laid out as the dense tensor x.
Tensor alloc_like_layout(const Tensor& x, ScalarType dtype) { return alloc_strided_cpu(x.sizes(), x.strides(), dtype); }

// The input arranged in a layout the kernels walk (Note [Batch norm layouts]), in the compute dtype.
struct Prepared {
  Tensor x;  // arranged, compute dtype
  Layout layout;
};

Prepared prepare(const Tensor& self) {
  Prepared p;
  const Tensor arranged = arrange(self, p.layout);
  p.x = as_dtype_keeping_layout(arranged, compute_dtype(self.dtype()));
  return p;
}

// The result (self's dtype) from the compute-dtype tensor y laid out as the arranged input.
Tensor finish(const Tensor& y, ScalarType dtype) {
  if (y.dtype() == dtype) return y;
  Tensor out = alloc_like_layout(y, dtype);
  copy_cpu(out, y);
  return out;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_cpu(const Tensor& self, const std::optional<Tensor>& weight,
                                                         const std::optional<Tensor>& bias,
                                                         const std::optional<Tensor>& running_mean,
                                                         const std::optional<Tensor>& running_var, bool training,
                                                         double momentum, double eps) {
  check_same_device(kOp, kCPU, self.device());
  KAEL_CHECK_IMPLEMENTED(is_floating(self.dtype()),
                         kOp << ": \"batch_norm\" not implemented for '" << torch_type_name(self.dtype())
                            << "' (dtype " << self.dtype() << ")");
  if (self.numel() == 0) {
    // As PyTorch's kernel: no statistics of no element in training; in evaluation an empty output
    // and empty saved statistics, whatever the other arguments (F.batch_norm handles an empty
    // batch before it calls this, as torch's batch_norm does).
    KAEL_CHECK(!training, kOp << ": input tensor must have at least one element, but got input_sizes = "
                              << shape_str(self.sizes()));
    const std::int64_t none = 0;
    const ScalarType d = compute_dtype(self.dtype());
    return {alloc_cpu(self.sizes(), self.dtype()), alloc_cpu(IntArrayRef{&none, 1}, d),
            alloc_cpu(IntArrayRef{&none, 1}, d)};
  }
  check_input(kOp, self);
  const std::int64_t C = self.sizes()[1];
  const ScalarType acc = compute_dtype(self.dtype());
  // The parameters share one dtype: the input's, or float32 for float16/bfloat16 input.
  std::optional<ScalarType> param_dtype;
  for (const std::optional<Tensor>* t : {&weight, &bias, &running_mean, &running_var})
    if (t->has_value()) {
      param_dtype = (**t).dtype();
      break;
    }
  const ScalarType pd = param_dtype.value_or(self.dtype());
  KAEL_CHECK(pd == self.dtype() || (is_reduced_floating(self.dtype()) && pd == ScalarType::Float32),
             kOp << ": mixed dtype (CPU): all inputs must share same datatype (input is " << self.dtype()
                 << ", parameters " << pd << ")");
  if (weight) check_param(kOp, "weight", *weight, C, pd);
  if (bias) check_param(kOp, "bias", *bias, C, pd);
  if (running_mean) check_param(kOp, "running_mean", *running_mean, C, pd);
  if (running_var) check_param(kOp, "running_var", *running_var, C, pd);
  if (!training) {
    KAEL_CHECK(running_mean.has_value(), kOp << ": running_mean must be defined in evaluation mode");
    KAEL_CHECK(running_var.has_value(), kOp << ": running_var must be defined in evaluation mode");
  }
  const bool update = training;
  for (const std::optional<Tensor>* t : {&running_mean, &running_var})
    if (update && t->has_value()) assert_no_internal_overlap(kOp, **t);
  if (update && running_mean && running_var) assert_no_overlap(kOp, *running_mean, *running_var);

  Prepared p = prepare(self);
  const Layout& L = p.layout;
  Tensor save_mean = alloc_cpu(IntArrayRef{&C, 1}, acc);
  Tensor save_invstd = alloc_cpu(IntArrayRef{&C, 1}, acc);
  Tensor y = alloc_like_layout(p.x, acc);
  std::vector<double> new_mean, new_var;
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* x = p.x.data<T>();
      std::vector<T> mean_t(static_cast<std::size_t>(C)), invstd_t(static_cast<std::size_t>(C));
      if (training) {
        std::vector<double> mean, m2;
        moments(x, L, mean, m2);
        const double n = static_cast<double>(L.count());
        for (std::int64_t c = 0; c < C; ++c) {
          mean_t[c] = static_cast<T>(mean[c]);
          invstd_t[c] = static_cast<T>(1.0 / std::sqrt(m2[c] / n + eps));
        }
        if (running_mean) {
          const std::vector<double> old = values_of<double>(*running_mean);
          new_mean.resize(old.size());
          for (std::int64_t c = 0; c < C; ++c) new_mean[c] = momentum * mean[c] + (1 - momentum) * old[c];
        }
        if (running_var) {
          const std::vector<double> old = values_of<double>(*running_var);
          new_var.resize(old.size());
          for (std::int64_t c = 0; c < C; ++c) {
            const double unbiased = n > 1 ? m2[c] / (n - 1) : std::numeric_limits<double>::infinity();
            new_var[c] = momentum * unbiased + (1 - momentum) * old[c];
          }
        }
      } else {
        mean_t = values_of<T>(*running_mean);
        const std::vector<double> var = values_of<double>(*running_var);
        for (std::int64_t c = 0; c < C; ++c) invstd_t[c] = static_cast<T>(1.0 / std::sqrt(var[c] + eps));
      }
      std::copy(mean_t.begin(), mean_t.end(), save_mean.data<T>());
      std::copy(invstd_t.begin(), invstd_t.end(), save_invstd.data<T>());
      const std::vector<T> w = weight ? values_of<T>(*weight) : std::vector<T>(static_cast<std::size_t>(C), T(1));
      const std::vector<T> b = bias ? values_of<T>(*bias) : std::vector<T>(static_cast<std::size_t>(C), T(0));
      std::vector<T> alpha(static_cast<std::size_t>(C)), beta(static_cast<std::size_t>(C));
      for (std::int64_t c = 0; c < C; ++c) {
        alpha[c] = invstd_t[c] * w[c];
        beta[c] = b[c] - mean_t[c] * alpha[c];
      }
      normalize(x, y.data<T>(), L, alpha, beta);
    }
  });
  Tensor output = finish(y, self.dtype());
  // Last: every read of the input (which a running statistic may share memory with) is done.
  if (training && running_mean) write_values(*running_mean, new_mean);
  if (training && running_var) write_values(*running_var, new_var);
  return {output, save_mean, save_invstd};
}

namespace {

// The checks the backward kernels share; returns the compute dtype.
ScalarType check_backward(const char* op, const Tensor& grad_output, const Tensor& self, const Tensor& save_mean,
                          const Tensor& save_invstd) {
  check_input(op, self);
  check_same_device(op, kCPU, grad_output.device());
  KAEL_CHECK(std::equal(grad_output.sizes().begin(), grad_output.sizes().end(), self.sizes().begin(),
                        self.sizes().end()),
             op << ": grad_output of size " << shape_str(grad_output.sizes()) << " does not match the input's size "
                << shape_str(self.sizes()));
  KAEL_CHECK(grad_output.dtype() == self.dtype(),
             op << ": grad_output of dtype " << grad_output.dtype() << " does not match the input's " << self.dtype());
  const ScalarType acc = compute_dtype(self.dtype());
  const std::int64_t C = self.sizes()[1];
  check_param(op, "save_mean", save_mean, C, acc);
  check_param(op, "save_invstd", save_invstd, C, acc);
  return acc;
}

}  // namespace

Tensor native_batch_norm_backward_input_cpu(const Tensor& grad_output, const Tensor& self,
                                            const std::optional<Tensor>& weight, const Tensor& save_mean,
                                            const Tensor& save_invstd, bool training) {
  constexpr const char* op = "native_batch_norm_backward_input";
  const ScalarType acc = check_backward(op, grad_output, self, save_mean, save_invstd);
  const std::int64_t C = self.sizes()[1];
  if (weight) {
    const ScalarType pd = weight->dtype();
    KAEL_CHECK(pd == self.dtype() || (is_reduced_floating(self.dtype()) && pd == ScalarType::Float32),
               op << ": mixed dtype (CPU): all inputs must share same datatype (input is " << self.dtype()
                  << ", weight " << pd << ")");
    check_param(op, "weight", *weight, C, pd);
  }
  Prepared p = prepare(self);
  const Layout& L = p.layout;
  const Tensor dy = match_layout(grad_output, p.x, acc);
  Tensor dx = alloc_like_layout(p.x, acc);
  if (self.numel() == 0) return finish(dx, self.dtype());
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* x = p.x.data<T>();
      const T* g = dy.data<T>();
      T* out = dx.data<T>();
      const std::vector<T> mean = values_of<T>(save_mean);
      const std::vector<T> invstd = values_of<T>(save_invstd);
      const std::vector<T> w = weight ? values_of<T>(*weight) : std::vector<T>(static_cast<std::size_t>(C), T(1));
      // Multiplied by invstd, then by the weight, in that order (torch's): invstd * weight may
      // overflow where the product with the gradient first does not.
      const T* is = invstd.data();
      const T* ws = w.data();
      if (!training) {
        for_each_element(
            L,
            [&](std::int64_t c, std::int64_t off, std::int64_t n) {
              const T ic = is[c], wc = ws[c];
              for (std::int64_t i = 0; i < n; ++i) out[off + i] = g[off + i] * ic * wc;
            },
            [&](std::int64_t off) {
              for (std::int64_t c = 0; c < C; ++c) out[off + c] = g[off + c] * is[c] * ws[c];
            });
        return;
      }
      // dx = (dy - mean(dy) - (x - mean) * k) * invstd * weight, k = sum((x - mean) * dy) * invstd^2 / n
      const std::vector<double> sums = grad_sums(x, g, L, mean);
      const double n = static_cast<double>(L.count());
      std::vector<T> grad_mean(static_cast<std::size_t>(C)), k(static_cast<std::size_t>(C));
      for (std::int64_t c = 0; c < C; ++c) {
        grad_mean[c] = static_cast<T>(sums[c] / n);
        k[c] = static_cast<T>(sums[C + c] * static_cast<double>(invstd[c]) * static_cast<double>(invstd[c]) / n);
      }
      const T* gm = grad_mean.data();
      const T* kp = k.data();
      const T* mp = mean.data();
      for_each_element(
          L,
          [&](std::int64_t c, std::int64_t off, std::int64_t len) {
            const T gmc = gm[c], kc = kp[c], mc = mp[c], ic = is[c], wc = ws[c];
            for (std::int64_t i = 0; i < len; ++i)
              out[off + i] = (g[off + i] - gmc - (x[off + i] - mc) * kc) * ic * wc;
          },
          [&](std::int64_t off) {
            for (std::int64_t c = 0; c < C; ++c)
              out[off + c] = (g[off + c] - gm[c] - (x[off + c] - mp[c]) * kp[c]) * is[c] * ws[c];
          });
    }
  });
  return finish(dx, self.dtype());
}

Tensor native_batch_norm_backward_weight_cpu(const Tensor& grad_output, const Tensor& self, const Tensor& save_mean,
                                             const Tensor& save_invstd) {
  constexpr const char* op = "native_batch_norm_backward_weight";
  const ScalarType acc = check_backward(op, grad_output, self, save_mean, save_invstd);
  const std::int64_t C = self.sizes()[1];
  Tensor result = alloc_cpu(IntArrayRef{&C, 1}, acc);
  Prepared p = prepare(self);
  const Tensor dy = match_layout(grad_output, p.x, acc);
  visit_dtype(acc, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const std::vector<T> mean = values_of<T>(save_mean);
      const std::vector<T> invstd = values_of<T>(save_invstd);
      T* out = result.data<T>();
      if (self.numel() == 0) {
        std::fill_n(out, C, T(0));
        return;
      }
      const std::vector<double> sums = grad_sums(p.x.data<T>(), dy.data<T>(), p.layout, mean);
      for (std::int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(sums[C + c] * static_cast<double>(invstd[c]));
    }
  });
  return result;
}

}  // namespace kael::native
