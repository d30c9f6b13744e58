// The two forms of kael's float exp and gelu (Note [SIMD forms] in
// aten/include/kael/native/vec_math.h), bare loops on one thread: the scalar form in a loop the
// compiler vectorises (for gelu the piecewise form of AVX-512 builds, which it vectorises with
// gathers), against the SIMD form; 8K floats in cache, then 16M from memory written
// with streaming stores (as kael's loops write outputs that large), with a streaming copy for
// reference. Median of 9, in G elements/s. Last, gelu with the tanh approximation: PyTorch's
// formula 0.5 x (1 + tanh(y)) with kael's tanh in a loop the compiler vectorises (kael's kernel
// until 2026-12-03) against the SIMD form of x / (1 + exp(-2 y)), both with plain stores.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 -Iaten/include
//       tools/bench/vec_math_probe.cpp -o /tmp/vec_math_probe && /tmp/vec_math_probe    (one line)
//
// (-march as the build picks it: CMakeLists.txt, KAEL_CPU_ARCH. Needs AVX-512.)

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kael/native/vec_math.h"

#if !defined(KAEL_VMATH_SIMD)
#error "the SIMD forms need AVX-512: build with -march=x86-64-v4"
#endif

namespace {

namespace vmath = kael::native::vmath;

template <typename F>
[[gnu::noinline]] void scalar_loop(float* __restrict out, const float* __restrict in, std::int64_t n, F f) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = f(in[i]);
}

template <bool kStream, typename F>
[[gnu::noinline]] void simd_loop(float* __restrict out, const float* __restrict in, std::int64_t n, F f) {
  for (std::int64_t i = 0; i + 16 <= n; i += 16) {
    const __m512 y = f(_mm512_loadu_ps(in + i));
    if constexpr (kStream) {
      _mm512_stream_ps(out + i, y);
    } else {
      _mm512_storeu_ps(out + i, y);
    }
  }
  if constexpr (kStream) _mm_sfence();
}

template <typename Run>
double rate(Run run, std::int64_t n, int reps) {
  std::vector<double> t;
  for (int r = 0; r < 9; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < reps; ++k) run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(t.begin(), t.end());
  return static_cast<double>(n) / t[4] / 1e9;
}

}  // namespace

int main() {
  constexpr std::int64_t kBig = std::int64_t(16) << 20, kSmall = 8192, kHuge = 2 << 20;
  auto* in = static_cast<float*>(std::aligned_alloc(kHuge, kBig * 4));
  auto* out = static_cast<float*>(std::aligned_alloc(kHuge, kBig * 4));
  madvise(in, kBig * 4, MADV_HUGEPAGE);  // as kael's allocator does for large blocks
  madvise(out, kBig * 4, MADV_HUGEPAGE);
  for (std::int64_t i = 0; i < kBig; ++i) {
    in[i] = static_cast<float>((static_cast<std::uint64_t>(i) * 2654435761u) % 20000) / 2000.0f - 5.0f;
    out[i] = 0;
  }
  const auto exp_s = [](float x) { return vmath::exp(x); };
  const auto gelu_s = [](float x) { return vmath::gelu(x); };
  const auto exp_v = [](__m512 x) { return vmath::simd::exp(x); };
  const auto gelu_v = [](__m512 x) { return vmath::simd::gelu(x); };
  const auto copy_v = [](__m512 x) { return x; };
  std::printf("in cache (%lld floats): exp scalar form %.2f, SIMD form %.2f; gelu scalar form %.2f, SIMD form %.2f\n",
              static_cast<long long>(kSmall), rate([&] { scalar_loop(out, in, kSmall, exp_s); }, kSmall, 2000),
              rate([&] { simd_loop<false>(out, in, kSmall, exp_v); }, kSmall, 2000),
              rate([&] { scalar_loop(out, in, kSmall, gelu_s); }, kSmall, 2000),
              rate([&] { simd_loop<false>(out, in, kSmall, gelu_v); }, kSmall, 2000));
  std::printf("from memory (16M floats, streaming stores): copy %.2f, exp SIMD form %.2f, gelu SIMD form %.2f\n",
              rate([&] { simd_loop<true>(out, in, kBig, copy_v); }, kBig, 3),
              rate([&] { simd_loop<true>(out, in, kBig, exp_v); }, kBig, 3),
              rate([&] { simd_loop<true>(out, in, kBig, gelu_v); }, kBig, 3));
  const auto gelu_tanh_torch = [](float x) {
    const float beta = 0.79788456080286535588f, kappa = 0.044715f;
    return 0.5f * x * (1.0f + vmath::tanh(beta * (x + kappa * x * x * x)));
  };
  const auto gelu_tanh_v = [](__m512 x) { return vmath::simd::gelu_tanh(x); };
  std::printf("gelu tanh in cache: PyTorch's formula %.2f, SIMD form %.2f; from memory %.2f, %.2f\n",
              rate([&] { scalar_loop(out, in, kSmall, gelu_tanh_torch); }, kSmall, 2000),
              rate([&] { simd_loop<false>(out, in, kSmall, gelu_tanh_v); }, kSmall, 2000),
              rate([&] { scalar_loop(out, in, kBig, gelu_tanh_torch); }, kBig, 3),
              rate([&] { simd_loop<false>(out, in, kBig, gelu_tanh_v); }, kBig, 3));
  std::free(in);
  std::free(out);
  return 0;
}
