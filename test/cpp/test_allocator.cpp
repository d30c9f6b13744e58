// Tests of the caching CPU allocator (see Note [Caching CPU allocator]).
// The allocator's statistics are process-wide, so every test compares deltas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "kael/core/allocator.h"
#include "kael/core/error.h"
#include "kael/core/storage.h"
#include "kael/core/tensor_impl.h"
#include "kael/ops.h"

namespace {

namespace alloc = kael::cpu_allocator;

struct Delta {
  std::int64_t reserved, in_use, cached, hits, misses;
};

Delta delta(const kael::AllocatorStats& before, const kael::AllocatorStats& after) {
  return {after.reserved_bytes - before.reserved_bytes, after.in_use_bytes - before.in_use_bytes,
          after.cached_bytes - before.cached_bytes, after.hits - before.hits, after.misses - before.misses};
}

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % alloc::kAlignment == 0; }

// A request size whose class nobody else in this test binary is likely to hold cached.
constexpr std::size_t kOddSize = 3 * 1000 * 1000 + 17;

TEST(Allocator, RoundSizeSmallIsMultipleOf64) {
  EXPECT_EQ(alloc::round_size(1), 64u);
  EXPECT_EQ(alloc::round_size(63), 64u);
  EXPECT_EQ(alloc::round_size(64), 64u);
  EXPECT_EQ(alloc::round_size(65), 128u);
  EXPECT_EQ(alloc::round_size(100), 128u);
  EXPECT_EQ(alloc::round_size(129), 192u);
  EXPECT_EQ(alloc::round_size(448), 448u);
  EXPECT_EQ(alloc::round_size(449), 512u);
  EXPECT_EQ(alloc::round_size(512), 512u);
  for (std::size_t n = 1; n <= 512; ++n) {
    const std::size_t r = alloc::round_size(n);
    ASSERT_EQ(r % 64, 0u) << n;
    ASSERT_GE(r, n) << n;
    ASSERT_LT(r - n, 64u) << n;
  }
}

TEST(Allocator, RoundSizeZeroIsZero) { EXPECT_EQ(alloc::round_size(0), 0u); }

TEST(Allocator, RoundSizeLargeUsesFourClassesPerPowerOfTwo) {
  // (512, 1024]: classes 640, 768, 896, 1024.
  EXPECT_EQ(alloc::round_size(513), 640u);
  EXPECT_EQ(alloc::round_size(640), 640u);
  EXPECT_EQ(alloc::round_size(641), 768u);
  EXPECT_EQ(alloc::round_size(768), 768u);
  EXPECT_EQ(alloc::round_size(769), 896u);
  EXPECT_EQ(alloc::round_size(897), 1024u);
  EXPECT_EQ(alloc::round_size(1024), 1024u);
  // (1024, 2048]: 1280, 1536, 1792, 2048.
  EXPECT_EQ(alloc::round_size(1025), 1280u);
  EXPECT_EQ(alloc::round_size(1537), 1792u);
  EXPECT_EQ(alloc::round_size(2048), 2048u);
  // (2^20, 2^21]
  EXPECT_EQ(alloc::round_size((std::size_t{1} << 20) + 1), std::size_t{5} << 18);
  EXPECT_EQ(alloc::round_size(std::size_t{1} << 21), std::size_t{1} << 21);

  // Exactly four distinct classes in each power-of-two interval.
  for (int p = 10; p <= 24; ++p) {
    const std::size_t lo = std::size_t{1} << (p - 1), hi = std::size_t{1} << p;
    std::set<std::size_t> classes;
    const std::size_t step = std::max<std::size_t>(1, (hi - lo) / 512);
    for (std::size_t n = lo + 1; n <= hi; n += step) classes.insert(alloc::round_size(n));
    classes.insert(alloc::round_size(hi));
    EXPECT_EQ(classes.size(), 4u) << "(2^" << p - 1 << ", 2^" << p << "]";
    for (std::size_t c : classes) {
      EXPECT_GT(c, lo);
      EXPECT_LE(c, hi);
    }
  }
}

TEST(Allocator, RoundSizeSlackAtMostQuarterAndAligned) {
  std::vector<std::size_t> sizes;
  for (std::size_t n = 513; n < 20000; ++n) sizes.push_back(n);
  for (int p = 15; p < 40; ++p) {
    const std::size_t b = std::size_t{1} << p;
    for (std::size_t n : {b - 1, b, b + 1, b + b / 4, b + b / 4 + 1, b + b / 2 + 3, 2 * b - 7}) sizes.push_back(n);
  }
  for (std::size_t n : sizes) {
    const std::size_t r = alloc::round_size(n);
    ASSERT_GE(r, n) << n;
    ASSERT_EQ(r % alloc::kAlignment, 0u) << n;
    ASSERT_LE(4 * (r - n), n) << "slack over 25% for " << n << " -> " << r;
    // Idempotent: a class size is its own class.
    ASSERT_EQ(alloc::round_size(r), r) << n;
  }
}

TEST(Allocator, RoundSizeIsMonotonic) {
  std::size_t prev = 0;
  for (std::size_t n = 0; n < 70000; ++n) {
    const std::size_t r = alloc::round_size(n);
    ASSERT_GE(r, prev) << n;
    prev = r;
  }
}

TEST(Allocator, ZeroBytesReturnsNullAndCountsNothing) {
  const auto before = alloc::stats();
  void* p = alloc::allocate(0);
  EXPECT_EQ(p, nullptr);
  alloc::deallocate(p, 0);
  const Delta d = delta(before, alloc::stats());
  EXPECT_EQ(d.hits, 0);
  EXPECT_EQ(d.misses, 0);
  EXPECT_EQ(d.in_use, 0);
  EXPECT_EQ(d.cached, 0);
  EXPECT_EQ(d.reserved, 0);
}

TEST(Allocator, ZeroElementTensorHasNoBlock) {
  const auto before = alloc::stats();
  {
    const std::int64_t shape[] = {0, 3};
    kael::Tensor t = kael::empty(shape);
    EXPECT_EQ(t.numel(), 0);
  }
  const Delta d = delta(before, alloc::stats());
  EXPECT_EQ(d.hits + d.misses, 0);
  EXPECT_EQ(d.in_use, 0);
}

TEST(Allocator, BlocksAre64ByteAlignedAndUsable) {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n : {1u, 7u, 63u, 64u, 65u, 200u, 511u, 513u, 1000u, 4097u, 100000u}) {
    void* p = alloc::allocate(n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(aligned(p)) << n;
    std::memset(p, 0xab, alloc::round_size(n));  // the whole class is ours to use
    blocks.emplace_back(p, n);
  }
  // Distinct live blocks never overlap.
  for (std::size_t i = 0; i < blocks.size(); ++i)
    for (std::size_t j = i + 1; j < blocks.size(); ++j) EXPECT_NE(blocks[i].first, blocks[j].first);
  for (auto [p, n] : blocks) alloc::deallocate(p, n);
}

TEST(Allocator, LargeBlocksOfEveryClass) {
  // Around and above the sizes served from huge-page-aligned blocks: each of the four
  // classes of (2^21, 2^25] (2.5 MiB, 3 MiB, ..., 32 MiB).
  std::vector<std::size_t> sizes;
  for (int p = 22; p <= 25; ++p) {
    const std::size_t q = std::size_t{1} << (p - 3);
    for (std::size_t k = 5; k <= 8; ++k) sizes.push_back(k * q - 100);
  }
  for (std::size_t n : sizes) {
    const std::size_t r = alloc::round_size(n);
    auto* p = static_cast<unsigned char*>(alloc::allocate(n));
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(aligned(p)) << n;
    p[0] = 1;
    p[r / 2] = 2;
    p[r - 1] = 3;  // the whole class is usable
    EXPECT_EQ(p[0] + p[r / 2] + p[r - 1], 6);
    alloc::deallocate(p, n);
  }
  alloc::empty_cache();
}

TEST(Allocator, MissThenHitInSameSizeClass) {
  alloc::empty_cache();
  const std::size_t n = kOddSize;
  const std::int64_t cls = static_cast<std::int64_t>(alloc::round_size(n));

  auto s0 = alloc::stats();
  void* p = alloc::allocate(n);
  auto s1 = alloc::stats();
  Delta d = delta(s0, s1);
  EXPECT_EQ(d.misses, 1);
  EXPECT_EQ(d.hits, 0);
  EXPECT_EQ(d.in_use, cls);
  EXPECT_EQ(d.reserved, cls);
  EXPECT_EQ(d.cached, 0);

  alloc::deallocate(p, n);
  auto s2 = alloc::stats();
  d = delta(s1, s2);
  EXPECT_EQ(d.in_use, -cls);
  EXPECT_EQ(d.cached, cls);
  EXPECT_EQ(d.reserved, 0);
  EXPECT_EQ(d.hits + d.misses, 0);

  // A different request of the same class is served by the cached block.
  const std::size_t other = n - 1;
  ASSERT_EQ(alloc::round_size(other), alloc::round_size(n));
  void* q = alloc::allocate(other);
  auto s3 = alloc::stats();
  d = delta(s2, s3);
  EXPECT_EQ(q, p);
  EXPECT_EQ(d.hits, 1);
  EXPECT_EQ(d.misses, 0);
  EXPECT_EQ(d.in_use, cls);
  EXPECT_EQ(d.cached, -cls);
  EXPECT_EQ(d.reserved, 0);
  alloc::deallocate(q, other);
}

TEST(Allocator, DifferentSizeClassIsAMiss) {
  alloc::empty_cache();
  const std::size_t n = kOddSize;
  void* p = alloc::allocate(n);
  alloc::deallocate(p, n);
  const std::size_t bigger = alloc::round_size(n) + 1;
  ASSERT_NE(alloc::round_size(bigger), alloc::round_size(n));
  const auto before = alloc::stats();
  void* q = alloc::allocate(bigger);
  const Delta d = delta(before, alloc::stats());
  EXPECT_EQ(d.misses, 1);
  EXPECT_EQ(d.hits, 0);
  EXPECT_EQ(d.cached, 0);  // the cached block of the other class stays cached
  alloc::deallocate(q, bigger);
  alloc::empty_cache();
}

TEST(Allocator, ReservedIsInUsePlusCached) {
  alloc::empty_cache();
  const auto base = alloc::stats();
  EXPECT_EQ(base.cached_bytes, 0);
  EXPECT_EQ(base.reserved_bytes, base.in_use_bytes + base.cached_bytes);

  std::vector<std::pair<void*, std::size_t>> blocks;
  std::int64_t total = 0;
  for (std::size_t n : {100u, 700u, 5000u, 70000u}) {
    blocks.emplace_back(alloc::allocate(n), n);
    total += static_cast<std::int64_t>(alloc::round_size(n));
  }
  auto mid = alloc::stats();
  EXPECT_EQ(mid.in_use_bytes - base.in_use_bytes, total);
  EXPECT_EQ(mid.reserved_bytes, mid.in_use_bytes + mid.cached_bytes);

  for (auto [p, n] : blocks) alloc::deallocate(p, n);
  auto after = alloc::stats();
  EXPECT_EQ(after.in_use_bytes, base.in_use_bytes);
  EXPECT_EQ(after.cached_bytes - base.cached_bytes, total);
  EXPECT_EQ(after.reserved_bytes - base.reserved_bytes, total);
  EXPECT_EQ(after.reserved_bytes, after.in_use_bytes + after.cached_bytes);
}

TEST(Allocator, EmptyCacheReleasesCachedBlocksOnly) {
  void* live = alloc::allocate(kOddSize);
  void* dead = alloc::allocate(12345);
  alloc::deallocate(dead, 12345);
  const auto before = alloc::stats();
  EXPECT_GT(before.cached_bytes, 0);

  alloc::empty_cache();
  const auto after = alloc::stats();
  EXPECT_EQ(after.cached_bytes, 0);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes - before.cached_bytes);
  EXPECT_EQ(after.reserved_bytes, after.in_use_bytes);

  // With the cache empty, the next request of the freed class misses.
  void* again = alloc::allocate(12345);
  const Delta d = delta(after, alloc::stats());
  EXPECT_EQ(d.misses, 1);
  EXPECT_EQ(d.hits, 0);
  alloc::deallocate(again, 12345);
  alloc::deallocate(live, kOddSize);
  alloc::empty_cache();
  EXPECT_EQ(alloc::stats().cached_bytes, 0);
}

TEST(Allocator, TensorStorageReturnsToCache) {
  alloc::empty_cache();
  const std::int64_t shape[] = {1000, 3};  // 12000 bytes of float32
  const std::int64_t cls = static_cast<std::int64_t>(alloc::round_size(12000));
  const auto s0 = alloc::stats();
  void* first = nullptr;
  {
    kael::Tensor t = kael::empty(shape);
    first = t.data_ptr();
    EXPECT_TRUE(aligned(first));
    EXPECT_EQ(alloc::stats().in_use_bytes - s0.in_use_bytes, cls);
  }
  const auto s1 = alloc::stats();
  EXPECT_EQ(s1.in_use_bytes, s0.in_use_bytes);
  EXPECT_EQ(s1.cached_bytes - s0.cached_bytes, cls);
  {
    kael::Tensor t = kael::empty(shape);
    EXPECT_EQ(t.data_ptr(), first);
    EXPECT_EQ(alloc::stats().hits - s1.hits, 1);
  }
  alloc::empty_cache();
}

}  // namespace

// See Note [Per-thread block cache]: blocks may be freed on another thread than the one that
// allocated them, and a thread's cache moves into the shared one when it exits.
TEST(Allocator, CrossThreadFreesKeepTheCountsConsistent) {
  alloc::empty_cache();
  const auto before = alloc::stats();
  constexpr std::size_t kBytes = 256;  // a per-thread class
  std::vector<void*> blocks;
  for (int i = 0; i < 20; ++i) blocks.push_back(alloc::allocate(kBytes));
  const auto allocated = alloc::stats();
  EXPECT_EQ(allocated.in_use_bytes - before.in_use_bytes, 20 * 256);
  std::thread other([&] {
    for (void* p : blocks) alloc::deallocate(p, kBytes);
    const auto s = alloc::stats();  // this thread's cache is still alive here
    EXPECT_EQ(s.in_use_bytes, before.in_use_bytes);
    EXPECT_EQ(s.cached_bytes - before.cached_bytes, 20 * 256);
  });
  other.join();
  // The exited thread's cached blocks moved to the shared cache: still cached, and reusable.
  const auto after = alloc::stats();
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.cached_bytes - before.cached_bytes, 20 * 256);
  EXPECT_EQ(after.reserved_bytes, after.in_use_bytes + after.cached_bytes);
  const auto hits_before = alloc::stats().hits;
  void* again = alloc::allocate(kBytes);
  EXPECT_EQ(alloc::stats().hits, hits_before + 1);
  alloc::deallocate(again, kBytes);
  alloc::empty_cache();
  EXPECT_EQ(alloc::stats().cached_bytes, 0);
  EXPECT_EQ(alloc::stats().reserved_bytes, alloc::stats().in_use_bytes);
}

TEST(Allocator, ThreadsAllocatingConcurrentlyLoseNothing) {
  alloc::empty_cache();
  const auto before = alloc::stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<void*> mine;
      for (int i = 0; i < 2000; ++i) {
        const std::size_t n = 64 + static_cast<std::size_t>((i * 37 + t * 11) % 6000);
        void* p = alloc::allocate(n);
        std::memset(p, t, n);
        mine.push_back(p);
        if (mine.size() > 16) {
          alloc::deallocate(mine.front(), 64 + static_cast<std::size_t>(((i - 16) * 37 + t * 11) % 6000));
          mine.erase(mine.begin());
        }
      }
      const int base = 2000 - static_cast<int>(mine.size());
      for (std::size_t k = 0; k < mine.size(); ++k)
        alloc::deallocate(mine[k], 64 + static_cast<std::size_t>(((base + static_cast<int>(k)) * 37 + t * 11) % 6000));
    });
  }
  for (auto& th : threads) th.join();
  const auto after = alloc::stats();
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(after.reserved_bytes, after.in_use_bytes + after.cached_bytes);
  alloc::empty_cache();
  EXPECT_EQ(alloc::stats().cached_bytes, 0);
}

// ---- the Allocator interface, its registry and Storage (Note [Allocators and storage])

namespace {

// A second device's allocator in name only: blocks come from the heap, calls are counted.
class CountingAllocator final : public kael::Allocator {
 public:
  void* allocate(std::size_t nbytes) override {
    ++allocations;
    return nbytes == 0 ? nullptr : ::operator new(nbytes);
  }
  void free(void* ptr, std::size_t nbytes) noexcept override {
    ++frees;
    freed_bytes += static_cast<std::int64_t>(nbytes);
    ::operator delete(ptr);
  }
  kael::AllocatorStats stats() const override { return {}; }
  void empty_cache() override { ++empties; }
  int allocations = 0, frees = 0, empties = 0;
  std::int64_t freed_bytes = 0;
};

const kael::Device kCuda{kael::DeviceType::CUDA, 0};

// Registers an allocator for CUDA for the test's duration.
struct Registered {
  explicit Registered(kael::Allocator* a) { kael::register_allocator(kael::DeviceType::CUDA, a); }
  ~Registered() { kael::register_allocator(kael::DeviceType::CUDA, nullptr); }
};

}  // namespace

TEST(AllocatorRegistry, CpuIsRegisteredAndBehindTheInterface) {
  kael::Allocator* a = kael::get_allocator(kael::DeviceType::CPU);
  ASSERT_EQ(a, &alloc::instance);
  EXPECT_EQ(&kael::allocator_for("op", kael::kCPU), a);
  const kael::AllocatorStats before = a->stats();
  void* p = a->allocate(kOddSize);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p));
  const Delta d = delta(before, a->stats());
  EXPECT_EQ(d.in_use, static_cast<std::int64_t>(alloc::round_size(kOddSize)));
  a->free(p, kOddSize);
  EXPECT_EQ(delta(before, a->stats()).in_use, 0);
  a->empty_cache();
  EXPECT_EQ(a->stats().cached_bytes, alloc::stats().cached_bytes);
}

TEST(AllocatorRegistry, DeviceWithoutAllocatorRaisesNamingTheOp) {
  if (kael::cuda_backend_built()) GTEST_SKIP() << "this build has a CUDA backend";
  ASSERT_EQ(kael::get_allocator(kael::DeviceType::CUDA), nullptr);
  try {
    kael::allocator_for("allocator_stats", kCuda);
    FAIL() << "expected an error";
  } catch (const kael::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("allocator_stats: device 'cuda' requested, but this build of kael has no CUDA backend"),
              std::string::npos)
        << msg;
  }
  EXPECT_THROW(kael::Storage::allocate(64, kCuda, "empty"), kael::Error);
}

TEST(AllocatorRegistry, StorageUsesAndFreesThroughItsDevicesAllocator) {
  CountingAllocator fake;
  Registered r(&fake);
  const kael::AllocatorStats cpu_before = alloc::stats();
  {
    auto s = kael::Storage::allocate(1000, kCuda);
    EXPECT_EQ(s->allocator(), &fake);
    EXPECT_EQ(s->device(), kCuda);
    EXPECT_EQ(s->nbytes(), 1000u);
    EXPECT_EQ(fake.allocations, 1);
    EXPECT_EQ(fake.frees, 0);
  }
  EXPECT_EQ(fake.frees, 1);
  EXPECT_EQ(fake.freed_bytes, 1000);
  // Nothing went through the CPU allocator.
  const Delta d = delta(cpu_before, alloc::stats());
  EXPECT_EQ(d.misses + d.hits, 0);
}

TEST(AllocatorRegistry, CpuStorageRecordsTheCpuAllocator) {
  auto s = kael::Storage::allocate(100, kael::kCPU);
  EXPECT_EQ(s->allocator(), &alloc::instance);
  EXPECT_EQ(s->device(), kael::kCPU);
}

namespace {
int g_deleted = 0;
void* g_context = nullptr;
void count_delete(void* context) {
  ++g_deleted;
  g_context = context;
}
}  // namespace

TEST(Storage, ExternalMemoryRunsItsDeleterOnceWhenTheLastViewDies) {
  alignas(64) static float buffer[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int tag = 0;
  g_deleted = 0;
  const kael::AllocatorStats before = alloc::stats();
  {
    auto s = kael::Storage::external(buffer, sizeof(buffer), kael::kCPU, &count_delete, &tag);
    EXPECT_EQ(s->allocator(), nullptr);
    EXPECT_EQ(s->data(), buffer);
    const std::int64_t sizes[] = {8};
    kael::Tensor t(kael::TensorImpl::make(s, kael::ScalarType::Float32, kael::DimVector(kael::IntArrayRef(sizes)),
                                          kael::contiguous_strides(kael::IntArrayRef(sizes)), 0));
    s.reset();
    kael::Tensor v = kael::narrow(t, 0, 2, 3);
    t = kael::Tensor();
    EXPECT_EQ(g_deleted, 0);  // the view keeps the storage
    EXPECT_EQ(v.data<float>()[0], 3.0f);
  }
  EXPECT_EQ(g_deleted, 1);
  EXPECT_EQ(g_context, &tag);
  EXPECT_EQ(delta(before, alloc::stats()).in_use, 0);
}
