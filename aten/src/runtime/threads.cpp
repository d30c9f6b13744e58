#include "kael/runtime/threads.h"

#include <omp.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kael/core/error.h"

namespace kael {

namespace {
constexpr int kMaxThreads = 1024;
std::once_flag env_once;
int env_threads = 0;  // 0: not set

void read_env() {
  const char* value = std::getenv("KAEL_NUM_THREADS");
  if (value == nullptr || *value == '\0') return;
  int n = 0;
  auto [end, ec] = std::from_chars(value, value + std::strlen(value), n);
  KAEL_CHECK_VALUE(ec == std::errc() && *end == '\0' && n >= 1 && n <= kMaxThreads,
                   "KAEL_NUM_THREADS: expected an integer in 1.." << kMaxThreads << ", got '" << value << "'");
  env_threads = n;
  omp_set_num_threads(n);
}

void init() {
  // call_once rethrows and lets a later call try again, so a bad value raises every time.
  std::call_once(env_once, read_env);
}
}  // namespace

void set_num_threads(int n) {
  KAEL_CHECK_VALUE(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1.." << kMaxThreads << ", got " << n);
  init();
  omp_set_num_threads(n);
}

int get_num_threads() {
  init();
  return omp_get_max_threads();
}

}  // namespace kael
