// The verdicts of one stream go out in the order the calls arrived, whatever order the workers
// finish in; a message that did not parse stops the stream there; a failed write drops the rest.
#include "server/service/ordered_outbox.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

grpc::ByteBuffer Message(const std::string& text) {
  grpc::Slice slice(text);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Text(const grpc::ByteBuffer& b) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(b.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Writes everything ready, one write at a time, each completing with `ok`.
std::vector<std::string> Drain(OrderedOutbox& box, bool ok = true) {
  std::vector<std::string> written;
  grpc::ByteBuffer out;
  bool more = false;
  while (box.StartWrite(&out, &more)) {
    written.push_back(Text(out));
    box.WriteDone(ok);
  }
  return written;
}

TEST(OrderedOutboxTest, VerdictsGoOutInArrivalOrder) {
  OrderedOutbox box;
  box.Push(Message("info"));
  const uint64_t a = box.Reserve(), b = box.Reserve(), c = box.Reserve();
  box.Complete(c, Message("c"));
  box.Complete(b, Message("b"));
  EXPECT_THAT(Drain(box), ElementsAre("info"));  // b and c wait for a
  EXPECT_FALSE(box.drained());
  box.Complete(a, Message("a"));
  EXPECT_THAT(Drain(box), ElementsAre("a", "b", "c"));
  EXPECT_TRUE(box.drained());
}

TEST(OrderedOutboxTest, OneWriteAtATimeWithAHintWhenMoreAreReady) {
  OrderedOutbox box;
  box.Complete(box.Reserve(), Message("a"));
  box.Complete(box.Reserve(), Message("b"));
  grpc::ByteBuffer out;
  bool more = false;
  ASSERT_TRUE(box.StartWrite(&out, &more));
  EXPECT_TRUE(more);
  EXPECT_TRUE(box.writing());
  EXPECT_FALSE(box.StartWrite(&out, &more)) << "a second write while one is outstanding";
  box.WriteDone(true);
  ASSERT_TRUE(box.StartWrite(&out, &more));
  EXPECT_EQ(Text(out), "b");
  EXPECT_FALSE(more);
}

TEST(OrderedOutboxTest, AnUnparsedMessageStopsTheStreamThere) {
  OrderedOutbox box;
  const uint64_t a = box.Reserve(), bad = box.Reserve(), c = box.Reserve();
  box.Complete(c, Message("c"));
  box.Complete(bad, std::nullopt);
  box.Complete(a, Message("a"));
  EXPECT_THAT(Drain(box), ElementsAre("a"));  // the calls after the bad message get nothing
  EXPECT_TRUE(box.drained());
  box.Complete(box.Reserve(), Message("late"));
  EXPECT_THAT(Drain(box), IsEmpty());
}

TEST(OrderedOutboxTest, AFailedWriteDropsTheRest) {
  OrderedOutbox box;
  box.Complete(box.Reserve(), Message("a"));
  box.Complete(box.Reserve(), Message("b"));
  EXPECT_THAT(Drain(box, /*ok=*/false), ElementsAre("a"));
  box.Complete(box.Reserve(), Message("c"));
  box.Push(Message("d"));
  EXPECT_THAT(Drain(box), IsEmpty());
  EXPECT_TRUE(box.drained());
}

}  // namespace
}  // namespace parity::server
