// The helper pool: every task runs exactly once, whatever the thread count, and concurrent
// callers (several replay workers) share the pool without losing or repeating tasks; a split
// copy is a memcpy.
#include "common/base/parallel.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace parity::common {
namespace {

TEST(ParallelForTest, RunsEveryTaskExactlyOnce) {
  for (int threads : {1, 2, 4, 16}) {
    for (int64_t tasks : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(tasks));
      ParallelFor(tasks, threads, [&](int64_t k) { runs[static_cast<std::size_t>(k)]++; });
      for (const auto& r : runs) EXPECT_EQ(r.load(), 1) << threads << " threads, " << tasks;
    }
  }
}

TEST(ParallelForTest, ConcurrentCallersShareThePool) {
  constexpr int kCallers = 6;
  constexpr int64_t kTasks = 5000;
  std::vector<std::vector<std::atomic<int>>> runs(kCallers);
  for (auto& r : runs) r = std::vector<std::atomic<int>>(kTasks);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 5; ++round) {
        ParallelFor(kTasks, 3, [&](int64_t k) { runs[c][static_cast<std::size_t>(k)]++; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (const auto& r : runs) {
    for (const auto& n : r) EXPECT_EQ(n.load(), 5);
  }
}

// Many short jobs with more helpers wanted than tasks: a helper woken for a job finds its tasks
// already taken by the job's owner (which takes them outside the pool's lock) and must wait
// again, not join a job that is not there. An H200 host's replay_bench died of exactly that
// (a null job) in 5 of 6 whole runs, once decode copies used the pool too.
TEST(ParallelForTest, HelperWokenForTakenTasksWaitsAgain) {
  constexpr int kCallers = 4;
  constexpr int kRounds = 20000;
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        const int64_t tasks = 2 + round % 3;
        ParallelFor(tasks, 4, [&](int64_t k) {
          for (volatile int spin = 0; spin < 200; spin = spin + 1) {
          }
          total.fetch_add(k + 1);
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  int64_t expected = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int64_t tasks = 2 + round % 3;
    expected += tasks * (tasks + 1) / 2;
  }
  EXPECT_EQ(total.load(), expected * kCallers);
}

// Every byte lands where a memcpy puts it, whatever the split: sizes below, at and above the
// piece, not multiples of a page, and more threads than pieces.
TEST(ParallelCopyTest, CopiesEveryByteForEverySplit) {
  for (std::size_t bytes :
       {std::size_t{0}, std::size_t{1}, kParallelCopyPiece - 1, 2 * kParallelCopyPiece,
        2 * kParallelCopyPiece + 4097, 7 * kParallelCopyPiece + 13}) {
    std::vector<unsigned char> src(bytes);
    for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    for (int threads : {1, 2, 3, 4, 16}) {
      std::vector<unsigned char> dst(bytes, 0);
      ParallelCopy(dst.data(), src.data(), bytes, threads);
      EXPECT_TRUE(dst == src) << bytes << " bytes, " << threads << " threads";
    }
  }
}

TEST(ParallelCopyTest, DecodeThreadsSettingIsClamped) {
  const int saved = DecodeThreads();
  EXPECT_GE(saved, 1);
  SetDecodeThreads(0);
  EXPECT_EQ(DecodeThreads(), 1);
  SetDecodeThreads(3);
  EXPECT_EQ(DecodeThreads(), 3);
  SetDecodeThreads(saved);
}

}  // namespace
}  // namespace parity::common
