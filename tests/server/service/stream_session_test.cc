// The Check stream's protocol without gRPC's server: a StreamSession fed serialized messages,
// with a recording context (the service) and output (the reactor). Each state and each rule of
// the stream a message can break; the gRPC adapter is exercised by server_tests.
#include "server/service/stream_session.h"
#include "parity/v1/parity.pb.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/transport/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/metrics.h"
#include "server/service/byte_budget.h"
#include "server/service/check_service.h"
#include "server/service/grpc_bytes.h"

namespace parity::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Keeps the reports it is given, with their mailboxes.
class FakeReplicas : public ReplicaSink {
 public:
  void Report(ReplicaReport report, std::shared_ptr<ReplicaMailbox> mailbox) override {
    reports.push_back(std::move(report));
    mailboxes.push_back(std::move(mailbox));
  }
  std::vector<ReplicaReport> reports;
  std::vector<std::shared_ptr<ReplicaMailbox>> mailboxes;
};

class FakeContext : public StreamContext, public CallSink {
 public:
  FakeContext() : metrics_(registry_) { options_.server.kept_blob_bytes = 1 << 20; }

  const ServiceOptions& options() const override { return options_; }
  ServerMetrics* metrics() const override { return &metrics_; }
  ByteBudget* partial_blobs() override { return &partial_; }
  ByteBudget* kept_offered() override { return &kept_; }
  void NoteConfigDigest(const std::string& run_id, int32_t rank,
                        const std::string& digest) override {
    digests.push_back(run_id + "/" + std::to_string(rank) + "/" + digest);
  }
  v1::AgentStats ExchangeAgentStats(const std::string& agent,
                                    const v1::AgentStats& stats) override {
    v1::AgentStats last = last_stats[agent];
    last_stats[agent] = stats;
    return last;
  }
  bool Enqueue(WorkItem, std::function<void()>) override { return true; }
  CallSink& sink() const override { return const_cast<FakeContext&>(*this); }
  CallOutcome Run(const CallOrigin& origin, const ServerCall& call,
                  const common::BlobSource&) override {
    checked.push_back(origin.run_id + ":" + call.id.op_name);
    CallOutcome check;
    check.status = CheckStatus::kPass;
    return check;
  }
  void StreamEnded(const CallOrigin*, bool) override {}

  std::string Scrape() { return prometheus::TextSerializer().Serialize(registry_.Collect()); }

  ServiceOptions options_;
  std::vector<std::string> digests;
  std::map<std::string, v1::AgentStats> last_stats;
  std::vector<std::string> checked;

 private:
  prometheus::Registry registry_;
  mutable ServerMetrics metrics_;
  ByteBudget partial_{64 << 20};
  ByteBudget kept_{64 << 20};
};

class FakeOutput : public StreamOutput {
 public:
  void Answer(MessageBytes message, bool batch_verdicts, std::string who) override {
    v1::ServerMessage m;
    ASSERT_TRUE(ParseMessage(message, &m));
    answers.push_back(m);
    batches = batch_verdicts;
    this->who = std::move(who);
  }
  void Queue(CallWork work) override { queued.push_back(std::move(work)); }
  void Post(MessageBytes message) override {
    v1::ServerMessage m;
    ASSERT_TRUE(ParseMessage(message, &m));
    posted.push_back(m);
  }
  std::vector<v1::ServerMessage> posted;

  std::vector<v1::ServerMessage> answers;
  bool batches = false;
  std::string who;
  std::vector<CallWork> queued;
};

v1::AgentMessage HelloMessage(int32_t rank = 1) {
  v1::AgentMessage m;
  v1::Hello& h = *m.mutable_hello();
  h.set_protocol_version(kProtocolVersion);
  h.set_run_id("run-a");
  h.set_hostname("node-3");
  h.set_pid(77);
  h.set_rank(rank);
  h.set_world_size(4);
  h.set_config_digest("d1");
  h.set_accepts_batches(true);
  return m;
}

v1::AgentMessage CallMessage(uint64_t sequence, const std::string& op = "aten::gelu") {
  v1::AgentMessage m;
  m.mutable_call()->set_sequence(sequence);
  m.mutable_call()->set_op_name(op);
  m.mutable_call()->set_phase(v1::PHASE_FORWARD);
  return m;
}

class StreamSessionTest : public ::testing::Test {
 protected:
  absl::Status Send(const v1::AgentMessage& m) {
    MessageBytes bytes = SerializeMessage(m);
    return session_.OnMessage(bytes);
  }
  std::vector<uint64_t> QueuedSequences() const {
    std::vector<uint64_t> out;
    for (const CallWork& w : output_.queued) {
      if (!w.raw) continue;
      v1::AgentMessage m;
      MessageBytes copy = *w.raw;  // a view: Parse reads it
      if (ParseMessage(copy, &m)) out.push_back(m.call().sequence());
    }
    return out;
  }

  FakeContext context_;
  FakeOutput output_;
  StreamSession session_{&context_, &output_, "ipv4:10.0.0.9:5000", 42};
};

TEST_F(StreamSessionTest, AHelloMovesItFromAwaitingHelloToStreamingAndIsAnsweredOnce) {
  EXPECT_EQ(session_.state(), StreamState::kAwaitingHello);
  EXPECT_EQ(session_.origin(), nullptr);
  ASSERT_TRUE(Send(HelloMessage()).ok());
  EXPECT_EQ(session_.state(), StreamState::kStreaming);
  ASSERT_EQ(output_.answers.size(), 1u);
  const v1::ServerInfo& info = output_.answers[0].server_info();
  EXPECT_EQ(info.protocol_version(), kProtocolVersion);
  EXPECT_EQ(info.session_id(), "42");
  EXPECT_TRUE(info.accepts_batches());
  EXPECT_EQ(info.kept_blob_bytes(), 1u << 20);  // offered from the server-wide budget
  EXPECT_TRUE(output_.batches);
  EXPECT_EQ(output_.who, "rank 1");
  ASSERT_NE(session_.origin(), nullptr);
  EXPECT_EQ(session_.origin()->run_id, "run-a");
  EXPECT_EQ(session_.origin()->hostname, "node-3");
  EXPECT_THAT(context_.digests, ElementsAre("run-a/1/d1"));

  const absl::Status again = Send(HelloMessage());
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.message()), HasSubstr("a second Hello"));
  EXPECT_EQ(output_.answers.size(), 1u);
}

TEST_F(StreamSessionTest, EveryMessageButHelloIsRefusedBeforeIt) {
  v1::AgentMessage stats;
  stats.mutable_stats()->set_captured_calls(3);
  v1::AgentMessage batch;
  *batch.mutable_batch()->add_messages() = CallMessage(1);
  for (const v1::AgentMessage& m : {CallMessage(1), stats, batch}) {
    const absl::Status s = Send(m);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << m.DebugString();
    EXPECT_THAT(std::string(s.message()), HasSubstr("before Hello; the first message must be"));
  }
  EXPECT_TRUE(output_.queued.empty());
  EXPECT_EQ(session_.state(), StreamState::kAwaitingHello);
  EXPECT_EQ(session_.messages(), 3u);
}

TEST_F(StreamSessionTest, AHelloOfARankOutsideRankListOrAnotherProtocolIsRefused) {
  context_.options_.rank_list = {0, 2};
  const absl::Status rank = Send(HelloMessage(1));
  EXPECT_EQ(rank.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(rank.message()), HasSubstr("rank 1 is not in this server's rank_list"));
  v1::AgentMessage old = HelloMessage(2);
  old.mutable_hello()->set_protocol_version(kProtocolVersion + 1);
  EXPECT_THAT(std::string(Send(old).message()), HasSubstr("unsupported protocol version"));
  EXPECT_EQ(session_.state(), StreamState::kAwaitingHello);
  EXPECT_TRUE(output_.answers.empty());
  ASSERT_TRUE(Send(HelloMessage(2)).ok());
  EXPECT_EQ(session_.state(), StreamState::kStreaming);
}

TEST_F(StreamSessionTest, CallsAreQueuedInOrderAndASequenceThatDoesNotIncreaseEndsTheStream) {
  ASSERT_TRUE(Send(HelloMessage()).ok());
  ASSERT_TRUE(Send(CallMessage(1)).ok());
  v1::AgentMessage batch;
  *batch.mutable_batch()->add_messages() = CallMessage(2);
  *batch.mutable_batch()->add_messages() = CallMessage(5);
  ASSERT_TRUE(Send(batch).ok());
  EXPECT_THAT(QueuedSequences(), ElementsAre(1u, 2u, 5u));
  EXPECT_EQ(output_.queued[0].message, 1u);  // the stream's second message (Hello was first)
  EXPECT_EQ(output_.queued[2].message, 2u);
  const absl::Status s = Send(CallMessage(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("ApiCall.sequence 5 after 5"));
  EXPECT_EQ(output_.queued.size(), 3u);
  EXPECT_THAT(context_.Scrape(),
              HasSubstr("parity_server_calls_received_total{phase=\"forward\"} 4"));
}

TEST_F(StreamSessionTest, ABatchMayNotHoldAHelloOrABatch) {
  ASSERT_TRUE(Send(HelloMessage()).ok());
  v1::AgentMessage hello_in_batch;
  *hello_in_batch.mutable_batch()->add_messages() = HelloMessage();
  EXPECT_THAT(std::string(Send(hello_in_batch).message()),
              HasSubstr("only ApiCall, TensorChunk and BlobRelease may be items"));
  v1::AgentMessage nested;
  *nested.mutable_batch()->add_messages()->mutable_batch()->add_messages() = CallMessage(1);
  EXPECT_THAT(std::string(Send(nested).message()),
              HasSubstr("a MessageBatch inside a MessageBatch"));
  v1::AgentMessage empty;
  EXPECT_THAT(std::string(Send(empty).message()), HasSubstr("empty AgentMessage"));
  std::string garbage = "\x0a\xff\xff\xff";  // a field claiming more bytes than there are
  grpc::Slice slice(garbage);
  MessageBytes bad = FromGrpc(grpc::ByteBuffer(&slice, 1));
  EXPECT_FALSE(session_.OnMessage(bad).ok());
  EXPECT_TRUE(output_.queued.empty());
}

TEST_F(StreamSessionTest, DrainingAndFinishingGoOneWay) {
  ASSERT_TRUE(Send(HelloMessage()).ok());
  session_.Finish();  // not draining yet: nothing happens
  EXPECT_EQ(session_.state(), StreamState::kStreaming);
  EXPECT_TRUE(session_.EndReading());
  EXPECT_EQ(session_.state(), StreamState::kDraining);
  EXPECT_FALSE(session_.EndReading());
  session_.Finish();
  EXPECT_EQ(session_.state(), StreamState::kFinished);
  EXPECT_FALSE(session_.EndReading());
  EXPECT_EQ(session_.state(), StreamState::kFinished);
  EXPECT_NE(session_.origin(), nullptr);  // the stream's end still knows whose it was
  EXPECT_EQ(StreamStateName(StreamState::kDraining), "draining");
}

TEST_F(StreamSessionTest, AStreamEndingBeforeItsHelloNeverReachesStreaming) {
  EXPECT_TRUE(session_.EndReading());
  EXPECT_EQ(Send(HelloMessage()).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(session_.state(), StreamState::kDraining);
  EXPECT_EQ(session_.origin(), nullptr);
  EXPECT_TRUE(output_.answers.empty());
}

TEST_F(StreamSessionTest,
       TheWorkerStepChecksACallWithTheStreamsOriginAndReportsBytesThatDoNotParse) {
  ASSERT_TRUE(Send(HelloMessage()).ok());
  ASSERT_TRUE(Send(CallMessage(1, "aten::silu")).ok());
  ASSERT_EQ(output_.queued.size(), 1u);
  CallAnswer checked = session_.RunCall(std::move(output_.queued[0]));
  ASSERT_TRUE(checked.error.ok()) << checked.error;
  ASSERT_TRUE(checked.verdict.has_value());
  v1::ServerMessage verdict;
  ASSERT_TRUE(ParseMessage(*checked.verdict, &verdict));
  EXPECT_EQ(verdict.verdict().sequence(), 1u);  // encoded by the worker step from the call
  EXPECT_EQ(verdict.verdict().status(), v1::VERDICT_STATUS_PASS);
  EXPECT_EQ(verdict.verdict().api_name(), "aten::silu.0");
  EXPECT_THAT(context_.checked, ElementsAre("run-a:aten::silu"));

  // A call whose own bytes break inside: the reaction queues it (it does not parse calls), the
  // worker finds it malformed and says which message it was.
  std::string call;
  CallMessage(2).call().SerializeToString(&call);
  call += "\x0a\x7f";          // a field claiming 127 bytes, with none after it
  std::string bytes = "\x12";  // AgentMessage.call, length-delimited
  bytes += static_cast<char>(call.size());
  bytes += call;
  grpc::Slice slice(bytes);
  MessageBytes broken = FromGrpc(grpc::ByteBuffer(&slice, 1));
  ASSERT_TRUE(session_.OnMessage(broken).ok());
  ASSERT_EQ(output_.queued.size(), 2u);
  CallAnswer bad = session_.RunCall(std::move(output_.queued[1]));
  EXPECT_FALSE(bad.verdict.has_value());
  EXPECT_EQ(bad.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.error.message()), HasSubstr("message 3"));
  EXPECT_EQ(context_.checked.size(), 1u);
}

TEST_F(StreamSessionTest, StatsCountEachIncreaseOnce) {
  ASSERT_TRUE(Send(HelloMessage()).ok());
  v1::AgentMessage stats;
  stats.mutable_stats()->set_captured_calls(10);
  (*stats.mutable_stats()->mutable_dropped_calls())["queue_full"] = 2;
  ASSERT_TRUE(Send(stats).ok());
  stats.mutable_stats()->set_captured_calls(15);
  ASSERT_TRUE(Send(stats).ok());
  v1::AgentMessage bye;
  *bye.mutable_goodbye()->mutable_final_stats() = stats.stats();
  bye.mutable_goodbye()->mutable_final_stats()->set_captured_calls(16);
  ASSERT_TRUE(Send(bye).ok());
  const std::string text = context_.Scrape();
  EXPECT_THAT(text, HasSubstr("parity_server_agent_captured_calls_total 16"));
  EXPECT_THAT(text, HasSubstr("reason=\"queue_full\"} 2"));
}

// A ReplicaReport goes to the replica checker with the stream's run and rank, and the checker's
// outcome comes back on this stream, out of the calls' order, until the session closes.
TEST_F(StreamSessionTest, AReplicaReportReachesTheCheckerAndItsOutcomeComesBackOnTheStream) {
  FakeReplicas replicas;
  context_.options_.replicas = &replicas;
  ASSERT_TRUE(Send(HelloMessage(/*rank=*/1)).ok());
  v1::AgentMessage m;
  v1::ReplicaReport& r = *m.mutable_replica();
  r.add_group(0);
  r.add_group(1);
  r.set_step(2);
  r.set_kind("parameters");
  r.set_op("AdamW.step");
  r.set_algorithm("crc32c");
  r.add_digests()->set_name("w");
  ASSERT_TRUE(Send(m).ok());
  ASSERT_EQ(replicas.reports.size(), 1u);
  EXPECT_EQ(replicas.reports[0].run_id, "run-a");
  EXPECT_EQ(replicas.reports[0].rank, 1);
  ReplicaOutcome outcome;
  outcome.group = {0, 1};
  outcome.step = 2;
  outcome.status = CheckStatus::kError;
  outcome.mismatches.push_back({"w", {}, {0, 1}});
  replicas.mailboxes[0]->Deliver(outcome);
  ASSERT_EQ(output_.posted.size(), 1u);
  ASSERT_TRUE(output_.posted[0].has_replica());
  EXPECT_EQ(output_.posted[0].replica().status(), v1::VERDICT_STATUS_ERROR);
  EXPECT_EQ(output_.posted[0].replica().mismatches(0).name(), "w");
  session_.Close();
  replicas.mailboxes[0]->Deliver(outcome);  // the stream is gone: nothing is posted
  EXPECT_EQ(output_.posted.size(), 1u);
  // A report that breaks a rule ends the stream, as any malformed message does.
  r.set_kind("weights");
  EXPECT_EQ(Send(m).code(), absl::StatusCode::kInvalidArgument);
}

// A replicas-only stream (Hello.replicas_only: a group's reports sent to the server the group
// picks) is taken whatever the server's rank_list, carries reports but no call, chunk, release
// or batch, and its stats are not counted (the rank's call stream, maybe on another server,
// reports them).
TEST_F(StreamSessionTest, AReplicasOnlyStreamCarriesReportsNotCallsAndIsNotCountedTwice) {
  FakeReplicas replicas;
  context_.options_.replicas = &replicas;
  context_.options_.rank_list = {0, 2};
  v1::AgentMessage hello = HelloMessage(/*rank=*/1);
  hello.mutable_hello()->set_replicas_only(true);
  ASSERT_TRUE(Send(hello).ok());
  EXPECT_EQ(session_.state(), StreamState::kStreaming);
  v1::AgentMessage report;
  v1::ReplicaReport& r = *report.mutable_replica();
  r.add_group(0);
  r.add_group(1);
  r.set_kind("gradients");
  r.set_op("AdamW.step");
  r.set_algorithm("crc32c");
  ASSERT_TRUE(Send(report).ok());
  EXPECT_EQ(replicas.reports.size(), 1u);
  v1::AgentMessage stats;
  stats.mutable_stats()->set_captured_calls(10);
  ASSERT_TRUE(Send(stats).ok());
  EXPECT_THAT(context_.Scrape(), HasSubstr("parity_server_agent_captured_calls_total 0"));
  v1::AgentMessage chunk;
  chunk.mutable_chunk()->set_blob_id(1);
  v1::AgentMessage release;
  release.mutable_release()->add_blob_ids(1);
  v1::AgentMessage batch;
  *batch.mutable_batch()->add_messages() = CallMessage(2);
  for (const v1::AgentMessage& m : {CallMessage(1), chunk, release, batch}) {
    const absl::Status s = Send(m);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << m.DebugString();
    EXPECT_THAT(std::string(s.message()), HasSubstr("on a replicas-only stream")) << s;
  }
  EXPECT_TRUE(output_.queued.empty());
}

}  // namespace
}  // namespace parity::server
