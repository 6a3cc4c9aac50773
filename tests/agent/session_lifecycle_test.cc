// One session per process, with msprobe's PrecisionDebugger semantics: start() begins or resumes,
// stop() pauses and returns at once, step() always advances, and the session ends after the last
// configured step. Both loop styles (msprobe's per-iteration start/stop/step, and start once)
// give the same calls, names, steps and counts.
#include <algorithm>
#include <cstdlib>
#include <set>
#include <tuple>

#include "agent/transport/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agent/agent_testing.h"

namespace parity::agent {
namespace {

using namespace testing;  // NOLINT(build/namespaces): the agent tests' own helpers

enum class Loop { kStartOnce, kMsprobe };

// Trains `steps` steps in one loop style and closes the session; returns its counters.
Counters Train(Loop loop, const common::AgentConfig& config, int steps) {
  std::unique_ptr<TorchAgent> agent = MakeAgent(config);
  torch::manual_seed(0);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  if (loop == Loop::kStartOnce) agent->Start();
  for (int s = 0; s < steps; ++s) {
    if (loop == Loop::kMsprobe) agent->Start();
    TrainStep(w, x);
    if (loop == Loop::kMsprobe) agent->Stop();
    agent->Step(nullptr);
  }
  agent->Close();
  return agent->GetCounters();
}

// What a call is called, whichever loop captured it.
using Name = std::tuple<int64_t, std::string, std::string, uint64_t, int, std::string>;
std::vector<Name> Names(const std::vector<Seen>& calls, int32_t rank) {
  std::vector<Name> out;
  for (const Seen& c : calls) {
    if (c.rank == rank) {
      out.emplace_back(c.step, c.op, c.overload, c.call_index, c.phase, c.forward_op);
    }
  }
  std::sort(out.begin(), out.end());  // the server's workers record in completion order
  return out;
}

TEST(SessionLifecycleTest, BothLoopStylesGiveTheSameCallsStepsAndCounts) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.step = {2, 3};
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "0", 1);
  const Counters once = Train(Loop::kStartOnce, config, 6);
  ::setenv("RANK", "1", 1);
  const Counters msprobe = Train(Loop::kMsprobe, config, 6);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  const std::vector<Name> a = Names(server.calls(), 0), b = Names(server.calls(), 1);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  std::set<int64_t> steps;
  for (const Name& n : a) steps.insert(std::get<0>(n));
  EXPECT_THAT(steps, ::testing::ElementsAre(2, 3)) << "the configured steps, numbered as run";
  EXPECT_EQ(once.captured, msprobe.captured);
  EXPECT_EQ(once.verdicts, msprobe.verdicts);
  EXPECT_EQ(once.captured, a.size());
  EXPECT_EQ(once.reconnects + msprobe.reconnects, 0u) << "one stream per session";
  ExpectEveryCallAccountedFor(once);
  ExpectEveryCallAccountedFor(msprobe);
}

// The per-signature budget counts over the session, not per start(): msprobe's loop does not
// check every call again at every iteration.
TEST(SessionLifecycleTest, TheSignatureBudgetSurvivesStopAndStart) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.parity.capture.max_checks_per_signature = 1;
  const Counters once = Train(Loop::kStartOnce, config, 4);
  const Counters msprobe = Train(Loop::kMsprobe, config, 4);
  EXPECT_GT(once.sampled_out, 0u);
  EXPECT_EQ(once.captured, msprobe.captured);
  EXPECT_EQ(once.sampled_out, msprobe.sampled_out);
}

// stop() pauses and returns without waiting for the server; start() resumes on the same stream.
TEST(SessionLifecycleTest, StopReturnsAtOnceAndStartResumesTheSameStream) {
  RecordingServer server(0, "", /*workers=*/1);
  auto agent = StartAgent(Config(server.port()));
  ASSERT_TRUE(agent->Flush(20000));  // connected
  server.Wedge();
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  RunWithHangDetector(std::chrono::seconds(60), [&] { agent->Stop(); });
  Counters c = agent->GetCounters();
  EXPECT_GT(c.captured, 0u);
  EXPECT_LT(c.verdicts, c.captured) << "stop() must not wait for the verdicts";
  EXPECT_FALSE(agent->capturing());
  const uint64_t captured = c.captured;
  TrainStep(w, torch::randn({3, 4}));  // paused: nothing captured
  EXPECT_EQ(agent->GetCounters().captured, captured);
  server.Release();
  agent->Start();
  EXPECT_TRUE(agent->capturing());
  TrainStep(w, torch::randn({3, 4}));
  agent->Step(nullptr);
  agent->Close();
  c = agent->GetCounters();
  EXPECT_GT(c.captured, captured) << "capture resumed";
  EXPECT_EQ(c.verdicts, c.captured);
  EXPECT_EQ(c.reconnects, 0u) << "the same stream";
}

// After the last step the config lists, capture ends for good (msprobe's rule) and what is
// queued is delivered without the training waiting.
TEST(SessionLifecycleTest, TheSessionEndsAfterTheLastConfiguredStep) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.step = {0};
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  agent->Step(nullptr);
  EXPECT_TRUE(agent->ended());
  EXPECT_FALSE(agent->capturing());
  const uint64_t captured = agent->GetCounters().captured;
  EXPECT_GT(captured, 0u);
  agent->Start();  // msprobe's loop goes on calling it: nothing more is captured
  TrainStep(w, torch::randn({3, 4}));
  agent->Step(nullptr);
  agent->Close();
  const Counters c = agent->GetCounters();
  EXPECT_EQ(c.captured, captured);
  EXPECT_EQ(c.verdicts, captured);
  for (const Seen& s : server.calls()) EXPECT_EQ(s.step, 0);
}

TEST(SessionLifecycleTest, ARankOutsideTheRankListChecksNothing) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.rank = {1};
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  const Counters c = Train(Loop::kMsprobe, config, 2);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(c.captured, 0u);
  EXPECT_TRUE(server.calls().empty());
}

// A replica report that breaks a rule of ReplicaReport (a group without this rank, as a wrong
// set_replica_group would give; a tensor name over 1,024 bytes) is refused by the agent with its
// reason and counted unsent, instead of reaching the server, which would end the stream with the
// calls in flight on it: the stream goes on, a good report and the calls after it arrive.
TEST(SessionLifecycleTest, ABadReplicaReportIsRefusedHereAndTheStreamGoesOn) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  ASSERT_TRUE(agent->Flush(20000));  // connected
  const int32_t no_rank_0[] = {1, 2};
  const int32_t rank_0[] = {0};
  const std::string long_name(2000, 'w');
  const char* names[] = {"w"};
  const char* long_names[] = {long_name.c_str()};
  const uint64_t digests[] = {7};
  const uint64_t bytes[] = {4};
  parity_replica_report r{};
  r.size = sizeof(r);
  r.step = 0;
  r.kind = "parameters";
  r.op = "AdamW.step";
  r.algorithm = "crc32c";
  r.count = 1;
  r.digests = digests;
  r.bytes = bytes;
  r.group = no_rank_0;
  r.group_size = 2;
  r.names = names;
  EXPECT_EQ(parity_session_report_replicas(agent->session(), &r), 0);
  r.group = rank_0;
  r.group_size = 1;
  r.names = long_names;
  EXPECT_EQ(parity_session_report_replicas(agent->session(), &r), 0);
  EXPECT_EQ(agent->GetCounters().replica_unsent, 2u);
  r.names = names;
  EXPECT_EQ(parity_session_report_replicas(agent->session(), &r), 1);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  ASSERT_TRUE(agent->Flush(20000)) << "the good report answered, the calls' verdicts too";
  const Counters c = agent->GetCounters();
  EXPECT_EQ(c.replica_reports, 1u);
  EXPECT_EQ(c.replica_skip, 1u) << "a group of one: nothing to compare";
  EXPECT_EQ(c.reconnects, 0u) << "the stream never ended";
  EXPECT_GT(c.captured, 0u);
  EXPECT_EQ(c.verdicts, c.captured);
}

}  // namespace
}  // namespace parity::agent
