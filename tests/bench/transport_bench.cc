// Server transport throughput on loopback, side by side in one run:
//   raw TCP      the same serialized messages, length-prefixed, one 8-byte ack per call
//   gRPC         the parity.v1 Check stream, plaintext
//   gRPC + TLS   the same over mutual TLS
// The server's handler answers PASS without replaying, so this measures transport, decoding of
// the protobuf envelope, the queue and the verdict stream: what the server adds on top of the
// socket. Then one line with real replay (CPU bench + float64 golden) for scale.
//   transport_bench [--quick]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/grpc_tuning.h"
#include "common/log.h"
#include "common/torch/torch_pch.h"
#include "server/server.h"
#include "tests/testing/op_cases.h"
#include "tests/testing/server_harness.h"
#include "tests/testing/test_certs.h"

namespace {

namespace v1 = parity::v1;
namespace pt = parity::testing;
using Clock = std::chrono::steady_clock;

// A stream of typical training calls: linear, gelu, layer_norm, add, softmax, their backward ops,
// on [batch 64, hidden 512] float32 activations (~128 KiB per tensor).
std::vector<std::string> TypicalCalls(int count) {
  const at::Tensor x = pt::R({64, 512}, 1), w = pt::R({512, 512}, 2), b = pt::R({512}, 3);
  std::vector<v1::ApiCall> kinds = {
      pt::BuildCall("aten::linear", "", {x, w, b}),
      pt::BuildCall("aten::gelu", "", {x, std::string("none")}),
      pt::BuildCall("aten::native_layer_norm", "", {x, c10::List<int64_t>({512}), w[0], b, 1e-5}),
      pt::BuildCall("aten::add", "Tensor", {x, x, 1}),
      pt::BuildCall("aten::_softmax", "", {x, 1, false}),
      pt::BuildCall("aten::gelu_backward", "", {x, x, std::string("none")}, v1::PHASE_BACKWARD),
  };
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    v1::AgentMessage m;
    *m.mutable_call() = kinds[i % kinds.size()];
    m.mutable_call()->set_sequence(i + 1);
    out.push_back(m.SerializeAsString());
  }
  return out;
}

uint64_t TotalBytes(const std::vector<std::string>& msgs) {
  uint64_t n = 0;
  for (const auto& m : msgs) n += m.size();
  return n;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Raw TCP: the receiver reads each length-prefixed message into a buffer and acks it.
double RawTcpSeconds(const std::vector<std::string>& msgs) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listener, 1);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread server([&] {
    const int fd = ::accept(listener, nullptr, nullptr);
    std::string buf;
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      uint32_t n = 0;
      if (!ReadAll(fd, reinterpret_cast<char*>(&n), 4)) break;
      buf.resize(n);
      if (!ReadAll(fd, buf.data(), n)) break;
      const uint64_t ack = i;
      WriteAll(fd, reinterpret_cast<const char*>(&ack), 8);
    }
    ::close(fd);
  });
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const auto start = Clock::now();
  std::thread acks([&] {
    uint64_t ack;
    for (std::size_t i = 0; i < msgs.size(); ++i) ReadAll(fd, reinterpret_cast<char*>(&ack), 8);
  });
  for (const std::string& m : msgs) {
    const uint32_t n = static_cast<uint32_t>(m.size());
    WriteAll(fd, reinterpret_cast<const char*>(&n), 4);
    WriteAll(fd, m.data(), m.size());
  }
  acks.join();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  server.join();
  ::close(fd);
  ::close(listener);
  return s;
}

// The Check stream: writes every call while a reader thread takes the verdicts.
double GrpcSeconds(parity::server::ParityServer& server, const std::string& client_tls,
                   const std::vector<std::string>& msgs) {
  pt::TestStream stream(pt::TestChannel(server.port(), client_tls));
  if (!stream.Hello()) {
    std::fprintf(stderr, "hello failed: %s\n", stream.status().error_message().c_str());
    std::exit(1);
  }
  std::vector<v1::AgentMessage> parsed(msgs.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) parsed[i].ParseFromString(msgs[i]);
  const auto start = Clock::now();
  std::thread reader([&] {
    v1::ServerMessage m;
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      if (!stream.Read(&m)) break;
    }
  });
  for (const auto& m : parsed) stream.Send(m);
  reader.join();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  stream.Close();
  return s;
}

std::unique_ptr<parity::server::ParityServer> StartServer(const std::string& tls, bool replay) {
  parity::common::ServerConfig c = pt::TestServerConfig(pt::MakeTempDir("parity_bench_"), tls);
  c.parity.metrics_port = -1;
  parity::server::CallHandler pass;
  if (!replay) {
    pass = [](const parity::server::CallOrigin&, const v1::ApiCall& call,
              const parity::server::BlobStore&) {
      v1::Verdict v;
      v.set_sequence(call.sequence());
      v.set_status(v1::VERDICT_STATUS_PASS);
      return v;
    };
  }
  auto s = parity::server::ParityServer::Create(c, pass);
  if (!s.ok() || !(*s)->Start().ok()) {
    std::fprintf(stderr, "server: %s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(s);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double Best(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) best = std::min(best, f());
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  parity::common::SetLogLevel(parity::common::LogLevel::kWarning);
  parity::common::KeepLargeAllocations(std::size_t{256} << 20);  // as parity-server does
  const int calls = quick ? 24 : 600;
  const int reps = quick ? 1 : 9;
  const std::vector<std::string> msgs = TypicalCalls(calls);
  const double mb = static_cast<double>(TotalBytes(msgs)) / 1e6;

  pt::KeyPair ca = pt::MakeCa("bench CA");
  const std::string root = pt::MakeTempDir("parity_bench_pki_");
  const std::string server_tls =
      pt::WriteTlsDir(root + "/s", ca.cert_pem, pt::MakeLeaf(ca, {"localhost", -1, 2}), {});
  const std::string client_tls =
      pt::WriteTlsDir(root + "/c", ca.cert_pem, {}, pt::MakeLeaf(ca, {"client", -1, 2}));
  auto plain = StartServer("", false);
  auto tls = StartServer(server_tls, false);

  // Repetitions alternate the three paths so that each ratio compares runs made moments apart
  // (loopback throughput on a shared VM drifts by tens of percent between seconds).
  std::vector<double> raw_s, plain_s, tls_s, plain_ratio, tls_ratio;
  for (int r = 0; r < reps; ++r) {
    raw_s.push_back(RawTcpSeconds(msgs));
    plain_s.push_back(GrpcSeconds(*plain, "", msgs));
    tls_s.push_back(GrpcSeconds(*tls, client_tls, msgs));
    plain_ratio.push_back(raw_s.back() / plain_s.back());
    tls_ratio.push_back(raw_s.back() / tls_s.back());
  }
  const double raw = Median(raw_s);

  std::printf("transport: %d calls, %.1f MB (typical ops on [64, 512] float32), median of %d\n",
              calls, mb, reps);
  std::printf("%-22s %10s %10s %14s\n", "path", "calls/s", "MB/s", "ratio to raw");
  auto line = [&](const char* name, double s, double ratio) {
    std::printf("%-22s %10.0f %10.1f %14.3f\n", name, calls / s, mb / s, ratio);
  };
  line("raw TCP loopback", raw, 1.0);
  line("gRPC plaintext", Median(plain_s), Median(plain_ratio));
  line("gRPC mutual TLS", Median(tls_s), Median(tls_ratio));

  // Where gRPC's time goes beyond the socket: the two copies of every tensor byte that protobuf
  // messages imply (the client serializes, the server parses into fresh messages), timed alone
  // on one thread. Each runs once per call in the gRPC rows above and never in the raw row.
  std::vector<v1::AgentMessage> parsed(msgs.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) parsed[i].ParseFromString(msgs[i]);
  std::string out;
  const double serialize = Best(reps, [&] {
    const auto start = Clock::now();
    for (const auto& m : parsed) m.SerializeToString(&out);
    return std::chrono::duration<double>(Clock::now() - start).count();
  });
  const double parse = Best(reps, [&] {
    const auto start = Clock::now();
    for (const auto& m : msgs) {
      v1::AgentMessage fresh;
      fresh.ParseFromString(m);
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  });
  line("  protobuf serialize", serialize, raw / serialize);
  line("  protobuf parse", parse, raw / parse);

  // For scale: the same stream with real replay and compare (CPU bench + float64 golden).
  auto replay = StartServer("", true);
  const int replay_calls = quick ? 6 : 120;
  const std::vector<std::string> few(msgs.begin(), msgs.begin() + replay_calls);
  const double r = GrpcSeconds(*replay, "", few);
  std::printf("%-22s %10.0f %10.1f %14s  (replay-bound: %d workers on %u cores)\n",
              "gRPC + replay (CPU)", replay_calls / r, TotalBytes(few) / 1e6 / r, "-",
              std::max(1u, std::min(4u, std::thread::hardware_concurrency() / 2)),
              std::thread::hardware_concurrency());
  return 0;
}
