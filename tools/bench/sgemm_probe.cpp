// kael's float32 GEMM (Note [float32 GEMM] in aten/src/native/cpu/gemm.cpp) on one core: this file
// compiles gemm.cpp itself (its block sizes can be changed with -DKAEL_GEMM_KC=..., _MC, _NC) with
// the thread pool replaced by the calling thread, and prints
//   - the core's float32 FMA peak (24 independent FMA chains in registers, no memory);
//   - the 14 x 32 micro-kernel alone, its A and B panels in L1 (kc = 256, the same C each call);
//   - gemm_f32 over the products of tools/bench/throughput.py and a few more, row-major operands
//     (and B transposed, as linear's x @ w.t() passes it), in 2 MiB-aligned huge-page buffers as
//     kael's allocator gives tensors of 4 MB or more.
// Each figure is the median of 9 timed runs of at least 0.2 s of calls (GFLOP/s, 2 m n k per call).
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 -Iaten/include
//       tools/bench/sgemm_probe.cpp -o /tmp/sgemm_probe && /tmp/sgemm_probe    (one line)
// `/tmp/sgemm_probe m n k` times that one product instead (B row-major and transposed).

#if !defined(__AVX512F__)
#error "sgemm_probe measures the AVX-512 GEMM: build with -march=x86-64-v4"
#endif

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kael/runtime/threads.h"

// The pool, for this program: one thread.
namespace kael {
int intra_op_threads() noexcept { return 1; }
bool in_parallel_region() noexcept { return false; }
namespace detail {
void parallel_run(std::int64_t begin, std::int64_t end, std::int64_t, ChunkFn fn, const void* context) {
  fn(context, begin, end);
}
}  // namespace detail
}  // namespace kael

#include "../../aten/src/native/cpu/gemm.cpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Median over 9 runs of f's rate, each run repeating f for at least 0.2 s; f returns its FLOPs.
template <typename F>
double median_rate(F&& f) {
  std::vector<double> rates;
  f();  // warm-up
  for (int run = 0; run < 9; ++run) {
    double flops = 0;
    const auto t0 = Clock::now();
    do flops += f();
    while (seconds_since(t0) < 0.2);
    rates.push_back(flops / seconds_since(t0) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

float* huge_buffer(std::size_t floats) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t bytes = (floats * sizeof(float) + kHuge - 1) / kHuge * kHuge;
  void* p = nullptr;
  if (posix_memalign(&p, kHuge, bytes) != 0) std::abort();
  madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<float*>(p);
}

// 100,000 steps of 24 independent FMA chains held in registers.
[[gnu::noinline]] void fma_chains(float* out) {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  __m512 x = _mm512_set1_ps(0.999f);
  const __m512 y = _mm512_set1_ps(1e-7f);
  for (int it = 0; it < 100000; ++it) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    __asm__ volatile("" : "+v"(x));
  }
  for (int i = 1; i < 24; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  _mm512_storeu_ps(out, acc[0]);
}

double fma_peak() {
  alignas(64) float sink[16];
  return median_rate([&] {
    fma_chains(sink);
    return 100000.0 * 24 * 32;
  });
}

double micro_kernel_in_l1() {
  using namespace kael::native;
  constexpr std::int64_t kc = 256;
  float* a = huge_buffer(kMr * kc);
  float* b = huge_buffer(kNr * kc);
  float* c = huge_buffer(kMr * kNr);
  for (std::int64_t i = 0; i < kMr * kc; ++i) a[i] = 1e-3f;
  for (std::int64_t i = 0; i < kNr * kc; ++i) b[i] = 1e-3f;
  return median_rate([&] {
    for (int rep = 0; rep < 100; ++rep) {
      kPlainKernels[kMr - 1](kc, a, nullptr, 0, b, c, kNr, false, 0xffff, 0xffff);
      __asm__ volatile("" : : "r"(c) : "memory");
    }
    return 100.0 * 2 * kMr * kNr * kc;
  });
}

double gemm_rate(std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed) {
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  float* a = huge_buffer(static_cast<std::size_t>(m * k));
  float* b = huge_buffer(static_cast<std::size_t>(k * n));
  float* c = huge_buffer(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m * k; ++i) a[i] = dist(gen);
  for (std::int64_t i = 0; i < k * n; ++i) b[i] = dist(gen);
  const std::int64_t b_rs = b_transposed ? 1 : n, b_cs = b_transposed ? k : 1;
  const double rate = median_rate([&] {
    kael::native::gemm_f32(m, n, k, a, k, 1, b, b_rs, b_cs, c, n, false);
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  });
  std::free(a);
  std::free(b);
  std::free(c);
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kael::native;
  if (argc == 4) {  // one product: m n k
    const std::int64_t m = std::atoll(argv[1]), n = std::atoll(argv[2]), k = std::atoll(argv[3]);
    for (bool transposed : {false, true})
      std::printf("gemm %lld x %lld x %lld, B %-10s %7.1f GFLOP/s\n", static_cast<long long>(m),
                  static_cast<long long>(n), static_cast<long long>(k), transposed ? "transposed" : "row-major",
                  gemm_rate(m, n, k, transposed));
    return 0;
  }
  std::printf("block sizes: kc %lld, mc %lld, nc %lld (micro-kernel %d x %d)\n", static_cast<long long>(kKc),
              static_cast<long long>(kMc), static_cast<long long>(kNc), kMr, kNr);
  const double peak = fma_peak();
  std::printf("FMA peak, one core                  %7.1f GFLOP/s\n", peak);
  const double kernel = micro_kernel_in_l1();
  std::printf("micro-kernel alone, in L1           %7.1f GFLOP/s  (%.0f%% of peak)\n", kernel, 100 * kernel / peak);
  const std::int64_t cases[][3] = {{1024, 1024, 1024}, {64, 512, 512}, {512, 512, 512}, {4096, 1024, 1024}, {128, 4096, 1024}};
  for (const auto& s : cases) {
    for (bool transposed : {false, true}) {
      const double r = gemm_rate(s[0], s[1], s[2], transposed);
      std::printf("gemm %4lld x %4lld x %4lld, B %-10s %7.1f GFLOP/s  (%.0f%% of peak)\n", static_cast<long long>(s[0]),
                  static_cast<long long>(s[1]), static_cast<long long>(s[2]), transposed ? "transposed" : "row-major",
                  r, 100 * r / peak);
    }
  }
}
