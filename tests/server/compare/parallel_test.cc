// The compare pool: every task runs exactly once, whatever the thread count, and concurrent
// comparisons (several replay workers) share the pool without losing or repeating tasks.
#include "server/compare/parallel.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace parity::server::internal {
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

}  // namespace
}  // namespace parity::server::internal
