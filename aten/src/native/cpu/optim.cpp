// The fused Adam(W) update, registry entries _adam_step_ and _adam_step_supported: every element
// of every parameter in one parallel region, instead of a dozen ops (each a pass over memory) per
// parameter.

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kael/core/concurrency.h"
#include "kael/core/error.h"
#include "kael/native/declarations.h"
#include "kael/native/loops.h"
#include "kael/native/pointwise.h"
#include "kael/runtime/threads.h"

namespace kael::native {

namespace {

// The elements from which a step drops the caller's lock (as the bindings' gil: auto).
constexpr std::int64_t kUnlockElements = std::int64_t{1} << 16;

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: p *= 1 - lr * weight_decay; Adam: grad += weight_decay * p
  bool amsgrad = false, maximize = false;
  std::int64_t step = 1;   // the step count of every parameter in the lists (for the bias corrections)
};

bool overlaps(const Tensor& a, const Tensor& b) {
  const auto* pa = static_cast<const char*>(a.data_ptr());
  const auto* pb = static_cast<const char*>(b.data_ptr());
  const std::int64_t na = a.numel() * static_cast<std::int64_t>(a.element_size());
  const std::int64_t nb = b.numel() * static_cast<std::int64_t>(b.element_size());
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

template <typename T>
struct Constants {
  T decay, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, bc2_sqrt, eps, step_size;
  bool decoupled, amsgrad, maximize, has_wd;
};

// The flags are template parameters, so that each form's loop has no branch.
template <typename T, bool kMaximize, bool kWeightDecay, bool kDecoupled, bool kAmsgrad>
void update(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, T* __restrict vmax,
            std::int64_t n, const Constants<T>& c) {
  const T decay = c.decay, wd = c.wd, beta1 = c.beta1, one_minus_beta1 = c.one_minus_beta1, beta2 = c.beta2,
          one_minus_beta2 = c.one_minus_beta2, bc2_sqrt = c.bc2_sqrt, eps = c.eps, step_size = c.step_size;
  for (std::int64_t i = 0; i < n; ++i) {
    T gi = kMaximize ? -g[i] : g[i];
    T pi = p[i];
    if constexpr (kWeightDecay) {
      if constexpr (kDecoupled) pi = pi * decay;
      else gi = gi + wd * pi;
    }
    T mi = m[i] * beta1;
    mi = mi + one_minus_beta1 * gi;
    T vi = v[i] * beta2;
    vi = vi + one_minus_beta2 * (gi * gi);
    T vd = vi;
    if constexpr (kAmsgrad) {
      const T old = vmax[i];
      vd = (old > vi || old != old) ? old : vi;
      vmax[i] = vd;
    }
    const T denom = std::sqrt(vd) / bc2_sqrt + eps;
    p[i] = pi - step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

#if defined(__AVX512F__)
// The float update in 16 lanes: the scalar loop does not vectorise, as std::sqrt keeps a branch to
// the library call that sets errno for a negative argument (whose result is NaN either way). The
// same operations, a partial vector (masked) at the end (docs/performance.md, "Figures behind
// kernel constants"). The square root is the masked form with every lane set (the unmasked one
// trips GCC 12's -Wmaybe-uninitialized).
template <bool kMaximize, bool kWeightDecay, bool kDecoupled, bool kAmsgrad>
void update_avx512(float* p, const float* g, float* m, float* v, float* vmax, std::int64_t n,
                   const Constants<float>& c) {
  const __m512 decay = _mm512_set1_ps(c.decay), wd = _mm512_set1_ps(c.wd), beta1 = _mm512_set1_ps(c.beta1),
               one_minus_beta1 = _mm512_set1_ps(c.one_minus_beta1), beta2 = _mm512_set1_ps(c.beta2),
               one_minus_beta2 = _mm512_set1_ps(c.one_minus_beta2), bc2_sqrt = _mm512_set1_ps(c.bc2_sqrt),
               eps = _mm512_set1_ps(c.eps), step_size = _mm512_set1_ps(c.step_size);
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 gi = _mm512_maskz_loadu_ps(k, g + i);
    if constexpr (kMaximize) gi = _mm512_sub_ps(_mm512_setzero_ps(), gi);
    __m512 pi = _mm512_maskz_loadu_ps(k, p + i);
    if constexpr (kWeightDecay) {
      if constexpr (kDecoupled) pi = _mm512_mul_ps(pi, decay);
      else gi = _mm512_fmadd_ps(wd, pi, gi);
    }
    const __m512 mi = _mm512_fmadd_ps(one_minus_beta1, gi, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, m + i), beta1));
    const __m512 vi = _mm512_fmadd_ps(one_minus_beta2, _mm512_mul_ps(gi, gi),
                                      _mm512_mul_ps(_mm512_maskz_loadu_ps(k, v + i), beta2));
    __m512 vd = vi;
    if constexpr (kAmsgrad) {
      const __m512 old = _mm512_maskz_loadu_ps(k, vmax + i);
      const __mmask16 keep_old = _mm512_cmp_ps_mask(old, vi, _CMP_GT_OQ) | _mm512_cmp_ps_mask(old, old, _CMP_UNORD_Q);
      vd = _mm512_mask_blend_ps(keep_old, vi, old);
      _mm512_mask_storeu_ps(vmax + i, k, vd);
    }
    const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_maskz_sqrt_ps(__mmask16(0xFFFF), vd), bc2_sqrt), eps);
    _mm512_mask_storeu_ps(p + i, k, _mm512_fnmadd_ps(step_size, _mm512_div_ps(mi, denom), pi));
    _mm512_mask_storeu_ps(m + i, k, mi);
    _mm512_mask_storeu_ps(v + i, k, vi);
  }
}
#endif

// update() of the form the constants ask for.
template <typename T>
void update(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, const Constants<T>& c) {
  auto with = [&]<bool kMaximize, bool kWeightDecay, bool kDecoupled>() {
#if defined(__AVX512F__)
    if constexpr (std::is_same_v<T, float>) {
      if (c.amsgrad) update_avx512<kMaximize, kWeightDecay, kDecoupled, true>(p, g, m, v, vmax, n, c);
      else update_avx512<kMaximize, kWeightDecay, kDecoupled, false>(p, g, m, v, vmax, n, c);
      return;
    }
#endif
    if (c.amsgrad) update<T, kMaximize, kWeightDecay, kDecoupled, true>(p, g, m, v, vmax, n, c);
    else update<T, kMaximize, kWeightDecay, kDecoupled, false>(p, g, m, v, vmax, n, c);
  };
  auto with_decay = [&]<bool kMaximize>() {
    if (!c.has_wd) with.template operator()<kMaximize, false, false>();
    else if (c.decoupled) with.template operator()<kMaximize, true, true>();
    else with.template operator()<kMaximize, true, false>();
  };
  if (c.maximize) with_decay.template operator()<true>();
  else with_decay.template operator()<false>();
}

template <typename T>
void run(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs, TensorList max_exp_avg_sqs,
         const AdamOptions& o) {
  const double bc1 = 1 - std::pow(o.beta1, static_cast<double>(o.step));
  const double bc2 = 1 - std::pow(o.beta2, static_cast<double>(o.step));
  const Constants<T> c{static_cast<T>(1 - o.lr * o.weight_decay), static_cast<T>(o.weight_decay),
                       static_cast<T>(o.beta1), static_cast<T>(1 - o.beta1), static_cast<T>(o.beta2),
                       static_cast<T>(1 - o.beta2), static_cast<T>(std::sqrt(bc2)), static_cast<T>(o.eps),
                       static_cast<T>(o.lr / bc1), o.decoupled, o.amsgrad, o.maximize, o.weight_decay != 0};
  // One index space over all the parameters' elements: start[i] is parameter i's first index.
  const std::size_t count = params.size();
  std::vector<std::int64_t> start(count + 1, 0);
  for (std::size_t i = 0; i < count; ++i) start[i + 1] = start[i] + params[i].numel();
  kael::parallel_for(0, start[count], kParallelGrain / 4, [&](std::int64_t begin, std::int64_t end) {
    std::size_t i = 0;
    while (i < count && start[i + 1] <= begin) ++i;
    for (; i < count && start[i] < end; ++i) {
      const std::int64_t lo = std::max(begin, start[i]) - start[i], hi = std::min(end, start[i + 1]) - start[i];
      update(params[i].data<T>() + lo, grads[i].data<T>() + lo, exp_avgs[i].data<T>() + lo,
             exp_avg_sqs[i].data<T>() + lo, o.amsgrad ? max_exp_avg_sqs[i].data<T>() + lo : nullptr, hi - lo, c);
    }
  });
}

}  // namespace

bool adam_step_supported_cpu(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                             TensorList max_exp_avg_sqs, bool amsgrad) {
  const std::size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n) return false;
  if (max_exp_avg_sqs.size() != (amsgrad ? n : 0)) return false;
  std::vector<Tensor> written;
  for (std::size_t i = 0; i < n; ++i) {
    const Tensor& p = params[i];
    if (!p.defined() || !p.device().is_cpu()) return false;
    if (p.dtype() != ScalarType::Float32 && p.dtype() != ScalarType::Float64) return false;
    if (p.dtype() != params[0].dtype()) return false;
    std::vector<Tensor> group{p, grads[i], exp_avgs[i], exp_avg_sqs[i]};
    if (amsgrad) group.push_back(max_exp_avg_sqs[i]);
    for (const Tensor& t : group) {
      if (!t.defined() || !t.device().is_cpu() || t.dtype() != p.dtype() || !t.is_contiguous()) return false;
      if (!std::equal(t.sizes().begin(), t.sizes().end(), p.sizes().begin(), p.sizes().end())) return false;
    }
    written.push_back(p);
    written.push_back(exp_avgs[i]);
    written.push_back(exp_avg_sqs[i]);
    if (amsgrad) written.push_back(max_exp_avg_sqs[i]);
  }
  // No written tensor may share memory with another tensor of the call (a gradient may not alias
  // its parameter either): the per-parameter ops would then see each other's writes.
  for (std::size_t a = 0; a < written.size(); ++a)
    for (std::size_t b = a + 1; b < written.size(); ++b)
      if (overlaps(written[a], written[b])) return false;
  for (const Tensor& w : written)
    for (const Tensor& g : grads)
      if (overlaps(w, g)) return false;
  return true;
}

void adam_step_cpu(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                   TensorList max_exp_avg_sqs, double lr, double beta1, double beta2, double weight_decay, double eps,
                   bool amsgrad, bool maximize, bool decoupled, std::int64_t step) {
  // every check before the first write
  KAEL_CHECK(adam_step_supported_cpu(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, amsgrad),
             "_adam_step_: expected lists of " << params.size() << " contiguous float32 or float64 CPU tensors of "
             "one dtype and shape per parameter (max_exp_avg_sqs " << (amsgrad ? "one per parameter" : "empty")
             << " with amsgrad=" << (amsgrad ? "True" : "False") << "), none of the written ones sharing memory; got "
             << grads.size() << " grads, " << exp_avgs.size() << " exp_avgs, " << exp_avg_sqs.size()
             << " exp_avg_sqs and " << max_exp_avg_sqs.size() << " max_exp_avg_sqs");
  KAEL_CHECK(step >= 1, "_adam_step_: expected a step count of at least 1, got " << step);
  const AdamOptions options{lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize, step};
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].bump_version();
    exp_avgs[i].bump_version();
    exp_avg_sqs[i].bump_version();
    if (amsgrad) max_exp_avg_sqs[i].bump_version();
  }
  if (params.empty()) return;
  // Note [Concurrency]: a step over many elements runs without the caller's lock (the GIL), over
  // the call's own tensors, so that another thread that swaps a parameter's storage meanwhile
  // (`p.data = ...`) can neither free nor reshape what the loop writes. A small step keeps the
  // lock: owning costs a TensorImpl per tensor.
  const auto step_over = [&](TensorList p, TensorList g, TensorList m, TensorList v, TensorList vmax) {
    if (params[0].dtype() == ScalarType::Float64) run<double>(p, g, m, v, vmax, options);
    else run<float>(p, g, m, v, vmax, options);
  };
  std::int64_t elements = 0;
  for (const Tensor& p : params) elements += p.numel();
  UnlockedSection section;
  if (!section.active() || elements < kUnlockElements) {
    step_over(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs);
    return;
  }
  const TensorList lists[5] = {params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs};
  std::array<std::vector<Tensor>, 5> owned;
  for (std::size_t k = 0; k < owned.size(); ++k) {
    owned[k].reserve(lists[k].size());
    for (const Tensor& t : lists[k]) owned[k].push_back(section.own(t));
  }
  section.unlock();
  step_over(owned[0], owned[1], owned[2], owned[3], owned[4]);
}

}  // namespace kael::native
