// Does software prefetching into L2 help kael's read-only streams (sums) on this CPU? One or two
// threads (std::thread, halves of the input) over 16M float32 from memory: a streaming copy for
// reference, a float32 sum (four 16-lane accumulators) and kael's float32-into-double sum (8
// floats converted per instruction, as aten/src/native/cpu/reduce.cpp's sum_contiguous), each
// plain and with prefetcht1 (into L2) a fixed distance ahead, one prefetch per 64-byte line.
// GB/s of the bytes the loop reads (the copy: read + written), medians of 9, four rounds.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -pthread tools/bench/read_prefetch_probe.cpp
//       -o /tmp/read_prefetch_probe && /tmp/read_prefetch_probe 1 && /tmp/read_prefetch_probe 2
//
// (one line; needs AVX-512.) docs/performance.md, "Prefetching the sums' reads: tried, not taken".

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <thread>
#include <vector>

namespace {

inline void prefetch_l2(const float* p, std::int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(ahead)),
               _MM_HINT_T1);
}

// The sum of n floats in four accumulators of 16 float32 lanes, or (kDouble) of 8 doubles, each
// 8 floats converted straight from memory as kael's sum_contiguous does; prefetcht1 `ahead`
// bytes ahead, once per 64-byte line, when ahead > 0.
template <bool kDouble>
double sum_stream(const float* x, std::int64_t n, std::int64_t ahead) {
  using E = std::conditional_t<kDouble, double, float>;
  constexpr int W = kDouble ? 8 : 16;
  const auto load = [](const float* p) {
    if constexpr (kDouble) {
      return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p));
    } else {
      return _mm512_loadu_ps(p);
    }
  };
  using V = decltype(load(x));  // __m512d or __m512
  const auto add = [](V a, V b) {
    if constexpr (kDouble) {
      return _mm512_add_pd(a, b);
    } else {
      return _mm512_add_ps(a, b);
    }
  };
  V a0{}, a1{}, a2{}, a3{};
  for (std::int64_t i = 0; i < n; i += 4 * W) {
    if (ahead > 0)
      for (int l = 0; l < 4 * W; l += 16) prefetch_l2(x + i + l, ahead);
    a0 = add(a0, load(x + i));
    a1 = add(a1, load(x + i + W));
    a2 = add(a2, load(x + i + 2 * W));
    a3 = add(a3, load(x + i + 3 * W));
  }
  const V all = add(add(a0, a1), add(a2, a3));
  E lanes[W];
  std::memcpy(lanes, &all, sizeof all);  // (a scalar sum: GCC 12's _mm512_reduce_add_* warn)
  double total = 0;
  for (const E l : lanes) total += static_cast<double>(l);
  return total;
}

void copy_nt(float* out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) _mm512_stream_ps(out + i, _mm512_loadu_ps(x + i));
  _mm_sfence();
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  constexpr std::int64_t n = std::int64_t{16} << 20;
  constexpr std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  auto* x = static_cast<float*>(std::aligned_alloc(std::size_t{1} << 21, bytes));
  auto* out = static_cast<float*>(std::aligned_alloc(std::size_t{1} << 21, bytes));
  if (x == nullptr || out == nullptr) return 1;
  madvise(x, bytes, MADV_HUGEPAGE);  // as kael's allocator asks for blocks this large
  madvise(out, bytes, MADV_HUGEPAGE);
  for (std::int64_t i = 0; i < n; ++i) x[i] = out[i] = 1.0f;
  volatile double sink = 0;
  const auto rate = [&](double bytes_moved, auto body) {
    std::vector<double> seconds;
    const std::int64_t per = n / threads;
    for (int r = 0; r < 9; ++r) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { body(t * per, per); });
      body(0, per);
      for (std::thread& t : pool) t.join();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    return bytes_moved / seconds[4] / 1e9;
  };
  const double read = static_cast<double>(bytes);
  for (int round = 0; round < 4; ++round) {
    std::printf("%d thread(s): copy %.1f GB/s", threads,
                rate(2 * read, [&](std::int64_t b, std::int64_t m) { copy_nt(out + b, x + b, m); }));
    std::printf(" | f32 sum %.1f, f64 sum %.1f", rate(read, [&](std::int64_t b, std::int64_t m) { sink = sum_stream<false>(x + b, m, 0); }),
                rate(read, [&](std::int64_t b, std::int64_t m) { sink = sum_stream<true>(x + b, m, 0); }));
    for (const std::int64_t ahead : {512, 1024, 2048, 4096}) {
      std::printf(" | %lld B ahead: f32 %.1f, f64 %.1f", static_cast<long long>(ahead),
                  rate(read, [&](std::int64_t b, std::int64_t m) { sink = sum_stream<false>(x + b, m, ahead); }),
                  rate(read, [&](std::int64_t b, std::int64_t m) { sink = sum_stream<true>(x + b, m, ahead); }));
    }
    std::printf("\n");
  }
  std::free(x);
  std::free(out);
  return sink > 0 ? 0 : 1;
}
