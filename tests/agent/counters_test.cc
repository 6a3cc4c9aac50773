// The agent's counters as the server's metrics receive them (AgentStats): every drop reason,
// the calls still queued when a session ended among them.
#include "agent/transport/counters.h"

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

TEST(AgentCountersTest, StatsCarryEveryDropReasonStoppedIncluded) {
  AgentCounters c;
  c.Captured();
  c.Dropped(DropReason::kQueueFull, 2);
  c.Dropped(DropReason::kStopped, 3);
  c.Dropped(DropReason::kCommunication);
  v1::AgentStats stats;
  c.FillStats(&stats);
  const auto& d = stats.dropped_calls();
  ASSERT_EQ(d.size(), static_cast<std::size_t>(kDropReasons));
  EXPECT_EQ(d.at("queue_full"), 2u);
  EXPECT_EQ(d.at("disconnected"), 0u);
  EXPECT_EQ(d.at("stopped"), 3u);
  EXPECT_EQ(d.at("communication"), 1u);
  // The same names the API's counters use.
  const Counters api = c.Snapshot();
  for (const auto& [reason, n] : d) EXPECT_EQ(api.dropped.at(reason), n) << reason;
}

}  // namespace
}  // namespace parity::agent
