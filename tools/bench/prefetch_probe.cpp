// Does software prefetching help kael's contiguous pointwise loops on this CPU? (Note [Prefetching
// pointwise loops] in aten/include/kael/native/loops.h.) One thread, 16M float32 from memory:
// a + b and kael's vectorised exp, erf and gelu (aten/include/kael/native/vec_math.h), each
// plain and in the loop shape loops.h uses when it prefetches (1 KB blocks, the block 4 or 8 KB
// ahead prefetched), then the same functions over 16K elements that stay in cache. Median of 9.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 -Iaten/include
//       tools/bench/prefetch_probe.cpp -o /tmp/prefetch_probe && /tmp/prefetch_probe    (one line)
//
// (-march as the build picks it: CMakeLists.txt, KAEL_CPU_ARCH.)

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kael/native/vec_math.h"

namespace {

constexpr std::int64_t kBlockBytes = 1024;

template <typename F>
[[gnu::noinline]] void unary(float* __restrict out, const float* in, std::int64_t n, std::int64_t ahead, F f) {
  std::int64_t i = 0;
  constexpr std::int64_t kBlock = kBlockBytes / 4;
  if (ahead > 0) {
    for (; i + kBlock <= n; i += kBlock) {
      for (std::int64_t b = 0; b < kBlockBytes; b += 64)
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(in + i) +
                                                         static_cast<std::uintptr_t>(ahead + b)));
      for (std::int64_t j = i; j < i + kBlock; ++j) out[j] = f(in[j]);
    }
  }
  for (; i < n; ++i) out[i] = f(in[i]);
}

[[gnu::noinline]] void add(float* __restrict out, const float* a, const float* b, std::int64_t n, std::int64_t ahead) {
  std::int64_t i = 0;
  constexpr std::int64_t kBlock = kBlockBytes / 4;
  if (ahead > 0) {
    for (; i + kBlock <= n; i += kBlock) {
      for (std::int64_t q = 0; q < kBlockBytes; q += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(a + i) +
                                                         static_cast<std::uintptr_t>(ahead + q)));
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(b + i) +
                                                         static_cast<std::uintptr_t>(ahead + q)));
      }
      for (std::int64_t j = i; j < i + kBlock; ++j) out[j] = a[j] + b[j];
    }
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename Body>
double median_seconds(Body body) {
  std::vector<double> t;
  for (int r = 0; r < 9; ++r) {
    const auto start = std::chrono::steady_clock::now();
    body();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  namespace vm = kael::native::vmath;
  constexpr std::int64_t n = std::int64_t{16} << 20;
  constexpr std::int64_t small = std::int64_t{1} << 14;
  std::vector<float> a(n), b(n, 1.0f), out(n);
  std::srand(1);
  for (auto& v : a) {  // standard normal (Box-Muller), as throughput.py's inputs
    const float u1 = (static_cast<float>(std::rand()) + 1.0f) / (static_cast<float>(RAND_MAX) + 2.0f);
    const float u2 = static_cast<float>(std::rand()) / static_cast<float>(RAND_MAX);
    v = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
  }
  const auto f_exp = [](float x) { return vm::exp(x); };
  const auto f_erf = [](float x) { return vm::erf(x); };
  const auto f_gelu = [](float x) { return vm::gelu(x); };
  std::printf("16M float32 from memory, 1 thread    a + b (GB/s)  exp     erf     gelu  (G elements/s)\n");
  for (const std::int64_t ahead : {std::int64_t{0}, std::int64_t{4096}, std::int64_t{8192}}) {
    const double t_add = median_seconds([&] { add(out.data(), a.data(), b.data(), n, ahead); });
    const double t_exp = median_seconds([&] { unary(out.data(), a.data(), n, ahead, f_exp); });
    const double t_erf = median_seconds([&] { unary(out.data(), a.data(), n, ahead, f_erf); });
    const double t_gelu = median_seconds([&] { unary(out.data(), a.data(), n, ahead, f_gelu); });
    std::printf("%-38s %12.1f %7.2f %7.2f %7.2f\n", ahead ? (ahead == 4096 ? "prefetch 4 KB ahead" : "prefetch 8 KB ahead") : "no prefetch",
                12.0 * n / t_add / 1e9, n / t_exp / 1e9, n / t_erf / 1e9, n / t_gelu / 1e9);
  }
  const auto in_cache = [&](auto f) {
    return 1000.0 * small / median_seconds([&] {
             for (int r = 0; r < 1000; ++r) unary(out.data(), a.data(), small, 0, f);
           }) / 1e9;
  };
  std::printf("%-38s %12s %7.2f %7.2f %7.2f\n", "16K elements in cache", "", in_cache(f_exp), in_cache(f_erf),
              in_cache(f_gelu));
  return 0;
}
