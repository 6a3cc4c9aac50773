// Server metrics as Prometheus text: names, labels, pre-created series, bounded op labels.
#include "server/metrics/metrics.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Scrape(prometheus::Registry& r) {
  return prometheus::TextSerializer().Serialize(r.Collect());
}

TEST(ServerMetricsTest, CountsCallsByPhaseAndVerdict) {
  prometheus::Registry registry;
  ServerMetrics m(registry);
  std::string text = Scrape(registry);
  // Known series exist at zero before the first call, so alerts and rate() see them.
  EXPECT_THAT(text, HasSubstr("parity_server_calls_checked_total{phase=\"backward\",verdict="
                              "\"error\"} 0"));
  EXPECT_THAT(text, HasSubstr("parity_build_info{"));
  m.CallReceived(wire::kPhaseForward);
  m.CallReceived(wire::kPhaseForward);
  m.CallChecked(wire::kPhaseForward, CheckStatus::kError, "aten::gelu", 0.002, 0.0005);
  m.CallChecked(wire::kPhaseForward, CheckStatus::kPass, "aten::add", 0.02, 0.001);
  m.MessageBytes(1000);
  m.QueueDepth(3, 4096);
  m.QueueCapacity(64, int64_t{2} << 30, 4);
  m.AgentConnected();
  text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("parity_server_calls_received_total{phase=\"forward\"} 2"));
  EXPECT_THAT(
      text, HasSubstr("parity_server_calls_checked_total{phase=\"forward\",verdict=\"error\"} 1"));
  EXPECT_THAT(text, HasSubstr("parity_server_op_errors_total{op=\"aten::gelu\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("op=\"aten::add\"")));  // errors only
  EXPECT_THAT(text, HasSubstr("parity_server_received_bytes_total 1000"));
  EXPECT_THAT(text, HasSubstr("parity_server_queue_calls 3"));
  EXPECT_THAT(text, HasSubstr("parity_server_queue_bytes 4096"));
  EXPECT_THAT(text, HasSubstr("parity_server_queue_capacity_calls 64"));
  EXPECT_THAT(text, HasSubstr("parity_server_queue_capacity_bytes 2147483648"));
  EXPECT_THAT(text, HasSubstr("parity_server_workers 4"));
  EXPECT_THAT(text, HasSubstr("parity_server_connected_agents 1"));
  // 2 ms and 20 ms replays: one in the 3 ms bucket, both in the 30 ms one.
  EXPECT_THAT(text, HasSubstr("parity_server_replay_seconds_bucket{le=\"0.003\"} 1"));
  EXPECT_THAT(text, HasSubstr("parity_server_replay_seconds_bucket{le=\"0.03\"} 2"));
  EXPECT_THAT(text, HasSubstr("parity_server_replay_seconds_sum 0.022"));
}

TEST(ServerMetricsTest, OpLabelsAreBoundedAndAgentReasonsClosed) {
  prometheus::Registry registry;
  ServerMetrics m(registry, /*max_op_labels=*/2);
  for (const char* op : {"aten::a", "aten::b", "aten::c", "aten::d", "aten::a"}) {
    m.CallChecked(wire::kPhaseBackward, CheckStatus::kError, op, 0, 0);
  }
  m.AgentDropped("queue_full", 5);
  m.AgentDropped("stopped", 3);
  m.AgentDropped("made-up reason from a client", 2);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("parity_server_op_errors_total{op=\"aten::a\"} 2"));
  EXPECT_THAT(text, HasSubstr("parity_server_op_errors_total{op=\"other\"} 2"));
  EXPECT_THAT(text, Not(HasSubstr("aten::c")));
  EXPECT_THAT(text, HasSubstr("parity_server_agent_dropped_calls_total{reason=\"queue_full\"} 5"));
  EXPECT_THAT(text, HasSubstr("parity_server_agent_dropped_calls_total{reason=\"stopped\"} 3"));
  EXPECT_THAT(text, HasSubstr("parity_server_agent_dropped_calls_total{reason=\"other\"} 2"));
}

// Every family from start-up (issue 66): each stream-ending code at zero, the op family through
// its "other" series; a rank's two series from its Hello, at zero.
TEST(ServerMetricsTest, FamiliesExistBeforeTheirFirstEvent) {
  prometheus::Registry registry;
  ServerMetrics m(registry);
  std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("parity_server_stream_errors_total{code=\"UNAUTHENTICATED\"} 0"));
  EXPECT_THAT(text, HasSubstr("parity_server_stream_errors_total{code=\"INVALID_ARGUMENT\"} 0"));
  EXPECT_THAT(text, Not(HasSubstr("code=\"OK\"")));
  EXPECT_THAT(text, HasSubstr("parity_server_op_errors_total{op=\"other\"} 0"));
  EXPECT_THAT(text, Not(HasSubstr("parity_server_rank_checked_total{")));
  m.RankSeen(7);
  text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("parity_server_rank_checked_total{rank=\"7\"} 0"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_errors_total{rank=\"7\"} 0"));
  m.StreamError("UNAUTHENTICATED");
  EXPECT_THAT(Scrape(registry),
              HasSubstr("parity_server_stream_errors_total{code=\"UNAUTHENTICATED\"} 1"));
}

// Which ranks fail, within a bound a 4,096-rank run stays under: ranks from kMaxRankLabels up
// share rank="other".
TEST(ServerMetricsTest, RankLabelsSayWhichRanksFailWithinABound) {
  prometheus::Registry registry;
  ServerMetrics m(registry);
  m.RankChecked(0, CheckStatus::kPass);
  m.RankChecked(0, CheckStatus::kPass);
  m.RankChecked(3, CheckStatus::kError);
  m.RankChecked(3, CheckStatus::kPass);
  m.RankChecked(ServerMetrics::kMaxRankLabels - 1, CheckStatus::kError);
  m.RankChecked(ServerMetrics::kMaxRankLabels, CheckStatus::kError);
  m.RankChecked(100000, CheckStatus::kWarning);
  const std::string text = Scrape(registry);
  EXPECT_THAT(text, HasSubstr("parity_server_rank_checked_total{rank=\"0\"} 2"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_errors_total{rank=\"0\"} 0"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_checked_total{rank=\"3\"} 2"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_errors_total{rank=\"3\"} 1"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_errors_total{rank=\"4095\"} 1"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_checked_total{rank=\"other\"} 2"));
  EXPECT_THAT(text, HasSubstr("parity_server_rank_errors_total{rank=\"other\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("rank=\"4096\"")));
  EXPECT_THAT(text, Not(HasSubstr("rank=\"100000\"")));
}

TEST(ServerMetricsTest, CatalogueNamesFollowPrometheusConventions) {
  prometheus::Registry registry;
  ServerMetrics m(registry);
  // Series of open label sets (op, code, rank) appear once seen.
  m.CallChecked(wire::kPhaseForward, CheckStatus::kError, "aten::mm", 0, 0);
  m.StreamError("INVALID_ARGUMENT");
  m.RankChecked(0, CheckStatus::kError);
  const std::string text = Scrape(registry);
  for (const MetricInfo& info : MetricCatalogue()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(absl::StartsWith(info.name, "parity_"));
    EXPECT_EQ(absl::EndsWith(info.name, "_total"), std::string(info.type) == "counter");
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# TYPE ", info.name, " ", info.type, "\n")));
  }
}

}  // namespace
}  // namespace parity::server
