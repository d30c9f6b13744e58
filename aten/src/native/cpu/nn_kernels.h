#pragma once
// Pieces the neural-network kernels share (nn_ops.cpp, attention.cpp): splitting a range of
// independent tasks among the intra-op threads, and an exp the compiler vectorises.

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>

#include "kael/native/loops.h"
#include "kael/runtime/threads.h"

namespace kael::native::nn {

// Runs f(begin, end) over [0, n) split into one contiguous range per thread. `cost` is the
// work of one task in elements: below kParallelGrain in all the call stays on the calling
// thread. An exception thrown by f on any thread is rethrown here, on the caller's.
template <typename F>
void parallel_for(std::int64_t n, std::int64_t cost, F&& f) {
  if (n <= 0) return;
  const std::int64_t work = n * std::max<std::int64_t>(cost, 1);
  const int threads =
      work >= kParallelGrain && n > 1 ? static_cast<int>(std::min<std::int64_t>(intra_op_threads(), n)) : 1;
  if (threads <= 1) {
    f(std::int64_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    if (end > begin) {
      try {
        f(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

// exp(x) for float in straight-line code the compiler turns into vector instructions inside a
// loop (libm's expf is a call per element). Cephes' expf: x = n ln2 + r with |r| <= ln2/2, a
// degree-7 polynomial for e^r, 2^n put into the exponent bits. Within 2 ulp of the correctly
// rounded result for x in [-86.6, 88.7] (checked against float64 by test_nn_ops.py); below that
// it returns 0 (the true result is below 2.4e-38), above it inf;
// NaN gives NaN. No float -> int conversion, so no undefined behaviour on any input.
inline float exp_vec(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kC1 = 0.693359375f, kC2 = -2.12194440e-4f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::min(std::max(x, -86.6f), 88.72283f);
  const float shifted = xc * kLog2e + kShift;
  const float n = shifted - kShift;
  const std::uint32_t ni = std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kShift);
  float r = xc - n * kC1;
  r = r - n * kC2;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n in [-125, 128]: 2^n = 2 * 2^(n-1), both factors normal floats.
  const float two_n1 = std::bit_cast<float>((ni + 126u) << 23);
  const float y = p * two_n1 * 2.0f;
  const float lo = x < -86.6f ? 0.0f : y;
  return x > 88.72283f ? std::numeric_limits<float>::infinity() : lo;
}

inline double exp_vec(double x) { return std::exp(x); }

}  // namespace kael::native::nn
