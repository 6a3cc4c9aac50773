// What the agent's tests share: a ParityServer whose handler records what arrives, a server that
// speaks the Check method's bytes itself (garbled or silent), the config and the training step
// the tests run, and the loss accounting every test checks.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/torch/agent_hook.h"
#include "agent/torch/torch_agent.h"
#include "agent/transport/session.h"
#include "agent/transport/transport_internal.h"
#include "common/config/config.h"
#include "common/transport/wire.h"
#include "gtest/gtest.h"
#include "server/app/server.h"
#include "tests/testing/generic_stream.h"
#include "tests/testing/server_harness.h"
#include "tests/testing/test_certs.h"

namespace parity::agent::testing {

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
    server::ServerConfig config =
        parity::testing::TestServerConfig(parity::testing::MakeTempDir("parity_agent_out_"), "");
    config.port = port;
    config.parity.workers = static_cast<uint32_t>(workers);
    config.parity.queue_max_calls = 2;
    auto s =
        server::ParityServer::Create(config, [this](const server::CallOrigin& origin,
                                                    const parity::server::ServerCall& server_call,
                                                    const parity::common::BlobSource&) {
          const v1::ApiCall& call = server_call.message;
          return Handle(origin, call);
        });
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
  // The calls as they arrived, values included (tensors of kept blobs are named, not carried).
  std::vector<v1::ApiCall> raw_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return raw_calls_;
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
  // A server slower than the training: each call takes `per_call` more (0: as fast as it can).
  void SetPace(std::chrono::milliseconds per_call) { pace_ms_.store(per_call.count()); }

 private:
  server::CallOutcome Handle(const server::CallOrigin& origin, const v1::ApiCall& call) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !wedged_; });
      calls_.push_back({call.op_name(), call.overload(), call.forward_op_name(), call.call_index(),
                        call.phase(), call.step(), call.module_path(), origin.rank});
      raw_calls_.push_back(call);
    }
    if (const int64_t pace = pace_ms_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(pace));  // the simulated work
    }
    // The server encodes the verdict (its names, phase, step, module path) from this.
    server::CallOutcome check;
    const bool bad = call.op_name() == error_op_;
    check.status = bad ? server::CheckStatus::kError : server::CheckStatus::kPass;
    if (bad) {
      server::OutputOutcome& o = check.outputs.emplace_back();
      o.judgement.status = server::CheckStatus::kError;
      o.judgement.failed_metric = server::Metric::kMaxRelError;
      o.judgement.standard = server::Standard::kBenchmark;
    }
    return check;
  }

  std::string error_op_;
  std::unique_ptr<server::ParityServer> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wedged_ = false;
  std::atomic<int64_t> pace_ms_{0};
  std::vector<Seen> calls_;
  std::vector<v1::ApiCall> raw_calls_;
};

// Not a ParityServer: a server speaking the Check method's bytes itself, which answers Hello
// properly and then puts `garbage` (bytes that are no ServerMessage) before each call's verdict;
// or, with `answer_calls` false, never answers a call at all; or, with `verdicts_per_batch` above
// 0, holds the verdicts and sends each `verdicts_per_batch` of them as one VerdictBatch, after
// an item that is not a verdict (a ServerInfo), and no garbage.
class GarbledServer : public grpc::CallbackGenericService {
 public:
  explicit GarbledServer(std::string garbage, bool answer_calls = true,
                         std::size_t verdicts_per_batch = 0)
      : garbage_(std::move(garbage)),
        answer_calls_(answer_calls),
        verdicts_per_batch_(verdicts_per_batch) {
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
  uint64_t batches_sent() const { return batches_sent_.load(); }
  // Whether the last Hello said the agent takes VerdictBatches.
  bool hello_accepts_batches() const { return hello_accepts_batches_.load(); }

 private:
  class Reactor : public parity::testing::GenericStreamReactor {
   public:
    explicit Reactor(GarbledServer* server) : server_(server) {}

   private:
    void OnMessage(grpc::ByteBuffer& message) override {
      v1::AgentMessage m;
      ASSERT_TRUE(common::Parse(message, &m));
      if (m.has_hello()) {
        server_->hello_accepts_batches_.store(m.hello().accepts_batches());
        v1::ServerMessage info;
        info.mutable_server_info()->set_protocol_version(m.hello().protocol_version());
        info.mutable_server_info()->set_max_message_bytes(4 << 20);
        out_.push_back(common::Serialize(info));
      } else if (m.has_call()) {
        server_->calls_received_.fetch_add(1);
        if (!server_->answer_calls_) return;
        v1::ServerMessage verdict;
        verdict.mutable_verdict()->set_sequence(m.call().sequence());
        verdict.mutable_verdict()->set_status(v1::VERDICT_STATUS_PASS);
        server_->verdicts_sent_.fetch_add(1);
        if (server_->verdicts_per_batch_ > 0) {
          if (held_.empty()) {
            v1::ServerMessage not_a_verdict;
            not_a_verdict.mutable_server_info()->set_server_version("not a verdict");
            held_.push_back(common::Serialize(not_a_verdict));
          }
          held_.push_back(common::Serialize(verdict));
          if (held_.size() == server_->verdicts_per_batch_ + 1) {
            out_.push_back(common::SerializeBatch(common::kServerBatchField, held_));
            held_.clear();
            server_->batches_sent_.fetch_add(1);
          }
          return;
        }
        grpc::Slice slice(server_->garbage_);
        out_.emplace_back(&slice, 1);
        out_.push_back(common::Serialize(verdict));
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
    std::vector<grpc::ByteBuffer> held_;  // the next VerdictBatch's items
  };
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Reactor(this);
  }

  const std::string garbage_;
  const bool answer_calls_;
  const std::size_t verdicts_per_batch_;
  std::atomic<uint64_t> verdicts_sent_{0};
  std::atomic<uint64_t> batches_sent_{0};
  std::atomic<bool> hello_accepts_batches_{false};
  std::atomic<uint64_t> calls_received_{0};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Runs `f` and aborts the test program if it has not returned after `limit`: a hang detector
// (the limit is far above the expected time; it makes no timing claim).
template <typename F>
void RunWithHangDetector(std::chrono::seconds limit, F f) {
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
}

inline common::AgentConfig Config(int port) {
  common::AgentConfig c;
  c.online_run_ut = true;
  c.host = "127.0.0.1";
  c.port = port;
  c.parity.link.plaintext = true;
  c.parity.sender.policy = common::QueuePolicy::kBlock;
  c.parity.sender.block_timeout_ms = 0;  // tests that count every verdict wait as long as it takes
  c.parity.link.reconnect_initial_ms = 20;
  c.parity.link.reconnect_max_ms = 100;
  c.parity.link.connect_timeout_ms = 2000;
  c.parity.sender.flush_timeout_ms = 20000;
  return c;
}

// Both halves in-process: the torch half's agent over a transport session made from `config`.
inline std::unique_ptr<TorchAgent> MakeAgent(const common::AgentConfig& config) {
  auto agent = TorchAgent::Adopt([&config](const parity_host& host) -> parity_session* {
    auto core = Session::Create(config, host);
    EXPECT_TRUE(core.ok()) << core.status();
    return core.ok() ? WrapSession(*std::move(core)) : nullptr;
  });
  EXPECT_NE(agent, nullptr);
  return agent;
}

inline std::unique_ptr<TorchAgent> StartAgent(const common::AgentConfig& config) {
  std::unique_ptr<TorchAgent> agent = MakeAgent(config);
  if (agent) agent->Start();
  return agent;
}

// One training step of a tiny model: linear -> gelu -> sum, backward.
inline void TrainStep(torch::Tensor& w, const torch::Tensor& x) {
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
inline void ExpectEveryCallAccountedFor(const Counters& c) {
  uint64_t dropped = 0;
  for (const auto& [reason, n] : c.dropped) dropped += n;
  EXPECT_EQ(c.captured, c.verdicts + dropped + c.lost_in_flight)
      << c.verdicts << " verdicts, " << dropped << " dropped, " << c.lost_in_flight << " lost";
}

// How long `f` takes (with a hang detector far above any expected time).
template <typename F>
std::chrono::milliseconds TimeOf(F f) {
  const auto start = std::chrono::steady_clock::now();
  RunWithHangDetector(std::chrono::seconds(300), f);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// A loopback port nothing listens on (bound, read, released).
inline int UnusedPort() {
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

}  // namespace parity::agent::testing
