#include "server/app/server.h"

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "common/base/parallel.h"
#include "common/base/status_macros.h"
#include "common/naming/naming.h"
#include "common/naming/operator_catalogue.h"
#include "common/naming/selection.h"
#include "common/torch/generator_read.h"
#include "common/transport/client_certificates.h"
#include "common/transport/grpc_tuning.h"
#include "common/transport/tls.h"
#include "server/check/call_pipeline.h"
#include "server/check/replica_check.h"
#include "server/compare/accumulate.h"
#include "server/compare/standards.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/replay/call_checker.h"
#include "server/replay/operator_libraries.h"
#include "server/results/replica_writer.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace parity::server {

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

ParityServer::ParityServer(ServerConfig config) : config_(std::move(config)) {}

ParityServer::~ParityServer() { Shutdown(std::chrono::seconds(1)); }

absl::StatusOr<std::unique_ptr<ParityServer>> ParityServer::Create(const ServerConfig& config,
                                                                   CallHandler handler) {
  PARITY_RETURN_IF_ERROR(ValidateServerConfig(config));
  std::unique_ptr<ParityServer> s(new ParityServer(config));
  // Transport security first: a missing certificate must never turn into plaintext.
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const common::ClientCertificates> clients,
                          s->InitSecurity());
  PARITY_RETURN_IF_ERROR(s->InitOperators(/*load_libraries=*/!handler));
  s->registry_ = std::make_shared<prometheus::Registry>();
  s->metrics_ = std::make_unique<ServerMetrics>(*s->registry_);
  if (!handler) {
    PARITY_ASSIGN_OR_RETURN(s->pipeline_,
                            CallPipeline::Create(s->config_.check, s->config_.parity.limits,
                                                 *s->standards_, *s->metrics_));
    s->sink_ = s->pipeline_.get();
  } else {
    s->handler_sink_ = std::make_unique<HandlerSink>(std::move(handler));
    s->sink_ = s->handler_sink_.get();
  }
  // Replica reports are compared with or without the replay (docs/replicas.md).
  PARITY_ASSIGN_OR_RETURN(s->replica_writer_, ReplicaWriter::Create(s->config_.check.output_dir));
  s->replicas_ = std::make_unique<ReplicaChecker>(s->config_.replicas, s->replica_writer_.get(),
                                                  s->metrics_.get());
  s->InitWorkers();
  s->service_ = std::make_unique<CheckService>(s->MakeServiceOptions(std::move(clients)), s->sink_,
                                               s->queue_.get(), s->metrics_.get());
  return s;
}

absl::StatusOr<std::shared_ptr<const common::ClientCertificates>> ParityServer::InitSecurity() {
  const ServerOptions& o = config_.parity;
  host_ = config_.host.empty() ? (o.plaintext ? "127.0.0.1" : "0.0.0.0") : config_.host;
  if (o.plaintext) {
    if (!IsLoopbackHost(host_) && !o.allow_plaintext_non_loopback) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plaintext on ", host_,
          " would expose training data to the network: bind to 127.0.0.1, use TLS (tls_path), "
          "or set parity.allow_plaintext_non_loopback: true"));
    }
    credentials_ = grpc::InsecureServerCredentials();
    tls_description_ = "plaintext (explicit parity.plaintext)";
    return std::shared_ptr<const common::ClientCertificates>();
  }
  PARITY_ASSIGN_OR_RETURN(common::ServerTls tls,
                          common::LoadServerTls(config_.tls_path, o.tls_key_password_file));
  credentials_ = tls.credentials;
  tls_description_ = tls.description;
  return tls.clients;
}

absl::Status ParityServer::InitOperators(bool load_libraries) {
  const ServerOptions& o = config_.parity;
  // Before the standards: they list the random ops, which the catalogue names.
  if (!o.operator_catalogue.empty()) {
    PARITY_RETURN_IF_ERROR(common::AddToOperatorCatalogue(o.operator_catalogue));
  }
  if (o.standards_file.empty()) {
    standards_ = std::make_unique<StandardsTable>(StandardsTable::Default());
  } else {
    PARITY_ASSIGN_OR_RETURN(StandardsTable t, StandardsTable::Load(o.standards_file));
    standards_ = std::make_unique<StandardsTable>(std::move(t));
  }
  // Before the lists are checked against the operators this process knows: they may name the
  // libraries' operators.
  if (load_libraries) {
    PARITY_ASSIGN_OR_RETURN(const std::vector<LoadedLibrary> libraries,
                            LoadOperatorLibraries(o.npu_reference, o.reference_libraries));
    for (const LoadedLibrary& lib : libraries) {
      common::LogInfo(
          absl::StrCat("operator library ", lib.path, ": ", lib.operators.size(), " operators"));
    }
  }
  // The lists are the pipeline's; a server with a test's handler still refuses malformed ones.
  PARITY_RETURN_IF_ERROR(common::NameList::Parse(config_.check.white_list).status());
  PARITY_RETURN_IF_ERROR(common::NameList::Parse(config_.check.black_list).status());
  return absl::OkStatus();
}

void ParityServer::InitWorkers() {
  const ServerOptions& o = config_.parity;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // Small ops gain from a few workers while large ones already use libtorch's intra-op threads.
  // A CUDA bench gets at least two workers per GPU (as many as the cores allow), each on a
  // stream of its own: one worker's decode and copies overlap another's kernels.
  const unsigned gpus = pipeline_ ? static_cast<unsigned>(pipeline_->checker().bench_gpus()) : 0;
  workers_ =
      o.workers > 0
          ? static_cast<int>(o.workers)
          : static_cast<int>(std::max(std::clamp(cores / 2, 1u, 4u), std::min(2 * gpus, cores)));
  // Large comparisons and libtorch's own ops split across threads; together the workers should
  // not oversubscribe the cores (a worker's replay waits for the slowest of its op's threads).
  const int per_worker = static_cast<int>(std::max(1u, cores / static_cast<unsigned>(workers_)));
  internal::SetCompareThreads(per_worker);
  // Unless the environment set it (PARITY_DECODE_THREADS): a worker's decode copies with its
  // share of the cores too, at most 8.
  if (std::getenv("PARITY_DECODE_THREADS") == nullptr)
    common::SetDecodeThreads(std::min(per_worker, 8));
  if (pipeline_) {
    // Auto: libtorch's own choice, but no more than the worker's share of the cores.
    SetIntraOpThreads(o.intra_op_threads > 0
                          ? static_cast<int>(o.intra_op_threads)
                          : std::min(per_worker, LibtorchDefaultIntraOpThreads()));
  }
  ServerMetrics* metrics = metrics_.get();
  queue_ = std::make_unique<WorkQueue>(
      o.queue_max_calls, o.queue_max_bytes, workers_,
      [metrics](int64_t calls, int64_t bytes) { metrics->QueueDepth(calls, bytes); });
  metrics->QueueCapacity(o.queue_max_calls, static_cast<int64_t>(o.queue_max_bytes), workers_);
}

ServiceOptions ParityServer::MakeServiceOptions(
    std::shared_ptr<const common::ClientCertificates> clients) {
  const ServerOptions& o = config_.parity;
  ServiceOptions service = config_.service;
  service.limits = o.limits;
  ServiceOptions::Facts& info = service.server;
  info.server_version = PARITY_VERSION;
  info.max_message_bytes = o.max_message_bytes;
  info.max_tensor_bytes = o.limits.max_tensor_bytes;
  info.max_call_bytes = o.limits.max_call_bytes;
  info.bench_device = pipeline_ ? pipeline_->checker().bench_device() : "none";
  info.golden_enabled = config_.check.checker.golden;
  info.torch_version = common::TorchVersion();
  info.kept_blob_bytes = o.kept_blob_bytes;
  service.clients = std::move(clients);
  service.replicas = replicas_.get();
  // A rank's result rows wait for its backward calls; a stream's end writes them.
  service.on_stream_end = [this](const CallOrigin& origin) {
    if (pipeline_) pipeline_->EndOfStream(origin);
  };
  return service;
}

absl::Status ParityServer::Start() {
  const ServerOptions& o = config_.parity;
  queue_->Start();
  grpc::ServerBuilder builder;
  const std::string addr = absl::StrCat(
      absl::StrContains(host_, ":") && host_[0] != '[' ? absl::StrCat("[", host_, "]") : host_, ":",
      config_.port);
  builder.AddListeningPort(addr, std::static_pointer_cast<grpc::ServerCredentials>(credentials_),
                           &port_);
  builder.RegisterService(service_.get());
  // A deliberate cap: larger tensors arrive in chunks (never raise it to INT_MAX).
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<uint64_t>(o.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(16 << 20);
  for (const auto& [name, value] : common::StreamChannelArgs()) {
    builder.AddChannelArgument(name, value);
  }
  // gRPC binds with SO_REUSEPORT by default: a second server on a busy port would start and
  // silently take half of the agents. Refuse the port instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    queue_->Stop();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", addr, " (port in use, or an address this host does not have)"));
  }
  if (o.metrics_port >= 0) {
    auto endpoint =
        MetricsEndpoint::Start(o.metrics_host, static_cast<int>(o.metrics_port), registry_);
    if (!endpoint.ok()) {
      server_->Shutdown();
      queue_->Stop();
      return endpoint.status();
    }
    endpoint_ = *std::move(endpoint);
    metrics_port_ = endpoint_->port();
  }
  common::LogInfo(absl::StrCat("listening on ", address(), " (", tls_description_, ")"));
  if (metrics_port_ >= 0) {
    common::LogInfo(
        absl::StrCat("metrics on http://", o.metrics_host, ":", metrics_port_, "/metrics"));
  }
  return absl::OkStatus();
}

std::string ParityServer::address() const { return absl::StrCat(host_, ":", port_); }

void ParityServer::Shutdown(std::chrono::milliseconds grace) {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  if (server_) {
    // Workers keep running meanwhile: open streams finish only once their calls are checked.
    server_->Shutdown(std::chrono::system_clock::now() + grace);
    server_->Wait();
  }
  if (queue_) queue_->Stop();
  endpoint_.reset();
}

std::vector<std::string> ParityServer::ResultPaths() const {
  return pipeline_ ? pipeline_->ResultPaths() : std::vector<std::string>{};
}

std::string ParityServer::Describe() const {
  return absl::StrCat(DescribeServerConfig(config_), "\ntransport = ", tls_description_,
                      "\nbench device = ", pipeline_ ? pipeline_->checker().bench_device() : "none",
                      "\nworkers = ", workers_);
}

}  // namespace parity::server
