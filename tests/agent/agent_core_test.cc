// The agent's core in-process against a real ParityServer on loopback whose handler records
// what arrives: call names (op, overload, per-step call index, phase, module, forward link),
// fail_fast, and a server that goes away and comes back on the same port.
#include "agent/agent_core.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "common/config.h"
#include "common/wire.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/testing/generic_stream.h"
#include "tests/testing/server_harness.h"
#include "tests/testing/test_certs.h"

namespace parity::agent {
namespace {

struct Seen {
  std::string op, overload, forward_op;
  uint64_t call_index = 0;
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  int64_t step = 0;
  std::string module_path;
  int32_t rank = 0;
};

// A server whose handler records calls and judges `error_op` as error, everything else pass.
class RecordingServer {
 public:
  explicit RecordingServer(int port = 0, std::string error_op = "", int workers = 2)
      : error_op_(error_op) {
    common::ServerConfig config =
        testing::TestServerConfig(testing::MakeTempDir("parity_agent_out_"), "");
    config.port = port;
    config.parity.workers = static_cast<uint32_t>(workers);
    config.parity.queue_max_calls = 2;
    auto s = server::ParityServer::Create(
        config, [this](const server::CallOrigin& origin, const v1::ApiCall& call,
                       const server::BlobStore&) { return Handle(origin, call); });
    EXPECT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    const absl::Status started = server_->Start();
    EXPECT_TRUE(started.ok()) << started;
  }
  // The server goes first: its workers may still be in Handle(), which uses the members below.
  ~RecordingServer() {
    Release();
    server_.reset();
  }
  int port() const { return server_->port(); }
  void Shutdown() { server_->Shutdown(std::chrono::seconds(2)); }
  std::vector<Seen> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // A wedged server: the handler blocks until Release().
  void Wedge() {
    std::lock_guard<std::mutex> lock(mu_);
    wedged_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    wedged_ = false;
    cv_.notify_all();
  }

 private:
  v1::Verdict Handle(const server::CallOrigin& origin, const v1::ApiCall& call) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !wedged_; });
      calls_.push_back({call.op_name(), call.overload(), call.forward_op_name(), call.call_index(),
                        call.phase(), call.step(), call.module_path(), origin.rank});
    }
    v1::Verdict v;
    v.set_sequence(call.sequence());
    v.set_api_name(
        absl::StrCat(call.forward_op_name().empty() ? call.op_name() : call.forward_op_name(), ".",
                     call.call_index()));
    v.set_phase(call.phase());
    v.set_step(call.step());
    v.set_module_path(call.module_path());
    const bool bad = call.op_name() == error_op_;
    v.set_status(bad ? v1::VERDICT_STATUS_ERROR : v1::VERDICT_STATUS_PASS);
    if (bad) {
      v1::OutputVerdict* o = v.add_outputs();
      o->set_status(v1::VERDICT_STATUS_ERROR);
      o->set_failed_metric("max_rel_error");
      o->set_standard("benchmark");
    }
    return v;
  }

  std::string error_op_;
  std::unique_ptr<server::ParityServer> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wedged_ = false;
  std::vector<Seen> calls_;
};

// Not a ParityServer: a server speaking the Check method's bytes itself, which answers Hello
// properly and then puts `garbage` (bytes that are no ServerMessage) before each call's verdict;
// or, with `answer_calls` false, never answers a call at all.
class GarbledServer : public grpc::CallbackGenericService {
 public:
  explicit GarbledServer(std::string garbage, bool answer_calls = true)
      : garbage_(std::move(garbage)), answer_calls_(answer_calls) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterCallbackGenericService(this);
    server_ = builder.BuildAndStart();
  }
  // Cancels open streams at once: the server dies, whatever its clients are doing.
  ~GarbledServer() override { server_->Shutdown(std::chrono::system_clock::now()); }
  int port() const { return port_; }
  uint64_t verdicts_sent() const { return verdicts_sent_.load(); }
  uint64_t calls_received() const { return calls_received_.load(); }

 private:
  class Reactor : public testing::GenericStreamReactor {
   public:
    explicit Reactor(GarbledServer* server) : server_(server) {}

   private:
    void OnMessage(grpc::ByteBuffer& message) override {
      v1::AgentMessage m;
      ASSERT_TRUE(common::Parse(message, &m));
      if (m.has_hello()) {
        v1::ServerMessage info;
        info.mutable_server_info()->set_protocol_version(m.hello().protocol_version());
        info.mutable_server_info()->set_max_message_bytes(4 << 20);
        out_.push_back(common::Serialize(info));
      } else if (m.has_call()) {
        server_->calls_received_.fetch_add(1);
        if (!server_->answer_calls_) return;
        grpc::Slice slice(server_->garbage_);
        out_.emplace_back(&slice, 1);
        v1::ServerMessage verdict;
        verdict.mutable_verdict()->set_sequence(m.call().sequence());
        verdict.mutable_verdict()->set_status(v1::VERDICT_STATUS_PASS);
        out_.push_back(common::Serialize(verdict));
        server_->verdicts_sent_.fetch_add(1);
      }
    }
    std::optional<grpc::ByteBuffer> NextWrite() override {
      if (out_.empty()) return std::nullopt;
      grpc::ByteBuffer next = std::move(out_.front());
      out_.pop_front();
      return next;
    }

    GarbledServer* const server_;
    std::deque<grpc::ByteBuffer> out_;
  };
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Reactor(this);
  }

  const std::string garbage_;
  const bool answer_calls_;
  std::atomic<uint64_t> verdicts_sent_{0};
  std::atomic<uint64_t> calls_received_{0};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Runs `f` and aborts the test program if it has not returned after `limit`: a hang detector
// (the limit is far above the expected time; it makes no timing claim).
template <typename F>
bool FinishesWithin(std::chrono::seconds limit, F f) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread watchdog([&finished, limit] {
    if (finished.wait_for(limit) != std::future_status::ready) {
      std::fprintf(stderr, "HANG: the call did not return within %lld s\n",
                   static_cast<long long>(limit.count()));
      std::abort();
    }
  });
  f();
  done.set_value();
  watchdog.join();
  return true;
}

common::AgentConfig Config(int port) {
  common::AgentConfig c;
  c.online_run_ut = true;
  c.host = "127.0.0.1";
  c.port = port;
  c.parity.plaintext = true;
  c.parity.policy = common::QueuePolicy::kBlock;
  c.parity.reconnect_initial_ms = 20;
  c.parity.reconnect_max_ms = 100;
  c.parity.connect_timeout_ms = 2000;
  c.parity.flush_timeout_ms = 20000;
  return c;
}

std::unique_ptr<AgentCore> StartAgent(const common::AgentConfig& config) {
  auto core = AgentCore::Create(config);
  EXPECT_TRUE(core.ok()) << core.status();
  (*core)->Start();
  return *std::move(core);
}

// One training step of a tiny model: linear -> gelu -> sum, backward.
void TrainStep(torch::Tensor& w, const torch::Tensor& x) {
  PushModuleScope("mlp");
  torch::Tensor h = torch::gelu(torch::linear(x, w));
  PopModuleScope();
  torch::Tensor loss = h.sum();
  loss.backward();
  torch::NoGradGuard no_grad;
  w.sub_(w.grad() * 0.1);
  w.grad().zero_();
}

// After stop(), every captured call got a verdict, was dropped (by reason) or was lost in
// flight.
void ExpectEveryCallAccountedFor(const Counters& c) {
  uint64_t dropped = 0;
  for (const auto& [reason, n] : c.dropped) dropped += n;
  EXPECT_EQ(c.captured, c.verdicts + dropped + c.lost_in_flight)
      << c.verdicts << " verdicts, " << dropped << " dropped, " << c.lost_in_flight << " lost";
}

// How long `f` takes (with a hang detector far above any expected time).
template <typename F>
std::chrono::milliseconds TimeOf(F f) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(FinishesWithin(std::chrono::seconds(300), f));
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// A loopback port nothing listens on (bound, read, released).
int UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST(AgentCoreTest, NamesCallsByOpOverloadStepIndexPhaseAndModule) {
  RecordingServer server;
  auto agent = StartAgent(Config(server.port()));
  torch::manual_seed(0);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  for (int step = 0; step < 2; ++step) {
    TrainStep(w, x);
    // Two more calls of one op in the step: call indexes 0 and 1.
    torch::Tensor y = torch::add(x, x);
    y = torch::add(y, x);
    std::string error;
    ASSERT_TRUE(agent->Step(&error)) << error;
  }
  ASSERT_TRUE(agent->Flush(20000));
  agent->Stop();

  std::set<std::tuple<std::string, std::string, uint64_t, int, int64_t, std::string>> got;
  std::set<std::pair<std::string, std::string>> backward_links;
  for (const Seen& s : server.calls()) {
    got.emplace(s.op, s.overload, s.call_index, s.phase, s.step, s.module_path);
    if (s.phase == v1::PHASE_BACKWARD) backward_links.emplace(s.op, s.forward_op);
    EXPECT_EQ(s.rank, 0);  // no process group: rank 0
  }
  for (int64_t step : {0, 1}) {
    // Top-level calls only: linear, not the addmm/matmul inside it.
    EXPECT_TRUE(got.count({"aten::linear", "", 0, v1::PHASE_FORWARD, step, "mlp"})) << step;
    EXPECT_TRUE(got.count({"aten::gelu", "", 0, v1::PHASE_FORWARD, step, "mlp"})) << step;
    EXPECT_TRUE(got.count({"aten::sum", "", 0, v1::PHASE_FORWARD, step, ""})) << step;
    // Call indexes count per op within the step and restart at each step.
    EXPECT_TRUE(got.count({"aten::add", "Tensor", 0, v1::PHASE_FORWARD, step, ""})) << step;
    EXPECT_TRUE(got.count({"aten::add", "Tensor", 1, v1::PHASE_FORWARD, step, ""})) << step;
    EXPECT_FALSE(got.count({"aten::add", "Tensor", 2, v1::PHASE_FORWARD, step, ""})) << step;
  }
  for (const auto& entry : got) {
    EXPECT_NE(std::get<0>(entry), "aten::addmm") << "a nested call was captured";
  }
  // Backward kernels are linked to the forward call that made their autograd node.
  EXPECT_TRUE(backward_links.count({"aten::gelu_backward", "aten::gelu"}));
}

// The sender lets gRPC hold a call back only while another is queued to follow it: the last
// call of a burst goes out at once, not with the next message the agent happens to send (its
// periodic stats, here an hour away), so its verdict comes back.
TEST(AgentCoreTest, TheLastCallOfABurstIsSentWithoutWaitingForMore) {
  RecordingServer server;
  common::AgentConfig config = Config(server.port());
  config.parity.stats_interval_ms = 3600 * 1000;
  auto agent = StartAgent(config);
  const torch::Tensor x = torch::randn({3, 4});
  torch::relu(x);  // a burst of one, on a quiet stream: nothing else would carry it
  ASSERT_TRUE(agent->Flush(20000));
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  for (int i = 0; i < 3; ++i) TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));
  const auto counters = agent->GetCounters();
  EXPECT_GT(counters.sent, 0u);
  EXPECT_EQ(server.calls().size(), counters.sent);
  agent->Stop();
}

TEST(AgentCoreTest, FailFastReportsTheFirstErrorAtTheNextStep) {
  RecordingServer server(0, "aten::gelu");
  common::AgentConfig config = Config(server.port());
  config.parity.fail_fast = true;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));  // the verdicts are in
  std::string error;
  EXPECT_FALSE(agent->Step(&error));
  EXPECT_EQ(error,
            "precision error: aten::gelu.0 forward, step 0, module mlp: output 0 max_rel_error "
            "(benchmark)");
  EXPECT_EQ(agent->GetCounters().error, 1u);
  agent->Stop();
}

TEST(AgentCoreTest, WithoutFailFastErrorsAreCountedNotRaised) {
  RecordingServer server(0, "aten::gelu");
  auto agent = StartAgent(Config(server.port()));
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  ASSERT_TRUE(agent->Flush(20000));
  EXPECT_TRUE(agent->Step(nullptr));
  EXPECT_EQ(agent->GetCounters().error, 1u);
  agent->Stop();
}

TEST(AgentCoreTest, ReconnectsWhenTheServerComesBackAndResumes) {
  auto first = std::make_unique<RecordingServer>();
  const int port = first->port();
  auto agent = StartAgent(Config(port));
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  const torch::Tensor x = torch::randn({3, 4});
  TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));
  agent->Step(nullptr);
  const size_t before = first->calls().size();
  EXPECT_GT(before, 0u);
  first->Shutdown();
  first.reset();

  // While the server is away the training goes on; under `block` the agent waits for room only
  // while connected, so these calls are dropped as disconnected or sent after reconnecting.
  TrainStep(w, x);
  agent->Step(nullptr);
  RecordingServer second(port);
  // Calls made after the server is back reach it once the agent has reconnected.
  for (int i = 0; i < 200 && agent->GetCounters().reconnects == 0; ++i) {
    TrainStep(w, x);
    agent->Step(nullptr);
    agent->Flush(100);
  }
  TrainStep(w, x);
  ASSERT_TRUE(agent->Flush(20000));
  const Counters c = agent->GetCounters();
  agent->Stop();
  EXPECT_GE(c.reconnects, 1u);
  const std::vector<Seen> resumed = second.calls();
  ASSERT_FALSE(resumed.empty());
  // The steps kept counting across the outage.
  int64_t max_step = 0;
  for (const Seen& s : resumed) max_step = std::max(max_step, s.step);
  EXPECT_GE(max_step, 2);
  // Nothing is lost silently.
  ExpectEveryCallAccountedFor(c);
}

// A message from the server that does not parse is skipped and counted; the verdicts after it
// still arrive and the connection stays up.
TEST(AgentCoreTest, UnreadableServerMessagesAreCountedAndTheVerdictsAfterThemStillCount) {
  // Field 1 with wire type 7 (no such type), then a length-delimited field cut short.
  for (const std::string& garbage : {std::string("\x0f\x01\x02", 3), std::string("\x12\x7f", 2)}) {
    GarbledServer server(garbage);
    auto agent = StartAgent(Config(server.port()));
    torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
    TrainStep(w, torch::randn({3, 4}));
    ASSERT_TRUE(agent->Flush(20000));  // every verdict came, though each followed garbage
    const Counters c = agent->GetCounters();
    agent->Stop();
    ASSERT_GT(c.sent, 0u);
    EXPECT_EQ(server.verdicts_sent(), c.sent);
    EXPECT_EQ(c.verdicts, c.sent);
    EXPECT_EQ(c.pass, c.sent);
    EXPECT_EQ(c.unreadable, c.sent);
    EXPECT_EQ(c.reconnects, 0u);
    EXPECT_TRUE(c.connected);
  }
}

// A server that accepts the stream but never answers: under `drop` the training never waits,
// and stop() gives up after flush_timeout_ms, counting what it could not send.
TEST(AgentCoreTest, AWedgedServerNeverHangsTheTrainingUnderDrop) {
  RecordingServer server(0, "", /*workers=*/1);
  common::AgentConfig config = Config(server.port());
  config.parity.policy = common::QueuePolicy::kDrop;
  config.parity.queue_max_calls = 8;
  config.parity.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  ASSERT_TRUE(agent->Flush(20000));  // connected
  server.Wedge();
  // Megabyte tensors, so that the server's queue, the HTTP/2 window and the agent's queue fill.
  torch::Tensor w = torch::randn({512, 1024}, torch::requires_grad());
  const torch::Tensor x = torch::randn({256, 1024});
  EXPECT_TRUE(FinishesWithin(std::chrono::seconds(60), [&] {
    for (int step = 0; step < 20; ++step) {
      TrainStep(w, x);
      agent->Step(nullptr);
    }
  }));
  EXPECT_TRUE(FinishesWithin(std::chrono::seconds(60), [&] { agent->Stop(); }));
  const Counters c = agent->GetCounters();
  EXPECT_GT(c.dropped.at("queue_full"), 0u);
  ExpectEveryCallAccountedFor(c);
  server.Release();
}

// Under `block`, block_timeout_ms bounds each wait: the training finishes against a wedged server.
TEST(AgentCoreTest, BlockTimeoutBoundsTheWaitOnAWedgedServer) {
  RecordingServer server(0, "", /*workers=*/1);
  common::AgentConfig config = Config(server.port());
  config.parity.queue_max_calls = 4;
  config.parity.block_timeout_ms = 50;
  config.parity.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  ASSERT_TRUE(agent->Flush(20000));
  server.Wedge();
  torch::Tensor w = torch::randn({512, 1024}, torch::requires_grad());
  EXPECT_TRUE(FinishesWithin(std::chrono::seconds(120), [&] {
    for (int step = 0; step < 5; ++step) {
      TrainStep(w, torch::randn({256, 1024}));
      agent->Step(nullptr);
    }
    agent->Stop();
  }));
  const Counters c = agent->GetCounters();
  EXPECT_GT(c.dropped.at("queue_full"), 0u);
  ExpectEveryCallAccountedFor(c);
  server.Release();
}

// The end of the session takes flush_timeout_ms and little more, even while connection
// attempts to a server that is gone would each wait out their connect timeout.
TEST(AgentCoreTest, StopIsBoundedByTheFlushTimeoutWhenTheServerIsGone) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.policy = common::QueuePolicy::kDrop;
  config.parity.connect_timeout_ms = 20000;
  config.parity.flush_timeout_ms = 1000;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  const std::chrono::milliseconds took = TimeOf([&] { agent->Stop(); });
  EXPECT_LT(took.count(), 1000 + 3000) << "stop() waited out a connection attempt";
  const Counters c = agent->GetCounters();
  EXPECT_GT(c.dropped.at("stopped"), 0u);
  ExpectEveryCallAccountedFor(c);
}

// Nothing can be delivered (a tls_path without ca.crt): the end of the session does not wait.
TEST(AgentCoreTest, StopDoesNotWaitWhenNothingCanBeDelivered) {
  common::AgentConfig config = Config(UnusedPort());
  config.parity.plaintext = false;
  config.tls_path = testing::MakeTempDir("parity_no_ca_");
  config.parity.flush_timeout_ms = 60000;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  const std::chrono::milliseconds took = TimeOf([&] { agent->Stop(); });
  EXPECT_LT(took.count(), 10000) << "stop() waited for a delivery that could not happen";
  ExpectEveryCallAccountedFor(agent->GetCounters());
}

// Calls written to a stream whose server dies before answering are lost in flight: counted,
// so that captured = verdicts + dropped + lost.
TEST(AgentCoreTest, CallsWrittenToAStreamThatDiesAreCountedAsLost) {
  auto server = std::make_unique<GarbledServer>("", /*answer_calls=*/false);
  common::AgentConfig config = Config(server->port());
  config.parity.flush_timeout_ms = 500;
  auto agent = StartAgent(config);
  torch::Tensor w = torch::randn({8, 4}, torch::requires_grad());
  TrainStep(w, torch::randn({3, 4}));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (server->calls_received() < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_GE(server->calls_received(), 5u);
  server.reset();  // dies with every call unanswered
  agent->Stop();
  const Counters c = agent->GetCounters();
  EXPECT_GE(c.lost_in_flight, 5u);
  EXPECT_EQ(c.verdicts, 0u);
  ExpectEveryCallAccountedFor(c);
}

}  // namespace
}  // namespace parity::agent
