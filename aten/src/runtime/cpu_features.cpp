// What kael asks of the CPU it runs on, decided once at first use.

#include "kael/native/loops.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kael::native {

bool detect_prefetch_streams() noexcept {
  // KAEL_PREFETCH_STREAMS=1 or 0 decides instead of the CPU: for measuring, and so that the tests
  // run the prefetching loops on every machine (test_pointwise_prefetch.py).
  if (const char* env = std::getenv("KAEL_PREFETCH_STREAMS")) {
    if (std::strcmp(env, "1") == 0) return true;
    if (std::strcmp(env, "0") == 0) return false;
  }
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  // "AuthenticAMD" in ebx, edx, ecx.
  const bool amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;
  if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  unsigned family = (eax >> 8) & 0xfu;
  if (family == 0xfu) family += (eax >> 20) & 0xffu;  // the extended family
  return family >= 0x1au;  // Zen 5 and later (Note [Prefetching pointwise loops])
#else
  return false;
#endif
}

}  // namespace kael::native
