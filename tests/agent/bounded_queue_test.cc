// The agent's send queue: bounds by count and bytes, drop vs block.
#include "agent/bounded_queue.h"

#include <thread>

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

using namespace std::chrono_literals;

TEST(BoundedQueueTest, DropsNewestWhenFullByCountOrBytes) {
  BoundedQueue<int> q(2, 100);
  EXPECT_EQ(q.TryPush(1, 10), PushResult::kOk);
  EXPECT_EQ(q.TryPush(2, 10), PushResult::kOk);
  EXPECT_EQ(q.TryPush(3, 10), PushResult::kFull);  // count
  int v = 0;
  ASSERT_TRUE(q.Pop(&v, 0ms));
  EXPECT_EQ(v, 1);
  EXPECT_EQ(q.TryPush(4, 95), PushResult::kFull);  // bytes: 10 + 95 > 100
  EXPECT_FALSE(q.HasRoom(95));
  EXPECT_TRUE(q.HasRoom(90));
}

TEST(BoundedQueueTest, AnOversizedItemFitsOnlyAnEmptyQueue) {
  BoundedQueue<int> q(10, 100);
  EXPECT_EQ(q.TryPush(1, 1000), PushResult::kOk);
  EXPECT_EQ(q.TryPush(2, 1), PushResult::kFull);
}

TEST(BoundedQueueTest, BlockWaitsForRoomWhileAllowedAndGivesUpWhenNot) {
  BoundedQueue<int> q(1, 100);
  ASSERT_EQ(q.TryPush(1, 1), PushResult::kOk);
  // Not allowed to wait (server gone): returns at once.
  EXPECT_EQ(q.PushWait(2, 1, 0ms, [] { return false; }), PushResult::kFull);
  // Allowed: a consumer makes room.
  std::thread consumer([&] {
    int v;
    q.Pop(&v, 10s);
  });
  EXPECT_EQ(q.PushWait(3, 1, 10s, [] { return true; }), PushResult::kOk);
  consumer.join();
  int v = 0;
  ASSERT_TRUE(q.Pop(&v, 0ms));
  EXPECT_EQ(v, 3);
}

TEST(BoundedQueueTest, CloseWakesConsumersAndRefusesProducers) {
  BoundedQueue<int> q(4, 100);
  std::thread consumer([&] {
    int v;
    EXPECT_FALSE(q.Pop(&v, 30s));  // woken by Close, not by the timeout
  });
  q.Close();
  consumer.join();
  EXPECT_EQ(q.TryPush(1, 1), PushResult::kClosed);
  EXPECT_EQ(q.Clear(), 0u);
}

}  // namespace
}  // namespace parity::agent
