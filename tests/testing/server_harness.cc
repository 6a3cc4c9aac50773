#include "tests/testing/server_harness.h"

#include "parity/v1/parity.pb.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/transport/grpc_tuning.h"
#include "common/transport/tls.h"
#include "common/transport/wire.h"

namespace parity::testing {

server::ServerConfig TestServerConfig(const std::string& output_dir, const std::string& tls_path) {
  server::ServerConfig c;
  c.host = "127.0.0.1";
  c.port = 0;
  c.tls_path = tls_path;
  c.parity.plaintext = tls_path.empty();
  c.check.output_dir = output_dir;
  c.parity.metrics_host = "127.0.0.1";
  c.parity.metrics_port = 0;
  c.check.checker.bench_device = "cpu";
  c.parity.workers = 2;
  return c;
}

std::shared_ptr<grpc::Channel> TestChannel(int port, const std::string& tls_path) {
  grpc::ChannelArguments args;
  for (const auto& [name, value] : common::StreamChannelArgs()) args.SetInt(name, value);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (tls_path.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    auto tls = common::LoadChannelTls(tls_path);
    if (!tls.ok()) return nullptr;
    creds = tls->credentials;
    args.SetSslTargetNameOverride("localhost");
  }
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), creds, args);
}

TestStream::TestStream(const std::shared_ptr<grpc::Channel>& channel) {
  context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  // A synchronous stream of bytes (the agent uses agent/transport/check_stream.h's reactor): gRPC
  // has no public generic synchronous stub, so it is made as the generated stubs make theirs.
  stream_.reset(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(),
          grpc::internal::RpcMethod(common::kCheckMethod,
                                    grpc::internal::RpcMethod::BIDI_STREAMING),
          &context_));
}

TestStream::~TestStream() {
  if (!closed_) {
    context_.TryCancel();
    stream_->Finish();
  }
}

bool TestStream::Hello(int32_t rank, uint32_t protocol_version) {
  v1::Hello hello;
  hello.set_protocol_version(protocol_version);
  hello.set_rank(rank);
  hello.set_world_size(rank + 1);  // the smallest run this rank can belong to
  hello.set_run_id("test-run");
  hello.set_hostname("test-host");
  return SendHello(hello);
}

bool TestStream::SendHello(const v1::Hello& hello) {
  v1::AgentMessage m;
  *m.mutable_hello() = hello;
  if (!Send(m)) {
    Close();
    return false;
  }
  v1::ServerMessage reply;
  if (!Read(&reply) || !reply.has_server_info()) {
    Close();
    return false;
  }
  info_ = reply.server_info();
  return true;
}

bool TestStream::Send(const v1::AgentMessage& message) {
  return stream_->Write(common::Serialize(message));
}

bool TestStream::Send(std::shared_ptr<const v1::AgentMessage> message, bool more) {
  grpc::ByteBuffer buffer = common::SerializeShared(std::move(message));
  return stream_->Write(buffer, common::WriteOptionsFor(more));
}

bool TestStream::SendCall(const v1::ApiCall& call) {
  v1::AgentMessage m;
  *m.mutable_call() = call;
  return Send(m);
}

bool TestStream::SendBytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buffer(&slice, 1);
  return stream_->Write(buffer);
}

void TestStream::WritesDone() {
  if (writes_done_) return;
  writes_done_ = true;
  stream_->WritesDone();
}

bool TestStream::Read(v1::ServerMessage* message) {
  grpc::ByteBuffer buffer;
  return stream_->Read(&buffer) && common::Parse(buffer, message);
}

grpc::Status TestStream::Close() {
  if (closed_) return status_;
  closed_ = true;
  WritesDone();
  grpc::ByteBuffer ignored;
  while (stream_->Read(&ignored)) {
  }
  status_ = stream_->Finish();
  return status_;
}

absl::StatusOr<std::string> HttpExchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, " failed"));
  }
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError("short write");
  }
  std::string response;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return response;
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  absl::StatusOr<std::string> response = HttpExchange(
      port,
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  if (!response.ok()) return response;
  const std::size_t body = response->find("\r\n\r\n");
  if (body == std::string::npos) return absl::DataLossError("no HTTP body");
  return response->substr(body + 4);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace parity::testing
