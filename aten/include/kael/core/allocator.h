#pragma once
// Allocators: one caching allocator per device type behind a common interface, and the
// caching CPU allocator.
//
// Note [Allocators and storage]
// Every Storage remembers where its bytes came from: either the Allocator of its device
// (allocate/free through a registry indexed by DeviceType; the CPU allocator is registered
// at compile time, a CUDA backend registers its own when it is built) or an external owner
// with a deleter (Storage::external: memory borrowed from NumPy, a Python buffer, DLPack).
// Set-up code never calls a device allocator directly: it asks for `Storage::allocate(n,
// device)`, which looks the allocator up by the device. The CPU allocator is a `final`
// class, so Storage's hot path calls it without a virtual call. A deleter may run on any
// thread, with or without the GIL (a tensor can die inside a kernel that released it):
// deleters of Python-owned memory take the GIL themselves (csrc/python_owner.h).
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

#include "kael/core/device.h"
#include "kael/core/stream.h"

namespace kael {

struct AllocatorStats {
  std::int64_t reserved_bytes = 0;  // in use + cached
  std::int64_t in_use_bytes = 0;
  std::int64_t cached_bytes = 0;
  std::int64_t hits = 0;
  std::int64_t misses = 0;
};

// The interface every device's allocator implements.
class Allocator {
 public:
  // Returns a block of at least nbytes (nullptr for 0 bytes); throws std::bad_alloc.
  virtual void* allocate(std::size_t nbytes) = 0;
  // Returns a block obtained from allocate(nbytes).
  virtual void free(void* ptr, std::size_t nbytes) noexcept = 0;
  // Note [Frees that wait for streams]
  // Tells the allocator that work queued on `stream` uses the block at ptr (from allocate),
  // PyTorch's record_stream: its free() must not hand the block out again before that work
  // has run (a device allocator records an event on the stream and reuses the block once the
  // event has completed). Memory is allocated on the current stream of its device; a block
  // used on that stream alone needs no call. The CPU allocator ignores it: the CPU's one
  // stream runs in call order (Note [Streams]).
  virtual void record_stream(void* /*ptr*/, Stream /*stream*/) noexcept {}
  virtual AllocatorStats stats() const = 0;
  // Returns cached blocks to the system (or the driver).
  virtual void empty_cache() = 0;

 protected:
  constexpr Allocator() = default;
  ~Allocator() = default;  // allocators live as long as the process
};

// Registers `a` as the allocator of a device type (a backend does this once at load time);
// nullptr unregisters.
void register_allocator(DeviceType type, Allocator* a);
// The allocator registered for a device type, or nullptr.
Allocator* get_allocator(DeviceType type);
// The allocator for `device`; raises a RuntimeError naming `op` when none is registered
// (for CUDA in a build without it: "... this build of kael has no CUDA backend").
Allocator& allocator_for(const char* op, Device device);

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

// The CPU allocator behind the Allocator interface (what get_allocator(DeviceType::CPU) returns).
class CpuAllocator final : public Allocator {
 public:
  constexpr CpuAllocator() = default;
  void* allocate(std::size_t nbytes) override { return cpu_allocator::allocate(nbytes); }
  void free(void* ptr, std::size_t nbytes) noexcept override { cpu_allocator::deallocate(ptr, nbytes); }
  AllocatorStats stats() const override { return cpu_allocator::stats(); }
  void empty_cache() override { cpu_allocator::empty_cache(); }
};
extern CpuAllocator instance;
}  // namespace cpu_allocator

}  // namespace kael
