// The agent's Check stream (a ClientBidiReactor behind a blocking face) against a real
// ParityServer: the handshake, verdicts in call order, a refused Hello, a write held by flow
// control and released by Cancel, and a message handler that throws.
#include "agent/transport/check_stream.h"
#include "parity/v1/parity.pb.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/transport/wire.h"
#include "gtest/gtest.h"
#include "tests/agent/agent_testing.h"
#include "tests/testing/op_cases.h"

namespace parity::agent {
namespace {

using namespace testing;  // NOLINT(build/namespaces): the agent tests' own helpers
namespace pt = parity::testing;

grpc::ByteBuffer Hello(uint32_t version = common::kProtocolVersion) {
  v1::AgentMessage m;
  m.mutable_hello()->set_protocol_version(version);
  m.mutable_hello()->set_run_id("check_stream_test");
  m.mutable_hello()->set_world_size(1);
  return common::Serialize(m);
}

// A call carrying one float32 tensor of `elements` elements, inline.
grpc::ByteBuffer Call(uint64_t sequence, int64_t elements = 16) {
  auto m = std::make_shared<v1::AgentMessage>();
  *m->mutable_call() = pt::BuildCall("aten::relu", "", {torch::ones({elements})});
  m->mutable_call()->set_sequence(sequence);
  return common::SerializeShared(std::move(m));
}

// Collects the sequences of the verdicts the server sends.
struct Verdicts {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint64_t> sequences;

  CheckStream::OnMessage Handler() {
    return [this](grpc::ByteBuffer& bytes) {
      v1::ServerMessage m;
      ASSERT_TRUE(common::Parse(bytes, &m));
      std::lock_guard<std::mutex> lock(mu);
      if (m.has_verdict()) sequences.push_back(m.verdict().sequence());
      cv.notify_all();
    };
  }
  bool WaitFor(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return sequences.size() >= n; });
  }
};

TEST(CheckStreamTest, HandshakeThenEveryVerdictInCallOrder) {
  RecordingServer server;
  Verdicts verdicts;
  CheckStream stream(pt::TestChannel(server.port(), ""), verdicts.Handler());
  ASSERT_TRUE(stream.Write(Hello(), /*more=*/false));
  std::optional<grpc::ByteBuffer> first = stream.AwaitFirst();
  ASSERT_TRUE(first.has_value());
  v1::ServerMessage info;
  ASSERT_TRUE(common::Parse(*first, &info));
  EXPECT_TRUE(info.has_server_info());

  constexpr uint64_t kCalls = 40;
  for (uint64_t i = 1; i <= kCalls; ++i) {
    ASSERT_TRUE(stream.Write(Call(i), /*more=*/i < kCalls)) << i;
  }
  ASSERT_TRUE(verdicts.WaitFor(kCalls));
  std::vector<uint64_t> expected;
  for (uint64_t i = 1; i <= kCalls; ++i) expected.push_back(i);
  EXPECT_EQ(verdicts.sequences, expected);  // the ServerInfo went to AwaitFirst, not here

  stream.WritesDone();
  EXPECT_TRUE(stream.Finish(absl::Seconds(10)).ok());
  EXPECT_TRUE(stream.done());
  EXPECT_FALSE(stream.Write(Call(kCalls + 1), false)) << "a write after the end is refused";
}

TEST(CheckStreamTest, ARefusedHelloEndsTheStreamWithTheServersReason) {
  RecordingServer server;
  Verdicts verdicts;
  CheckStream stream(pt::TestChannel(server.port(), ""), verdicts.Handler());
  stream.Write(Hello(/*version=*/999), false);
  EXPECT_FALSE(stream.AwaitFirst().has_value());
  const grpc::Status status = stream.Finish(absl::Seconds(10));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("unsupported protocol version 999"), std::string::npos)
      << status.error_message();
  EXPECT_FALSE(stream.Write(Call(1), false));
}

TEST(CheckStreamTest, CancelReleasesAWriteThatFlowControlHolds) {
  RecordingServer server(/*port=*/0, /*error_op=*/"", /*workers=*/1);
  server.Wedge();  // the handler blocks: the server stops reading, the windows fill
  Verdicts verdicts;
  CheckStream stream(pt::TestChannel(server.port(), ""), verdicts.Handler());
  ASSERT_TRUE(stream.Write(Hello(), false));
  ASSERT_TRUE(stream.AwaitFirst().has_value());

  std::atomic<uint64_t> written{0};
  std::atomic<bool> cancelled{false};  // set once Cancel() has returned
  std::atomic<int> accepted_after{0};  // Writes begun after that which still succeeded
  std::thread writer([&] {
    for (uint64_t i = 1; i < 10000; ++i) {
      const bool after_cancel = cancelled.load();
      if (!stream.Write(Call(i, /*elements=*/1 << 18), false)) return;  // 1 MiB of tensor
      if (after_cancel) accepted_after.fetch_add(1);
      written.fetch_add(1);
    }
  });
  // A Write waits behind the one in flight; with the server wedged, flow control holds the stream
  // within a few windows' worth of megabytes at the latest.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!stream.WriteWaitingForTesting() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(stream.WriteWaitingForTesting()) << written.load() << " writes, none held";
  EXPECT_LT(written.load(), 200u) << "the stream took 200 MiB without the server reading";

  // gRPC's cancellation is asynchronous, but the stream's own is not: a Write that begins after
  // Cancel() has returned is refused, and the one waiting at the cancel gives up.
  stream.Cancel();
  cancelled.store(true);
  RunWithHangDetector(std::chrono::seconds(60), [&] { writer.join(); });
  EXPECT_EQ(accepted_after.load(), 0) << "writes went through after the cancel";
  EXPECT_FALSE(stream.Write(Call(1), false)) << "a write after the cancel is refused";
  EXPECT_EQ(stream.Finish(absl::Seconds(10)).error_code(), grpc::StatusCode::CANCELLED);
  server.Release();
}

TEST(CheckStreamTest, AHandlerThatThrowsEndsThatStreamOnly) {
  RecordingServer server;
  std::atomic<int> calls{0};
  CheckStream stream(pt::TestChannel(server.port(), ""), [&](grpc::ByteBuffer&) {
    calls.fetch_add(1);
    throw std::runtime_error("handler failed");
  });
  ASSERT_TRUE(stream.Write(Hello(), false));
  ASSERT_TRUE(stream.AwaitFirst().has_value());
  ASSERT_TRUE(stream.Write(Call(1), false));
  // Ended by the handler's exception, not by a timeout of ours.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!stream.done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(stream.done());
  EXPECT_EQ(stream.Finish(absl::ZeroDuration()).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(calls.load(), 1);

  // The process goes on: a new stream to the same server works.
  Verdicts verdicts;
  CheckStream again(pt::TestChannel(server.port(), ""), verdicts.Handler());
  ASSERT_TRUE(again.Write(Hello(), false));
  ASSERT_TRUE(again.AwaitFirst().has_value());
  ASSERT_TRUE(again.Write(Call(1), false));
  EXPECT_TRUE(verdicts.WaitFor(1));
}

}  // namespace
}  // namespace parity::agent
