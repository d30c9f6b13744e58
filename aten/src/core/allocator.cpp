// See Note [Caching CPU allocator].
#include "kael/core/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "kael/core/error.h"
#include "kael/core/intrusive_ptr.h"

namespace kael {

namespace cpu_allocator {
constinit CpuAllocator instance;
}  // namespace cpu_allocator

namespace {
// Indexed by DeviceType; CPU is there from the start, other backends register at load time.
constinit std::atomic<Allocator*> registry[kNumDeviceTypes] = {&cpu_allocator::instance, nullptr};
}  // namespace

void register_allocator(DeviceType type, Allocator* a) {
  registry[static_cast<int>(type)].store(a, std::memory_order_release);
}

Allocator* get_allocator(DeviceType type) { return registry[static_cast<int>(type)].load(std::memory_order_acquire); }

Allocator& allocator_for(const char* op, Device device) {
  Allocator* a = get_allocator(device.type);
  if (a != nullptr) return *a;
  check_device_available(op, device);
  KAEL_CHECK(false, op << ": no allocator is registered for device '" << device.str() << "'");
  __builtin_unreachable();
}

}  // namespace kael

namespace kael::cpu_allocator {
namespace {

constexpr std::size_t kSmallLimit = 512;
constexpr int kSmallClasses = static_cast<int>(kSmallLimit / kAlignment) + 1;  // 0, 64, ..., 512
constexpr int kNumClasses = kSmallClasses + 4 * 64;
// Cached blocks above this total are returned to the system at once.
constexpr std::int64_t kMaxCachedBytes = std::int64_t{4} << 30;

struct SizeClass {
  std::size_t bytes;
  int index;
};

SizeClass classify(std::size_t n) {
  if (n <= kSmallLimit) {
    const std::size_t units = (n + kAlignment - 1) / kAlignment;
    return {units * kAlignment, static_cast<int>(units)};
  }
  // n in (2^(p-1), 2^p]: four classes of width 2^(p-3).
  const int p = std::bit_width(n - 1);
  const std::size_t step = std::size_t{1} << (p - 3);
  const std::size_t quarters = (n + step - 1) / step;  // 5..8
  return {quarters * step, kSmallClasses + (p - 10) * 4 + static_cast<int>(quarters - 5)};
}

// The failure of a request, as std::bad_alloc with the size asked in what(): csrc/errors.cpp
// makes it a MemoryError with that message (PyTorch's RuntimeError says as much).
class AllocationFailed : public std::bad_alloc {
 public:
  explicit AllocationFailed(std::size_t bytes)
      : message_("CPU allocator: can't allocate memory: you tried to allocate " + std::to_string(bytes) + " bytes (" +
                 std::to_string(bytes >> 20) + " MiB)") {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// Large blocks are 2 MiB aligned and asked to be backed by huge pages: fewer page faults
// and TLB misses when a big result is written (the kernel may decline; that is harmless).
constexpr std::size_t kHugePage = std::size_t{2} << 20;

void* system_alloc(std::size_t bytes) {
  // posix_memalign: aligned_alloc requires the size to be a multiple of the alignment.
  void* p = nullptr;
  const std::size_t alignment = bytes < 2 * kHugePage ? kAlignment : kHugePage;
  if (posix_memalign(&p, alignment, bytes) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

// Note [Per-thread block cache] (statistics: see also Note [Caching CPU allocator])
// Blocks of up to 4 KiB (the classes below kThreadClasses) first go to a small cache of the
// freeing thread and come back from the allocating thread's cache without a lock; the shared
// cache behind the mutex serves everything else. Each thread counts its own share of the
// statistics (written only by that thread, read by stats() with relaxed loads); stats() adds
// them up. A thread's cache moves into the shared one when the thread exits, and when that
// thread calls empty_cache().
constexpr int kThreadClasses = kSmallClasses + 3 * 4;  // up to 4096 bytes
constexpr int kPerClass = 8;

struct Counters {
  std::atomic<std::int64_t> in_use{0}, cached{0}, hits{0};
};

// A counter only its owning thread writes: a plain load and store, no locked instruction.
void bump(std::atomic<std::int64_t>& c, std::int64_t delta) {
  c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

struct ThreadCache {
  void* blocks[kThreadClasses][kPerClass];
  int count[kThreadClasses] = {};
  Counters counters;
};

struct Cache {
  std::mutex mutex;  // guards free_lists, stats and threads
  std::vector<void*> free_lists[kNumClasses];
  AllocatorStats stats;
  std::vector<ThreadCache*> threads;
};

Cache& cache() {
  // Leaked on purpose: tensors may be freed during static destruction.
  static Cache* c = new Cache();
  return *c;
}

// Moves a thread's cached blocks into the shared lists and its counters into the shared
// stats. The caller holds the mutex.
void fold_locked(Cache& cc, ThreadCache& tc) {
  for (int i = 0; i < kThreadClasses; ++i) {
    while (tc.count[i] > 0) cc.free_lists[i].push_back(tc.blocks[i][--tc.count[i]]);
  }
  Counters& k = tc.counters;
  cc.stats.in_use_bytes += k.in_use.exchange(0, std::memory_order_relaxed);
  cc.stats.cached_bytes += k.cached.exchange(0, std::memory_order_relaxed);
  cc.stats.hits += k.hits.exchange(0, std::memory_order_relaxed);
}

struct ThreadCacheOwner {
  ThreadCache* tc = nullptr;
  ~ThreadCacheOwner();
};

ThreadCache*& current() {
  static thread_local ThreadCache* tc KAEL_FAST_TLS = nullptr;
  return tc;
}
bool& finished() {
  static thread_local bool f KAEL_FAST_TLS = false;
  return f;
}

ThreadCacheOwner::~ThreadCacheOwner() {
  if (tc == nullptr) return;
  Cache& cc = cache();
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    fold_locked(cc, *tc);
    cc.threads.erase(std::find(cc.threads.begin(), cc.threads.end(), tc));
  }
  delete tc;
  current() = nullptr;
  finished() = true;
}

ThreadCache* thread_cache() {
  ThreadCache* tc = current();
  if (tc != nullptr || finished()) return tc;
  static thread_local ThreadCacheOwner owner;
  tc = new ThreadCache();
  {
    Cache& cc = cache();
    std::lock_guard<std::mutex> lock(cc.mutex);
    cc.threads.push_back(tc);
  }
  owner.tc = tc;
  current() = tc;
  return tc;
}

}  // namespace

std::size_t round_size(std::size_t nbytes) { return nbytes == 0 ? 0 : classify(nbytes).bytes; }

void* allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const SizeClass c = classify(nbytes);
  const auto bytes = static_cast<std::int64_t>(c.bytes);
  ThreadCache* tc = c.index < kThreadClasses ? thread_cache() : nullptr;
  if (tc != nullptr && tc->count[c.index] > 0) {
    bump(tc->counters.hits, 1);
    bump(tc->counters.cached, -bytes);
    bump(tc->counters.in_use, bytes);
    return tc->blocks[c.index][--tc->count[c.index]];
  }
  Cache& cc = cache();
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    auto& list = cc.free_lists[c.index];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      cc.stats.hits++;
      cc.stats.cached_bytes -= bytes;
      cc.stats.in_use_bytes += bytes;
      return p;
    }
    cc.stats.misses++;
  }
  void* p = system_alloc(c.bytes);
  if (p == nullptr) {
    empty_cache();
    p = system_alloc(c.bytes);
    if (p == nullptr) throw AllocationFailed(nbytes);
  }
  std::lock_guard<std::mutex> lock(cc.mutex);
  cc.stats.in_use_bytes += bytes;
  cc.stats.reserved_bytes += bytes;
  return p;
}

void deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  const SizeClass c = classify(nbytes);
  const auto bytes = static_cast<std::int64_t>(c.bytes);
  ThreadCache* tc = c.index < kThreadClasses ? thread_cache() : nullptr;
  if (tc != nullptr && tc->count[c.index] < kPerClass) {
    tc->blocks[c.index][tc->count[c.index]++] = ptr;
    bump(tc->counters.in_use, -bytes);
    bump(tc->counters.cached, bytes);
    return;
  }
  Cache& cc = cache();
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    cc.stats.in_use_bytes -= bytes;
    if (cc.stats.cached_bytes + bytes <= kMaxCachedBytes) {
      cc.free_lists[c.index].push_back(ptr);
      cc.stats.cached_bytes += bytes;
      return;
    }
    cc.stats.reserved_bytes -= bytes;
  }
  std::free(ptr);
}

void empty_cache() {
  Cache& cc = cache();
  ThreadCache* tc = finished() ? nullptr : current();
  std::vector<void*> to_free;
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    if (tc != nullptr) fold_locked(cc, *tc);
    for (int i = 0; i < kNumClasses; ++i) {
      auto& list = cc.free_lists[i];
      to_free.insert(to_free.end(), list.begin(), list.end());
      list.clear();
    }
    // Blocks in other live threads' caches stay there, and are still counted as cached.
    cc.stats.reserved_bytes -= cc.stats.cached_bytes;
    cc.stats.cached_bytes = 0;
  }
  for (void* p : to_free) std::free(p);
}

AllocatorStats stats() {
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mutex);
  AllocatorStats s = cc.stats;
  for (ThreadCache* tc : cc.threads) {
    const Counters& k = tc->counters;
    s.in_use_bytes += k.in_use.load(std::memory_order_relaxed);
    s.cached_bytes += k.cached.load(std::memory_order_relaxed);
    s.hits += k.hits.load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace kael::cpu_allocator
