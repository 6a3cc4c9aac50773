// The benchmark server: configuration in, a listening gRPC service (TLS or mutual TLS), a worker
// pool replaying calls, result files and a Prometheus endpoint out. `main` only parses flags.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/call/call_sink.h"
#include "server/config/server_config.h"
#include "server/service/check_service.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace grpc {
class Server;
}

namespace parity::server {

class CallPipeline;
class ReplicaChecker;
class ReplicaWriter;
class MetricsEndpoint;
class ServerMetrics;
class StandardsTable;

// What replaces the replay where a server must not check (parity-server --replay=false, the
// transport's benchmarks, tests): a function in the CallSink's place.
using CallHandler = std::function<CallOutcome(const CallOrigin& origin, const ServerCall& call,
                                              const common::BlobSource& blobs)>;

// A CallHandler as the service's sink.
class HandlerSink final : public CallSink {
 public:
  explicit HandlerSink(CallHandler handler) : handler_(std::move(handler)) {}
  CallOutcome Run(const CallOrigin& origin, const ServerCall& call,
                  const common::BlobSource& blobs) override {
    return handler_(origin, call, blobs);
  }

 private:
  const CallHandler handler_;
};

class ParityServer {
 public:
  // Validates the configuration and prepares everything that can fail without binding: TLS
  // material, the standards table, the bench device, the output directory. `handler` replaces
  // the replay (benchmarks of the transport alone); empty = replay and compare.
  static absl::StatusOr<std::unique_ptr<ParityServer>> Create(const ServerConfig& config,
                                                              CallHandler handler = {});
  ~ParityServer();  // Shutdown()

  // Binds the gRPC port and the metrics port; both may be 0 (ephemeral: read them back).
  absl::Status Start();
  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }  // -1 when disabled
  // Bytes held in chunked tensors whose call has not arrived, over all streams.
  uint64_t partial_blob_bytes() const { return service_->partial_blob_bytes(); }
  uint64_t kept_blob_bytes_offered() const { return service_->kept_blob_bytes_offered(); }
  std::string address() const;  // "host:port" as bound

  // Stops accepting streams, lets open ones finish within `grace` (then cancels them), finishes
  // queued calls and flushes the result files. Idempotent; thread-safe.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::seconds(5));

  prometheus::Registry& registry() { return *registry_; }
  std::vector<std::string> ResultPaths() const;
  // One line per effective setting, for the start-up log.
  std::string Describe() const;
  const ServerConfig& config() const { return config_; }

 private:
  explicit ParityServer(ServerConfig config);
  // Create's steps, in order: the host and credentials (mutual TLS: the client certificates'
  // verifier, crl.pem in it); the standards and the operator libraries; the metrics; the call
  // pipeline (absent with a test's handler); workers, threads and the queue; the service's
  // options.
  absl::StatusOr<std::shared_ptr<const common::ClientCertificates>> InitSecurity();
  absl::Status InitOperators(bool load_libraries);
  void InitWorkers();
  ServiceOptions MakeServiceOptions(std::shared_ptr<const common::ClientCertificates> clients);

  ServerConfig config_;
  std::string host_;
  std::string tls_description_;
  std::shared_ptr<void> credentials_;  // grpc::ServerCredentials, kept opaque here
  std::unique_ptr<StandardsTable> standards_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<CallPipeline> pipeline_;         // null with a test's handler; uses metrics_
  std::unique_ptr<HandlerSink> handler_sink_;      // the test's handler, when given
  CallSink* sink_ = nullptr;                       // the pipeline or the handler: the service's
  std::unique_ptr<ReplicaWriter> replica_writer_;  // replica_checking_result_*.csv
  std::unique_ptr<ReplicaChecker> replicas_;       // before the service: outlives its streams
  std::unique_ptr<WorkQueue> queue_;
  std::unique_ptr<CheckService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsEndpoint> endpoint_;  // /metrics
  int port_ = 0;
  int metrics_port_ = -1;
  int workers_ = 1;
  bool shut_down_ = false;
  absl::Mutex shutdown_mu_;
};

// Whether `host` names the loopback interface ("127.0.0.1", "localhost", "::1", "[::1]").
bool IsLoopbackHost(absl::string_view host);

}  // namespace parity::server
