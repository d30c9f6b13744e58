#include "kael/runtime/threads.h"

#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kael/core/error.h"

namespace kael {

namespace {
constexpr int kMaxThreads = 1024;

// Note [Threads after fork]
// GNU OpenMP (shared with oneDNN) cannot restart its thread pool in a child forked after
// the pool started: the first parallel region would wait forever for threads that no longer
// exist. A forked child therefore runs everything on its one thread, as PyTorch does.
bool forked_child = false;

// The setting (see Note [Process-wide thread count]): 0 until set_num_threads is called.
std::atomic<int> explicit_threads{0};

// KAEL_NUM_THREADS and OpenMP's default, read once, by the first thread that needs them (no
// thread's OpenMP setting has been changed by kael before that).
struct Defaults {
  int threads = 1;      // KAEL_NUM_THREADS if valid, else OpenMP's default
  std::string env_error;  // why KAEL_NUM_THREADS is invalid, or empty

  Defaults() {
    threads = omp_get_max_threads();
    const char* value = std::getenv("KAEL_NUM_THREADS");
    if (value == nullptr || *value == '\0') return;
    int n = 0;
    auto [end, ec] = std::from_chars(value, value + std::strlen(value), n);
    if (ec == std::errc() && *end == '\0' && n >= 1 && n <= kMaxThreads) {
      threads = n;
    } else {
      env_error = std::string("KAEL_NUM_THREADS: expected an integer in 1..") + std::to_string(kMaxThreads) +
                  ", got '" + value + "'";
    }
  }
};
const Defaults& defaults() {
  static const Defaults d;
  return d;
}

void after_fork_in_child() {
  forked_child = true;
  explicit_threads.store(1, std::memory_order_relaxed);
  omp_set_num_threads(1);
}

struct RegisterForkHandler {
  RegisterForkHandler() { pthread_atfork(nullptr, nullptr, after_fork_in_child); }
} register_fork_handler;

}  // namespace

int intra_op_threads() noexcept {
  const int n = explicit_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : defaults().threads;
}

void sync_openmp_threads() noexcept {
  thread_local int applied = 0;
  const int n = intra_op_threads();
  if (applied != n) {
    omp_set_num_threads(n);
    applied = n;
  }
}

void set_num_threads(int n) {
  KAEL_CHECK_VALUE(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1.." << kMaxThreads << ", got " << n);
  KAEL_CHECK(n == 1 || !forked_child, "set_num_threads: this process was forked from one whose thread pool may "
                                      "have started, so it runs on 1 thread (see Note [Threads after fork]); got "
                                          << n);
  explicit_threads.store(n, std::memory_order_relaxed);
  sync_openmp_threads();
}

int get_num_threads() {
  const int n = explicit_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
  KAEL_CHECK_VALUE(defaults().env_error.empty(), defaults().env_error);
  return defaults().threads;
}

}  // namespace kael
