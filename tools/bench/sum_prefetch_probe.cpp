// How fast does one core read 16M float32 from memory in kael's float32-into-double sum, and
// what lifts it: several streams at once, or software prefetching? (Note [Prefetching reductions'
// reads] in kael/native/loops.h.) The input is cut into blocks of 32768 floats, as kael's sum cuts
// it (Note [Deterministic sums]); each line prints GB/s of the bytes read, medians of 9 runs of
// at least 50 ms, two rounds:
//   - float32 accumulators (PyTorch's kind of sum, for reference);
//   - kael's form, each 8 floats converted to double straight from memory, in K streams at once
//     (the block's K equal parts side by side);
//   - the same with prefetcht0 4 KB ahead in each stream, once per 64-byte line (kael's sum where
//     prefetch_reads(), Note [Sums in four streams] in aten/src/native/cpu/reduce.cpp);
//   - kael's form in one stream with prefetcht0 a fixed distance ahead, once per 64-byte line.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 tools/bench/sum_prefetch_probe.cpp -o /tmp/sum_prefetch_probe
//   /tmp/sum_prefetch_probe          # 2 MB pages where the kernel gives them (as kael's allocator)
//   /tmp/sum_prefetch_probe small    # 4 KB pages (as NumPy's buffers)
//
// (needs AVX-512.)

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr std::int64_t kBlock = 32768;

// (the masked forms with every lane set, and stores for the horizontal sums: GCC 12's unmasked
// forms start from an "undefined" vector that -Wmaybe-uninitialized reports)
inline __m512d load_as_double(const float* p) { return _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p)); }

inline double hsum(__m512d v) {
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, v);
  double s = 0;
  for (const double l : lanes) s += l;
  return s;
}

inline double hsum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  double s = 0;
  for (const float l : lanes) s += l;
  return s;
}

// float32 accumulators, two of 16 lanes.
double sum_float(const float* x, std::int64_t n) {
  double total = 0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (std::int64_t i = b; i < b + kBlock; i += 32) {
      a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
      a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
    }
    total += hsum(_mm512_add_ps(a0, a1));
  }
  return total;
}

// kael's form in K streams per block, two double accumulators of 8 lanes per stream; with
// kAhead > 0, each stream prefetches the line kAhead bytes ahead of each line it reads (kael's
// sum: K = 4, kAhead = 4096 where prefetch_reads()).
template <int K, int kAhead = 0>
double sum_streams(const float* x, std::int64_t n) {
  constexpr std::int64_t kPart = kBlock / K;
  double total = 0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    __m512d a[K][2];
    for (auto& s : a) s[0] = s[1] = _mm512_setzero_pd();
    for (std::int64_t i = 0; i < kPart; i += 16) {
      for (int k = 0; k < K; ++k) {
        const float* p = x + b + k * kPart + i;
        if constexpr (kAhead > 0) _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead, _MM_HINT_T0);
        a[k][0] = _mm512_add_pd(a[k][0], load_as_double(p));
        a[k][1] = _mm512_add_pd(a[k][1], load_as_double(p + 8));
      }
    }
    __m512d s = _mm512_setzero_pd();
    for (auto& acc : a) s = _mm512_add_pd(s, _mm512_add_pd(acc[0], acc[1]));
    total += hsum(s);
  }
  return total;
}

// kael's form in one stream, prefetcht0 `ahead` bytes ahead of each line.
template <int kAhead>
double sum_prefetched(const float* x, std::int64_t n) {
  double total = 0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (std::int64_t i = b; i < b + kBlock; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(x + i) + kAhead, _MM_HINT_T0);
      a0 = _mm512_add_pd(a0, load_as_double(x + i));
      a1 = _mm512_add_pd(a1, load_as_double(x + i + 8));
    }
    total += hsum(_mm512_add_pd(a0, a1));
  }
  return total;
}

template <typename F>
double gbps(F f, std::int64_t n) {
  std::vector<double> rates;
  double sink = 0;
  for (int run = 0; run < 9; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    int calls = 0;
    double seconds = 0;
    do {
      sink = sink + f();
      ++calls;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (seconds < 0.05);
    rates.push_back(4.0 * static_cast<double>(n) * calls / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  if (sink == 0.125) std::printf(" ");  // keeps the sums
  return rates[4];
}

}  // namespace

int main(int argc, char** argv) {
  constexpr std::int64_t n = std::int64_t{1} << 24;
  const bool small_pages = argc > 1 && std::strcmp(argv[1], "small") == 0;
  auto* x = static_cast<float*>(std::aligned_alloc(2 << 20, n * sizeof(float)));
  if (x == nullptr) return 1;
  madvise(x, n * sizeof(float), small_pages ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
  for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 7) * 0.5f;
  std::printf("16M float32, 1 thread, %s pages; GB/s read, medians of 9\n", small_pages ? "4 KB" : "2 MB");
  for (int round = 0; round < 2; ++round) {
    std::printf("float32 accumulators %.1f | kael's form, streams 1: %.1f 2: %.1f 4: %.1f 8: %.1f | "
                "4 streams prefetched 4 KB ahead: %.1f | one stream, prefetch 512 B: %.1f 2 KB: %.1f 8 KB: %.1f\n",
                gbps([&] { return sum_float(x, n); }, n), gbps([&] { return sum_streams<1>(x, n); }, n),
                gbps([&] { return sum_streams<2>(x, n); }, n), gbps([&] { return sum_streams<4>(x, n); }, n),
                gbps([&] { return sum_streams<8>(x, n); }, n), gbps([&] { return sum_streams<4, 4096>(x, n); }, n),
                gbps([&] { return sum_prefetched<512>(x, n); }, n),
                gbps([&] { return sum_prefetched<2048>(x, n); }, n), gbps([&] { return sum_prefetched<8192>(x, n); }, n));
  }
  std::free(x);
  return 0;
}
