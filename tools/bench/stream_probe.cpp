// Does one core read faster from several streams at once? kael's float32 sum reads one
// sequential stream (a block of 32768 floats at a time, Note [Deterministic sums] in
// aten/src/native/cpu/reduce.cpp), and one core's read rate is what bounds `a.sum()` and
// logsumexp at 1 thread (docs/performance.md, "Reading several streams at once: tried, not
// taken"). Here 16M float32 are summed as kael sums them (8 floats converted to double per
// instruction) with each block of B floats read as k segments in turn, k = 1, 2, 4, 8 and B =
// 128 KB (kael's block), 1 MB or the whole array, beside a copy with streaming stores (the
// bandwidth reference of tools/bench/throughput.py, 8 B per element). GB/s of the bytes read
// (the copy: read + written); the kernels alternate, 15 rounds, median and quartiles.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 tools/bench/stream_probe.cpp -o /tmp/stream_probe && /tmp/stream_probe
//
// (one line; needs AVX-512.)
#if !defined(__AVX512F__)
#error "stream_probe measures AVX-512 loops: build with -march=x86-64-v4"
#endif

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

// GCC 12's AVX-512 intrinsics read an undefined vector for their unused mask operand and warn
// about it where inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// The sum of a block of n floats read as k segments in turn, 32 floats of each at a time (n a
// multiple of 32 k), in eight accumulators of 8 doubles.
static double sum_block(const float* x, std::int64_t n, int k) {
  const std::int64_t L = n / k;
  __m512d acc[8];
  for (auto& a : acc) a = _mm512_setzero_pd();
  for (std::int64_t i = 0; i < L; i += 32) {
    for (int s = 0; s < k; ++s) {
      const float* p = x + s * L + i;
      __m512d* a = acc + 4 * (s & 1);
      a[0] = _mm512_add_pd(a[0], _mm512_cvtps_pd(_mm256_loadu_ps(p)));
      a[1] = _mm512_add_pd(a[1], _mm512_cvtps_pd(_mm256_loadu_ps(p + 8)));
      a[2] = _mm512_add_pd(a[2], _mm512_cvtps_pd(_mm256_loadu_ps(p + 16)));
      a[3] = _mm512_add_pd(a[3], _mm512_cvtps_pd(_mm256_loadu_ps(p + 24)));
    }
  }
  __m512d t = _mm512_setzero_pd();
  for (auto& a : acc) t = _mm512_add_pd(t, a);
  return _mm512_reduce_add_pd(t);
}

static void copy_nt(float* d, const float* s, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) _mm512_stream_ps(d + i, _mm512_loadu_ps(s + i));
  _mm_sfence();
}

int main() {
  const std::int64_t n = 16 << 20;
  auto alloc = [&](std::size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 0, bytes);
    return static_cast<float*>(p);
  };
  float* x = alloc(n * 4);
  float* y = alloc(n * 4);
  for (std::int64_t i = 0; i < n; ++i) x[i] = 1.0f;
  struct V { const char* name; std::int64_t block; int k; };
  std::vector<V> vs = {{"1 stream", n, 1}, {"2 streams / 128K block", 32768, 2}, {"4 streams / 128K", 32768, 4},
                       {"8 streams / 128K", 32768, 8}, {"2 streams whole", n, 2}, {"4 streams whole", n, 4},
                       {"8 streams whole", n, 8}, {"4 streams / 1M block", 262144, 4}};
  std::vector<std::vector<double>> rates(vs.size() + 1);
  volatile double sink = 0;
  for (int round = 0; round < 15; ++round) {
    for (std::size_t v = 0; v <= vs.size(); ++v) {
      auto t0 = std::chrono::steady_clock::now();
      if (v == vs.size()) {
        copy_nt(y, x, n);
      } else {
        double s = 0;
        for (std::int64_t b = 0; b < n; b += vs[v].block) s += sum_block(x + b, vs[v].block, vs[v].k);
        sink = sink + s;
      }
      auto t1 = std::chrono::steady_clock::now();
      const double sec = std::chrono::duration<double>(t1 - t0).count();
      rates[v].push_back((v == vs.size() ? 8.0 : 4.0) * n / sec / 1e9);
    }
  }
  for (std::size_t v = 0; v <= vs.size(); ++v) {
    auto r = rates[v];
    std::sort(r.begin(), r.end());
    std::printf("%-26s %6.1f GB/s (q1 %.1f q3 %.1f)\n", v == vs.size() ? "copy (NT, 8 B/elem)" : vs[v].name, r[r.size() / 2],
                r[r.size() / 4], r[3 * r.size() / 4]);
  }
}
