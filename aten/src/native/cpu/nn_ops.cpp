// Neural-network ops on the CPU: softmax, log_softmax, standardize, layer_norm, embedding and
// cross_entropy_losses (with the backward kernels of the last two; layer_norm's and gelu's fused
// backward kernels are in nn_backward.cpp).
//
// Every kernel computes in float (float32, float16, bfloat16 inputs) or double (float64): a
// float16/bfloat16 input is converted to float32 first and the result rounded once. The rows a
// kernel reduces are made contiguous first (a copy only when they are not); work is split over
// independent rows with nn::parallel_for. All checks run before anything is written.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/math.h"
#include "kael/native/pointwise.h"
#include "kael/ops/contiguous.h"
#include "kael/ops/permute.h"
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

// ---- softmax / log_softmax

// Max and sum of exp(x - max) of a contiguous row, with independent lanes so that the loops
// vectorise. NaN anywhere makes the sum NaN (exp_vec(NaN) is NaN), so the whole row becomes
// NaN, as in PyTorch; a row of -inf gives NaN too (-inf - -inf).
template <typename T>
T row_max(const T* x, std::int64_t n) {
  return nn::max_of(x, n);
}

// sum(exp(x - m)); writes the exps to e when e is not null.
template <typename T>
T row_sum_exp(const T* x, T m, T* e, std::int64_t n) {
  return nn::sum_exp(x, m, e, n);
}

template <typename T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t n, bool log) {
  parallel_for(rows, 4 * n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      const T m = row_max(xr, n);
      if (log) {
        // (x - max) - log(sum), in that order, as PyTorch: max + log(sum) first would lose
        // the log to rounding for a large max (-2**63 from int64, in float32).
        const T log_sum = std::log(row_sum_exp<T>(xr, m, nullptr, n));
        for (std::int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) - log_sum;
      } else {
        const T inv = T(1) / row_sum_exp(xr, m, yr, n);
        for (std::int64_t i = 0; i < n; ++i) yr[i] *= inv;
      }
    }
  });
}

// Softmax over the middle dim of a contiguous (outer, n, inner) block with inner > 1: the
// loops run along inner (contiguous), in chunks so that the per-column state stays small.
template <typename T>
void softmax_strided(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool log) {
  constexpr std::int64_t kChunk = 256;
  const std::int64_t chunks = (inner + kChunk - 1) / kChunk;
  parallel_for(outer * chunks, 4 * n * std::min(inner, kChunk), [&](std::int64_t begin, std::int64_t end) {
    T m[kChunk], s[kChunk];
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t o = task / chunks, c0 = (task % chunks) * kChunk, w = std::min(kChunk, inner - c0);
      const T* xb = x + o * n * inner + c0;
      T* yb = y + o * n * inner + c0;
      for (std::int64_t c = 0; c < w; ++c) {
        m[c] = -std::numeric_limits<T>::infinity();
        s[c] = 0;
      }
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t c = 0; c < w; ++c) m[c] = xb[j * inner + c] > m[c] ? xb[j * inner + c] : m[c];
      T e[kChunk];
      for (std::int64_t j = 0; j < n; ++j) {
        T* ej = log ? e : yb + j * inner;
        nn::exp_diff(xb + j * inner, m, ej, w);
        for (std::int64_t c = 0; c < w; ++c) s[c] += ej[c];
      }
      if (log) {
        for (std::int64_t c = 0; c < w; ++c) s[c] = std::log(s[c]);
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t c = 0; c < w; ++c) yb[j * inner + c] = (xb[j * inner + c] - m[c]) - s[c];
      } else {
        for (std::int64_t c = 0; c < w; ++c) s[c] = T(1) / s[c];
        for (std::int64_t j = 0; j < n; ++j)
          for (std::int64_t c = 0; c < w; ++c) yb[j * inner + c] *= s[c];
      }
    }
  });
}

Tensor softmax_impl(const char* op, const Tensor& self, std::int64_t dim, std::optional<ScalarType> dtype, bool log) {
  check_cpu(op, self);
  const std::int64_t d = wrap_dim(op, dim, std::max<std::int64_t>(self.dim(), 1));
  const ScalarType out_dtype = dtype ? *dtype : self.dtype();
  check_floating(op, out_dtype);
  Tensor result = alloc_cpu(self.sizes(), out_dtype);
  if (self.numel() == 0) return result;
  const ScalarType acc_dtype = compute_dtype(out_dtype);
  // dtype= converts the input first (rounding it to a half type), as PyTorch does.
  Tensor x = contiguous_as(self.dtype() == out_dtype ? self : to_dtype_cpu(self, out_dtype), acc_dtype);
  Tensor y = out_dtype == acc_dtype ? result : alloc_cpu(self.sizes(), acc_dtype);
  const std::int64_t n = self.dim() == 0 ? 1 : self.sizes()[d];
  std::int64_t inner = 1;
  for (std::int64_t i = d + 1; i < self.dim(); ++i) inner *= self.sizes()[i];
  const std::int64_t outer = self.numel() / (n * inner);
  UnlockedSection section;
  x = section.own(x);
  section.unlock();
  if (acc_dtype == ScalarType::Float64) {
    if (inner == 1) softmax_rows(x.data<double>(), y.data<double>(), outer, n, log);
    else softmax_strided(x.data<double>(), y.data<double>(), outer, n, inner, log);
  } else {
    if (inner == 1) softmax_rows(x.data<float>(), y.data<float>(), outer, n, log);
    else softmax_strided(x.data<float>(), y.data<float>(), outer, n, inner, log);
  }
  store(result, y);
  return result;
}

// ---- standardize / layer_norm

// The number of elements in each normalised row; checks normalized_shape against input.
std::int64_t normalized_numel(const char* op, const Tensor& self, IntArrayRef normalized_shape) {
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  KAEL_CHECK(k >= 1, op << ": Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                           "element, but got normalized_shape = "
                        << shape_str(normalized_shape));
  bool ok = self.dim() >= k;
  for (std::int64_t i = 0; ok && i < k; ++i) ok = self.sizes()[self.dim() - k + i] == normalized_shape[i];
  KAEL_CHECK(ok, op << ": Given normalized_shape=" << shape_str(normalized_shape) << ", expected input with shape [*, "
                    << shape_str(normalized_shape).substr(1) << ", but got input of size" << shape_str(self.sizes()));
  std::int64_t n = 1;
  for (std::int64_t s : normalized_shape) n *= s;
  return n;
}

// y = (x - mean) * rsqrt(var + eps) [* w] [+ b] per row of n elements.
template <typename T>
void standardize_rows(const T* x, T* y, const T* w, const T* b, std::int64_t rows, std::int64_t n, double eps) {
  parallel_for(rows, 3 * n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      T lanes[kLanes] = {};
      std::int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (int j = 0; j < kLanes; ++j) lanes[j] += xr[i + j];
      T s = 0;
      for (; i < n; ++i) s += xr[i];
      for (int j = 0; j < kLanes; ++j) s += lanes[j];
      const T mean = s / static_cast<T>(n);
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
      const T rstd = T(1) / std::sqrt(ss / static_cast<T>(n) + static_cast<T>(eps));
      if (w != nullptr && b != nullptr) {
        for (i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
      } else if (w != nullptr) {
        for (i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * rstd * w[i];
      } else if (b != nullptr) {
        for (i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * rstd + b[i];
      } else {
        for (i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * rstd;
      }
    }
  });
}

Tensor layer_norm_impl(const char* op, const Tensor& self, IntArrayRef normalized_shape,
                       const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
  check_cpu(op, self);
  const std::int64_t n = normalized_numel(op, self, normalized_shape);
  check_floating(op, self);
  for (const std::optional<Tensor>* p : {&weight, &bias}) {
    if (!p->has_value()) continue;
    const Tensor& t = **p;
    const char* name = p == &weight ? "weight" : "bias";
    check_cpu(op, t);
    KAEL_CHECK(std::equal(t.sizes().begin(), t.sizes().end(), normalized_shape.begin(), normalized_shape.end()),
               op << ": Expected " << name << " to be of same shape as normalized_shape, but got " << name
                  << " of shape " << shape_str(t.sizes()) << " and normalized_shape = " << shape_str(normalized_shape));
    KAEL_CHECK(t.dtype() == self.dtype() || (is_reduced_floating(self.dtype()) && t.dtype() == ScalarType::Float32),
               op << ": expected " << name << " of dtype " << self.dtype() << ", got " << t.dtype());
  }
  Tensor result = alloc_cpu(self.sizes(), self.dtype());
  if (self.numel() == 0) return result;
  const ScalarType acc_dtype = compute_dtype(self.dtype());
  Tensor x = contiguous_as(self, acc_dtype);
  Tensor w = weight ? contiguous_as(*weight, acc_dtype) : Tensor();
  Tensor b = bias ? contiguous_as(*bias, acc_dtype) : Tensor();
  Tensor y = self.dtype() == acc_dtype ? result : alloc_cpu(self.sizes(), acc_dtype);
  const std::int64_t rows = self.numel() / n;
  UnlockedSection section;
  x = section.own(x);
  if (w.defined()) w = section.own(w);
  if (b.defined()) b = section.own(b);
  section.unlock();
  visit_dtype(acc_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      standardize_rows<T>(x.data<T>(), y.data<T>(), w.defined() ? w.data<T>() : nullptr,
                          b.defined() ? b.data<T>() : nullptr, rows, n, eps);
    }
  });
  store(result, y);
  return result;
}

// ---- embedding

void check_indices(const char* op, const Tensor& indices) {
  check_cpu(op, indices);
  KAEL_CHECK(indices.dtype() == ScalarType::Int64 || indices.dtype() == ScalarType::Int32,
             op << ": Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, "
                   "Int; but got "
                << indices.dtype() << " instead");
}

// indices as a contiguous int64 tensor.
Tensor int64_indices(const Tensor& indices) { return contiguous_as(indices, ScalarType::Int64); }

// ---- cross_entropy_losses

struct CrossEntropyGeometry {
  Tensor logits;        // (rows, classes), contiguous, compute dtype
  Tensor target;        // (rows,) int64, or (rows, classes) compute dtype (probabilities)
  DimVector out_shape;  // the per-sample shape
  std::int64_t rows = 0, classes = 0;
  bool probabilities = false;
};

// Moves the class dim (1, or 0 for a 1-d input) last and flattens the rest, as rows.
Tensor classes_last(const Tensor& t) {
  if (t.dim() <= 2) return t;
  DimVector perm;
  perm.push_back(0);
  for (std::int64_t i = 2; i < t.dim(); ++i) perm.push_back(i);
  perm.push_back(1);
  return kael::permute(t, perm);
}

CrossEntropyGeometry cross_entropy_setup(const char* op, const Tensor& self, const Tensor& target,
                                         std::int64_t ignore_index, double label_smoothing) {
  check_cpu(op, self);
  check_cpu(op, target);
  KAEL_CHECK(self.dim() >= 1, op << ": Expected input to have at least 1 dimension (the classes), got 0");
  check_floating(op, self);
  // As PyTorch: only a value above 1 is refused; one that is not above 0 (NaN included) means no
  // smoothing.
  KAEL_CHECK(!(label_smoothing > 1.0), op << ": label_smoothing must be between 0.0 and 1.0. Got: " << label_smoothing);
  CrossEntropyGeometry g;
  const std::int64_t cdim = self.dim() == 1 ? 0 : 1;
  g.classes = self.sizes()[cdim];
  for (std::int64_t i = 0; i < self.dim(); ++i)
    if (i != cdim) g.out_shape.push_back(self.sizes()[i]);
  g.probabilities = is_floating(target.dtype());
  if (g.probabilities) {
    // torch takes a target of another shape for class indices, and refuses its dtype: RuntimeError
    KAEL_CHECK(std::equal(target.sizes().begin(), target.sizes().end(), self.sizes().begin(), self.sizes().end()),
               op << ": Expected input batch_size and target batch_size to match: input of shape "
                  << shape_str(self.sizes()) << " and probability target of shape " << shape_str(target.sizes()));
    // As PyTorch: no class index to ignore in a probability target; only a negative
    // ignore_index (the default -100) is taken, and it means nothing there.
    KAEL_CHECK(ignore_index < 0, op << ": ignore_index is not supported for floating point target (got ignore_index="
                                    << ignore_index << ")");
    KAEL_CHECK(target.dtype() == self.dtype(),
               op << ": expected target of dtype " << self.dtype() << " (probabilities), got " << target.dtype());
  } else {
    // as torch: a target of the input's shape holds class probabilities, whatever its dtype
    KAEL_CHECK(!std::equal(target.sizes().begin(), target.sizes().end(), self.sizes().begin(), self.sizes().end()),
               op << ": Expected floating point type for target with class probabilities, got "
                  << torch_type_name(target.dtype()));
    KAEL_CHECK(target.dtype() == ScalarType::Int64 || target.dtype() == ScalarType::UInt8,
               op << ": expected target dtype to be Long or Byte, but got " << torch_type_name(target.dtype())
                  << " (target of dtype " << target.dtype() << ")");
    const bool match = std::equal(target.sizes().begin(), target.sizes().end(), g.out_shape.begin(), g.out_shape.end());
    const auto mismatch = [&] {
      std::ostringstream os;
      os << op << ": Expected target of shape " << shape_str(g.out_shape) << " for input of shape "
         << shape_str(self.sizes()) << ", got target of shape " << shape_str(target.sizes());
      return os.str();
    };
    // as torch's nll_loss: a batch size that does not match (or any target of a 1-d input) is a
    // ValueError, checked first; any other shape (spatial targets, more dims) RuntimeError
    const bool batch_differs = self.dim() == 1 || (target.dim() >= 1 && target.sizes()[0] != self.sizes()[0]);
    KAEL_CHECK_VALUE(match || !batch_differs, mismatch());
    KAEL_CHECK(match, mismatch());
  }
  g.rows = 1;
  for (std::int64_t s : g.out_shape) g.rows *= s;
  const ScalarType acc = compute_dtype(self.dtype());
  g.logits = contiguous_as(kael::contiguous(classes_last(self)), acc);
  g.target = g.probabilities ? contiguous_as(kael::contiguous(classes_last(target)), acc) : int64_indices(target);
  return g;
}

// The class index of each row, checked: ignore_index or in [0, classes). IndexError otherwise,
// before anything is written.
void check_targets(const char* op, const std::int64_t* t, std::int64_t rows, std::int64_t classes,
                   std::int64_t ignore_index) {
  for (std::int64_t r = 0; r < rows; ++r)
    KAEL_CHECK_INDEX(t[r] == ignore_index || (t[r] >= 0 && t[r] < classes),
                     op << ": Target " << t[r] << " is out of bounds (" << classes << " classes)");
}

template <typename T>
void cross_entropy_forward(const CrossEntropyGeometry& g, T* out, std::int64_t ignore_index, double smoothing) {
  const std::int64_t C = g.classes;
  const T* x = g.logits.data<T>();
  if (!(smoothing > 0)) smoothing = 0;
  const T eps = static_cast<T>(smoothing);
  parallel_for(g.rows, 3 * C, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * C;
      if (!g.probabilities) {
        const std::int64_t t = g.target.data<std::int64_t>()[r];
        if (t == ignore_index) {
          out[r] = 0;
          continue;
        }
        if constexpr (std::is_same_v<T, float>) {
          if (smoothing == 0) {
            // (max - x_t) + log(sum(exp(x - max))), PyTorch's order of operations (see
            // softmax_rows), with the row read once (logsumexp's one pass) rather than twice
            // (max, then the sum of exp(x - max)); in double, rounded once. A row holding +inf
            // or NaN, or only -inf, gives NaN, as PyTorch's log_softmax (x - max) does.
            const nn::RowLogSumExp lse = nn::logsumexp_row(xr, C);
            out[r] = std::isfinite(lse.max)
                         ? static_cast<T>((static_cast<double>(lse.max) - static_cast<double>(xr[t])) + lse.log_sum)
                         : std::numeric_limits<T>::quiet_NaN();
            continue;
          }
        }
        const T m = row_max(xr, C);
        // log_softmax as (x - max) - log(sum), in that order (see softmax_rows)
        const T log_sum = std::log(row_sum_exp<T>(xr, m, nullptr, C));
        T loss = -((xr[t] - m) - log_sum);
        if (smoothing > 0) {
          T lanes[kLanes] = {};
          std::int64_t i = 0;
          for (; i + kLanes <= C; i += kLanes)
            for (int j = 0; j < kLanes; ++j) lanes[j] += xr[i + j] - m;
          T s = 0;
          for (; i < C; ++i) s += xr[i] - m;
          for (int j = 0; j < kLanes; ++j) s += lanes[j];
          loss = (T(1) - eps) * loss + eps * (log_sum - s / static_cast<T>(C));
        }
        out[r] = loss;
      } else {
        const T* tr = g.target.data<T>() + r * C;
        const T m = row_max(xr, C);
        const T log_sum = std::log(row_sum_exp<T>(xr, m, nullptr, C));
        // -sum_c t'_c log_softmax(x)_c, t' = t (1 - eps) + eps / C, term by term as PyTorch
        // computes it (so infinities and NaNs come out the same)
        T acc = 0;
        if (smoothing > 0) {
          const T uniform = eps / static_cast<T>(C);
          for (std::int64_t i = 0; i < C; ++i) acc += ((xr[i] - m) - log_sum) * (tr[i] * (T(1) - eps) + uniform);
        } else {
          for (std::int64_t i = 0; i < C; ++i) acc += ((xr[i] - m) - log_sum) * tr[i];
        }
        out[r] = -acc;
      }
    }
  });
}

template <typename T>
void cross_entropy_backward(const CrossEntropyGeometry& g, const T* grad, T* gx, std::int64_t ignore_index,
                            double smoothing) {
  const std::int64_t C = g.classes;
  const T* x = g.logits.data<T>();
  if (!(smoothing > 0)) smoothing = 0;
  const T eps = static_cast<T>(smoothing);
  const T uniform = eps / static_cast<T>(C);
  parallel_for(g.rows, 3 * C, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * C;
      T* gr = gx + r * C;
      if (!g.probabilities) {
        const std::int64_t t = g.target.data<std::int64_t>()[r];
        if (t == ignore_index) {
          for (std::int64_t i = 0; i < C; ++i) gr[i] = 0;
          continue;
        }
        const T m = row_max(xr, C);
        const T inv = T(1) / row_sum_exp(xr, m, gr, C);
        const T gv = grad[r];
        for (std::int64_t i = 0; i < C; ++i) gr[i] = gv * (gr[i] * inv - uniform);
        gr[t] -= gv * (T(1) - eps);
      } else {
        const T* tr = g.target.data<T>() + r * C;
        const T m = row_max(xr, C);
        const T inv = T(1) / row_sum_exp(xr, m, gr, C);
        const T gv = grad[r];
        T st = 0;
        for (std::int64_t i = 0; i < C; ++i) st += tr[i];
        // d/dx_i of sum_c t'_c (lse - x_c) = sum(t') softmax_i - t'_i
        const T total = st * (T(1) - eps) + eps;
        for (std::int64_t i = 0; i < C; ++i) gr[i] = gv * (total * gr[i] * inv - (tr[i] * (T(1) - eps) + uniform));
      }
    }
  });
}

}  // namespace

Tensor softmax_cpu(const Tensor& self, std::int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl("softmax", self, dim, dtype, false);
}

Tensor log_softmax_cpu(const Tensor& self, std::int64_t dim, std::optional<ScalarType> dtype) {
  return softmax_impl("log_softmax", self, dim, dtype, true);
}

Tensor standardize_cpu(const Tensor& self, IntArrayRef normalized_shape, double eps) {
  return layer_norm_impl("standardize", self, normalized_shape, std::nullopt, std::nullopt, eps);
}

Tensor layer_norm_cpu(const Tensor& self, IntArrayRef normalized_shape, const std::optional<Tensor>& weight,
                      const std::optional<Tensor>& bias, double eps) {
  return layer_norm_impl("layer_norm", self, normalized_shape, weight, bias, eps);
}

Tensor embedding_cpu(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx) {
  (void)padding_idx;  // only the gradient skips it
  constexpr const char* op = "embedding";
  check_cpu(op, weight);
  check_indices(op, indices);
  KAEL_CHECK(weight.dim() == 2, op << ": 'weight' must be 2-D, got a " << weight.dim() << "-D tensor");
  const std::int64_t rows = weight.sizes()[0], d = weight.sizes()[1];
  Tensor idx = int64_indices(indices);
  const std::int64_t* ip = idx.data<std::int64_t>();
  for (std::int64_t i = 0; i < idx.numel(); ++i)
    KAEL_CHECK_INDEX(ip[i] >= 0 && ip[i] < rows,
                     op << ": index out of range in self (index " << ip[i] << ", " << rows << " rows)");
  DimVector shape(indices.sizes());
  shape.push_back(d);
  Tensor result = alloc_cpu(shape, weight.dtype());
  if (result.numel() == 0) return result;
  Tensor w = weight.strides()[1] == 1 ? weight : snapshot_cpu(weight);
  UnlockedSection section;
  w = section.own(w);
  idx = section.own(idx);
  section.unlock();
  const std::int64_t row_bytes = d * w.element_size();  // one row may have any stride (never stepped over)
  const std::int64_t row_stride = w.sizes()[0] > 1 ? w.strides()[0] * w.element_size() : 0;
  const char* src = static_cast<const char*>(w.data_ptr());
  char* dst = static_cast<char*>(result.data_ptr());
  const std::int64_t* ids = idx.data<std::int64_t>();
  parallel_for(idx.numel(), d, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) std::memcpy(dst + i * row_bytes, src + ids[i] * row_stride, row_bytes);
  });
  return result;
}

Tensor embedding_backward_cpu(const Tensor& grad, const Tensor& indices, std::int64_t num_weights,
                              std::int64_t padding_idx) {
  constexpr const char* op = "embedding_backward";
  check_cpu(op, grad);
  check_indices(op, indices);
  check_floating(op, grad);
  // As PyTorch: grad is read as (indices.numel(), grad.size(-1)), whatever its other dims.
  KAEL_CHECK_INDEX(grad.dim() >= 1, op << ": expected grad of at least 1 dim, got a 0-d tensor");
  const std::int64_t d = grad.sizes()[grad.dim() - 1];
  KAEL_CHECK(grad.numel() == indices.numel() * d, op << ": grad of shape " << shape_str(grad.sizes())
                                                     << " cannot be read as " << indices.numel() << " rows of " << d);
  Tensor idx = int64_indices(indices);
  const std::int64_t* ids = idx.data<std::int64_t>();
  for (std::int64_t i = 0; i < idx.numel(); ++i)
    KAEL_CHECK_INDEX(ids[i] >= 0 && ids[i] < num_weights,
                     op << ": index out of range in self (index " << ids[i] << ", " << num_weights << " rows)");
  const ScalarType acc_dtype = compute_dtype(grad.dtype());
  const DimVector shape{num_weights, d};
  Tensor result = alloc_cpu(shape, grad.dtype());
  Tensor acc = acc_dtype == grad.dtype() ? result : alloc_cpu(shape, acc_dtype);
  fill_cpu(acc, Scalar(0.0));
  const Tensor g = contiguous_as(grad, acc_dtype);
  visit_dtype(acc_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const T* gp = g.data<T>();
      T* ap = acc.data<T>();
      // Parallel over columns: every thread walks all indices, so no two write one element.
      parallel_for(d, idx.numel(), [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t i = 0; i < idx.numel(); ++i) {
          if (ids[i] == padding_idx) continue;
          T* row = ap + ids[i] * d;
          const T* gr = gp + i * d;
          for (std::int64_t c = c0; c < c1; ++c) row[c] += gr[c];
        }
      });
    }
  });
  store(result, acc);
  return result;
}

Tensor cross_entropy_losses_cpu(const Tensor& self, const Tensor& target, std::int64_t ignore_index,
                                double label_smoothing) {
  constexpr const char* op = "cross_entropy_losses";
  if (is_floating(target.dtype()) && is_floating(self.dtype()) && target.dtype() != self.dtype()) {
    // probabilities of another floating dtype: both in the promoted dtype, as in PyTorch
    const ScalarType common = promote_types(self.dtype(), target.dtype());
    return cross_entropy_losses_cpu(to_dtype_cpu(self, common), to_dtype_cpu(target, common), ignore_index,
                                    label_smoothing);
  }
  CrossEntropyGeometry g = cross_entropy_setup(op, self, target, ignore_index, label_smoothing);
  if (!g.probabilities) check_targets(op, g.target.data<std::int64_t>(), g.rows, g.classes, ignore_index);
  Tensor result = alloc_cpu(g.out_shape, self.dtype());
  if (g.rows == 0) return result;
  const ScalarType acc_dtype = compute_dtype(self.dtype());
  Tensor out = acc_dtype == self.dtype() ? result : alloc_cpu(g.out_shape, acc_dtype);
  if (g.classes == 0) {
    // No classes, as in PyTorch: every index target is ignore_index (checked above), a loss of
    // 0, or NaN with label smoothing (its mean over no classes); a probability target's loss
    // is minus an empty sum, -0.0.
    fill_cpu(out, Scalar(g.probabilities            ? -0.0
                         : label_smoothing > 0.0 ? std::numeric_limits<double>::quiet_NaN()
                                                 : 0.0));
  } else {
    UnlockedSection section;
    g.logits = section.own(g.logits);
    g.target = section.own(g.target);
    section.unlock();
    if (acc_dtype == ScalarType::Float64)
      cross_entropy_forward<double>(g, out.data<double>(), ignore_index, label_smoothing);
    else
      cross_entropy_forward<float>(g, out.data<float>(), ignore_index, label_smoothing);
  }
  store(result, out);
  return result;
}

Tensor cross_entropy_losses_backward_cpu(const Tensor& grad, const Tensor& self, const Tensor& target,
                                         std::int64_t ignore_index, double label_smoothing) {
  constexpr const char* op = "cross_entropy_losses_backward";
  CrossEntropyGeometry g = cross_entropy_setup(op, self, target, ignore_index, label_smoothing);
  if (!g.probabilities) check_targets(op, g.target.data<std::int64_t>(), g.rows, g.classes, ignore_index);
  check_cpu(op, grad);
  KAEL_CHECK_VALUE(std::equal(grad.sizes().begin(), grad.sizes().end(), g.out_shape.begin(), g.out_shape.end()),
                   op << ": expected grad of shape " << shape_str(g.out_shape) << ", got " << shape_str(grad.sizes()));
  const ScalarType acc_dtype = compute_dtype(self.dtype());
  // The gradient in (rows, classes) layout, then put back into input's dim order.
  DimVector flat_shape = g.out_shape;
  if (self.dim() == 1) flat_shape.clear();
  DimVector last_shape(flat_shape);
  last_shape.push_back(g.classes);
  Tensor gx = alloc_cpu(last_shape, acc_dtype);
  if (g.rows > 0 && g.classes > 0) {
    const Tensor gr = contiguous_as(grad, acc_dtype);
    if (acc_dtype == ScalarType::Float64)
      cross_entropy_backward<double>(g, gr.data<double>(), gx.data<double>(), ignore_index, label_smoothing);
    else
      cross_entropy_backward<float>(g, gr.data<float>(), gx.data<float>(), ignore_index, label_smoothing);
  }
  // gx is the result itself where the classes are already last and the dtype is the input's
  // (no second buffer of the input's size, no copy)
  if (self.dim() <= 2 && acc_dtype == self.dtype()) return gx;
  Tensor back = gx;
  if (self.dim() > 2) {
    DimVector perm;
    perm.push_back(0);
    perm.push_back(self.dim() - 1);
    for (std::int64_t i = 1; i < self.dim() - 1; ++i) perm.push_back(i);
    back = kael::permute(gx, perm);
  }
  Tensor result = alloc_cpu(self.sizes(), self.dtype());
  copy_cpu(result, back);
  return result;
}

}  // namespace kael::native
