// The thread count and kael's thread pool (Note [Thread pool], Note [Process-wide thread count]
// and Note [Threads after fork] in kael/runtime/threads.h).
#include "kael/runtime/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "kael/core/error.h"

namespace kael {

namespace {
constexpr int kMaxThreads = 1024;

// Set by the fork child handler (while the child has one thread), read by openmp_threads().
bool forked_child = false;

// The setting (see Note [Process-wide thread count]): 0 until set_num_threads is called.
std::atomic<int> explicit_threads{0};

// KAEL_NUM_THREADS and OpenMP's default, read once, by the first thread that needs them (no
// thread's OpenMP setting has been changed by kael before that).
struct Defaults {
  int threads = 1;        // KAEL_NUM_THREADS if valid, else OpenMP's default
  std::string env_error;  // why KAEL_NUM_THREADS is invalid, or empty

  Defaults() {
    threads = std::clamp(omp_get_max_threads(), 1, kMaxThreads);
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

// Whether this thread runs a chunk of a parallel region (pool workers: always).
thread_local bool tls_in_region = false;

class RegionScope {
 public:
  RegionScope() : previous_(tls_in_region) { tls_in_region = true; }
  ~RegionScope() { tls_in_region = previous_; }
  RegionScope(const RegionScope&) = delete;
  RegionScope& operator=(const RegionScope&) = delete;

 private:
  bool previous_;
};

// One parallel_for over the pool: [begin, begin + chunks * size) cut into `chunks` pieces of
// `size` elements (the last one shorter), on the stack of the thread that runs it.
struct Region {
  detail::ChunkFn fn;
  const void* context;
  std::int64_t begin, end, size;
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // written once, by the chunk that set `failed`
  bool tracing = false;
  std::mutex trace_mutex;
  std::set<long> trace_tids;

  void run_chunk(std::int64_t chunk) noexcept {
    if (tracing) {
      std::lock_guard<std::mutex> lock(trace_mutex);
      trace_tids.insert(static_cast<long>(::syscall(SYS_gettid)));
    }
    if (failed.load(std::memory_order_relaxed)) return;  // cancelled: another chunk threw
    const std::int64_t b = begin + chunk * size, e = std::min(end, b + size);
    try {
      RegionScope scope;
      fn(context, b, e);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
};

// One worker thread; its slot is handed one chunk of one region at a time.
struct Worker {
  std::mutex mutex;
  std::condition_variable wake;
  Region* region = nullptr;  // the region whose chunk `chunk` to run next
  std::int64_t chunk = 0;
  bool stop = false;
  std::thread thread;
};

class Pool {
 public:
  // Held by the thread running a region on the pool (and by fork's prepare handler): one region
  // at a time; the workers' set only changes under it.
  std::mutex region_mutex;

  // Runs r's `chunks` chunks: 0 here, the others on the first chunks - 1 workers (resize() has
  // made them live). region_mutex is held.
  void run(Region& r, std::int64_t chunks) {
    {
      std::lock_guard<std::mutex> lock(done_mutex_);
      remaining_ = chunks - 1;
    }
    for (std::int64_t c = 1; c < chunks; ++c) {
      Worker& w = *workers_[static_cast<std::size_t>(c - 1)];
      {
        std::lock_guard<std::mutex> lock(w.mutex);
        w.region = &r;
        w.chunk = c;
      }
      w.wake.notify_one();
    }
    r.run_chunk(0);
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_.wait(lock, [&] { return remaining_ == 0; });
  }

  // Makes `wanted` workers live (starting or stopping threads); returns how many are live, fewer
  // than wanted when the system refuses a new thread. region_mutex is held.
  int resize(int wanted) {
    while (static_cast<int>(workers_.size()) > wanted) {
      std::unique_ptr<Worker> w = std::move(workers_.back());
      workers_.pop_back();
      {
        std::lock_guard<std::mutex> lock(w->mutex);
        w->stop = true;
      }
      w->wake.notify_one();
      w->thread.join();
      live_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    }
    while (static_cast<int>(workers_.size()) < wanted) {
      auto w = std::make_unique<Worker>();
      try {
        w->thread = std::thread(&Pool::work, this, w.get());
      } catch (const std::system_error&) {
        break;  // no more threads: run with the ones there are
      }
      workers_.push_back(std::move(w));
      live_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    }
    return static_cast<int>(workers_.size());
  }

  int live() const noexcept { return live_.load(std::memory_order_relaxed); }

 private:
  void work(Worker* w) {
    tls_in_region = true;  // nested parallel_for calls run inline on a worker
    std::unique_lock<std::mutex> lock(w->mutex);
    for (;;) {
      w->wake.wait(lock, [&] { return w->region != nullptr || w->stop; });
      if (w->region == nullptr) return;  // stopped
      Region* r = w->region;
      const std::int64_t chunk = w->chunk;
      w->region = nullptr;
      lock.unlock();
      r->run_chunk(chunk);
      {
        // The last touch of r: the region's thread may return as soon as remaining_ is 0.
        std::lock_guard<std::mutex> done_lock(done_mutex_);
        if (--remaining_ == 0) done_.notify_one();
      }
      lock.lock();
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int> live_{0};
  std::mutex done_mutex_;
  std::condition_variable done_;
  std::int64_t remaining_ = 0;  // chunks handed to workers and not finished yet
};

// The pool. Never destroyed: workers may outlive static destruction (they wait for work, and the
// process ends them); a forked child replaces it with a fresh one (Note [Threads after fork]).
Pool*& pool_slot() {
  static Pool* pool = new Pool;
  return pool;
}

// Test tracing (ParallelTrace): guarded by trace_mutex, which regions take with the pool's lock held
// (so it is free whenever fork's prepare handler holds that lock).
std::atomic<bool> trace_on{false};
std::mutex trace_mutex;
ParallelTrace trace_totals;
std::set<long> trace_tids;

void before_fork() { pool_slot()->region_mutex.lock(); }
void after_fork_in_parent() { pool_slot()->region_mutex.unlock(); }
void after_fork_in_child() {
  // The child has one thread. The parent's pool, with its (locked) mutex and the std::thread
  // objects of workers that do not exist here, is left alone: a new one starts workers on demand.
  forked_child = true;
  pool_slot() = new Pool;
  omp_set_num_threads(1);
}

struct RegisterForkHandlers {
  RegisterForkHandlers() { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); }
} register_fork_handlers;

}  // namespace

int intra_op_threads() noexcept {
  const int n = explicit_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : defaults().threads;
}

int openmp_threads() noexcept { return forked_child ? 1 : intra_op_threads(); }

void sync_openmp_threads() noexcept {
  thread_local int applied = 0;
  const int n = openmp_threads();
  if (applied != n) {
    omp_set_num_threads(n);
    applied = n;
  }
}

void set_num_threads(int n) {
  KAEL_CHECK_VALUE(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1.." << kMaxThreads << ", got " << n);
  explicit_threads.store(n, std::memory_order_relaxed);
  sync_openmp_threads();
}

int get_num_threads() {
  const int n = explicit_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
  KAEL_CHECK_VALUE(defaults().env_error.empty(), defaults().env_error);
  return defaults().threads;
}

bool in_parallel_region() noexcept { return tls_in_region; }

namespace detail {

void parallel_run(std::int64_t begin, std::int64_t end, std::int64_t grain, ChunkFn fn, const void* context) {
  const std::int64_t n = end - begin;
  grain = std::max<std::int64_t>(grain, 1);
  const int setting = intra_op_threads();
  const std::int64_t chunks = std::min<std::int64_t>(setting, n / grain + (n % grain != 0));
  if (chunks <= 1 || tls_in_region) {
    fn(context, begin, end);
    return;
  }
  Pool& pool = *pool_slot();
  std::unique_lock<std::mutex> lock(pool.region_mutex, std::try_to_lock);
  if (!lock.owns_lock()) {  // another thread's region has the pool: compute here
    fn(context, begin, end);
    return;
  }
  // The pool keeps setting - 1 workers (a region with fewer chunks leaves the rest idle).
  const std::int64_t threads = std::min<std::int64_t>(chunks, pool.resize(setting - 1) + 1);
  // chunks of `size` elements, the last one possibly shorter, none empty
  const std::int64_t size = n / threads + (n % threads != 0);
  Region r{fn, context, begin, end, size};
  r.tracing = trace_on.load(std::memory_order_relaxed);
  pool.run(r, n / size + (n % size != 0));
  if (r.tracing) {
    std::lock_guard<std::mutex> trace_lock(trace_mutex);
    trace_totals.regions += 1;
    trace_totals.max_region_threads =
        std::max<std::int64_t>(trace_totals.max_region_threads, static_cast<std::int64_t>(r.trace_tids.size()));
    trace_tids.insert(r.trace_tids.begin(), r.trace_tids.end());
  }
  lock.unlock();
  if (r.error) std::rethrow_exception(r.error);
}

}  // namespace detail

void parallel_trace_start() {
  std::lock_guard<std::mutex> lock(trace_mutex);
  trace_totals = ParallelTrace{};
  trace_tids.clear();
  trace_on.store(true, std::memory_order_relaxed);
}

ParallelTrace parallel_trace_stop() {
  std::lock_guard<std::mutex> lock(trace_mutex);
  trace_on.store(false, std::memory_order_relaxed);
  ParallelTrace t = trace_totals;
  t.threads = static_cast<std::int64_t>(trace_tids.size());
  return t;
}

int pool_workers() noexcept { return pool_slot()->live(); }

}  // namespace kael
