#pragma once
// The caching CPU allocator.
//
// Note [Caching CPU allocator]
// Blocks are 64-byte aligned and rounded up to a size class: multiples of 64 bytes up to
// 512 bytes, then four classes per power of two (at most 25% slack). A freed block goes to
// the free list of its class and is handed out again to the next request of that class
// (a hit); a miss allocates from the system. empty_cache() returns every cached block to
// the system. Blocks of up to 4 KiB are first served from a per-thread cache without a lock
// (Note [Per-thread block cache] in allocator.cpp); the shared lists are behind one mutex.

#include <cstddef>
#include <cstdint>

namespace kael {

struct AllocatorStats {
  std::int64_t reserved_bytes = 0;  // in use + cached
  std::int64_t in_use_bytes = 0;
  std::int64_t cached_bytes = 0;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
};

namespace cpu_allocator {
inline constexpr std::size_t kAlignment = 64;
// The block size a request of `nbytes` is served with.
std::size_t round_size(std::size_t nbytes);
// Returns a block of round_size(nbytes) bytes; nullptr for 0 bytes.
void* allocate(std::size_t nbytes);
// Returns a block obtained from allocate(nbytes) to the cache.
void deallocate(void* ptr, std::size_t nbytes);
void empty_cache();
AllocatorStats stats();
}  // namespace cpu_allocator

}  // namespace kael
