// The bounded work queue: admits while there is room, parks the rest in FIFO order and resumes
// each parked producer exactly once when a worker admits its item.
#include "server/service/work_queue.h"

#include <condition_variable>
#include <mutex>
#include <vector>

#include "gtest/gtest.h"

namespace parity::server {
namespace {

// A gate the test opens to let the workers run.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::vector<int> ran, resumed;
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return open; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(WorkQueueTest, ParksWhenFullAndAdmitsInOrder) {
  Gate gate;
  WorkQueue q(/*max_items=*/2, /*max_bytes=*/1 << 20, /*workers=*/1);
  // Not started: nothing runs, so the queue fills deterministically.
  auto item = [&](int id) {
    return WorkItem{[&gate, id] {
                      gate.Wait();
                      std::lock_guard<std::mutex> lock(gate.mu);
                      gate.ran.push_back(id);
                    },
                    10};
  };
  auto resume = [&](int id) {
    return [&gate, id] {
      std::lock_guard<std::mutex> lock(gate.mu);
      gate.resumed.push_back(id);
    };
  };
  EXPECT_TRUE(q.PushOrPark(item(1), resume(1)));
  EXPECT_TRUE(q.PushOrPark(item(2), resume(2)));
  EXPECT_FALSE(q.PushOrPark(item(3), resume(3)));
  EXPECT_FALSE(q.PushOrPark(item(4), resume(4)));
  EXPECT_EQ(q.parked(), 2u);
  q.Start();
  gate.Open();
  q.Stop();  // runs everything queued and parked
  EXPECT_EQ(gate.ran, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(gate.resumed, (std::vector<int>{3, 4}));
  EXPECT_EQ(q.parked(), 0u);
}

TEST(WorkQueueTest, ByteBoundParksButAnOversizedItemRunsAlone) {
  WorkQueue q(/*max_items=*/100, /*max_bytes=*/100, /*workers=*/1);
  std::vector<int> ran;
  EXPECT_TRUE(q.PushOrPark({[&] { ran.push_back(1); }, 1000}, {}));  // empty queue: admitted
  EXPECT_FALSE(q.PushOrPark({[&] { ran.push_back(2); }, 1}, {}));    // 1000 + 1 > 100
  q.Start();
  q.Stop();
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
}

TEST(WorkQueueTest, ReportsDepth) {
  std::vector<std::pair<int64_t, int64_t>> depths;
  WorkQueue q(4, 1000, 1, [&](int64_t calls, int64_t bytes) { depths.emplace_back(calls, bytes); });
  q.PushOrPark({[] {}, 7}, {});
  ASSERT_FALSE(depths.empty());
  EXPECT_EQ(depths.back(), std::make_pair(int64_t{1}, int64_t{7}));
  q.Start();
  q.Stop();
  EXPECT_EQ(depths.back(), std::make_pair(int64_t{0}, int64_t{0}));
}

}  // namespace
}  // namespace parity::server
