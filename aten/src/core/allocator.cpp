// See Note [Caching CPU allocator].
#include "kael/core/allocator.h"

#include <sys/mman.h>

#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

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

struct Cache {
  std::mutex mutex;
  std::vector<void*> free_lists[kNumClasses];
  AllocatorStats stats;
};

Cache& cache() {
  // Leaked on purpose: tensors may be freed during static destruction.
  static Cache* c = new Cache();
  return *c;
}

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

}  // namespace

std::size_t round_size(std::size_t nbytes) { return nbytes == 0 ? 0 : classify(nbytes).bytes; }

void* allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const SizeClass c = classify(nbytes);
  Cache& cc = cache();
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    auto& list = cc.free_lists[c.index];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      cc.stats.hits++;
      cc.stats.cached_bytes -= static_cast<std::int64_t>(c.bytes);
      cc.stats.in_use_bytes += static_cast<std::int64_t>(c.bytes);
      return p;
    }
    cc.stats.misses++;
  }
  void* p = system_alloc(c.bytes);
  if (p == nullptr) {
    empty_cache();
    p = system_alloc(c.bytes);
    if (p == nullptr) throw std::bad_alloc();
  }
  std::lock_guard<std::mutex> lock(cc.mutex);
  cc.stats.in_use_bytes += static_cast<std::int64_t>(c.bytes);
  cc.stats.reserved_bytes += static_cast<std::int64_t>(c.bytes);
  return p;
}

void deallocate(void* ptr, std::size_t nbytes) {
  if (ptr == nullptr) return;
  const SizeClass c = classify(nbytes);
  Cache& cc = cache();
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    cc.stats.in_use_bytes -= static_cast<std::int64_t>(c.bytes);
    if (cc.stats.cached_bytes + static_cast<std::int64_t>(c.bytes) <= kMaxCachedBytes) {
      cc.free_lists[c.index].push_back(ptr);
      cc.stats.cached_bytes += static_cast<std::int64_t>(c.bytes);
      return;
    }
    cc.stats.reserved_bytes -= static_cast<std::int64_t>(c.bytes);
  }
  std::free(ptr);
}

void empty_cache() {
  Cache& cc = cache();
  std::vector<void*> to_free;
  {
    std::lock_guard<std::mutex> lock(cc.mutex);
    for (auto& list : cc.free_lists) {
      to_free.insert(to_free.end(), list.begin(), list.end());
      list.clear();
    }
    cc.stats.reserved_bytes -= cc.stats.cached_bytes;
    cc.stats.cached_bytes = 0;
  }
  for (void* p : to_free) std::free(p);
}

AllocatorStats stats() {
  Cache& cc = cache();
  std::lock_guard<std::mutex> lock(cc.mutex);
  return cc.stats;
}

}  // namespace kael::cpu_allocator
