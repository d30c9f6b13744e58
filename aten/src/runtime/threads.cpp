// The thread count and kael's thread pool (Note [Thread pool], Note [Process-wide thread count]
// and Note [Threads after fork] in kael/runtime/threads.h).
#include "kael/runtime/threads.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
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
constexpr std::int64_t kPiecesPerThread = 8;  // Note [Pieces and stealing]
// How long a thread of a region waits for work (a worker) or for the workers (the calling
// thread) by spinning before it blocks (Note [Spinning before blocking]).
constexpr std::chrono::microseconds kSpinBudget{200};

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

// Waits for ready() to hold, for up to `budget`, pausing the core between looks; whether it held.
template <class Ready>
bool spin_until(Ready ready, std::chrono::nanoseconds budget) noexcept {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return ready();
  }
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

// The pieces a thread of a region owns, [front, back) as front << 32 | back: the owner takes
// them from the front, the others steal from the back (Note [Pieces and stealing] in
// kael/runtime/threads.h).
struct alignas(64) PieceRange {
  std::atomic<std::uint64_t> bits{0};

  void set(std::int64_t front, std::int64_t back) {
    bits.store(static_cast<std::uint64_t>(front) << 32 | static_cast<std::uint64_t>(back), std::memory_order_relaxed);
  }
  // The next piece from the front (owner) or the back (thief), or -1 when none is left.
  std::int64_t take(bool from_front) noexcept {
    std::uint64_t r = bits.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t front = r >> 32, back = r & 0xffffffffu;
      if (front >= back) return -1;
      const std::uint64_t next = from_front ? (front + 1) << 32 | back : front << 32 | (back - 1);
      if (bits.compare_exchange_weak(r, next, std::memory_order_relaxed)) {
        return static_cast<std::int64_t>(from_front ? front : back - 1);
      }
    }
  }
};

// One parallel_for over the pool: [begin, end) cut into `pieces` pieces of `size` elements (the
// last one shorter), dealt to `threads` threads as contiguous runs of pieces; on the stack of
// the thread that runs it.
struct Region {
  detail::ChunkFn fn;
  const void* context;
  std::int64_t begin, end, size, threads;
  std::unique_ptr<PieceRange[]> ranges;  // one per thread: 0 the calling thread, t worker t - 1
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // written once, by the piece that set `failed`
  bool tracing = false;
  std::mutex trace_mutex;
  std::set<long> trace_tids;

  // Thread t's part: its own pieces in order, then pieces stolen from the other threads' backs.
  void run_thread(std::int64_t t) noexcept {
    if (tracing) {
      std::lock_guard<std::mutex> lock(trace_mutex);
      trace_tids.insert(static_cast<long>(::syscall(SYS_gettid)));
    }
    std::int64_t victim = t;
    for (std::int64_t tried = 0; tried < threads;) {
      const std::int64_t piece = ranges[static_cast<std::size_t>(victim)].take(victim == t);
      if (piece < 0) {  // this range is empty: go on to the next thread's
        victim = victim + 1 == threads ? 0 : victim + 1;
        ++tried;
        continue;
      }
      if (failed.load(std::memory_order_relaxed)) return;  // cancelled: another piece threw
      const std::int64_t b = begin + piece * size, e = std::min(end, b + size);
      try {
        RegionScope scope;
        fn(context, b, e);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    }
  }
};

// One worker thread; its slot is handed one region at a time, with its thread number there.
struct Worker {
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<Region*> region{nullptr};  // the region to take part in next, as its thread `index`
  std::int64_t index = 0;                // its place in the pool's workers + 1, for good
  std::atomic<bool> stop{false};
  std::thread thread;
};

class Pool {
 public:
  // Held by the thread running a region on the pool (and by fork's prepare handler): one region
  // at a time; the workers' set only changes under it.
  std::mutex region_mutex;

  // Runs r on r.threads threads: thread 0 is this one, thread t worker t - 1 (resize() has made
  // them live). region_mutex is held.
  void run(Region& r) {
    keep_off_caller_cpu(r.threads);
    remaining_.store(r.threads - 1, std::memory_order_relaxed);
    for (std::int64_t t = 1; t < r.threads; ++t) {
      Worker& w = *workers_[static_cast<std::size_t>(t - 1)];
      w.region.store(&r, std::memory_order_release);
      // A worker that is about to block holds its mutex from its last look at `region` until it
      // blocks: taking the mutex here means it either saw the region or is blocked and woken.
      { std::lock_guard<std::mutex> lock(w.mutex); }
      w.wake.notify_one();
    }
    r.run_thread(0);
    const auto all_done = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
    if (spin_.load(std::memory_order_relaxed) && spin_until(all_done, kSpinBudget)) return;
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_.wait(lock, all_done);
  }

  // Makes `wanted` workers live (starting or stopping threads); returns how many are live, fewer
  // than wanted when the system refuses a new thread. region_mutex is held.
  int resize(int wanted) {
    while (static_cast<int>(workers_.size()) > wanted) {
      std::unique_ptr<Worker> w = std::move(workers_.back());
      workers_.pop_back();
      w->stop.store(true, std::memory_order_relaxed);
      { std::lock_guard<std::mutex> lock(w->mutex); }
      w->wake.notify_one();
      w->thread.join();
      live_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    }
    while (static_cast<int>(workers_.size()) < wanted) {
      auto w = std::make_unique<Worker>();
      w->index = static_cast<std::int64_t>(workers_.size()) + 1;
      try {
        w->thread = std::thread(&Pool::work, this, w.get());
      } catch (const std::system_error&) {
        break;  // no more threads: run with the ones there are
      }
      workers_.push_back(std::move(w));
      live_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
      kept_off_ = kUnknown;  // the new worker's set is its starter's: set them all anew
    }
    return static_cast<int>(workers_.size());
  }

  int live() const noexcept { return live_.load(std::memory_order_relaxed); }

 private:
  static constexpr int kUnknown = -2;  // kept_off_: the workers' CPU sets are not known
  static constexpr int kNone = -1;     // kept_off_: the workers' sets are caller_set_

  // Before a region of `threads` threads wakes its workers, their CPU sets become the calling
  // thread's set less the CPU it runs on, when that set has CPUs enough for one thread each, else
  // the calling thread's set (Note [Workers off the caller's CPU]); nothing changes while the
  // two stay as they were. region_mutex is held.
  void keep_off_caller_cpu(std::int64_t threads) {
    cpu_set_t caller;
    CPU_ZERO(&caller);
    if (sched_getaffinity(0, sizeof caller, &caller) != 0) {
      spin_.store(false, std::memory_order_relaxed);
      return;
    }
    const int cpu = sched_getcpu();
    const bool room = cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &caller) && CPU_COUNT(&caller) >= threads;
    const int off = room ? cpu : kNone;
    spin_.store(room, std::memory_order_relaxed);
    if (off == kept_off_ && CPU_EQUAL(&caller, &caller_set_)) return;
    cpu_set_t set = caller;
    if (off != kNone) CPU_CLR(off, &set);
    // (a refusal, say by a cpuset that changed, leaves a worker where the scheduler puts it)
    for (const std::unique_ptr<Worker>& w : workers_)
      (void)pthread_setaffinity_np(w->thread.native_handle(), sizeof set, &set);
    kept_off_ = off;
    caller_set_ = caller;
  }

  void work(Worker* w) {
    (void)pthread_setname_np(pthread_self(), "kael-pool");  // as top -H, gdb and /proc show it
    tls_in_region = true;  // nested parallel_for calls run inline on a worker
    const auto posted = [&] {
      return w->region.load(std::memory_order_relaxed) != nullptr || w->stop.load(std::memory_order_relaxed);
    };
    for (;;) {
      if (!(spin_.load(std::memory_order_relaxed) && spin_until(posted, kSpinBudget))) {
        std::unique_lock<std::mutex> lock(w->mutex);
        w->wake.wait(lock, posted);
      }
      Region* r = w->region.exchange(nullptr, std::memory_order_acquire);
      if (r == nullptr) return;  // stopped
      r->run_thread(w->index);
      // The last touch of r: the region's thread may return as soon as remaining_ is 0.
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        { std::lock_guard<std::mutex> done_lock(done_mutex_); }
        done_.notify_one();
      }
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int> live_{0};
  std::mutex done_mutex_;
  std::condition_variable done_;
  std::atomic<std::int64_t> remaining_{0};  // workers handed the region and not done with it yet
  // Whether threads wait by spinning first: kept_off_ names a CPU (read by the workers, so not
  // derived from kept_off_, which only the thread holding region_mutex reads).
  std::atomic<bool> spin_{false};
  cpu_set_t caller_set_{};   // the calling thread's CPU set when the workers' sets were made
  int kept_off_ = kUnknown;  // the CPU the workers' sets exclude, or kNone / kUnknown
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
  KAEL_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1.." << kMaxThreads << ", got " << n);
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
  // up to kPiecesPerThread pieces a thread, of `size` elements (none below the grain but for
  // rounding, the last one possibly shorter, none empty), dealt in runs of pieces
  const std::int64_t wanted = std::min<std::int64_t>(n / grain + (n % grain != 0), threads * kPiecesPerThread);
  const std::int64_t size = n / wanted + (n % wanted != 0);
  const std::int64_t pieces = n / size + (n % size != 0);
  Region r{fn, context, begin, end, size, std::min(threads, pieces)};
  r.ranges = std::make_unique<PieceRange[]>(static_cast<std::size_t>(r.threads));
  for (std::int64_t t = 0; t < r.threads; ++t)
    r.ranges[static_cast<std::size_t>(t)].set(t * pieces / r.threads, (t + 1) * pieces / r.threads);
  r.tracing = trace_on.load(std::memory_order_relaxed);
  pool.run(r);
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
