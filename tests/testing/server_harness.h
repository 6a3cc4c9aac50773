// A parity-server in the test process plus a synchronous test client speaking parity.v1.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/transport/wire.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/app/server.h"

namespace parity::testing {

// A server config for tests: loopback, ephemeral ports, CPU bench, output in `output_dir`.
// Plaintext when `tls_path` is empty.
server::ServerConfig TestServerConfig(const std::string& output_dir, const std::string& tls_path);

// A channel to 127.0.0.1:port; TLS from `tls_path` (ca.crt [+ client.crt/key]) or plaintext.
std::shared_ptr<grpc::Channel> TestChannel(int port, const std::string& tls_path);

// One agent stream, driven synchronously. It writes bytes (the Check method called by name, as a
// generic client would), so that tests can also send what no protobuf serializer writes.
class TestStream {
 public:
  explicit TestStream(const std::shared_ptr<grpc::Channel>& channel);
  ~TestStream();

  // Sends Hello (rank, world_size rank + 1, version) and reads the ServerInfo; false with
  // `status()` filled if the server refused.
  bool Hello(int32_t rank = 0, uint32_t protocol_version = 1);
  // The same with a Hello of the caller's making.
  bool SendHello(const v1::Hello& hello);
  bool Send(const v1::AgentMessage& message);
  // As the agent sends: the tensors go from the message's memory, which the stream keeps alive
  // until gRPC has sent them; `more` (another Send follows at once) lets gRPC hold this one
  // back and send both together, as the agent does while calls are queued.
  bool Send(std::shared_ptr<const v1::AgentMessage> message, bool more = false);
  bool SendCall(const v1::ApiCall& call);
  // Sends `bytes` as one message, whatever they are.
  bool SendBytes(const std::string& bytes);
  // Reads the next server message; false at the end of the stream.
  bool Read(v1::ServerMessage* message);
  // Half-closes: the server sees the end of the stream; verdicts can still be read.
  void WritesDone();
  // Half-closes (if not yet), reads what is left and returns the final status.
  grpc::Status Close();

  const v1::ServerInfo& server_info() const { return info_; }
  const grpc::Status& status() const { return status_; }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
  v1::ServerInfo info_;
  grpc::Status status_;
  bool closed_ = false;
  bool writes_done_ = false;
};

// Sends `request` to 127.0.0.1:port and returns everything the server sends back until it
// closes the connection (status line, headers, body).
absl::StatusOr<std::string> HttpExchange(int port, const std::string& request);

// GET http://127.0.0.1:port/path, returns the body.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// Reads a whole file.
std::string ReadAll(const std::string& path);

}  // namespace parity::testing
