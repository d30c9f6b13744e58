// kael's thread pool (Note [Thread pool] and Note [Pieces and stealing] in
// kael/runtime/threads.h): coverage of the range, inline small and nested calls, exceptions,
// concurrent callers, resizing, fork.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "kael/core/error.h"
#include "kael/runtime/threads.h"

namespace {

using Chunks = std::vector<std::pair<std::int64_t, std::int64_t>>;

// Restores the thread count a test changes.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : previous_(kael::intra_op_threads()) { kael::set_num_threads(n); }
  ~ThreadCount() { kael::set_num_threads(previous_); }

 private:
  int previous_;
};

Chunks run_chunks(std::int64_t begin, std::int64_t end, std::int64_t grain) {
  std::mutex mutex;
  Chunks chunks;
  kael::parallel_for(begin, end, grain, [&](std::int64_t b, std::int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

// The pieces parallel_for cuts [0, n) into on `threads` threads: ceil(n / grain), at most 8 per
// thread, of equal size but the last.
std::int64_t expected_pieces(int threads, std::int64_t n, std::int64_t grain) {
  if (threads == 1 || n <= grain) return 1;
  const std::int64_t wanted = std::min<std::int64_t>((n + grain - 1) / grain, 8 * std::int64_t{threads});
  const std::int64_t size = (n + wanted - 1) / wanted;
  return (n + size - 1) / size;
}

TEST(ThreadPool, PiecesCoverTheRangeOnceAndFollowTheGrain) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadCount count(threads);
    for (std::int64_t n : {0, 1, 5, 7, 64, 1000, 100003}) {
      for (std::int64_t grain : {1, 4, 64, 100000}) {
        const Chunks chunks = run_chunks(10, 10 + n, grain);
        if (n == 0) {
          EXPECT_TRUE(chunks.empty());
          continue;
        }
        ASSERT_EQ(static_cast<std::int64_t>(chunks.size()), expected_pieces(threads, n, grain))
            << threads << " " << n << " " << grain;
        std::int64_t next = 10;
        for (const auto& [b, e] : chunks) {
          EXPECT_EQ(b, next);
          EXPECT_LT(b, e);
          next = e;
        }
        EXPECT_EQ(next, 10 + n);
      }
    }
  }
}

TEST(ThreadPool, SmallRangesRunOnTheCallingThreadWithoutThePool) {
  ThreadCount count(4);
  kael::parallel_trace_start();
  const auto caller = std::this_thread::get_id();
  bool same_thread = false;
  kael::parallel_for(0, 4096, 4096, [&](std::int64_t, std::int64_t) {
    same_thread = std::this_thread::get_id() == caller && !kael::in_parallel_region();
  });
  EXPECT_TRUE(same_thread);
  EXPECT_EQ(kael::parallel_trace_stop().regions, 0);
}

TEST(ThreadPool, EveryThreadRunsAPiece) {
  ThreadCount count(3);
  kael::parallel_trace_start();
  std::mutex mutex;
  std::set<std::thread::id> ids;
  // Each piece waits (up to 60 s) until 3 threads have run one: a thread that is first cannot
  // take every piece before the others wake.
  kael::parallel_for(0, 3000, 1, [&](std::int64_t, std::int64_t) {
    EXPECT_TRUE(kael::in_parallel_region());
    {
      std::lock_guard<std::mutex> lock(mutex);
      ids.insert(std::this_thread::get_id());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (ids.size() >= 3) break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  const kael::ParallelTrace t = kael::parallel_trace_stop();
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(t.regions, 1);
  EXPECT_EQ(t.threads, 3);
  EXPECT_EQ(t.max_region_threads, 3);
  EXPECT_EQ(kael::pool_workers(), 2);
  EXPECT_FALSE(kael::in_parallel_region());
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadCount count(4);
  std::atomic<int> inner_chunks{0};
  std::atomic<bool> same_thread{true};
  kael::parallel_for(0, 4, 1, [&](std::int64_t b, std::int64_t e) {
    const auto outer = std::this_thread::get_id();
    kael::parallel_for(b * 1000, e * 1000, 1, [&](std::int64_t, std::int64_t) {
      inner_chunks.fetch_add(1);
      if (std::this_thread::get_id() != outer) same_thread = false;
    });
  });
  EXPECT_EQ(inner_chunks.load(), 4);  // one inline call per outer piece
  EXPECT_TRUE(same_thread.load());
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadCount count(4);
  for (std::int64_t failing : {0, 1, 3}) {  // the caller's piece and workers' pieces
    std::atomic<int> ran{0};
    try {
      kael::parallel_for(0, 4, 1, [&](std::int64_t b, std::int64_t) {
        ran.fetch_add(1);
        KAEL_CHECK_VALUE(b != failing, "chunk " << b << " failed");
      });
      FAIL() << "no exception";
    } catch (const kael::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("chunk " + std::to_string(failing) + " failed"), std::string::npos);
    }
    EXPECT_GE(ran.load(), 1);
    EXPECT_FALSE(kael::in_parallel_region());
  }
  // Every piece throws: one exception, the first, reaches the caller.
  try {
    kael::parallel_for(0, 4, 1, [](std::int64_t b, std::int64_t) { throw std::runtime_error(std::to_string(b)); });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what == "0" || what == "1" || what == "2" || what == "3") << what;
  }
  // The pool still works afterwards.
  EXPECT_EQ(run_chunks(0, 4, 1).size(), 4u);
}

TEST(ThreadPool, ConcurrentCallersEachGetTheirWholeRange) {
  ThreadCount count(3);
  constexpr int kCallers = 6;
  std::vector<std::thread> callers;
  std::vector<std::int64_t> sums(kCallers, 0);
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([c, &sums] {
      for (int round = 0; round < 50; ++round) {
        std::vector<std::int64_t> values(20000);
        kael::parallel_for(0, 20000, 100, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) values[static_cast<std::size_t>(i)] = i + c;
        });
        std::int64_t s = 0;
        for (std::int64_t v : values) s += v;
        sums[static_cast<std::size_t>(c)] += s;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c)
    EXPECT_EQ(sums[static_cast<std::size_t>(c)], 50 * (std::int64_t{19999} * 20000 / 2 + std::int64_t{20000} * c));
}

TEST(ThreadPool, WorkersFollowTheCount) {
  for (int threads : {4, 2, 5, 1, 3}) {
    ThreadCount count(threads);
    const Chunks chunks = run_chunks(0, 1000, 1);
    EXPECT_EQ(static_cast<std::int64_t>(chunks.size()), expected_pieces(threads, 1000, 1));
    if (threads > 1) {
      EXPECT_EQ(kael::pool_workers(), threads - 1);  // a 1-thread count never reaches the pool
    }
  }
}

TEST(ThreadPool, ForkedChildRunsOnANewPool) {
  ThreadCount count(2);
  // the parent's pool has its worker
  ASSERT_EQ(static_cast<std::int64_t>(run_chunks(0, 100, 1).size()), expected_pieces(2, 100, 1));
  ASSERT_EQ(kael::pool_workers(), 1);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: no worker survived fork; the first region starts one, and both threads run.
    int code = kael::pool_workers() == 0 ? 0 : 1;
    kael::parallel_trace_start();
    std::atomic<std::int64_t> total{0};
    kael::parallel_for(0, 1000, 1, [&](std::int64_t b, std::int64_t e) {
      std::int64_t s = 0;
      for (std::int64_t i = b; i < e; ++i) s += i;
      total.fetch_add(s);
    });
    const kael::ParallelTrace t = kael::parallel_trace_stop();
    if (t.max_region_threads != 2) code |= 2;
    if (total.load() != 999 * 1000 / 2) code |= 4;
    if (kael::pool_workers() != 1) code |= 8;
    if (kael::openmp_threads() != 1) code |= 16;  // oneDNN's OpenMP runs on one thread here
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(kael::openmp_threads(), 2);  // the parent is unchanged
  EXPECT_EQ(static_cast<std::int64_t>(run_chunks(0, 100, 1).size()), expected_pieces(2, 100, 1));
}

}  // namespace
