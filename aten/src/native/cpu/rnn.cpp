// Recurrent layers on the CPU: one direction of one layer of RNN (tanh/relu), LSTM (with
// projections) and GRU over a whole (packed) sequence, and its backward pass through time
// (docs/decisions/recurrent.md).
//
// Layout. The sequence is always read as packed: `x` is (N, input) with the rows of time step t
// at offsets[t] .. offsets[t] + batch_sizes[t], batch sizes non-increasing (a padded (T, B, I)
// input is the packed form with every batch size B). A step updates the first batch_sizes[t]
// rows of the state and leaves the others alone, so the finished sequences of a packed batch
// keep their last state (h_n) going forwards, and the ones not yet started keep h0 going
// backwards (reverse = true walks the steps from the last).
//
// Forward: the input projection of every step is one GEMM (x @ w_ih^T plus the biases), written
// straight into the workspace; each step then adds h_prev @ w_hh^T to its rows with one GEMM
// and runs the gate nonlinearities in one pass over the rows. What the backward needs is kept in
// the workspace, a byte tensor (an integer result, so autograd gives it no gradient), split into
// (N, width) blocks per mode (Layout below).
//
// Backward: the steps in reverse order, each one pointwise pass giving the gradients of the
// pre-activation gates and one GEMM carrying the gradient to h_prev; then the gradients of the
// input and of every weight and bias are single GEMMs (or column sums) over all N rows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <tuple>
#include <vector>

#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/gemm.h"
#include "kael/native/pointwise.h"
#include "kael/native/vec_math.h"
#include "kael/runtime/threads.h"
#include "nn_kernels.h"

namespace kael::native {

namespace {

// The gate loops read and write rows of different blocks that never overlap; telling GCC so
// lets it vectorise them (with vmath's branch-free sigmoid and tanh) without runtime alias checks.
#define KAEL_RNN_IVDEP _Pragma("GCC ivdep")

enum class Mode { Tanh, Relu, Lstm, Gru };

Mode parse_mode(const char* op, std::string_view mode) {
  if (mode == "RNN_TANH") return Mode::Tanh;
  if (mode == "RNN_RELU") return Mode::Relu;
  if (mode == "LSTM") return Mode::Lstm;
  if (mode == "GRU") return Mode::Gru;
  KAEL_CHECK_VALUE(false, op << ": unknown mode '" << mode << "' (expected RNN_TANH, RNN_RELU, LSTM or GRU)");
  return Mode::Tanh;
}

std::int64_t gate_count(Mode m) { return m == Mode::Lstm ? 4 : m == Mode::Gru ? 3 : 1; }

// The tensors of one layer-direction, in the order of the op's `tensors` list:
// input, hx, [cx (LSTM)], w_ih, w_hh, [b_ih, b_hh], [w_hr (LSTM with projections)].
struct Params {
  Mode mode;
  Tensor x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr;
  std::int64_t N = 0, I = 0, H = 0, P = 0, B = 0, G = 0;
  std::vector<std::int64_t> bs, off;
  bool proj = false, bias = false;
};

Tensor make(std::initializer_list<std::int64_t> sizes, ScalarType dtype) {
  return alloc_cpu(IntArrayRef(sizes.begin(), sizes.size()), dtype);
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : snapshot_cpu(t); }

Params unpack(const char* op, TensorList tensors, IntArrayRef batch_sizes, std::string_view mode_name,
              bool has_biases) {
  Params p;
  p.mode = parse_mode(op, mode_name);
  p.bias = has_biases;
  const bool lstm = p.mode == Mode::Lstm;
  const std::size_t base = (lstm ? 5 : 4) + (has_biases ? 2 : 0);
  const std::size_t n = tensors.size();
  KAEL_CHECK_VALUE(n == base || (lstm && n == base + 1),
                   op << ": expected " << base << (lstm ? " or " + std::to_string(base + 1) : std::string())
                      << " tensors for mode " << mode_name << " with has_biases=" << (has_biases ? "True" : "False")
                      << ", got " << n);
  std::size_t i = 0;
  p.x = tensors[i++];
  p.h0 = tensors[i++];
  if (lstm) p.c0 = tensors[i++];
  p.w_ih = tensors[i++];
  p.w_hh = tensors[i++];
  if (has_biases) {
    p.b_ih = tensors[i++];
    p.b_hh = tensors[i++];
  }
  p.proj = i < n;
  if (p.proj) p.w_hr = tensors[i++];
  const ScalarType dt = p.x.dtype();
  KAEL_CHECK(dt == ScalarType::Float32 || dt == ScalarType::Float64,
             op << ": expected a float32 or float64 input, got " << dt);
  for (std::size_t k = 0; k < n; ++k) {
    KAEL_CHECK(tensors[k].device().is_cpu(), op << ": expected CPU tensors, got tensor " << k << " on "
                                                 << tensors[k].device());
    KAEL_CHECK(tensors[k].dtype() == dt, op << ": expected every tensor to have the input's dtype " << dt
                                            << ", got " << tensors[k].dtype() << " for tensor " << k);
  }
  p.G = gate_count(p.mode);
  KAEL_CHECK_VALUE(p.x.dim() == 2, op << ": expected a 2-d (rows, features) input, got " << p.x.dim() << "-d");
  KAEL_CHECK_VALUE(p.w_ih.dim() == 2 && p.w_hh.dim() == 2 && p.w_ih.size(0) % p.G == 0,
                   op << ": bad weight shapes " << shape_str(p.w_ih.sizes()) << " and " << shape_str(p.w_hh.sizes()));
  p.N = p.x.size(0);
  p.I = p.x.size(1);
  p.H = p.w_ih.size(0) / p.G;
  p.P = p.proj ? p.w_hr.size(0) : p.H;
  KAEL_CHECK_VALUE(p.w_ih.size(1) == p.I, op << ": w_ih has " << p.w_ih.size(1) << " columns, expected input size "
                                             << p.I);
  KAEL_CHECK_VALUE(p.w_hh.size(0) == p.G * p.H && p.w_hh.size(1) == p.P,
                   op << ": w_hh has shape " << shape_str(p.w_hh.sizes()) << ", expected [" << p.G * p.H << ", "
                      << p.P << "]");
  if (p.proj)
    KAEL_CHECK_VALUE(p.w_hr.dim() == 2 && p.w_hr.size(1) == p.H,
                     op << ": w_hr has shape " << shape_str(p.w_hr.sizes()) << ", expected [" << p.P << ", " << p.H
                        << "]");
  if (has_biases)
    KAEL_CHECK_VALUE(p.b_ih.dim() == 1 && p.b_ih.size(0) == p.G * p.H && p.b_hh.dim() == 1 &&
                         p.b_hh.size(0) == p.G * p.H,
                     op << ": biases of shapes " << shape_str(p.b_ih.sizes()) << " and " << shape_str(p.b_hh.sizes())
                        << ", expected [" << p.G * p.H << "]");
  KAEL_CHECK_VALUE(!batch_sizes.empty(), op << ": batch_sizes is empty");
  std::int64_t total = 0;
  for (std::size_t t = 0; t < batch_sizes.size(); ++t) {
    const std::int64_t b = batch_sizes[t];
    KAEL_CHECK_VALUE(b >= 1 && (t == 0 || b <= batch_sizes[t - 1]),
                     op << ": batch_sizes must be positive and non-increasing, got " << shape_str(batch_sizes));
    p.off.push_back(total);
    p.bs.push_back(b);
    total += b;
  }
  p.B = batch_sizes[0];
  KAEL_CHECK_VALUE(total == p.N, op << ": batch_sizes sum to " << total << " but the input has " << p.N << " rows");
  KAEL_CHECK_VALUE(p.h0.dim() == 2 && p.h0.size(0) == p.B && p.h0.size(1) == p.P,
                   op << ": expected hx of shape [" << p.B << ", " << p.P << "], got " << shape_str(p.h0.sizes()));
  if (lstm)
    KAEL_CHECK_VALUE(p.c0.dim() == 2 && p.c0.size(0) == p.B && p.c0.size(1) == p.H,
                     op << ": expected cx of shape [" << p.B << ", " << p.H << "], got " << shape_str(p.c0.sizes()));
  p.x = dense(p.x);
  p.h0 = dense(p.h0);
  if (lstm) p.c0 = dense(p.c0);
  p.w_ih = dense(p.w_ih);
  p.w_hh = dense(p.w_hh);
  if (has_biases) {
    p.b_ih = dense(p.b_ih);
    p.b_hh = dense(p.b_hh);
  }
  if (p.proj) p.w_hr = dense(p.w_hr);
  return p;
}

// Note [Recurrent workspace layout]: (N, width) blocks, one after the other, in elements.
//   RNN:  act (N, H) (the step's output), hprev (N, H)
//   LSTM: gates (N, 4H) (i, f, g, o after their nonlinearities), cprev (N, H), tanh(c) (N, H),
//         hprev (N, P), and with projections hpre (N, H) (o * tanh(c), before w_hr)
//   GRU:  gates (N, 3H) (r, z, n after their nonlinearities), hn (N, H) (w_hn h + b_hn),
//         hprev (N, H)
struct Layout {
  std::int64_t gates = 0, cprev = 0, tanhc = 0, hprev = 0, hpre = 0, hn = 0, total = 0;
};

Layout layout(const Params& p) {
  Layout l;
  const std::int64_t N = p.N, H = p.H;
  l.gates = 0;
  std::int64_t at = N * p.G * H;
  if (p.mode == Mode::Lstm) {
    l.cprev = at;
    at += N * H;
    l.tanhc = at;
    at += N * H;
    l.hprev = at;
    at += N * p.P;
    if (p.proj) {
      l.hpre = at;
      at += N * H;
    }
  } else if (p.mode == Mode::Gru) {
    l.hn = at;
    at += N * H;
    l.hprev = at;
    at += N * H;
  } else {
    l.hprev = at;
    at += N * H;
  }
  l.total = at;
  return l;
}

// C (m x n, row-major, ldc) (+)= A @ B with element strides, as gemm_f32 (kael/native/gemm.h).
void mm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_rs, std::int64_t a_cs,
        const float* b, std::int64_t b_rs, std::int64_t b_cs, float* c, std::int64_t ldc, bool acc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!acc)
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  if (m <= kSmallM && gemm_small_m(m, n, k, a, a_rs, a_cs, b, ScalarType::Float32, b_rs, b_cs, c, ldc, acc)) return;
  if (gemm_f32_available()) {
    // A step's product (20 x 1024 x 256 in the LSTM language model) is below gemm_f32's own
    // threading size; split its columns (32-column panels) among the threads here when there are
    // several. Every C element is still one gemm_f32 sum, so the bits do not change.
    const std::int64_t work = m * n * k;
    if (work < kGemmParallelWork && work >= (std::int64_t{1} << 20) && n >= 128 && get_num_threads() > 1 &&
        !in_parallel_region()) {
      const std::int64_t panels = (n + 31) / 32;
      kael::parallel_for(0, panels, std::max<std::int64_t>(1, panels / get_num_threads()),
                         [&](std::int64_t p0, std::int64_t p1) {
                           const std::int64_t j0 = p0 * 32, j1 = std::min(n, p1 * 32);
                           gemm_f32(m, j1 - j0, k, a, a_rs, a_cs, b + j0 * b_cs, b_rs, b_cs, c + j0, ldc, acc);
                         });
      return;
    }
    gemm_f32(m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc, acc);
    return;
  }
  for (std::int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (!acc) std::fill(ci, ci + n, 0.0f);
    for (std::int64_t kk = 0; kk < k; ++kk) {
      const float av = a[i * a_rs + kk * a_cs];
      for (std::int64_t j = 0; j < n; ++j) ci[j] += av * b[kk * b_rs + j * b_cs];
    }
  }
}

// float64: a plain loop (float64 recurrent layers are for checking, not speed), with the
// contiguous operand innermost.
void mm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t a_rs, std::int64_t a_cs,
        const double* b, std::int64_t b_rs, std::int64_t b_cs, double* c, std::int64_t ldc, bool acc) {
  nn::parallel_for(m, n * k, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      double* ci = c + i * ldc;
      if (!acc) std::fill(ci, ci + n, 0.0);
      if (b_cs == 1) {
        for (std::int64_t kk = 0; kk < k; ++kk) {
          const double av = a[i * a_rs + kk * a_cs];
          const double* bk = b + kk * b_rs;
          for (std::int64_t j = 0; j < n; ++j) ci[j] += av * bk[j];
        }
      } else {
        for (std::int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (std::int64_t kk = 0; kk < k; ++kk) s += a[i * a_rs + kk * a_cs] * b[kk * b_rs + j * b_cs];
          ci[j] += s;
        }
      }
    }
  });
}

template <typename T>
inline T sigm(T v) {
  return vmath::sigmoid(v);
}
template <typename T>
inline T tanh_(T v) {
  return vmath::tanh(v);
}

// Runs f(begin, end) over the rows [0, rows) of a step, split among the threads when the step
// has enough elements.
template <typename F>
void rows_for(std::int64_t rows, std::int64_t cost, const F& f) {
  nn::parallel_for(rows, cost, f);
}

// The transpose of a row-major (rows, cols) matrix, row-major.
template <typename T>
Tensor transposed(const T* a, std::int64_t rows, std::int64_t cols, ScalarType dtype) {
  Tensor out = make({cols, rows}, dtype);
  T* t = out.data<T>();
  constexpr std::int64_t kTile = 16;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const std::int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (std::int64_t c = c0; c < c1; ++c)
        for (std::int64_t r = r0; r < r1; ++r) t[c * rows + r] = a[r * cols + c];
    }
  return out;
}

// A scratch buffer of n elements of T (kael's allocator, not zeroed).
template <typename T>
T* scratch(Tensor& holder, std::int64_t n, ScalarType dtype) {
  holder = make({n}, dtype);
  return holder.data<T>();
}

// One step's cells of rows [r0, r1), from the pre-activations in g (rows of G * H: the input
// projection plus h_prev @ w_hh^T, with the biases), which each overwrites with the activations
// the backward pass reads.
//
// GRU: hg holds h_prev @ w_hh^T + b_hh of the step (b_hn stays inside r * (w_hn h + b_hn)); keeps
// w_hn h + b_hn in hn and writes h_t = (1 - z) n + z h_prev into out (rows of P).
template <typename T>
void gru_rows(std::int64_t r0, std::int64_t r1, std::int64_t H, std::int64_t P, T* g, const T* hg, T* hn,
              const T* hp, T* out) {
  const std::int64_t GH = 3 * H;
  for (std::int64_t r = r0; r < r1; ++r) {
    T* gr = g + r * GH;
    const T* hr = hg + r * GH;
    T* hnr = hn + r * H;
    const T* hpr = hp + r * P;
    T* outr = out + r * P;
    KAEL_RNN_IVDEP
    for (std::int64_t j = 0; j < H; ++j) {
      const T rv = sigm(gr[j] + hr[j]);
      const T zv = sigm(gr[H + j] + hr[H + j]);
      const T nv = tanh_(gr[2 * H + j] + rv * hr[2 * H + j]);
      gr[j] = rv;
      gr[H + j] = zv;
      gr[2 * H + j] = nv;
      hnr[j] = hr[2 * H + j];
      outr[j] = (T(1) - zv) * nv + zv * hpr[j];
    }
  }
}

// LSTM: c (rows of H) steps in place, tanh(c) into tc, h = o tanh(c) into dst (rows dst_stride
// apart: the output, or the pre-projection h with w_hr).
template <typename T>
void lstm_rows(std::int64_t r0, std::int64_t r1, std::int64_t H, T* g, T* c, T* tc, T* dst, std::int64_t dst_stride) {
  const std::int64_t GH = 4 * H;
  for (std::int64_t r = r0; r < r1; ++r) {
    T* gr = g + r * GH;
    T* cr = c + r * H;
    T* tcr = tc + r * H;
    T* dr = dst + r * dst_stride;
    KAEL_RNN_IVDEP
    for (std::int64_t j = 0; j < H; ++j) {
      const T iv = sigm(gr[j]);
      const T fv = sigm(gr[H + j]);
      const T gv = tanh_(gr[2 * H + j]);
      const T ov = sigm(gr[3 * H + j]);
      gr[j] = iv;
      gr[H + j] = fv;
      gr[2 * H + j] = gv;
      gr[3 * H + j] = ov;
      const T cv = fv * cr[j] + iv * gv;
      cr[j] = cv;
      const T tv = tanh_(cv);
      tcr[j] = tv;
      dr[j] = ov * tv;
    }
  }
}

// RNN_TANH / RNN_RELU: h = tanh(g) or relu(g) (NaN kept), into g and out (rows of P).
template <typename T>
void plain_rows(std::int64_t r0, std::int64_t r1, std::int64_t H, bool relu, T* g, T* out, std::int64_t P) {
  for (std::int64_t r = r0; r < r1; ++r) {
    T* gr = g + r * H;
    T* outr = out + r * P;
    if (relu) {
      KAEL_RNN_IVDEP
      for (std::int64_t j = 0; j < H; ++j) gr[j] = outr[j] = gr[j] > T(0) ? gr[j] : (gr[j] != gr[j] ? gr[j] : T(0));
    } else {
      KAEL_RNN_IVDEP
      for (std::int64_t j = 0; j < H; ++j) gr[j] = outr[j] = tanh_(gr[j]);
    }
  }
}

template <typename T>
std::tuple<Tensor, Tensor, Tensor, Tensor> forward(const Params& p, bool reverse) {
  const std::int64_t N = p.N, I = p.I, H = p.H, P = p.P, B = p.B, G = p.G, GH = p.G * p.H;
  const Layout L = layout(p);
  Tensor ws = make({L.total * static_cast<std::int64_t>(sizeof(T))}, ScalarType::UInt8);
  Tensor output = make({N, P}, p.x.dtype());
  Tensor h_n = make({B, P}, p.x.dtype());
  const bool lstm = p.mode == Mode::Lstm, gru = p.mode == Mode::Gru;
  Tensor c_n = make({lstm ? B : 0, lstm ? H : 0}, p.x.dtype());
  T* W = reinterpret_cast<T*>(ws.data_ptr());
  T* gates = W + L.gates;
  T* out = output.data<T>();
  T* h = h_n.data<T>();
  T* c = lstm ? c_n.data<T>() : nullptr;
  const T* x = p.x.data<T>();
  const T* w_ih = p.w_ih.data<T>();
  // w_hh^T (P, GH) and w_hr^T (H, P) as row-major copies, made once for all the steps: the GEMM
  // then reads B's rows where they lie instead of transposing B again at every step.
  const ScalarType dt = p.x.dtype();
  const Tensor w_hh_t = transposed(p.w_hh.data<T>(), GH, P, dt);
  const Tensor w_hr_t = p.proj ? transposed(p.w_hr.data<T>(), P, H, dt) : Tensor();
  const T* w_hh = w_hh_t.data<T>();
  const T* w_hr = p.proj ? w_hr_t.data<T>() : nullptr;
  const T* b_ih = p.bias ? p.b_ih.data<T>() : nullptr;
  const T* b_hh = p.bias ? p.b_hh.data<T>() : nullptr;
  std::memcpy(h, p.h0.data<T>(), sizeof(T) * B * P);
  if (lstm) std::memcpy(c, p.c0.data<T>(), sizeof(T) * B * H);

  // The input projection of every step, with b_ih and b_hh (GRU: b_ih only; b_hh goes with
  // w_hh h, since b_hn stays inside r * (w_hn h + b_hn)).
  std::vector<T> bias_row(GH, T(0));
  if (p.bias)
    for (std::int64_t j = 0; j < GH; ++j) bias_row[j] = b_ih[j] + (gru ? T(0) : b_hh[j]);
  for (std::int64_t r = 0; r < N; ++r) std::memcpy(gates + r * GH, bias_row.data(), sizeof(T) * GH);
  mm(N, GH, I, x, I, 1, w_ih, 1, I, gates, GH, true);

  Tensor hg_holder;
  T* const hg = gru ? scratch<T>(hg_holder, B * GH, dt) : nullptr;  // GRU: h_prev @ w_hh^T + b_hh of the step
  const std::int64_t T_ = static_cast<std::int64_t>(p.bs.size());
  for (std::int64_t s = 0; s < T_; ++s) {
    const std::int64_t t = reverse ? T_ - 1 - s : s;
    const std::int64_t bs = p.bs[t], off = p.off[t];
    T* hp = W + L.hprev + off * P;
    std::memcpy(hp, h, sizeof(T) * bs * P);
    T* g = gates + off * GH;
    if (gru) {
      T* hgp = hg;
      for (std::int64_t r = 0; r < bs; ++r) {
        if (p.bias) std::memcpy(hgp + r * GH, b_hh, sizeof(T) * GH);
        else std::fill(hgp + r * GH, hgp + (r + 1) * GH, T(0));
      }
      mm(bs, GH, P, hp, P, 1, w_hh, GH, 1, hgp, GH, true);
      T* hn = W + L.hn + off * H;
      rows_for(bs, 8 * H, [&](std::int64_t r0, std::int64_t r1) {
        gru_rows(r0, r1, H, P, g, hgp, hn, hp, out + off * P);
      });
      std::memcpy(h, out + off * P, sizeof(T) * bs * P);
      continue;
    }
    mm(bs, GH, P, hp, P, 1, w_hh, GH, 1, g, GH, true);
    if (lstm) {
      T* cp = W + L.cprev + off * H;
      T* tc = W + L.tanhc + off * H;
      T* hpre = p.proj ? W + L.hpre + off * H : nullptr;
      std::memcpy(cp, c, sizeof(T) * bs * H);
      T* const dst = p.proj ? hpre : out + off * P;
      const std::int64_t dst_stride = p.proj ? H : P;
      rows_for(bs, 10 * H, [&](std::int64_t r0, std::int64_t r1) { lstm_rows(r0, r1, H, g, c, tc, dst, dst_stride); });
      if (p.proj) mm(bs, P, H, hpre, H, 1, w_hr, P, 1, out + off * P, P, false);
    } else {
      const bool relu = p.mode == Mode::Relu;
      rows_for(bs, 4 * H, [&](std::int64_t r0, std::int64_t r1) { plain_rows(r0, r1, H, relu, g, out + off * P, P); });
    }
    std::memcpy(h, out + off * P, sizeof(T) * bs * P);
  }
  (void)G;
  return {output, h_n, c_n, ws};
}

// Column sums of a (rows, cols) row-major matrix.
template <typename T>
void colsum(const T* a, std::int64_t rows, std::int64_t cols, T* out) {
  std::fill(out, out + cols, T(0));
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* ar = a + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) out[j] += ar[j];
  }
}

// The gradients of one step's pre-activations (dg, rows of G * H) for rows [r0, r1), from the
// activations the forward pass left in g and the gradient of the step's h.
//
// LSTM: dh (rows of H: the output's gradient, or the pre-projection h's with w_hr) and dc
// (rows of H, updated in place to the gradient of c_prev), c_prev in cp and tanh(c) in tc.
template <typename T>
void lstm_backward_rows(std::int64_t r0, std::int64_t r1, std::int64_t H, const T* g, T* dg, const T* dh, T* dc,
                        const T* cp, const T* tc) {
  const std::int64_t GH = 4 * H;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * GH;
    T* dgr = dg + r * GH;
    const T* dhr = dh + r * H;
    T* dcr = dc + r * H;
    const T* cpr = cp + r * H;
    const T* tcr = tc + r * H;
    KAEL_RNN_IVDEP
    for (std::int64_t j = 0; j < H; ++j) {
      const T iv = gr[j], fv = gr[H + j], gv = gr[2 * H + j], ov = gr[3 * H + j];
      const T tv = tcr[j];
      const T dcv = dcr[j] + dhr[j] * ov * (T(1) - tv * tv);
      const T dov = dhr[j] * tv;
      dgr[j] = dcv * gv * iv * (T(1) - iv);
      dgr[H + j] = dcv * cpr[j] * fv * (T(1) - fv);
      dgr[2 * H + j] = dcv * iv * (T(1) - gv * gv);
      dgr[3 * H + j] = dov * ov * (T(1) - ov);
      dcr[j] = dcv * fv;
    }
  }
}

// GRU: also the gradient of h_prev @ w_hh^T + b_hh (dgh); dh (rows of P) becomes the part of
// h_prev's gradient that does not pass through w_hh; h_prev in hp, w_hn h + b_hn in hn.
template <typename T>
void gru_backward_rows(std::int64_t r0, std::int64_t r1, std::int64_t H, std::int64_t P, const T* g, T* dg, T* dgh,
                       T* dh, const T* hp, const T* hn) {
  const std::int64_t GH = 3 * H;
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * GH;
    T* dgr = dg + r * GH;
    T* dghr = dgh + r * GH;
    T* dhr = dh + r * P;
    const T* hpr = hp + r * P;
    const T* hnr = hn + r * H;
    KAEL_RNN_IVDEP
    for (std::int64_t j = 0; j < H; ++j) {
      const T rv = gr[j], zv = gr[H + j], nv = gr[2 * H + j];
      const T d = dhr[j];
      const T dnp = d * (T(1) - zv) * (T(1) - nv * nv);
      const T dzp = d * (hpr[j] - nv) * zv * (T(1) - zv);
      const T drp = dnp * hnr[j] * rv * (T(1) - rv);
      dgr[j] = dghr[j] = drp;
      dgr[H + j] = dghr[H + j] = dzp;
      dgr[2 * H + j] = dnp;
      dghr[2 * H + j] = dnp * rv;
      dhr[j] = d * zv;
    }
  }
}

// RNN_TANH / RNN_RELU, from dh (rows of P).
template <typename T>
void plain_backward_rows(std::int64_t r0, std::int64_t r1, std::int64_t H, std::int64_t P, bool relu, const T* g,
                         T* dg, const T* dh) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const T* gr = g + r * H;
    T* dgr = dg + r * H;
    const T* dhr = dh + r * P;
    if (relu) {
      KAEL_RNN_IVDEP
      for (std::int64_t j = 0; j < H; ++j) dgr[j] = gr[j] <= T(0) ? T(0) : dhr[j];  // NaN passes, as torch's
    } else {
      KAEL_RNN_IVDEP
      for (std::int64_t j = 0; j < H; ++j) dgr[j] = dhr[j] * (T(1) - gr[j] * gr[j]);
    }
  }
}

template <typename T>
std::vector<Tensor> backward(const Params& p, TensorList grads, const Tensor& workspace, bool reverse) {
  const char* op = "_rnn_layer_backward";
  const std::int64_t N = p.N, I = p.I, H = p.H, P = p.P, B = p.B, GH = p.G * p.H;
  const bool lstm = p.mode == Mode::Lstm, gru = p.mode == Mode::Gru;
  const Layout L = layout(p);
  KAEL_CHECK_VALUE(workspace.dtype() == ScalarType::UInt8 && workspace.is_contiguous() &&
                       workspace.numel() == L.total * static_cast<std::int64_t>(sizeof(T)),
                   op << ": the workspace does not belong to these tensors (" << workspace.numel() << " bytes, expected "
                      << L.total * static_cast<std::int64_t>(sizeof(T)) << ")");
  KAEL_CHECK_VALUE(grads.size() >= 2, op << ": expected the gradients of output, h_n and c_n, got " << grads.size());
  const ScalarType dt = p.x.dtype();
  auto grad_of = [&](std::size_t i, std::int64_t rows, std::int64_t cols) -> Tensor {
    if (i >= grads.size() || !grads[i].defined()) return Tensor();
    const Tensor& g = grads[i];
    KAEL_CHECK_VALUE(g.dim() == 2 && g.size(0) == rows && g.size(1) == cols,
                     op << ": gradient " << i << " has shape " << shape_str(g.sizes()) << ", expected [" << rows
                        << ", " << cols << "]");
    return g.dtype() == dt ? dense(g) : to_dtype_cpu(g, dt);
  };
  const Tensor g_out = grad_of(0, N, P);
  const Tensor g_hn = grad_of(1, B, P);
  const Tensor g_cn = lstm ? grad_of(2, B, H) : Tensor();
  const T* W = reinterpret_cast<const T*>(workspace.data_ptr());
  const T* gates = W + L.gates;
  const T* w_hh = p.w_hh.data<T>();
  const T* w_hr = p.proj ? p.w_hr.data<T>() : nullptr;

  Tensor dh0 = make({B, P}, dt);
  Tensor dc0 = lstm ? make({B, H}, dt) : Tensor();
  T* dh = dh0.data<T>();
  T* dc = lstm ? dc0.data<T>() : nullptr;
  if (g_hn.defined()) std::memcpy(dh, g_hn.data<T>(), sizeof(T) * B * P);
  else std::fill(dh, dh + B * P, T(0));
  if (lstm) {
    if (g_cn.defined()) std::memcpy(dc, g_cn.data<T>(), sizeof(T) * B * H);
    else std::fill(dc, dc + B * H, T(0));
  }
  const T* gout = g_out.defined() ? g_out.data<T>() : nullptr;
  Tensor dG_holder, dGh_holder, dhout_holder, dhpre_holder;
  T* const dG = scratch<T>(dG_holder, N * GH, dt);  // gradients of the pre-activation input projections
  T* const dGh = gru ? scratch<T>(dGh_holder, N * GH, dt) : nullptr;  // GRU: of h_prev @ w_hh^T + b_hh
  T* const dhout = p.proj ? scratch<T>(dhout_holder, N * P, dt) : nullptr;  // of each step's output (w_hr)
  T* const dhpre = p.proj ? scratch<T>(dhpre_holder, B * H, dt) : nullptr;
  const std::int64_t T_ = static_cast<std::int64_t>(p.bs.size());
  for (std::int64_t s = T_ - 1; s >= 0; --s) {
    const std::int64_t t = reverse ? T_ - 1 - s : s;
    const std::int64_t bs = p.bs[t], off = p.off[t];
    if (gout) {
      const T* go = gout + off * P;
      for (std::int64_t i = 0; i < bs * P; ++i) dh[i] += go[i];
    }
    const T* g = gates + off * GH;
    T* dg = dG + off * GH;
    const T* hp = W + L.hprev + off * P;
    if (lstm) {
      const T* dsrc = dh;
      if (p.proj) {
        std::memcpy(dhout + off * P, dh, sizeof(T) * bs * P);
        mm(bs, H, P, dh, P, 1, w_hr, H, 1, dhpre, H, false);
        dsrc = dhpre;
      }
      const T* cp = W + L.cprev + off * H;
      const T* tc = W + L.tanhc + off * H;
      rows_for(bs, 12 * H, [&](std::int64_t r0, std::int64_t r1) { lstm_backward_rows(r0, r1, H, g, dg, dsrc, dc, cp, tc); });
      mm(bs, P, GH, dg, GH, 1, w_hh, P, 1, dh, P, false);
    } else if (gru) {
      const T* hn = W + L.hn + off * H;
      T* dgh = dGh + off * GH;
      rows_for(bs, 12 * H, [&](std::int64_t r0, std::int64_t r1) { gru_backward_rows(r0, r1, H, P, g, dg, dgh, dh, hp, hn); });
      mm(bs, P, GH, dgh, GH, 1, w_hh, P, 1, dh, P, true);
    } else {
      const bool relu = p.mode == Mode::Relu;
      rows_for(bs, 4 * H, [&](std::int64_t r0, std::int64_t r1) { plain_backward_rows(r0, r1, H, P, relu, g, dg, dh); });
      mm(bs, P, GH, dg, GH, 1, w_hh, P, 1, dh, P, false);
    }
  }

  const T* x = p.x.data<T>();
  const T* dgx = dG;
  const T* dgh = gru ? dGh : dG;
  Tensor dx = make({N, I}, dt);
  mm(N, I, GH, dgx, GH, 1, p.w_ih.data<T>(), I, 1, dx.data<T>(), I, false);
  Tensor dw_ih = make({GH, I}, dt);
  mm(GH, I, N, dgx, 1, GH, x, I, 1, dw_ih.data<T>(), I, false);
  Tensor dw_hh = make({GH, P}, dt);
  mm(GH, P, N, dgh, 1, GH, W + L.hprev, P, 1, dw_hh.data<T>(), P, false);
  std::vector<Tensor> result;
  result.push_back(dx);
  result.push_back(dh0);
  if (lstm) result.push_back(dc0);
  result.push_back(dw_ih);
  result.push_back(dw_hh);
  if (p.bias) {
    Tensor db_ih = make({GH}, dt);
    Tensor db_hh = make({GH}, dt);
    colsum(dgx, N, GH, db_ih.data<T>());
    colsum(dgh, N, GH, db_hh.data<T>());
    result.push_back(db_ih);
    result.push_back(db_hh);
  }
  if (p.proj) {
    Tensor dw_hr = make({P, H}, dt);
    mm(P, H, N, dhout, 1, P, W + L.hpre, H, 1, dw_hr.data<T>(), H, false);
    result.push_back(dw_hr);
  }
  return result;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> rnn_layer_cpu(TensorList tensors, IntArrayRef batch_sizes,
                                                         std::string_view mode, bool has_biases, bool reverse) {
  const Params p = unpack("_rnn_layer", tensors, batch_sizes, mode, has_biases);
  return p.x.dtype() == ScalarType::Float64 ? forward<double>(p, reverse) : forward<float>(p, reverse);
}

std::vector<Tensor> rnn_layer_backward_cpu(TensorList grads, TensorList tensors, const Tensor& workspace,
                                           IntArrayRef batch_sizes, std::string_view mode, bool has_biases,
                                           bool reverse) {
  const Params p = unpack("_rnn_layer_backward", tensors, batch_sizes, mode, has_biases);
  return p.x.dtype() == ScalarType::Float64 ? backward<double>(p, grads, workspace, reverse)
                                            : backward<float>(p, grads, workspace, reverse);
}

}  // namespace kael::native
