// Server throughput: N agents -> one parity-server in this process (plaintext loopback, the
// real service, work queue, replay, compare and result files), for N = 1, 2, 4, 8. Each agent is a
// stream writing pre-encoded calls of one kind as fast as the server lets it (at most 8 calls
// unanswered, as the agent's flow control allows), for a fixed time; the table prints the calls
// verdicted per second and the tensor payload checked per second, the ratio to one agent, and the
// same with the server not replaying (as --replay=false: receive the call, answer SKIP), which
// is what the transport alone carries. Side by side in one run.
//   server_throughput [--quick] [--seconds=S] [--bench_device=cpu|cuda|auto] [--agents=1,2,4,8]
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/base/crash_report.h"
#include "common/torch/torch_pch.h"
#include "parity/v1/parity.pb.h"
#include "server/app/server.h"
#include "tests/testing/op_cases.h"
#include "tests/testing/server_harness.h"

namespace {

namespace v1 = parity::v1;
using parity::testing::R;

struct Workload {
  std::string label;
  v1::ApiCall call;
  uint64_t payload = 0;  // tensor bytes of one call (inputs and outputs)
};

uint64_t PayloadBytes(const v1::ApiCall& call) {
  uint64_t n = 0;
  for (const auto* values : {&call.inputs(), &call.outputs()}) {
    for (const v1::Value& v : *values) {
      if (v.has_tensor()) n += v.tensor().data().size();
    }
  }
  return n;
}

struct Result {
  double calls_per_s = 0, bytes_per_s = 0;
  uint64_t calls = 0;
};

// `agents` streams against `port` for `seconds`.
Result Drive(int port, const Workload& w, int agents, double seconds) {
  std::atomic<uint64_t> verdicts{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int a = 0; a < agents; ++a) {
    threads.emplace_back([&, a] {
      parity::testing::TestStream stream(parity::testing::TestChannel(port, ""));
      if (!stream.Hello(a)) {
        std::fprintf(stderr, "agent %d: hello refused: %s\n", a,
                     stream.status().error_message().c_str());
        return;
      }
      absl::Mutex mu;
      int outstanding = 0;
      std::thread reader([&] {
        v1::ServerMessage m;
        while (stream.Read(&m)) {
          if (!m.has_verdict()) continue;
          absl::MutexLock lock(&mu);
          --outstanding;
          if (!stop.load()) verdicts.fetch_add(1);
        }
      });
      uint64_t sequence = 0;
      while (!stop.load()) {
        {
          absl::MutexLock lock(&mu);
          auto room = [&] { return outstanding < 8 || stop.load(); };
          mu.Await(absl::Condition(&room));
          if (stop.load()) break;
          ++outstanding;
        }
        auto message = std::make_shared<v1::AgentMessage>();
        *message->mutable_call() = w.call;
        message->mutable_call()->set_sequence(++sequence);
        if (!stream.Send(message)) break;
      }
      stream.WritesDone();
      reader.join();
      (void)stream.Close();
    });
  }
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the measured window
  const uint64_t done = verdicts.load();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop.store(true);
  for (std::thread& t : threads) t.join();
  Result r;
  r.calls = done;
  r.calls_per_s = static_cast<double>(done) / elapsed;
  r.bytes_per_s = r.calls_per_s * static_cast<double>(w.payload);
  return r;
}

std::unique_ptr<parity::server::ParityServer> StartServer(const std::string& dir,
                                                          const std::string& device, bool replay) {
  parity::server::ServerConfig c = parity::testing::TestServerConfig(dir, "");
  c.check.checker.bench_device = device;
  c.parity.workers = 0;  // the server's own choice
  c.parity.metrics_port = -1;
  parity::server::CallHandler handler;
  if (!replay) {  // as parity-server --replay=false: every call answered SKIP unread
    handler = [](const parity::server::CallOrigin&, const parity::server::ServerCall&,
                 const parity::common::BlobSource&) {
      parity::server::CallOutcome check;
      check.status = parity::server::CheckStatus::kSkip;
      return check;
    };
  }
  auto s = parity::server::ParityServer::Create(c, std::move(handler));
  if (!s.ok() || !(*s)->Start().ok()) {
    std::fprintf(stderr, "server: %s\n", s.ok() ? "did not start" : s.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(s);
}

}  // namespace

int main(int argc, char** argv) {
  parity::common::InstallCrashReport(argv[0]);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured, even into a pipe
  bool quick = false;
  double seconds = 3;
  std::string device = "cpu";
  std::vector<int> counts = {1, 2, 4, 8};
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--quick") {
      quick = true;
      seconds = 0.5;
      counts = {1, 2};
    } else if (absl::StartsWith(a, "--seconds=")) {
      if (!absl::SimpleAtod(a.substr(10), &seconds)) return 2;
    } else if (absl::StartsWith(a, "--bench_device=")) {
      device = std::string(a.substr(15));
    } else if (absl::StartsWith(a, "--agents=")) {
      counts.clear();
      for (absl::string_view n : absl::StrSplit(a.substr(9), ',')) {
        int v = 0;
        if (!absl::SimpleAtoi(n, &v) || v < 1) return 2;
        counts.push_back(v);
      }
    } else {
      std::fprintf(stderr,
                   "usage: server_throughput [--quick] [--seconds=S] [--bench_device=D] "
                   "[--agents=1,2,4,8]\n");
      return 2;
    }
  }
  const int64_t s = quick ? 4 : 1;
  std::vector<Workload> workloads = {
      {"mm 512x512x512",
       parity::testing::BuildCall("aten::mm", "", {R({512 / s, 512}, 1), R({512, 512}, 2)})},
      {"gelu 1M",
       parity::testing::BuildCall("aten::gelu", "", {R({1024 / s, 1024}, 3), std::string("none")})},
      // An LLM layer's projection in bfloat16: 2,048 tokens of a 2,048-wide model (25 MB a call).
      {"linear bf16 2048^3",
       parity::testing::BuildCall("aten::linear", "",
                                  {R({2048 / s, 2048 / s}, 4, at::kBFloat16),
                                   R({2048 / s, 2048 / s}, 5, at::kBFloat16), c10::IValue()})},
  };
  for (Workload& w : workloads) w.payload = PayloadBytes(w.call);
  const std::string dir =
      (std::filesystem::temp_directory_path() / absl::StrCat("parity-throughput-", ::getpid()))
          .string();
  std::printf("server_throughput: %.1f s per cell, bench %s, %u hardware threads\n", seconds,
              device.c_str(), std::thread::hardware_concurrency());
  std::printf("%-18s %6s %7s %11s %12s %9s %14s %12s\n", "call", "MB", "agents", "calls/s",
              "payload MB/s", "vs 1", "transport MB/s", "of transport");
  for (const Workload& w : workloads) {
    double one = 0;
    for (int n : counts) {
      Result on, off;
      {
        auto server = StartServer(dir + "/on", device, true);
        on = Drive(server->port(), w, n, seconds);
        server->Shutdown(std::chrono::seconds(2));
      }
      {
        auto server = StartServer(dir + "/off", device, false);
        off = Drive(server->port(), w, n, seconds);
        server->Shutdown(std::chrono::seconds(2));
      }
      if (one == 0) one = on.bytes_per_s;
      std::printf("%-18s %6.2f %7d %11.1f %12.1f %8.2fx %14.1f %11.2fx\n", w.label.c_str(),
                  static_cast<double>(w.payload) / 1e6, n, on.calls_per_s, on.bytes_per_s / 1e6,
                  one > 0 ? on.bytes_per_s / one : 0.0, off.bytes_per_s / 1e6,
                  off.bytes_per_s > 0 ? on.bytes_per_s / off.bytes_per_s : 0.0);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}
