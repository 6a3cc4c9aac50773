// The verdicts of one stream go out in the order the calls arrived, whatever order the workers
// finish in; a message that did not parse stops the stream there; a failed write drops the rest;
// for an agent that takes them, verdicts ready together go in one VerdictBatch within its caps,
// and with a hold they wait for the verdicts of the calls still being checked.
#include "server/service/ordered_outbox.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/transport/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"

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

// A ServerMessage holding the verdict of call `sequence`, its api_name `padding` bytes long.
grpc::ByteBuffer VerdictMessage(uint64_t sequence, std::size_t padding = 0) {
  v1::ServerMessage m;
  m.mutable_verdict()->set_sequence(sequence);
  m.mutable_verdict()->set_api_name(std::string(padding, 'x'));
  return common::Serialize(m);
}

// What one write carried: the sequences of its verdicts, and whether they came as a batch.
struct Written {
  std::vector<uint64_t> sequences;
  bool batch = false;
  std::size_t bytes = 0;  // the message's serialized size
};

// Writes what the outbox lets go at `now`; `*held_until` says when held verdicts go.
std::vector<Written> DrainVerdicts(
    OrderedOutbox& box, OrderedOutbox::Clock::time_point now = OrderedOutbox::Clock::now(),
    std::optional<OrderedOutbox::Clock::time_point>* held_until = nullptr) {
  std::vector<Written> writes;
  grpc::ByteBuffer out;
  bool more = false;
  if (held_until != nullptr) held_until->reset();
  while (box.StartWrite(now, &out, &more, held_until)) {
    Written w;
    w.bytes = out.Length();
    v1::ServerMessage m;
    EXPECT_TRUE(common::Parse(out, &m));
    if (m.has_batch()) {
      w.batch = true;
      for (const v1::ServerMessage& item : m.batch().messages()) {
        EXPECT_TRUE(item.has_verdict());
        w.sequences.push_back(item.verdict().sequence());
      }
    } else if (m.has_verdict()) {
      w.sequences.push_back(m.verdict().sequence());
    }
    writes.push_back(w);
    box.WriteDone(true);
  }
  return writes;
}

std::vector<std::size_t> Sizes(const std::vector<Written>& writes) {
  std::vector<std::size_t> sizes;
  for (const Written& w : writes) sizes.push_back(w.sequences.size());
  return sizes;
}

TEST(OrderedOutboxTest, VerdictsReadyTogetherGoInOneBatchAfterTheServerInfoAlone) {
  OrderedOutbox box;
  box.BatchVerdicts(64, 1 << 20);
  v1::ServerMessage info;
  info.mutable_server_info()->set_server_version("v");
  box.Push(common::Serialize(info));
  std::vector<uint64_t> slots;
  for (int i = 0; i < 5; ++i) slots.push_back(box.Reserve());
  for (int i = 4; i >= 1; --i) box.Complete(slots[i], VerdictMessage(i + 1));
  grpc::ByteBuffer out;
  bool more = true;
  ASSERT_TRUE(box.StartWrite(&out, &more));
  v1::ServerMessage first;
  ASSERT_TRUE(common::Parse(out, &first));
  EXPECT_TRUE(first.has_server_info()) << "the ServerInfo goes alone, first";
  EXPECT_FALSE(more) << "verdicts 2-5 wait for the first";
  box.Complete(slots[0], VerdictMessage(1));  // while the ServerInfo is being written
  box.WriteDone(true);
  const std::vector<Written> writes = DrainVerdicts(box);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_TRUE(writes[0].batch);
  EXPECT_THAT(writes[0].sequences, ElementsAre(1, 2, 3, 4, 5));
  // A verdict alone in the outbox goes alone, as a plain verdict (no hold here: nothing waits).
  box.Complete(box.Reserve(), VerdictMessage(6));
  const std::vector<Written> alone = DrainVerdicts(box);
  ASSERT_EQ(alone.size(), 1u);
  EXPECT_FALSE(alone[0].batch);
  EXPECT_THAT(alone[0].sequences, ElementsAre(6));
}

TEST(OrderedOutboxTest, BatchesStayWithinTheirCountAndBytes) {
  {
    OrderedOutbox box;
    box.BatchVerdicts(3, 1 << 20);
    for (uint64_t i = 1; i <= 7; ++i) box.Complete(box.Reserve(), VerdictMessage(i));
    const std::vector<Written> writes = DrainVerdicts(box);
    EXPECT_THAT(Sizes(writes), ElementsAre(3, 3, 1));
    EXPECT_THAT(writes[2].sequences, ElementsAre(7));
  }
  {
    // 400 KiB verdicts under a 1 MiB cap: two a batch; a 2 MiB one alone; order kept.
    OrderedOutbox box;
    box.BatchVerdicts(64, 1 << 20);
    for (uint64_t i = 1; i <= 3; ++i) box.Complete(box.Reserve(), VerdictMessage(i, 400 << 10));
    box.Complete(box.Reserve(), VerdictMessage(4, 2 << 20));
    box.Complete(box.Reserve(), VerdictMessage(5, 400 << 10));
    const std::vector<Written> writes = DrainVerdicts(box);
    EXPECT_THAT(Sizes(writes), ElementsAre(2, 1, 1, 1));
    EXPECT_THAT(writes[1].sequences, ElementsAre(3));
    EXPECT_THAT(writes[2].sequences, ElementsAre(4));
    EXPECT_LE(writes[0].bytes, std::size_t{1} << 20);
    EXPECT_GT(writes[2].bytes, std::size_t{2} << 20) << "the large verdict went whole, alone";
  }
}

// With a hold, ready verdicts wait for the verdicts of the calls still being checked: until the
// hold ends (counted from the first of them), or a batch is full, or no call is left to wait for.
TEST(OrderedOutboxTest, ReadyVerdictsWaitForCompanyWithinTheHold) {
  using std::chrono::milliseconds;
  const OrderedOutbox::Clock::time_point t0{};  // times are the test's own
  std::optional<OrderedOutbox::Clock::time_point> held_until;
  {
    OrderedOutbox box;
    box.BatchVerdicts(4, 1 << 20, milliseconds(10));
    std::vector<uint64_t> slots;
    for (int i = 0; i < 7; ++i) slots.push_back(box.Reserve());
    box.Complete(slots[0], VerdictMessage(1), t0);
    EXPECT_THAT(DrainVerdicts(box, t0 + milliseconds(1), &held_until), IsEmpty());
    EXPECT_EQ(held_until, t0 + milliseconds(10)) << "the first ready verdict's hold";
    box.Complete(slots[1], VerdictMessage(2), t0 + milliseconds(5));
    EXPECT_THAT(DrainVerdicts(box, t0 + milliseconds(9), &held_until), IsEmpty());
    EXPECT_EQ(held_until, t0 + milliseconds(10)) << "a later verdict does not extend it";
    std::vector<Written> writes = DrainVerdicts(box, t0 + milliseconds(10), &held_until);
    ASSERT_EQ(writes.size(), 1u) << "the hold ended";
    EXPECT_THAT(writes[0].sequences, ElementsAre(1, 2));
    EXPECT_FALSE(held_until);
    // A full batch does not wait.
    for (int i = 2; i < 6; ++i)
      box.Complete(slots[i], VerdictMessage(i + 1), t0 + milliseconds(11));
    writes = DrainVerdicts(box, t0 + milliseconds(11), &held_until);
    ASSERT_EQ(writes.size(), 1u);
    EXPECT_THAT(writes[0].sequences, ElementsAre(3, 4, 5, 6));
    // The stream's last call in the server: its verdict has nothing to wait for.
    box.Complete(slots[6], VerdictMessage(7), t0 + milliseconds(12));
    writes = DrainVerdicts(box, t0 + milliseconds(12), &held_until);
    ASSERT_EQ(writes.size(), 1u);
    EXPECT_THAT(writes[0].sequences, ElementsAre(7));
    EXPECT_TRUE(box.drained());
  }
  {
    // A stream that stops (a message that did not parse) sends what is ready at once.
    OrderedOutbox box;
    box.BatchVerdicts(64, 1 << 20, milliseconds(10));
    const uint64_t a = box.Reserve(), b = box.Reserve();
    box.Reserve();
    box.Complete(a, VerdictMessage(1), t0);
    EXPECT_THAT(DrainVerdicts(box, t0, &held_until), IsEmpty());
    box.Complete(b, std::nullopt, t0);
    const std::vector<Written> writes = DrainVerdicts(box, t0, &held_until);
    ASSERT_EQ(writes.size(), 1u);
    EXPECT_THAT(writes[0].sequences, ElementsAre(1));
  }
  {
    // Without a hold (the default), verdicts go as soon as a write can start.
    OrderedOutbox box;
    box.BatchVerdicts(64, 1 << 20);
    const uint64_t a = box.Reserve();
    box.Reserve();
    box.Complete(a, VerdictMessage(1), t0);
    const std::vector<Written> writes = DrainVerdicts(box, t0, &held_until);
    ASSERT_EQ(writes.size(), 1u);
    EXPECT_FALSE(held_until);
  }
}

// A write carries gRPC's buffer hint only when the next one goes right behind it: hinted while
// what is left waits for company, a full batch would sit in gRPC's buffer until the hold ends
// (issue 65: 129 calls gave (1.08 s, 64), (1.08 s, 64), (1.08 s, 1) with a 1 s hold). Verdicts
// ready behind full batches, one call still being checked: every full batch goes at once, and the
// hint is set exactly when the next write is not held.
TEST(OrderedOutboxTest, NoBufferHintOnAWriteWhoseSuccessorIsHeld) {
  const OrderedOutbox::Clock::time_point t0{};
  for (const int ready : {129, 150, 170, 128, 64, 65}) {
    OrderedOutbox box;
    box.BatchVerdicts(64, 1 << 20, std::chrono::seconds(1));
    std::vector<uint64_t> slots;
    for (int i = 0; i <= ready; ++i) slots.push_back(box.Reserve());  // the last one pending
    for (int i = 0; i < ready; ++i) box.Complete(slots[i], VerdictMessage(i + 1), t0);
    grpc::ByteBuffer out;
    bool more = false;
    int written = 0;
    std::optional<OrderedOutbox::Clock::time_point> held_until;
    while (box.StartWrite(t0, &out, &more, &held_until)) {
      v1::ServerMessage m;
      ASSERT_TRUE(common::Parse(out, &m));
      const int n = m.has_batch() ? m.batch().messages_size() : 1;
      EXPECT_EQ(n, 64) << ready << ": only full batches go before the hold ends";
      written += n;
      box.WriteDone(true);
      const bool next_goes = written + 64 <= ready;
      EXPECT_EQ(more, next_goes) << ready << " ready, " << written << " written";
    }
    EXPECT_EQ(written, ready / 64 * 64) << ready;
    EXPECT_EQ(held_until.has_value(), ready % 64 != 0) << ready << ": the rest waits for company";
  }
}

TEST(OrderedOutboxTest, WithoutBatchingEveryVerdictGoesAlone) {
  OrderedOutbox box;  // an agent whose Hello does not say it takes batches
  for (uint64_t i = 1; i <= 4; ++i) box.Complete(box.Reserve(), VerdictMessage(i));
  const std::vector<Written> writes = DrainVerdicts(box);
  EXPECT_THAT(Sizes(writes), ElementsAre(1, 1, 1, 1));
  for (const Written& w : writes) EXPECT_FALSE(w.batch);
}

}  // namespace
}  // namespace parity::server
