// The agent's send queue: bounds by count and bytes, drop vs block.
#include "agent/transport/bounded_queue.h"

#include <string>
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

// PopGathered: a consumer woken by one item waits for a batch to gather, and whatever ends that
// wait (the batch, half the byte bound, Wake, Close) hands it the oldest item at once. The linger
// is an hour: a wait that did not end would hang the test (ctest's timeout), not pass it.
TEST(BoundedQueueTest, AGatheringConsumerTakesTheBatchOnceItIsThere) {
  BoundedQueue<int> q(16, 1000);
  ASSERT_EQ(q.TryPush(1, 1), PushResult::kOk);
  int v = 0;
  PopResult got = PopResult::kTimeout;
  std::thread consumer([&] { got = q.PopGathered(&v, 1h, absl::Hours(1), 3); });
  while (!q.GatheringForTesting()) std::this_thread::yield();
  ASSERT_EQ(q.TryPush(2, 1), PushResult::kOk);  // two of three: it goes on gathering
  EXPECT_TRUE(q.GatheringForTesting());
  ASSERT_EQ(q.TryPush(3, 1), PushResult::kOk);  // the batch
  consumer.join();
  EXPECT_EQ(got, PopResult::kItem);
  EXPECT_EQ(v, 1) << "the oldest first";
  EXPECT_FALSE(q.GatheringForTesting());
  EXPECT_TRUE(q.TryPop(&v) && v == 2);
  EXPECT_TRUE(q.TryPop(&v) && v == 3);
}

TEST(BoundedQueueTest, WakeCloseAndHalfTheBytesEndAGatheringWait) {
  for (const char* end : {"wake", "close", "bytes"}) {
    SCOPED_TRACE(end);
    BoundedQueue<int> q(16, 100);
    ASSERT_EQ(q.TryPush(1, 10), PushResult::kOk);
    int v = 0;
    PopResult got = PopResult::kTimeout;
    std::thread consumer([&] { got = q.PopGathered(&v, 1h, absl::Hours(1), 8); });
    while (!q.GatheringForTesting()) std::this_thread::yield();
    if (std::string(end) == "wake") q.Wake();  // a flush: what is there goes now
    if (std::string(end) == "close") q.Close();
    if (std::string(end) == "bytes") {
      ASSERT_EQ(q.TryPush(2, 45), PushResult::kOk);  // 55 of 100
    }
    consumer.join();
    EXPECT_EQ(got, PopResult::kItem) << "the item that was there is taken, closed or not";
    EXPECT_EQ(v, 1);
  }
}

TEST(BoundedQueueTest, PopGatheredWithoutABatchIsPop) {
  BoundedQueue<int> q(4, 100);
  int v = 0;
  EXPECT_EQ(q.PopGathered(&v, 1ms, absl::Hours(1), 1), PopResult::kTimeout);
  ASSERT_EQ(q.TryPush(7, 1), PushResult::kOk);
  EXPECT_EQ(q.PopGathered(&v, 1h, absl::Hours(1), 1), PopResult::kItem);  // batch 1: no wait
  EXPECT_EQ(v, 7);
  ASSERT_EQ(q.TryPush(8, 1), PushResult::kOk);
  EXPECT_EQ(q.PopGathered(&v, 1h, absl::ZeroDuration(), 8), PopResult::kItem);  // no linger
  EXPECT_EQ(v, 8);
}

}  // namespace
}  // namespace parity::agent
