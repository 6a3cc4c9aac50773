// Server transport throughput on loopback, side by side in one run. Every path carries the same
// serialized calls (typical training ops), already in memory as the raw row has them:
//   raw TCP              length-prefixed, one 8-byte ack per call
//   raw TLS              the same over OpenSSL's mutual TLS: what TLS itself costs here (the
//                        TLS rows also print their ratio to this one)
//   gRPC floor           a generic gRPC stream of the same bytes to a server that only acks: what
//                        gRPC itself costs here, the bound for any service built on it
//   Parity               the parity.v1 Check stream: Hello, then the calls, one verdict each
//     sync client        the same from a synchronous client that writes as the agent's sender
//                        does (one blocking write per call, gRPC's buffer hint while more
//                        follow): the client's share
//     reactor client     the same work through the agent's own client
//     (agent/transport/check_stream.h, a
//                        ClientBidiReactor); the sync client is the design it replaced, and
//                        the paired ratio of the two is printed
// each in plaintext and over mutual TLS. The server's handler answers PASS without replaying, so
// this measures transport, the envelope, the queue and the verdict stream: what the server adds
// on top of the socket. Then one line with real replay (CPU bench + float64 golden) for scale.
//   transport_bench [--quick] [--only=TEXT] [--reps=N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "agent/transport/check_stream.h"
#include "common/base/log.h"
#include "common/torch/torch_pch.h"
#include "common/transport/grpc_tuning.h"
#include "common/transport/tls.h"
#include "common/transport/wire.h"
#include "parity/v1/parity.pb.h"
#include "server/app/server.h"
#include "tests/testing/generic_stream.h"
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

// A loopback listener on a free port, and a client socket connected to it (TCP_NODELAY).
struct Loopback {
  int listener = -1, client = -1;
  Loopback() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listener, 1);
    socklen_t len = sizeof(addr);
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ~Loopback() {
    ::close(client);
    ::close(listener);
  }
};

// The receiving end of the raw paths: reads `count` length-prefixed messages into a buffer and
// acks each with its index. `read(p, n)` reads exactly n bytes (false at the end); `write(p, n)`
// writes them.
template <typename Read, typename Write>
void ReceiveAndAck(std::size_t count, Read read, Write write) {
  std::string buf;
  for (std::size_t i = 0; i < count; ++i) {
    uint32_t n = 0;
    if (!read(reinterpret_cast<char*>(&n), 4)) break;
    buf.resize(n);
    if (!read(buf.data(), n)) break;
    const uint64_t ack = i;
    write(reinterpret_cast<const char*>(&ack), 8);
  }
}

// Raw TCP: the receiver reads each length-prefixed message into a buffer and acks it.
double RawTcpSeconds(const std::vector<std::string>& msgs) {
  Loopback net;
  std::thread server([&] {
    const int fd = ::accept(net.listener, nullptr, nullptr);
    ReceiveAndAck(
        msgs.size(), [fd](char* p, size_t n) { return ReadAll(fd, p, n); },
        [fd](const char* p, size_t n) { WriteAll(fd, p, n); });
    ::close(fd);
  });
  const int fd = net.client;
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
  return s;
}

[[noreturn]] void TlsDie(const char* what) {
  std::fprintf(stderr, "raw TLS: %s: %s\n", what, ERR_error_string(ERR_get_error(), nullptr));
  std::exit(1);
}

// An OpenSSL context for one side of mutual TLS with the files of `dir` (ca.crt, and server.*
// or client.*), as Parity's own TLS set-up reads them.
std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> TlsContext(bool server, const std::string& dir) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(
      SSL_CTX_new(server ? TLS_server_method() : TLS_client_method()), &SSL_CTX_free);
  const std::string who = dir + (server ? "/server" : "/client");
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), (who + ".crt").c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx.get(), (who + ".key").c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_load_verify_locations(ctx.get(), (dir + "/ca.crt").c_str(), nullptr) != 1) {
    TlsDie("loading the certificates");
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return ctx;
}

bool TlsReadAll(SSL* ssl, char* p, size_t n) {
  while (n > 0) {
    const int r = SSL_read(ssl, p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Raw TCP under OpenSSL's mutual TLS (the handshake before the clock starts, as the gRPC paths
// connect first): what TLS itself costs on this machine for these messages, whatever carries
// them. One SSL object is not for two threads, so the client writes every call and then reads
// the acks (which wait in the socket's buffer meanwhile). `cipher` gets the negotiated suite.
double RawTlsSeconds(const std::vector<std::string>& msgs, SSL_CTX* server_ctx, SSL_CTX* client_ctx,
                     std::string* cipher) {
  Loopback net;
  std::thread server([&] {
    const int fd = ::accept(net.listener, nullptr, nullptr);
    SSL* ssl = SSL_new(server_ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) TlsDie("server handshake");
    ReceiveAndAck(
        msgs.size(), [ssl](char* p, size_t n) { return TlsReadAll(ssl, p, n); },
        [ssl](const char* p, size_t n) { SSL_write(ssl, p, static_cast<int>(n)); });
    SSL_shutdown(ssl);
    SSL_free(ssl);
    ::close(fd);
  });
  SSL* ssl = SSL_new(client_ctx);
  SSL_set_fd(ssl, net.client);
  if (SSL_connect(ssl) != 1) TlsDie("client handshake");
  *cipher = SSL_get_cipher_name(ssl);
  const auto start = Clock::now();
  for (const std::string& m : msgs) {
    const uint32_t n = static_cast<uint32_t>(m.size());
    if (SSL_write(ssl, &n, 4) != 4 || SSL_write(ssl, m.data(), static_cast<int>(m.size())) <= 0) {
      TlsDie("write");
    }
  }
  uint64_t ack;
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    if (!TlsReadAll(ssl, reinterpret_cast<char*>(&ack), 8)) TlsDie("ack");
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  server.join();
  SSL_free(ssl);
  return s;
}

// The Check stream: writes every call while a reader thread takes the verdicts.
double GrpcSeconds(parity::server::ParityServer& server, const std::string& client_tls,
                   const std::vector<std::shared_ptr<const v1::AgentMessage>>& msgs) {
  pt::TestStream stream(pt::TestChannel(server.port(), client_tls));
  if (!stream.Hello()) {
    std::fprintf(stderr, "hello failed: %s\n", stream.status().error_message().c_str());
    std::exit(1);
  }
  const auto start = Clock::now();
  std::thread reader([&] {
    v1::ServerMessage m;
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      if (!stream.Read(&m)) break;
    }
  });
  for (std::size_t i = 0; i < msgs.size(); ++i) stream.Send(msgs[i], i + 1 < msgs.size());
  reader.join();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  stream.Close();
  return s;
}

// The agent's client: agent/transport/check_stream.h's reactor, driven as the sender thread drives
// it (each message serialized as it is written, one queued behind the write in flight, gRPC's
// buffer hint while more follow), the verdicts counted on gRPC's callback threads.
double ReactorSeconds(int port, const std::string& client_tls,
                      const std::vector<std::shared_ptr<const v1::AgentMessage>>& msgs) {
  std::shared_ptr<grpc::Channel> channel = pt::TestChannel(port, client_tls);
  channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto hello = std::make_shared<v1::AgentMessage>();
  hello->mutable_hello()->set_protocol_version(parity::server::kProtocolVersion);
  hello->mutable_hello()->set_run_id("transport_bench");
  hello->mutable_hello()->set_world_size(1);
  std::mutex mu;
  std::condition_variable cv;
  std::size_t answered = 0;
  parity::agent::CheckStream stream(channel, [&](grpc::ByteBuffer&) {
    std::lock_guard<std::mutex> l(mu);
    if (++answered == msgs.size()) cv.notify_all();
  });
  const auto start = Clock::now();
  bool ok = stream.Write(parity::common::SerializeShared(hello), false) &&
            stream.AwaitFirst().has_value();
  for (std::size_t i = 0; ok && i < msgs.size(); ++i) {
    ok = stream.Write(parity::common::SerializeShared(msgs[i]), i + 1 < msgs.size());
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait_for(l, std::chrono::seconds(60), [&] { return answered == msgs.size(); });
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  stream.WritesDone();
  const grpc::Status status = stream.Finish(absl::Seconds(10));
  if (!ok || answered != msgs.size() || !status.ok()) {
    std::fprintf(stderr, "reactor client: %zu of %zu calls answered (%s)\n", answered, msgs.size(),
                 status.error_message().c_str());
    std::exit(1);
  }
  return s;
}

// gRPC's own floor: a generic bidi stream of the same serialized messages, sent as ByteBuffers
// over the caller's memory (no serialization), received as ByteBuffers (no parsing), one 8-byte
// ack per message, client and server both on the callback API with Parity's channel arguments.
// What any gRPC transport of these bytes costs on this machine; the Check stream adds protobuf,
// the queue, the handler and the verdicts on top.
class FloorService : public grpc::CallbackGenericService {
  class Reactor : public pt::GenericStreamReactor {
    void OnMessage(grpc::ByteBuffer& message) override {
      message.Clear();
      ++received_;
    }
    // One ack for every message received since the last one.
    std::optional<grpc::ByteBuffer> NextWrite() override {
      if (acked_ == received_) return std::nullopt;
      const uint64_t n = received_ - acked_;
      acked_ += n;
      grpc::Slice slice(&n, sizeof(n));
      return grpc::ByteBuffer(&slice, 1);
    }
    uint64_t received_ = 0, acked_ = 0;
  };

 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Reactor;
  }
};

struct FloorServer {
  FloorService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

std::unique_ptr<FloorServer> StartFloorServer(const std::string& tls) {
  auto f = std::make_unique<FloorServer>();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!tls.empty()) creds = parity::common::LoadServerTls(tls)->credentials;
  builder.AddListeningPort("127.0.0.1:0", creds, &f->port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  for (const auto& [name, value] : parity::common::StreamChannelArgs()) {
    builder.AddChannelArgument(name, value);
  }
  builder.RegisterCallbackGenericService(&f->service);
  f->server = builder.BuildAndStart();
  return f;
}

// Writes `msgs` on a generic stream, one write outstanding at a time, from slices over the
// caller's memory (no copy); counts the answers: acks of the floor server (each carries how many
// messages it answers), or ServerMessages of the Check stream (one each).
class StreamClient : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamClient(grpc::GenericStub& stub, const char* method,
               const std::vector<const std::string*>& msgs, bool check_stream)
      : check_stream_(check_stream) {
    for (const std::string* m : msgs) {
      grpc::Slice slice(const_cast<char*>(m->data()), m->size(), grpc::Slice::STATIC_SLICE);
      buffers_.emplace_back(&slice, 1);
    }
    stub.PrepareBidiStreamingCall(&ctx_, method, grpc::StubOptions(), this);
  }
  double Run() {
    const auto start = Clock::now();
    StartRead(&in_);
    StartWrite(&buffers_[0]);
    StartCall();
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return done_; });
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  void OnWriteDone(bool ok) override {
    if (ok && ++written_ < buffers_.size()) {
      StartWrite(&buffers_[written_]);
    } else {
      StartWritesDone();
    }
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (check_stream_) {
      ++answered_;
    } else {
      std::vector<grpc::Slice> slices;  // the 8 bytes may arrive in more than one slice
      std::string bytes;
      if (in_.Dump(&slices).ok()) {
        for (const grpc::Slice& slice : slices) {
          bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
        }
      }
      uint64_t n = 0;
      if (bytes.size() == sizeof(n)) std::memcpy(&n, bytes.data(), sizeof(n));
      answered_ += n;
    }
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> l(mu_);
    status_ = status;
    done_ = true;
    cv_.notify_all();
  }
  uint64_t answered() const { return answered_; }
  const grpc::Status& status() const { return status_; }

 private:
  const bool check_stream_;
  std::vector<grpc::ByteBuffer> buffers_;
  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;
  std::size_t written_ = 0;
  uint64_t answered_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

// The floor stream (`check_stream` false) or Parity's Check stream (Hello first); exits unless
// every message was answered.
double StreamSeconds(int port, const std::string& client_tls, const std::vector<std::string>& msgs,
                     bool check_stream) {
  std::shared_ptr<grpc::Channel> channel = pt::TestChannel(port, client_tls);
  channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::GenericStub stub(channel);
  std::string hello;
  std::vector<const std::string*> sent;
  if (check_stream) {
    v1::AgentMessage m;
    m.mutable_hello()->set_protocol_version(parity::server::kProtocolVersion);
    m.mutable_hello()->set_run_id("transport_bench");
    m.mutable_hello()->set_world_size(1);
    hello = m.SerializeAsString();
    sent.push_back(&hello);
  }
  for (const std::string& m : msgs) sent.push_back(&m);
  StreamClient client(stub, check_stream ? parity::common::kCheckMethod : "/bench.Floor/Stream",
                      sent, check_stream);
  const double s = client.Run();
  if (client.answered() != sent.size() || !client.status().ok()) {
    std::fprintf(stderr, "stream: %llu of %zu messages answered (%s)\n",
                 static_cast<unsigned long long>(client.answered()), sent.size(),
                 client.status().error_message().c_str());
    std::exit(1);
  }
  return s;
}

std::unique_ptr<parity::server::ParityServer> StartServer(const std::string& tls, bool replay) {
  parity::server::ServerConfig c = pt::TestServerConfig(pt::MakeTempDir("parity_bench_"), tls);
  c.parity.metrics_port = -1;
  parity::server::CallHandler pass;
  if (!replay) {
    pass = [](const parity::server::CallOrigin&, const parity::server::ServerCall&,
              const parity::common::BlobSource&) {
      parity::server::CallOutcome check;
      check.status = parity::server::CheckStatus::kPass;
      return check;
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
  bool quick = false;
  std::string only;  // --only=TEXT: the paths whose name holds TEXT (and raw TCP, TLS), to profile
  int reps_override = 0;  // --reps=N
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
      only = argv[i] + 7;
    } else if (std::strncmp(argv[i], "--reps=", 7) == 0) {
      reps_override = std::atoi(argv[i] + 7);
    } else {
      std::fprintf(stderr, "usage: transport_bench [--quick] [--only=TEXT] [--reps=N]\n");
      return 2;
    }
  }
  parity::common::SetLogLevel(parity::common::LogLevel::kWarning);
  parity::common::KeepLargeAllocations(std::size_t{256} << 20);  // as parity-server does
  const int calls = quick ? 24 : 600;
  const int reps = reps_override > 0 ? reps_override : quick ? 1 : 9;
  const std::vector<std::string> msgs = TypicalCalls(calls);
  const double mb = static_cast<double>(TotalBytes(msgs)) / 1e6;

  pt::KeyPair ca = pt::MakeCa("bench CA");
  const std::string root = pt::MakeTempDir("parity_bench_pki_");
  const std::string server_tls =
      pt::WriteTlsDir(root + "/s", ca.cert_pem, pt::MakeLeaf(ca, {"localhost", -1, 2}), {});
  const std::string client_tls =
      pt::WriteTlsDir(root + "/c", ca.cert_pem, {}, pt::MakeLeaf(ca, {"client", -1, 2}));
  // The messages as the client holds them before sending (parsed once, outside the timings).
  std::vector<std::shared_ptr<const v1::AgentMessage>> parsed;
  for (const std::string& m : msgs) {
    auto p = std::make_shared<v1::AgentMessage>();
    p->ParseFromString(m);
    parsed.push_back(std::move(p));
  }
  auto plain = StartServer("", false);
  auto tls = StartServer(server_tls, false);
  auto plain_floor = StartFloorServer("");
  auto tls_floor = StartFloorServer(server_tls);
  const auto tls_server_ctx = TlsContext(true, server_tls);
  const auto tls_client_ctx = TlsContext(false, client_tls);
  std::string cipher;

  // Repetitions alternate the paths so that each ratio compares runs made moments apart
  // (loopback throughput on a shared VM drifts by tens of percent between seconds).
  struct Path {
    const char* name;
    bool tls;
    std::function<double()> run;
    std::vector<double> seconds = {}, ratio = {}, tls_ratio = {};
  };
  std::vector<Path> paths = {
      {"gRPC floor, plaintext", false,
       [&] { return StreamSeconds(plain_floor->port, "", msgs, false); }},
      {"Parity, plaintext", false, [&] { return StreamSeconds(plain->port(), "", msgs, true); }},
      {"  sync client", false, [&] { return GrpcSeconds(*plain, "", parsed); }},
      {"  reactor client", false, [&] { return ReactorSeconds(plain->port(), "", parsed); }},
      {"gRPC floor, mutual TLS", true,
       [&] { return StreamSeconds(tls_floor->port, client_tls, msgs, false); }},
      {"Parity, mutual TLS", true,
       [&] { return StreamSeconds(tls->port(), client_tls, msgs, true); }},
      {"  sync client", true, [&] { return GrpcSeconds(*tls, client_tls, parsed); }},
      {"  reactor client", true, [&] { return ReactorSeconds(tls->port(), client_tls, parsed); }},
  };
  paths.erase(std::remove_if(paths.begin(), paths.end(),
                             [&](const Path& p) {
                               return std::string(p.name).find(only) == std::string::npos;
                             }),
              paths.end());
  std::vector<double> raw_s, raw_tls_s, raw_tls_ratio;
  for (int r = 0; r < reps; ++r) {
    raw_s.push_back(RawTcpSeconds(msgs));
    raw_tls_s.push_back(RawTlsSeconds(msgs, tls_server_ctx.get(), tls_client_ctx.get(), &cipher));
    raw_tls_ratio.push_back(raw_s.back() / raw_tls_s.back());
    for (Path& p : paths) {
      p.seconds.push_back(p.run());
      p.ratio.push_back(raw_s.back() / p.seconds.back());
      if (p.tls) p.tls_ratio.push_back(raw_tls_s.back() / p.seconds.back());
    }
  }
  const double raw = Median(raw_s);

  std::printf("transport: %d calls, %.1f MB (typical ops on [64, 512] float32), median of %d\n",
              calls, mb, reps);
  std::printf("%-24s %10s %10s %14s %14s\n", "path", "calls/s", "MB/s", "ratio to raw",
              "to raw TLS");
  auto line = [&](const char* name, double s, double ratio, double tls_ratio = -1) {
    std::printf("%-24s %10.0f %10.1f %14.3f", name, calls / s, mb / s, ratio);
    if (tls_ratio >= 0) std::printf(" %14.3f", tls_ratio);
    std::printf("\n");
  };
  line("raw TCP loopback", raw, 1.0);
  line("raw TLS (OpenSSL)", Median(raw_tls_s), Median(raw_tls_ratio), 1.0);
  for (const Path& p : paths) {
    line(p.name, Median(p.seconds), Median(p.ratio), p.tls ? Median(p.tls_ratio) : -1);
  }
  std::printf("(raw TLS: mutual, %s, OpenSSL's default suite)\n", cipher.c_str());
  // The two agent-side clients, paired run by run: > 1 means the reactor moved the calls faster.
  for (const bool over_tls : {false, true}) {
    const Path *sync = nullptr, *reactor = nullptr;
    for (const Path& p : paths) {
      if (p.tls != over_tls) continue;
      if (std::string(p.name) == "  sync client") sync = &p;
      if (std::string(p.name) == "  reactor client") reactor = &p;
    }
    if (sync == nullptr || reactor == nullptr) continue;
    std::vector<double> speedup;
    for (std::size_t i = 0; i < sync->seconds.size(); ++i) {
      speedup.push_back(sync->seconds[i] / reactor->seconds[i]);
    }
    std::printf(
        "reactor client / sync client, %s: %.3fx (median of %zu paired runs; min %.3f, "
        "max %.3f)\n",
        over_tls ? "mutual TLS" : "plaintext", Median(speedup), speedup.size(),
        *std::min_element(speedup.begin(), speedup.end()),
        *std::max_element(speedup.begin(), speedup.end()));
  }

  // Protobuf's two copies of every tensor byte, timed alone on one thread: serializing (which
  // the agent and the sync client avoid: their tensors go out from the message's memory) and
  // parsing (the server's workers parse each call).
  std::string out;
  const double serialize = Best(reps, [&] {
    const auto start = Clock::now();
    for (const auto& m : parsed) m->SerializeToString(&out);
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
  const double r = StreamSeconds(replay->port(), "", few, true);
  std::printf("%-24s %10.0f %10.1f %14s  (replay-bound: %d workers on %u cores)\n",
              "Parity + replay (CPU)", replay_calls / r, TotalBytes(few) / 1e6 / r, "-",
              std::max(1u, std::min(4u, std::thread::hardware_concurrency() / 2)),
              std::thread::hardware_concurrency());
  return 0;
}
