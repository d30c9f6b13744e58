// How should the streaming path of kael's pointwise loops prefetch its inputs? (Note [Streaming
// stores] and Note [Prefetching streamed runs] in aten/include/kael/native/loops.h.) One thread,
// 16M float32 from memory into a 64 MB output, in huge-page-backed blocks as kael's allocator
// gives them: kael's SIMD exp and its vectorised log (a formula that computes more per element)
// and a copy, each written a 64-byte line at a time with streaming stores, in the prefetch forms
// below, and once with plain stores; the forms alternate over the rounds and each figure is the
// median of 9 rounds (GB/s, 8 bytes moved per element).
//
//   g++ -std=c++20 -O3 -march=x86-64-v4 -mprefer-vector-width=512 -Iaten/include
//       tools/bench/stream_store_probe.cpp -o /tmp/stream_store_probe && /tmp/stream_store_probe
//   (one line; -march as the build picks it: CMakeLists.txt, KAEL_CPU_ARCH)

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "kael/native/vec_math.h"

namespace {

namespace vm = kael::native::vmath;

enum class Form { kPlain, kNone, kBurst8K, kLine4K, kLine8K, kLine16K, kLineT2_8K, kLineT2_16K };
constexpr Form kForms[] = {Form::kPlain,  Form::kNone,    Form::kBurst8K,    Form::kLine4K,
                           Form::kLine8K, Form::kLine16K, Form::kLineT2_8K, Form::kLineT2_16K};
const char* name(Form f) {
  switch (f) {
    case Form::kPlain: return "plain stores, no prefetch";
    case Form::kNone: return "streaming, no prefetch";
    case Form::kBurst8K: return "streaming, 1 KB blocks 8 KB ahead (kael)";
    case Form::kLine4K: return "streaming, each line 4 KB ahead";
    case Form::kLine8K: return "streaming, each line 8 KB ahead";
    case Form::kLine16K: return "streaming, each line 16 KB ahead";
    case Form::kLineT2_8K: return "streaming, each line 8 KB ahead to L2";
    case Form::kLineT2_16K: return "streaming, each line 16 KB ahead to L2";
  }
  return "";
}

// A line of 16 floats: f over in[0, 16) into a register.
struct Exp {
  static __m512 line(const float* in) { return vm::simd::exp(_mm512_loadu_ps(in)); }
};
struct Log {
  static __m512 line(const float* in) {
    alignas(64) float buf[16];
#pragma GCC unroll 1
    for (int j = 0; j < 16; ++j) buf[j] = vm::log(in[j]);
    return _mm512_load_ps(buf);
  }
};
struct Copy {
  static __m512 line(const float* in) { return _mm512_loadu_ps(in); }
};

template <typename F>
[[gnu::noinline]] void run(Form form, float* __restrict out, const float* in, std::int64_t n) {
  const auto at = [&](std::int64_t i, std::int64_t ahead) {
    return reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(in + i) + static_cast<std::uintptr_t>(ahead));
  };
  switch (form) {
    case Form::kPlain:
      for (std::int64_t i = 0; i < n; i += 16) _mm512_store_ps(out + i, F::line(in + i));
      return;
    case Form::kNone:
      for (std::int64_t i = 0; i < n; i += 16) _mm512_stream_ps(out + i, F::line(in + i));
      break;
    case Form::kBurst8K:
      for (std::int64_t i = 0; i < n; i += 16) {
        if (i % 256 == 0)
          for (std::int64_t b = 0; b < 1024; b += 64) _mm_prefetch(at(i, 8192 + b), _MM_HINT_T0);
        _mm512_stream_ps(out + i, F::line(in + i));
      }
      break;
    case Form::kLine4K:
    case Form::kLine8K:
    case Form::kLine16K: {
      const std::int64_t ahead = form == Form::kLine4K ? 4096 : form == Form::kLine8K ? 8192 : 16384;
      for (std::int64_t i = 0; i < n; i += 16) {
        _mm_prefetch(at(i, ahead), _MM_HINT_T0);
        _mm512_stream_ps(out + i, F::line(in + i));
      }
      break;
    }
    case Form::kLineT2_8K:
    case Form::kLineT2_16K: {
      const std::int64_t ahead = form == Form::kLineT2_8K ? 8192 : 16384;
      for (std::int64_t i = 0; i < n; i += 16) {
        _mm_prefetch(at(i, ahead), _MM_HINT_T2);
        _mm512_stream_ps(out + i, F::line(in + i));
      }
      break;
    }
  }
  _mm_sfence();
}

float* huge_block(std::int64_t n) {
  void* p = nullptr;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  if (posix_memalign(&p, std::size_t{2} << 20, bytes) != 0) std::abort();
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

double seconds(Form form, int which, float* out, const float* in, std::int64_t n) {
  const auto start = std::chrono::steady_clock::now();
  if (which == 0) run<Exp>(form, out, in, n);
  if (which == 1) run<Log>(form, out, in, n);
  if (which == 2) run<Copy>(form, out, in, n);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  constexpr std::int64_t n = std::int64_t{16} << 20;
  float* in = huge_block(n);
  float* out = huge_block(n);
  std::srand(1);
  for (std::int64_t i = 0; i < n; ++i) in[i] = 0.5f + static_cast<float>(std::rand()) / static_cast<float>(RAND_MAX);
  constexpr int kForms_ = sizeof(kForms) / sizeof(kForms[0]);
  std::vector<double> t[kForms_][3];
  for (int round = 0; round < 9; ++round)
    for (int f = 0; f < kForms_; ++f)
      for (int which = 0; which < 3; ++which) t[f][which].push_back(seconds(kForms[f], which, out, in, n));
  std::printf("16M float32 from memory, 1 thread (GB/s)      exp     log    copy\n");
  for (int f = 0; f < kForms_; ++f) {
    std::printf("%-42s", name(kForms[f]));
    for (int which = 0; which < 3; ++which) {
      auto& v = t[f][which];
      std::sort(v.begin(), v.end());
      std::printf(" %7.1f", 8.0 * n / v[v.size() / 2] / 1e9);
    }
    std::printf("\n");
  }
  return 0;
}
