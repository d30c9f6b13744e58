#include "kael/runtime/threads.h"

#include <omp.h>
#include <pthread.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kael/core/error.h"

namespace kael {

namespace {
constexpr int kMaxThreads = 1024;

// Note [Threads after fork]
// GNU OpenMP (shared with oneDNN) cannot restart its thread pool in a child forked after
// the pool started: the first parallel region would wait forever for threads that no longer
// exist. A forked child therefore runs everything on its one thread, as PyTorch does.
bool forked_child = false;

void after_fork_in_child() {
  forked_child = true;
  omp_set_num_threads(1);
}

struct RegisterForkHandler {
  RegisterForkHandler() { pthread_atfork(nullptr, nullptr, after_fork_in_child); }
} register_fork_handler;

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
  if (!forked_child) std::call_once(env_once, read_env);
}
}  // namespace

void set_num_threads(int n) {
  KAEL_CHECK_VALUE(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1.." << kMaxThreads << ", got " << n);
  KAEL_CHECK(n == 1 || !forked_child, "set_num_threads: this process was forked from one whose thread pool may "
                                      "have started, so it runs on 1 thread (see Note [Threads after fork]); got "
                                          << n);
  init();
  omp_set_num_threads(n);
}

int get_num_threads() {
  init();
  return omp_get_max_threads();
}

}  // namespace kael
