// The agent's send queue: bounds by count and bytes, drop vs block.
#include "agent/transport/bounded_queue.h"

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
  ASSERT_EQ(q.Pop(&v, 0ms), PopResult::kItem);
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
  ASSERT_EQ(q.Pop(&v, 0ms), PopResult::kItem);
  EXPECT_EQ(v, 3);
}

// A consumer blocked in Pop() is woken by Close() (not by its one-hour timeout), and told so.
TEST(BoundedQueueTest, CloseWakesABlockedConsumerAndRefusesProducers) {
  BoundedQueue<int> q(4, 100);
  PopResult result = PopResult::kItem;
  std::thread consumer([&] {
    int v;
    result = q.Pop(&v, std::chrono::hours(1));
  });
  while (q.WaitingForTesting() == 0) std::this_thread::yield();  // the consumer is blocked
  q.Close();
  consumer.join();
  EXPECT_EQ(result, PopResult::kClosed);
  EXPECT_EQ(q.TryPush(1, 1), PushResult::kClosed);
  EXPECT_EQ(q.Clear(), 0u);
}

// TryPop (the sender gathering the calls already waiting into a batch) takes them in order, frees
// their room, and never waits.
TEST(BoundedQueueTest, TryPopTakesWhatWaitsInOrderWithoutWaiting) {
  BoundedQueue<int> q(2, 100);
  int v = 0;
  EXPECT_FALSE(q.TryPop(&v));
  ASSERT_EQ(q.TryPush(1, 60), PushResult::kOk);
  ASSERT_EQ(q.TryPush(2, 30), PushResult::kOk);
  EXPECT_EQ(q.TryPush(3, 1), PushResult::kFull);
  ASSERT_TRUE(q.TryPop(&v));
  EXPECT_EQ(v, 1);
  EXPECT_EQ(q.bytes(), 30u);
  EXPECT_EQ(q.TryPush(3, 70), PushResult::kOk);  // its room is free again
  ASSERT_TRUE(q.TryPop(&v));
  EXPECT_EQ(v, 2);
  ASSERT_TRUE(q.TryPop(&v));
  EXPECT_EQ(v, 3);
  EXPECT_FALSE(q.TryPop(&v));
  EXPECT_EQ(q.size(), 0u);
}

TEST(BoundedQueueTest, PopTellsATimeoutFromAnItem) {
  BoundedQueue<int> q(4, 100);
  int v = 0;
  EXPECT_EQ(q.Pop(&v, 1ms), PopResult::kTimeout);
  ASSERT_EQ(q.TryPush(7, 1), PushResult::kOk);
  EXPECT_EQ(q.Pop(&v, 1ms), PopResult::kItem);
  EXPECT_EQ(v, 7);
}

}  // namespace
}  // namespace parity::agent
