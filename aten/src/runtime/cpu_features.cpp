// What kael asks of the CPU it runs on, decided once at first use.

#include "kael/native/loops.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kael::native {

namespace {

// KAEL_PREFETCH_STREAMS=1 or 0 decides both prefetching choices instead of the CPU: for measuring,
// and so that the tests run every form on every machine (test_loop_forms.py). -1: unset (or
// anything else), the CPU decides.
int prefetch_override() noexcept {
  const char* env = std::getenv("KAEL_PREFETCH_STREAMS");
  if (env != nullptr && std::strcmp(env, "1") == 0) return 1;
  if (env != nullptr && std::strcmp(env, "0") == 0) return 0;
  return -1;
}

#if defined(__x86_64__) || defined(__i386__)
// The vendor from cpuid leaf 0 and the highest standard leaf.
struct CpuVendor {
  bool amd = false, intel = false;
  unsigned max_leaf = 0;
};

CpuVendor cpu_vendor() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return {};
  // "AuthenticAMD" and "GenuineIntel" in ebx, edx, ecx.
  return {ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u,
          ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu, eax};
}
#endif

}  // namespace

bool detect_prefetch_streams() noexcept {
  if (const int forced = prefetch_override(); forced >= 0) return forced == 1;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!cpu_vendor().amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  unsigned family = (eax >> 8) & 0xfu;
  if (family == 0xfu) family += (eax >> 20) & 0xffu;  // the extended family
  return family >= 0x1au;  // Zen 5 and later (Note [Prefetching pointwise loops])
#else
  return false;
#endif
}

bool detect_prefetch_reads() noexcept {
  if (const int forced = prefetch_override(); forced >= 0) return forced == 1;
#if defined(__x86_64__) || defined(__i386__)
  const CpuVendor vendor = cpu_vendor();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // AVX512-FP16: leaf 7, subleaf 0, edx bit 23 (Sapphire Rapids and later server cores)
  if (!vendor.intel || vendor.max_leaf < 7 || __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return ((edx >> 23) & 1u) != 0;  // Note [Prefetching reductions' reads]
#else
  return false;
#endif
}

std::int64_t detect_streaming_store_min_bytes() noexcept {
  // KAEL_STREAMING_STORES=1: every output of a few blocks streams; =0: none (for measuring, and
  // for the tests, which run both forms on every machine).
  if (const char* env = std::getenv("KAEL_STREAMING_STORES")) {
    if (std::strcmp(env, "1") == 0) return 1;
    if (std::strcmp(env, "0") == 0) return std::numeric_limits<std::int64_t>::max();
  }
  // Half the last-level cache, at most 64 MB (Note [Streaming stores]): its size from Linux's
  // sysfs (glibc's sysconf can be wrong in a virtual machine: 320 MB for a 32 MB L3 on one), else
  // sysconf, else 32 MB.
  long long llc = -1;
  int best_level = 0;
  for (int index = 0; index < 16; ++index) {
    char path[96];
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", index);
    std::FILE* level_file = std::fopen(path, "r");
    if (level_file == nullptr) break;
    int level = 0;
    const bool got_level = std::fscanf(level_file, "%d", &level) == 1;
    std::fclose(level_file);
    std::snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", index);
    std::FILE* size_file = std::fopen(path, "r");
    if (size_file == nullptr) continue;
    long long size = 0;
    char unit = 0;
    const int got = std::fscanf(size_file, "%lld%c", &size, &unit);
    std::fclose(size_file);
    if (!got_level || got < 1 || size <= 0 || level < best_level) continue;
    if (got == 2 && unit == 'K') size <<= 10;
    if (got == 2 && unit == 'M') size <<= 20;
    best_level = level;
    llc = size;
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (llc <= 0) llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  if (llc <= 0) llc = 32LL << 20;
  return std::min<std::int64_t>(static_cast<std::int64_t>(llc) / 2, std::int64_t{64} << 20);
}

}  // namespace kael::native
