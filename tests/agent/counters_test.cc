// The agent's counters as the server's metrics receive them (AgentStats): every drop reason,
// the calls still queued when a session ended among them.
#include "agent/transport/counters.h"
#include "parity/v1/parity.pb.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

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

// The exit lines say each reason in the table's words; calls never sent for want of a server,
// in a session that sent nothing at all, say that no server was reached.
TEST(AgentCountersTest, TheExitLinesNameEachReasonInTheTablesWords) {
  AgentCounters c;
  for (int i = 0; i < 5; ++i) c.Captured();
  c.Dropped(DropReason::kDisconnected, 3);
  c.Dropped(DropReason::kStopped, 2);
  std::vector<std::string> lines = SummaryLines(c.Snapshot());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("5 captured, 0 sent (0 bytes), 5 dropped (disconnected 3, stopped 2)"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[1], std::string("not checked: 3 calls (disconnected): ") + kNoServerReached);
  EXPECT_EQ(lines[2],
            std::string("not checked: 2 calls (stopped): ") + DropReasonWhy(DropReason::kStopped));
  c.Sent();
  lines = SummaryLines(c.Snapshot());
  EXPECT_EQ(lines[1], std::string("not checked: 3 calls (disconnected): ") +
                          DropReasonWhy(DropReason::kDisconnected));
}

// docs/troubleshooting.md#why-a-call-was-not-checked is this table in words: one row per reason,
// no other, each with the exit line's very words (issue 65: calls to an unreachable server were
// counted `stopped` where configuration.md said `disconnected`). session_test.cc makes each
// reason happen as the rows say.
TEST(AgentCountersTest, TheDocsTableOfDropReasonsIsTheCodes) {
  std::ifstream in(std::string(PARITY_SOURCE_DIR) + "/docs/troubleshooting.md");
  ASSERT_TRUE(in) << "docs/troubleshooting.md";
  std::map<std::string, std::string> rows;  // reason -> the row's last cell
  bool inside = false;
  const std::regex row(R"(^\| `([a-z_]+)` \| .* \| (.*) \|$)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) inside = line == "## Why a call was not checked";
    std::smatch m;
    if (inside && std::regex_match(line, m, row)) rows[m[1]] = m[2];
  }
  std::set<std::string> documented;
  for (const auto& [reason, words] : rows) documented.insert(reason);
  std::set<std::string> expected = {"lost_in_flight"};  // its own counter, explained there too
  for (int r = 0; r < kDropReasons; ++r) {
    const auto reason = static_cast<DropReason>(r);
    expected.insert(DropReasonName(reason));
    ASSERT_EQ(rows.count(DropReasonName(reason)), 1u) << DropReasonName(reason);
    EXPECT_NE(rows[DropReasonName(reason)].find(std::string("`") + DropReasonWhy(reason) + "`"),
              std::string::npos)
        << DropReasonName(reason) << ": the docs say " << rows[DropReasonName(reason)]
        << "\nthe exit line says " << DropReasonWhy(reason);
  }
  EXPECT_EQ(documented, expected);
  EXPECT_NE(rows["disconnected"].find(std::string("`") + kNoServerReached + "`"),
            std::string::npos);
}

}  // namespace
}  // namespace parity::agent
