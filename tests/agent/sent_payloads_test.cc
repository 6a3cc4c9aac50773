#include "agent/transport/sent_payloads.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A payload owned by a shared string, as the agent's snapshots own theirs.
struct Payload {
  std::shared_ptr<const std::string> bytes;
  explicit Payload(std::string s) : bytes(std::make_shared<const std::string>(std::move(s))) {}
  absl::string_view view() const { return *bytes; }
};

TEST(SentPayloadsTest, EqualBytesAreNamedAgainAndOthersAreNot) {
  SentPayloads sent(1 << 20);
  const Payload a(std::string(1000, 'a'));
  bool earlier = true;
  EXPECT_FALSE(sent.Find(a.view(), &earlier));
  sent.Add(1, a.view(), a.bytes);
  // Within the same call: found, but kept by this call (not to be listed as an earlier one).
  ASSERT_TRUE(sent.Find(std::string(1000, 'a'), &earlier));
  EXPECT_FALSE(earlier);
  EXPECT_TRUE(sent.CommitCall().release.empty());
  // In a later call: an equal copy elsewhere in memory is found, and is from an earlier call.
  const std::string copy(1000, 'a');
  std::optional<uint64_t> id = sent.Find(copy, &earlier);
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, 1u);
  EXPECT_TRUE(earlier);
  // One byte differs, or the length: not the same payload.
  std::string other(1000, 'a');
  other[999] = 'b';
  EXPECT_FALSE(sent.Find(other, &earlier));
  EXPECT_FALSE(sent.Find(std::string(999, 'a'), &earlier));
  sent.CommitCall();
}

// The hash reads a sample of a large payload; equality is still decided on every byte.
TEST(SentPayloadsTest, AKnownPayloadIsNamedByItsIdWhileKept) {
  // The torch half names a snapshot it sent before by the id it got (add_known): found by id
  // and size, without its bytes; not once the table let it go, nor with another size.
  SentPayloads sent(4000);
  const Payload a(std::string(1000, 'a'));
  sent.Add(7, a.view(), a.bytes);
  sent.CommitCall();
  bool earlier = false;
  std::optional<uint64_t> id = sent.FindById(7, 1000, &earlier);
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, 7u);
  EXPECT_TRUE(earlier);
  EXPECT_FALSE(sent.FindById(7, 999, &earlier));
  EXPECT_FALSE(sent.FindById(8, 1000, &earlier));
  // Four more payloads of 1000 bytes: the cap (4000) releases the least recently used first.
  for (uint64_t i = 10; i < 14; ++i) {
    const Payload p(std::string(1000, static_cast<char>('b' + i)));
    sent.Add(i, p.view(), p.bytes);
    sent.CommitCall();
  }
  EXPECT_FALSE(sent.FindById(7, 1000, &earlier));
}

TEST(SentPayloadsTest, PayloadsThatDifferOutsideTheHashedSampleAreNotNamed) {
  SentPayloads sent(1 << 20);
  const Payload a(std::string(100000, 'a'));
  sent.Add(1, a.view(), a.bytes);
  sent.CommitCall();
  std::string b(100000, 'a');
  b[50000] = 'b';  // between two sampled windows, outside the first and last KiB
  bool earlier = false;
  EXPECT_FALSE(sent.Find(b, &earlier));
  EXPECT_TRUE(sent.Find(std::string(100000, 'a'), &earlier));
  // Kept too, b is found as itself, and a still as a.
  const Payload kept_b(b);
  sent.Add(2, kept_b.view(), kept_b.bytes);
  sent.CommitCall();
  EXPECT_EQ(sent.Find(b, &earlier), std::optional<uint64_t>(2));
  EXPECT_EQ(sent.Find(std::string(100000, 'a'), &earlier), std::optional<uint64_t>(1));
  sent.CommitCall();
}

TEST(SentPayloadsTest, LeastRecentlyUsedPayloadsAreReleasedToStayUnderTheCap) {
  SentPayloads sent(3000);
  const Payload p1(std::string(1000, '1')), p2(std::string(1000, '2')), p3(std::string(1000, '3')),
      p4(std::string(1000, '4'));
  sent.Add(1, p1.view(), p1.bytes);
  sent.Add(2, p2.view(), p2.bytes);
  EXPECT_TRUE(sent.CommitCall().release.empty());
  sent.Add(3, p3.view(), p3.bytes);
  EXPECT_TRUE(sent.CommitCall().release.empty());
  EXPECT_EQ(sent.bytes(), 3000u);
  // The call using 1 and adding 4: 2 is the least recently used one not in use, and goes.
  bool earlier = false;
  ASSERT_TRUE(sent.Find(p1.view(), &earlier));
  sent.Add(4, p4.view(), p4.bytes);
  SentPayloads::Commit c = sent.CommitCall();
  EXPECT_THAT(c.release, ElementsAre(2u));
  EXPECT_THAT(c.unkept, IsEmpty());
  EXPECT_EQ(sent.bytes(), 3000u);
  EXPECT_FALSE(sent.Find(p2.view(), &earlier));
  EXPECT_TRUE(sent.Find(p3.view(), &earlier));
  sent.CommitCall();
}

TEST(SentPayloadsTest, ACallsOwnPayloadsBeyondTheCapGoUnkept) {
  SentPayloads sent(2000);
  const Payload p1(std::string(1000, '1')), p2(std::string(1000, '2')), p3(std::string(1000, '3'));
  sent.Add(1, p1.view(), p1.bytes);
  sent.Add(2, p2.view(), p2.bytes);
  sent.Add(3, p3.view(), p3.bytes);
  SentPayloads::Commit c = sent.CommitCall();
  EXPECT_THAT(c.release, IsEmpty());
  EXPECT_THAT(c.unkept, ElementsAre(3u));  // the newest
  bool earlier = false;
  EXPECT_FALSE(sent.Find(p3.view(), &earlier));
  EXPECT_TRUE(sent.Find(p1.view(), &earlier));
  EXPECT_TRUE(sent.Keepable(500));
  EXPECT_FALSE(sent.Keepable(501));  // over a quarter of the cap
  sent.CommitCall();
}

TEST(SentPayloadsTest, AnAbortedCallLeavesNothingBehind) {
  SentPayloads sent(1 << 20);
  const Payload kept(std::string(100, 'k')), lost(std::string(100, 'l'));
  sent.Add(1, kept.view(), kept.bytes);
  sent.CommitCall();
  sent.Add(2, lost.view(), lost.bytes);
  sent.AbortCall();  // never sent: must never be named
  bool earlier = false;
  EXPECT_FALSE(sent.Find(lost.view(), &earlier));
  EXPECT_TRUE(sent.Find(kept.view(), &earlier));
  EXPECT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent.bytes(), 100u);
  // The owner is dropped with the entry.
  std::weak_ptr<const std::string> watch;
  {
    auto owner = std::make_shared<const std::string>(std::string(100, 'x'));
    watch = owner;
    sent.Add(3, *owner, owner);
  }
  EXPECT_FALSE(watch.expired());
  sent.AbortCall();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace parity::agent
