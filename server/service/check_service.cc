#include "server/service/check_service.h"

#include "parity/v1/parity.pb.h"

#include <grpc/grpc_security_constants.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/text.h"
#include "common/transport/client_certificates.h"
#include "server/metrics/metrics.h"
#include "server/service/blob_assembler.h"
#include "server/service/stream_reactor.h"

namespace parity::server {

CheckService::CheckService(ServiceOptions options, CallSink* sink, WorkQueue* queue,
                           ServerMetrics* metrics)
    : options_(std::move(options)),
      sink_(sink),
      queue_(queue),
      metrics_(metrics),
      partial_blobs_(options_.max_partial_blob_bytes),
      kept_offered_(options_.max_kept_blob_bytes) {}

void CheckService::FailBlobGrowthAboveForTesting(uint64_t bytes) {
  BlobAssembler::FailGrowthAboveForTesting(bytes);
}

void CheckService::NoteConfigDigest(const std::string& run_id, int32_t rank,
                                    const std::string& digest) {
  if (run_id.empty() || digest.empty()) return;
  absl::MutexLock lock(&digests_mu_);
  constexpr std::size_t kMaxRuns = 10000;  // a long-lived server forgets the oldest runs
  if (digests_.size() >= kMaxRuns && digests_.count(run_id) == 0) digests_.erase(digests_.begin());
  auto [it, first] = digests_.emplace(run_id, RunDigest{digest, rank, false});
  if (first || it->second.digest == digest || it->second.warned) return;
  it->second.warned = true;
  common::LogWarning(
      absl::StrCat("run ", common::Printable(run_id), ": rank ", rank, " runs with configuration ",
                   common::Printable(digest), ", rank ", it->second.rank, " with ",
                   common::Printable(it->second.digest),
                   "; ranks started with different settings check different calls (compare their "
                   "agents' start-up lines)"));
}

v1::AgentStats CheckService::ExchangeAgentStats(const std::string& agent,
                                                const v1::AgentStats& stats) {
  absl::MutexLock lock(&agent_stats_mu_);
  constexpr std::size_t kMaxAgents = 65536;  // a long-lived server forgets the oldest agents
  if (agent_stats_.size() >= kMaxAgents && agent_stats_.count(agent) == 0) {
    agent_stats_.erase(agent_stats_.begin());
  }
  v1::AgentStats& last = agent_stats_[agent];
  v1::AgentStats previous = std::move(last);
  last = stats;
  return previous;
}

bool CheckService::Enqueue(WorkItem item, std::function<void()> on_admitted) {
  return queue_->PushOrPark(std::move(item), std::move(on_admitted));
}

std::string CheckService::RefusedClient(grpc::CallbackServerContext* context) {
  std::string leaf, chain;
  if (auto auth = context->auth_context()) {
    for (const grpc::string_ref& pem : auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME)) {
      leaf.assign(pem.data(), pem.size());
    }
    for (const grpc::string_ref& pem :
         auth->FindPropertyValues(GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME)) {
      chain.assign(pem.data(), pem.size());
    }
  }
  const common::ClientCertificateVerdict verdict = options_.clients->Verify(leaf, chain);
  if (verdict.accepted()) return "";
  const char* cause = common::ClientCertificateCauseName(verdict.cause);
  if (metrics_) metrics_->TlsRefused(cause);
  // One line a minute per peer host and cause: a misconfigured job of 1,000 ranks reconnecting
  // with back-off must not flood the log, and each host is still named.
  const std::string peer = context->peer();
  const std::string host = peer.substr(0, peer.rfind(':'));
  const auto now = std::chrono::steady_clock::now();
  bool log = false;
  {
    absl::MutexLock lock(&refusals_mu_);
    if (refusals_logged_.size() > 4096) refusals_logged_.clear();
    auto [it, fresh] = refusals_logged_.try_emplace(absl::StrCat(host, " ", cause), now);
    log = fresh || now - it->second >= std::chrono::minutes(1);
    if (log) it->second = now;
  }
  if (log) {
    common::LogWarning(absl::StrCat("refused a stream from ", peer, " (", cause, "): ", verdict.why,
                                    "; logged once a minute per host and cause, "
                                    "counted in parity_server_tls_refusals_total"));
  }
  return verdict.why;
}

void CheckService::StreamEnded(const CallOrigin* origin, bool counted) {
  if (origin != nullptr && options_.on_stream_end) options_.on_stream_end(*origin);
  if (metrics_) metrics_->AgentDisconnected();
  if (counted) active_.fetch_sub(1);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* CheckService::Check(
    grpc::CallbackServerContext* context) {
  auto* reactor = new StreamReactor(this, context->peer(), ++session_counter_);
  if (options_.clients) {
    if (const std::string why = RefusedClient(context); !why.empty()) {
      reactor->Refuse(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why));
      return reactor;
    }
  }
  if (active_.fetch_add(1) >= static_cast<int>(options_.max_streams)) {
    active_.fetch_sub(1);
    reactor->Refuse(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 absl::StrCat("server busy: ", options_.max_streams,
                                              " agent streams already open (parity.max_streams)")));
    return reactor;
  }
  reactor->Begin();
  return reactor;
}

}  // namespace parity::server
