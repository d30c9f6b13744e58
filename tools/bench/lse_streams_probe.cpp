// logsumexp's one pass over four streams side by side (Note [logsumexp in four streams] in
// aten/src/native/cpu/logsumexp.cpp), AVX-512, one core: 16M float32 reduced in chunks as the
// reduction engine cuts a long row, each chunk's blocks of 4096 summed
//   - "one stream": one block after another (the loop before the four streams);
//   - "4 streams, C chunks": the chunk's four equal parts side by side, one vector of each a step,
//     with or without a prefetch of the line 4 KB ahead of each load;
// next to kael's float32 sum in its form (four streams of 32768-element blocks, prefetched 4 KB
// ahead: Note [Sums in four streams] in reduce.cpp), what one core reads. Each kernel is timed
// after a streaming copy of 128 MB (as throughput.py runs its copy alongside: the data then
// comes from farther out) and again without it (the data left in cache by the run before).
// Kernels alternate, 11 rounds; each figure is the median (GB/s of input), with the quartiles.
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 tools/bench/lse_streams_probe.cpp
//       -o /tmp/lse_streams_probe && /tmp/lse_streams_probe    (one line)

#if !defined(__AVX512F__)
#error "lse_streams_probe measures the AVX-512 loop: build with -march=x86-64-v4"
#endif

#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

// GCC 12's AVX-512 intrinsics read an undefined vector for their unused mask operand and warn
// about it where inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

// The bits of 2^(j / 16) less j << 19 (logsumexp.cpp's kLseExp2Sixteenths).
std::array<std::uint32_t, 16> exp2_table() {
  std::array<std::uint32_t, 16> t{};
  for (std::uint32_t j = 0; j < 16; ++j) {
    const float f = static_cast<float>(std::exp2(j / 16.0));
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    t[j] = bits - (j << 19);
  }
  return t;
}
alignas(64) const std::array<std::uint32_t, 16> kTable = exp2_table();
constexpr float kShift = 0x1.8p19f;
constexpr float kLn2 = 0x1.62e430p-1f;
constexpr std::int64_t kBlock = 4096;

struct Ref {
  __m512 lo, c;  // M L - 87 and kShift - M, as logsumexp.cpp's LseRef
};
Ref ref_for(float m) {
  const double M = std::nearbyint(m * std::log2(std::exp(1.0)) * 16.0) / 16.0;
  return {_mm512_set1_ps(static_cast<float>(M * kLn2 - 87.0)), _mm512_set1_ps(static_cast<float>(kShift - M))};
}

inline __m512 vmax(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, static_cast<__mmask16>(0xffff), a, b); }

// exp(v - M L), as logsumexp.cpp's lse_exp with AVX-512.
inline __m512 term(__m512 v, const Ref& r, __m512i table) {
  v = vmax(r.lo, v);
  const __m512 t = _mm512_fmadd_ps(v, _mm512_set1_ps(0x1.715476p+0f), r.c);
  const __m512 k16 = _mm512_sub_ps(t, r.c);
  const __m512 red = _mm512_fmadd_ps(k16, _mm512_set1_ps(-kLn2), v);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(0x1.555556p-3f), red, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, red, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, red, _mm512_set1_ps(1.0f));
  const __m512i ti = _mm512_castps_si512(t);
  using I = std::uint32_t __attribute__((vector_size(64)));  // (GCC 12's _mm512_slli_epi32 warns)
  const __m512i scale = reinterpret_cast<__m512i>(
      reinterpret_cast<I>(_mm512_mask_permutexvar_epi32(table, static_cast<__mmask16>(0xffff), ti, table)) +
      (reinterpret_cast<I>(ti) << 19));
  return _mm512_mul_ps(_mm512_castsi512_ps(scale), p);
}

float lanes_sum(__m512 v) {
  alignas(64) float l[16];
  _mm512_store_ps(l, v);
  float s = 0;
  for (const float f : l) s += f;
  return s;
}

// One block, four vectors a step, four accumulators of each kind (the loop of one stream).
[[gnu::noinline]] float one_stream(const float* x, std::int64_t n, float m) {
  const __m512i table = _mm512_load_si512(kTable.data());
  const Ref r = ref_for(m);
  __m512 mx[4], acc[4];
  for (int j = 0; j < 4; ++j) mx[j] = _mm512_set1_ps(-INFINITY), acc[j] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * j);
      mx[j] = vmax(mx[j], v);
      acc[j] = _mm512_add_ps(acc[j], term(v, r, table));
    }
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
  return lanes_sum(s) + 1e-30f * lanes_sum(vmax(vmax(mx[0], mx[1]), vmax(mx[2], mx[3])));
}

// Four blocks side by side, one vector of each a step, one accumulator of each kind per block
// (logsumexp.cpp's lse_one_pass_streams_f32<4, true>).
[[gnu::noinline]] float four_streams(const float* const* x, std::int64_t n, float m, bool prefetch) {
  const __m512i table = _mm512_load_si512(kTable.data());
  Ref r[4];
  __m512 mx[4], acc[4];
  for (int s = 0; s < 4; ++s) r[s] = ref_for(m), mx[s] = _mm512_set1_ps(-INFINITY), acc[s] = _mm512_setzero_ps();
  for (std::int64_t i = 0; i + 16 <= n; i += 16) {
#pragma GCC unroll 4
    for (int s = 0; s < 4; ++s) {
      if (prefetch) __builtin_prefetch(x[s] + i + 1024);
      const __m512 v = _mm512_loadu_ps(x[s] + i);
      mx[s] = vmax(mx[s], v);
      acc[s] = _mm512_add_ps(acc[s], term(v, r[s], table));
    }
  }
  float t = 0;
  for (int s = 0; s < 4; ++s) t += lanes_sum(acc[s]) + 1e-30f * lanes_sum(mx[s]);
  return t;
}

// kael's float32 sum of a 32768-element block (reduce.cpp, Note [Sums in four streams]).
[[gnu::noinline]] double sum_block(const float* x, std::int64_t n) {
  __m512d a[4][4];
  for (auto& q : a)
    for (auto& v : q) v = _mm512_setzero_pd();
  const std::int64_t part = n / 128 * 32;
  for (std::int64_t i = 0; i < part; i += 32)
    for (int s = 0; s < 4; ++s) {
      const float* p = x + s * part + i;
      __builtin_prefetch(p + 1024);
      __builtin_prefetch(p + 1024 + 16);
      for (int j = 0; j < 4; ++j)
        a[s][j] = _mm512_add_pd(a[s][j], _mm512_maskz_cvtps_pd(0xFF, _mm256_loadu_ps(p + 8 * j)));
    }
  double t = 0;
  for (auto& q : a)
    for (auto& v : q) {
      alignas(64) double l[8];
      _mm512_store_pd(l, v);
      for (const double d : l) t += d;
    }
  return t;
}

[[gnu::noinline]] void stream_copy(float* __restrict out, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i + 16 <= n; i += 16) _mm512_stream_ps(out + i, _mm512_loadu_ps(x + i));
  _mm_sfence();
}

float* huge_buffer(std::int64_t n) {
  auto* p = static_cast<float*>(std::aligned_alloc(std::size_t{2} << 20, static_cast<std::size_t>(n) * 4));
  if (p == nullptr) std::abort();
  madvise(p, static_cast<std::size_t>(n) * 4, MADV_HUGEPAGE);  // as kael's allocator does
  return p;
}

volatile float sink;

}  // namespace

int main() {
  constexpr std::int64_t kN = std::int64_t{16} << 20;
  constexpr int kRounds = 11;
  float* x = huge_buffer(kN);
  float* y = huge_buffer(kN);
  float* z = huge_buffer(kN);
  for (std::int64_t i = 0; i < kN; ++i) x[i] = 3.0f * std::sin(0.001f * static_cast<float>(i)), y[i] = z[i] = 1.0f;
  const float m = 3.0f;
  const auto chunked = [&](std::int64_t chunk, bool prefetch) {
    return [=]() {
      float t = 0;
      for (std::int64_t c = 0; c < kN; c += chunk)
        for (std::int64_t b = 0; b < chunk / 4; b += kBlock) {
          const float* const blocks[4] = {x + c + b, x + c + chunk / 4 + b, x + c + chunk / 2 + b, x + c + 3 * chunk / 4 + b};
          t += four_streams(blocks, kBlock, m, prefetch);
        }
      return t;
    };
  };
  struct Kernel {
    std::string name;
    std::function<float()> run;
  };
  const std::vector<Kernel> kernels = {
      {"sum (kael's form)", [&] {
         double t = 0;
         for (std::int64_t c = 0; c < kN; c += 32768) t += sum_block(x + c, 32768);
         return static_cast<float>(t);
       }},
      {"one stream", [&] {
         float t = 0;
         for (std::int64_t c = 0; c < kN; c += kBlock) t += one_stream(x + c, kBlock, m);
         return t;
       }},
      {"4 streams, 16K chunks", chunked(16384, false)},
      {"4 streams, 16K, prefetch", chunked(16384, true)},
      {"4 streams, 64K chunks", chunked(65536, false)},
      {"4 streams, 64K, prefetch", chunked(65536, true)},
  };
  std::printf("%-26s %-24s %s\n", "kernel", "after a 128 MB copy", "data left in cache");
  std::vector<std::vector<double>> rates[2];
  for (auto& r : rates) r.resize(kernels.size());
  for (int round = 0; round < kRounds; ++round)
    for (std::size_t k = 0; k < kernels.size(); ++k)
      for (int evict = 1; evict >= 0; --evict) {
        if (evict) stream_copy(y, z, kN);
        const auto t0 = std::chrono::steady_clock::now();
        sink = kernels[k].run();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rates[evict][k].push_back(4.0 * static_cast<double>(kN) / s / 1e9);
      }
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    std::printf("%-26s", kernels[k].name.c_str());
    for (int evict = 1; evict >= 0; --evict) {
      auto& r = rates[evict][k];
      std::sort(r.begin(), r.end());
      std::printf(" %5.1f GB/s (%4.1f-%4.1f)    ", r[kRounds / 2], r[kRounds / 4], r[3 * kRounds / 4]);
    }
    std::printf("\n");
  }
}
