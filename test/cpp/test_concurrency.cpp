// Loops without the caller's lock (Note [Concurrency] in kael/core/concurrency.h) and storages
// that grow in place (Note [Growing a storage in place] in kael/core/storage.h). A std::mutex
// stands in for the GIL: every thread holds it around its calls, which allow their loops to drop
// it, exactly as the Python extension does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kael/core/allocator.h"
#include "kael/core/concurrency.h"
#include "kael/native/pointwise.h"
#include "kael/ops.h"
#include "test_util.h"

namespace kael {
namespace {

namespace alloc = cpu_allocator;

TEST(Concurrency, GrowKeepsTheContentsAndMovesTheMemory) {
  auto s = Storage::allocate(16, kCPU);
  std::memcpy(s->data(), "0123456789abcdef", 16);
  void* before = s->data();
  s->grow(8, "resize_");  // already large enough: nothing moves
  EXPECT_EQ(s->data(), before);
  s->grow(4096, "resize_");
  EXPECT_NE(s->data(), before);
  EXPECT_EQ(s->nbytes(), 4096u);
  EXPECT_EQ(std::memcmp(s->data(), "0123456789abcdef", 16), 0);
}

TEST(Concurrency, MemoryKaelDidNotAllocateCannotGrow) {
  float data[2] = {1, 2};
  auto s = Storage::external(data, sizeof(data), kCPU, nullptr, nullptr);
  const std::string message = testing::error_of([&] { s->grow(64, "resize_"); });
  EXPECT_NE(message.find("resize_: Trying to resize storage that is not resizable"), std::string::npos) << message;
  EXPECT_EQ(s->data(), data);
}

TEST(Concurrency, PinnedGrowthRetiresTheOldMemoryUntilTheLastUnpin) {
  constexpr std::size_t kOld = std::size_t{1} << 20, kNew = std::size_t{4} << 20;
  auto s = Storage::allocate(kOld, kCPU);
  const auto in_use = [] { return alloc::stats().in_use_bytes; };
  const auto base = in_use();
  s->pin();
  s->pin();
  s->grow(kNew, "resize_");
  EXPECT_EQ(in_use() - base, static_cast<std::int64_t>(alloc::round_size(kNew)));  // old one still held
  s->unpin();
  EXPECT_EQ(in_use() - base, static_cast<std::int64_t>(alloc::round_size(kNew)));
  s->unpin();
  EXPECT_EQ(in_use() - base, static_cast<std::int64_t>(alloc::round_size(kNew) - alloc::round_size(kOld)));
  // unpinned: the old memory goes at once
  s->grow(2 * kNew, "resize_");
  EXPECT_EQ(in_use() - base,
            static_cast<std::int64_t>(alloc::round_size(2 * kNew) - alloc::round_size(kOld)));
}

TEST(Concurrency, SectionsAreInactiveUnlessTheCallAllowsThem) {
  const Tensor t = native::alloc_cpu(std::vector<std::int64_t>{4}, ScalarType::Float32);
  {
    UnlockedSection section;
    EXPECT_FALSE(section.active());
    EXPECT_TRUE(section.own(t).is_same(t));
  }
  AllowUnlock allow(true);
  UnlockedSection section;
  ASSERT_TRUE(section.active());
  const Tensor& mine = section.own(t);
  EXPECT_FALSE(mine.is_same(t));
  EXPECT_EQ(mine.data_ptr(), t.data_ptr());
  EXPECT_EQ(std::vector<std::int64_t>(mine.sizes().begin(), mine.sizes().end()), std::vector<std::int64_t>{4});
  // the private geometry does not follow a resize of the original
  native::resize_tensor(t, std::vector<std::int64_t>{2});
  EXPECT_EQ(mine.numel(), 4);
  section.unlock();  // no caller lock installed: nothing to drop
  UnlockedSection nested;
  EXPECT_TRUE(nested.active());
}

// The GIL of this test.
std::mutex caller_mutex;

struct InstallMutexAsCallerLock {
  InstallMutexAsCallerLock() {
    set_caller_lock({[]() -> void* {
                       caller_mutex.unlock();
                       return &caller_mutex;
                     },
                     [](void*) { caller_mutex.lock(); }});
  }
  ~InstallMutexAsCallerLock() { set_caller_lock({}); }
};

// Readers multiply a shared tensor with their loops running unlocked while a resizer shrinks it,
// grows its storage in place and empties the allocator's cache: every reader sees one consistent
// state of the tensor, and its loop the memory it started on.
TEST(Concurrency, LoopsWithoutTheCallersLockSurviveResizesAndEmptyCache) {
  InstallMutexAsCallerLock install;
  constexpr std::int64_t kN = 1 << 18;
  Tensor t;
  {
    std::lock_guard<std::mutex> lock(caller_mutex);
    t = native::alloc_cpu(std::vector<std::int64_t>{kN}, ScalarType::Float32);
    native::fill_cpu(t, Scalar(1.0));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, large{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::lock_guard<std::mutex> lock(caller_mutex);
        AllowUnlock allow(true);
        const Tensor out = kael::mul(t, 1.0);
        if (out.numel() >= kN) large.fetch_add(1);
        // values the resizer writes: only ones, or memory the growth copied (ones)
        const float* p = out.data<float>();
        for (std::int64_t j = 0; j < out.numel(); j += 997)
          if (p[j] != 1.0f) bad.fetch_add(1);
      }
    });
  }
  std::thread resizer([&] {
    std::int64_t n = kN;
    while (!stop.load()) {
      std::lock_guard<std::mutex> lock(caller_mutex);
      native::resize_tensor(t, std::vector<std::int64_t>{1});
      alloc::empty_cache();
      if (n < 4 * kN) {
        n += 4096;
        native::resize_tensor(t, std::vector<std::int64_t>{n});  // grows the storage in place: new memory
        native::fill_cpu(t, Scalar(1.0));
      } else {
        native::resize_tensor(t, std::vector<std::int64_t>{n});  // fits: nothing is written
      }
      alloc::empty_cache();
    }
  });
  for (auto& th : readers) th.join();
  stop = true;
  resizer.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(large.load(), 0);
}

}  // namespace
}  // namespace kael
