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
#include "common/base/cpu_clock.h"
#include "common/base/log.h"
#include "common/base/parallel.h"
#include "common/base/status_macros.h"
#include "common/naming/api_names.h"
#include "common/naming/naming.h"
#include "common/naming/operator_catalogue.h"
#include "common/torch/generator_read.h"
#include "common/transport/grpc_tuning.h"
#include "common/transport/tls.h"
#include "server/compare/accumulate.h"
#include "server/compare/standards.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/replay/call_checker.h"
#include "server/replay/operator_libraries.h"
#include "server/replay/replay_errors.h"
#include "server/results/error_data.h"
#include "server/results/result_writer.h"
#include "server/results/verdict_text.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace parity::server {

std::string ErrorDataPath(const common::ServerConfig& config) {
  const std::filesystem::path path(config.error_data_path);
  if (path.is_absolute()) return path.lexically_normal().string();
  return (std::filesystem::path(config.parity.output_dir) / path).lexically_normal().string();
}

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

ParityServer::ParityServer(common::ServerConfig config) : config_(std::move(config)) {}

ParityServer::~ParityServer() { Shutdown(std::chrono::seconds(1)); }

absl::StatusOr<std::unique_ptr<ParityServer>> ParityServer::Create(
    const common::ServerConfig& config, CallHandler handler) {
  PARITY_RETURN_IF_ERROR(common::ValidateServerConfig(config));
  std::unique_ptr<ParityServer> s(new ParityServer(config));
  // Transport security first: a missing certificate must never turn into plaintext.
  PARITY_ASSIGN_OR_RETURN(std::shared_ptr<const common::RevocationList> crl, s->InitSecurity());
  PARITY_RETURN_IF_ERROR(s->InitOperators(/*load_libraries=*/!handler));
  if (!handler) {
    PARITY_RETURN_IF_ERROR(s->InitChecker());
    ParityServer* self = s.get();
    handler = [self](const CallOrigin& origin, const v1::ApiCall& call, const BlobStore& blobs) {
      return self->Process(origin, call, blobs);
    };
  }
  s->InitWorkers();
  s->service_ =
      std::make_unique<CheckService>(s->MakeServiceOptions(std::move(crl)), std::move(handler),
                                     s->queue_.get(), s->metrics_.get());
  return s;
}

absl::StatusOr<std::shared_ptr<const common::RevocationList>> ParityServer::InitSecurity() {
  const common::ServerOptions& o = config_.parity;
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
    return std::shared_ptr<const common::RevocationList>();
  }
  PARITY_ASSIGN_OR_RETURN(common::ServerTls tls,
                          common::LoadServerTls(config_.tls_path, o.tls_key_password_file));
  credentials_ = tls.credentials;
  tls_description_ = tls.description;
  return tls.crl;
}

absl::Status ParityServer::InitOperators(bool load_libraries) {
  const common::ServerOptions& o = config_.parity;
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
  PARITY_ASSIGN_OR_RETURN(white_list_, common::NameList::Parse(config_.white_list));
  PARITY_ASSIGN_OR_RETURN(black_list_, common::NameList::Parse(config_.black_list));
  if (!white_list_.empty() || !black_list_.empty()) {
    const common::OpNameIndex known(KnownOperatorNames());
    for (const auto& [key, list] : {std::pair{"run_ut.white_list", &white_list_},
                                    std::pair{"run_ut.black_list", &black_list_}}) {
      for (const std::string& line : list->Unknown(known)) {
        common::LogWarning(absl::StrCat(key, ": ", line));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParityServer::InitChecker() {
  const common::ServerOptions& o = config_.parity;
  PARITY_ASSIGN_OR_RETURN(checker_, CallChecker::Create(o, *standards_));
  if (const auto& low = checker_->low_precision_gemm_dtypes(); !low.empty()) {
    common::LogInfo(absl::StrCat(
        "bench ", checker_->bench_device(), ": libtorch's ", absl::StrJoin(low, " and "),
        " matrix products on this CPU round their partial sums to that dtype; the bench "
        "computes float16 and bfloat16 GEMMs in float32 and rounds once, as an accelerator "
        "does (docs/results.md#low-precision-gemms)"));
  }
  PARITY_ASSIGN_OR_RETURN(writer_, ResultWriter::Create(o.output_dir, *standards_));
  return absl::OkStatus();
}

void ParityServer::InitWorkers() {
  const common::ServerOptions& o = config_.parity;
  registry_ = std::make_shared<prometheus::Registry>();
  metrics_ = std::make_unique<ServerMetrics>(*registry_);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // Small ops gain from a few workers while large ones already use libtorch's intra-op threads.
  // A CUDA bench gets at least two workers per GPU (as many as the cores allow), each on a
  // stream of its own: one worker's decode and copies overlap another's kernels.
  const unsigned gpus = checker_ ? static_cast<unsigned>(checker_->bench_gpus()) : 0;
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
  if (checker_) {
    // Auto: libtorch's own choice, but no more than the worker's share of the cores.
    SetIntraOpThreads(o.intra_op_threads > 0
                          ? static_cast<int>(o.intra_op_threads)
                          : std::min(per_worker, LibtorchDefaultIntraOpThreads()));
  }
  ServerMetrics* metrics = metrics_.get();
  if (checker_ && o.save_error_data) {
    ErrorDataOptions error_data;
    error_data.path = ErrorDataPath(config_);
    error_data.max_bytes = o.error_data_max_bytes;
    error_data.max_per_op = o.error_data_per_op;
    error_data_ = std::make_unique<ErrorData>(
        error_data, *standards_,
        [metrics](ErrorDataOutcome outcome) { metrics->ErrorData(ErrorDataOutcomeName(outcome)); });
  }
  queue_ = std::make_unique<WorkQueue>(
      o.queue_max_calls, o.queue_max_bytes, workers_,
      [metrics](int64_t calls, int64_t bytes) { metrics->QueueDepth(calls, bytes); });
  metrics->QueueCapacity(o.queue_max_calls, static_cast<int64_t>(o.queue_max_bytes), workers_);
}

ServiceOptions ParityServer::MakeServiceOptions(std::shared_ptr<const common::RevocationList> crl) {
  const common::ServerOptions& o = config_.parity;
  ServiceOptions service;
  service.config = config_;
  v1::ServerInfo& info = service.server_info;
  info.set_server_version(PARITY_VERSION);
  info.set_max_message_bytes(o.max_message_bytes);
  info.set_max_tensor_bytes(o.limits.max_tensor_bytes);
  info.set_max_call_bytes(o.limits.max_call_bytes);
  for (int d = v1::DTYPE_BOOL; d <= v1::DTYPE_COMPLEX128; ++d) {
    info.add_accepted_dtypes(static_cast<v1::DType>(d));
  }
  info.set_bench_device(checker_ ? checker_->bench_device() : "none");
  info.set_golden_enabled(o.golden);
  info.set_torch_version(common::TorchVersion());
  info.set_kept_blob_bytes(o.kept_blob_bytes);
  service.crl = std::move(crl);
  // A rank's result rows wait for its backward calls; a stream's end writes them.
  service.on_stream_end = [this](const CallOrigin& origin) {
    if (!writer_) return;
    if (absl::Status written = writer_->EndOfStream(origin.rank); !written.ok()) {
      metrics_->ResultRowsLost(written.code() == absl::StatusCode::kResourceExhausted ? "disk_full"
                                                                                      : "io_error");
      common::LogError(absl::StrCat("result files: ", written.ToString()));
    }
  };
  return service;
}

absl::Status ParityServer::Start() {
  const common::ServerOptions& o = config_.parity;
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
  return writer_ ? writer_->Paths() : std::vector<std::string>{};
}

std::string ParityServer::Describe() const {
  return absl::StrCat(common::DescribeServerConfig(config_), "\ntransport = ", tls_description_,
                      "\nbench device = ", checker_ ? checker_->bench_device() : "none",
                      "\nworkers = ", workers_);
}

namespace {

// The checking thread's CPU per stage (parity_server_stage_cpu_seconds_total), for the stages
// that ran.
void CountStageCpu(const CallCheck::StageCpu& cpu, double write_cpu, ServerMetrics& metrics) {
  using Stage = ServerMetrics::Stage;
  metrics.StageCpu(Stage::kDecode, cpu.decode);
  if (cpu.random > 0) metrics.StageCpu(Stage::kRandom, cpu.random);
  if (cpu.bench_ran) metrics.StageCpu(Stage::kBench, cpu.bench);
  if (cpu.golden_ran) metrics.StageCpu(Stage::kGolden, cpu.golden);
  if (cpu.bench_ran || cpu.golden_ran) metrics.StageCpu(Stage::kCompare, cpu.compare);
  metrics.StageCpu(Stage::kWrite, write_cpu);
}

}  // namespace

v1::Verdict ParityServer::Process(const CallOrigin& origin, const v1::ApiCall& wire,
                                  const BlobStore& blobs) {
  static common::RateLimiter write_errors(std::chrono::seconds(10));
  const ServerCall call(
      wire, origin.framework);  // names and operator traits, made once for every stage below
  try {
    const bool white = !white_list_.empty() && !white_list_.Matches(wire);
    if (white || black_list_.Matches(wire)) {
      v1::Verdict v =
          DecidedVerdict(call, v1::VERDICT_STATUS_SKIP,
                         white ? "not in the server's white_list" : "in the server's black_list");
      metrics_->CallChecked(wire.phase(), v.status(), wire.op_name(), 0, 0);
      metrics_->RankChecked(origin.rank, v.status());
      return v;
    }
    const CallCheck check = checker_->Check(call, &blobs);
    v1::Verdict verdict = ToVerdict(call, check);
    double write_cpu = 0;
    {
      common::ScopedCpuTimer timer(&write_cpu);
      absl::Status written = writer_->Write(origin, call, check, verdict);
      if (!written.ok()) {
        metrics_->ResultRowsLost(
            written.code() == absl::StatusCode::kResourceExhausted  ? "disk_full"
            : written.code() == absl::StatusCode::kPermissionDenied ? "not_writable"
                                                                    : "io_error");
      }
      uint64_t suppressed = 0;
      if (!written.ok() && write_errors.Allow(&suppressed)) {
        common::LogError(absl::StrCat("result files: ", written.ToString(), " (", suppressed,
                                      " more suppressed)"));
      }
      if (check.values && error_data_) error_data_->Save(origin, call, check, verdict);
    }
    CountStageCpu(check.cpu, write_cpu, *metrics_);
    metrics_->CallChecked(wire.phase(), check.status, wire.op_name(), check.replay_seconds,
                          check.compare_seconds);
    metrics_->RankChecked(origin.rank, check.status);
    if (!check.inputs_written.empty()) metrics_->InputsWritten();
    return verdict;
  } catch (const std::exception& e) {
    // CallChecker catches the replays' errors itself; this is the last line of defence (an
    // allocation failure comparing or writing, say). The call is not checked: SKIP, never a
    // verdict on the call itself, with RESOURCE_EXHAUSTED when memory ran out, else INTERNAL.
    const bool memory = IsOutOfMemory(e);
    v1::Verdict v =
        DecidedVerdict(call, v1::VERDICT_STATUS_SKIP,
                       absl::StrCat(memory ? "not checked: the server ran out of memory: "
                                           : "not checked: internal error while checking: ",
                                    ErrorText(e)),
                       memory ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal);
    metrics_->CallChecked(wire.phase(), v.status(), wire.op_name(), 0, 0);
    metrics_->RankChecked(origin.rank, v.status());
    return v;
  }
}

}  // namespace parity::server
