#include "server/metrics/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/client_certificates.h"
#include "server/results/error_data.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif
#ifndef PARITY_REVISION
#define PARITY_REVISION "unknown"
#endif

namespace parity::server {
namespace {

constexpr const char* kVerdicts[] = {"pass", "warning", "error", "skip", "rejected"};
constexpr const char* kStages[] = {"parse",   "decode", "bench", "golden",
                                   "compare", "random", "write"};
constexpr const char* kPhases[] = {"forward", "backward", "unspecified"};
// The agent's loss reasons (AgentStats: dropped_calls by reason, and lost_in_flight_calls);
// anything else an agent reports counts as "other" (the label set stays closed whatever a
// client sends).
// The agents' reasons (common/naming/drop_reasons.h), their calls lost in flight, and any other
// name.
#define PARITY_DROP_NAME_(name, enumerator, why) #name,
constexpr const char* kDropReasons[] = {PARITY_DROP_REASONS(PARITY_DROP_NAME_) "lost_in_flight",
                                        "other"};
#undef PARITY_DROP_NAME_
static_assert(std::size(kDropReasons) == PARITY_DROP_REASON_COUNT + 2,
              "ServerMetrics::dropped_by_reason_ has a slot each");

// Latency buckets from 100 µs to ~1 min: small elementwise ops to large matmuls on CPU.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 60};
}

const MetricInfo& Info(absl::string_view name) {
  for (const MetricInfo& m : MetricCatalogue()) {
    if (name == m.name) return m;
  }
  std::abort();  // a programming error: every family is in the catalogue
}

template <typename Builder>
auto& Build(Builder builder, absl::string_view name, prometheus::Registry& registry) {
  const MetricInfo& info = Info(name);
  return builder.Name(info.name).Help(info.help).Register(registry);
}

// The one series of an unlabelled counter.
prometheus::Counter* Unlabelled(absl::string_view name, prometheus::Registry& registry) {
  return &Build(prometheus::BuildCounter(), name, registry).Add({});
}

}  // namespace

const std::vector<MetricInfo>& MetricCatalogue() {
  static const std::vector<MetricInfo> catalogue = {
      {"parity_build_info", "gauge", "version, revision", "Always 1; labels name the build."},
      {"parity_server_calls_received_total", "counter", "phase",
       "Operator calls received from agents."},
      {"parity_server_calls_checked_total", "counter", "phase, verdict",
       "Calls with a verdict: pass, warning, error, skip (not replayable) or rejected "
       "(malformed)."},
      {"parity_server_op_errors_total", "counter", "op",
       "Calls judged error, by operator (label set bounded by the ops seen; overflow is "
       "op=\"other\")."},
      {"parity_server_rank_checked_total", "counter", "rank",
       "Calls judged, by the agent's rank (ranks 0-4095; higher ranks share rank=\"other\": at "
       "most 4,097 series)."},
      {"parity_server_rank_errors_total", "counter", "rank",
       "Calls judged error, by the agent's rank (the same bound): which ranks fail."},
      {"parity_server_received_bytes_total", "counter", "",
       "Serialized bytes of agent messages received."},
      {"parity_server_messages_received_total", "counter", "",
       "gRPC messages received from agents (a MessageBatch of several calls counts once)."},
      {"parity_server_messages_sent_total", "counter", "",
       "gRPC messages sent to agents (a VerdictBatch of several verdicts counts once)."},
      {"parity_server_stream_errors_total", "counter", "code",
       "Agent streams ended with an error status, by gRPC code."},
      {"parity_server_tls_refusals_total", "counter", "cause",
       "Agent streams refused for their client certificate (mutual TLS), by cause: "
       "no_client_certificate, unknown_ca (not signed by the server's ca.crt), expired, "
       "not_yet_valid, not_a_client_certificate (its extended key usage), revoked (crl.pem), "
       "unverified (any other failure). Each refusal is also logged, naming the peer."},
      {"parity_server_queue_calls", "gauge", "", "Calls waiting for or in replay."},
      {"parity_server_queue_bytes", "gauge", "", "Payload bytes of the calls in the queue."},
      {"parity_server_queue_capacity_calls", "gauge", "",
       "Calls the queue holds before agents are pushed back (parity.queue_max_calls)."},
      {"parity_server_queue_capacity_bytes", "gauge", "",
       "Payload bytes the queue holds before agents are pushed back (parity.queue_max_bytes)."},
      {"parity_server_workers", "gauge", "", "Replay worker threads."},
      {"parity_server_connected_agents", "gauge", "", "Agent streams currently open."},
      {"parity_server_streams_waiting_for_reader", "gauge", "",
       "Streams whose calls the server does not read for now: their verdicts not yet written "
       "are over parity.max_unsent_verdict_bytes (the agent reads them too slowly, or not at "
       "all)."},
      {"parity_server_replay_seconds", "histogram", "",
       "Time to replay one call (bench and golden)."},
      {"parity_server_compare_seconds", "histogram", "", "Time to compare one call's outputs."},
      {"parity_server_stage_cpu_seconds_total", "counter", "stage",
       "Worker CPU seconds by stage of a check: parse, decode, bench, golden, compare, random "
       "(a random op's replay or property check), write (result files and error data)."},
      {"parity_server_stage_runs_total", "counter", "stage",
       "Times each stage ran: golden below bench counts the calls decided without a golden."},
      {"parity_server_agent_dropped_calls_total", "counter", "reason",
       "Calls the agents report they lost: never sent (queue_full, disconnected, stopped: still "
       "queued when the session ended, communication), or lost_in_flight."},
      {"parity_server_agent_captured_calls_total", "counter", "",
       "Calls the agents report they captured."},
      {"parity_server_inputs_written_total", "counter", "",
       "Calls that changed an argument their schema marks read-only (each is also an error "
       "of its op): a kernel writing into its input."},
      {"parity_server_unchecked_writes_total", "counter", "",
       "Calls whose agent could not compare everything the call must leave unchanged within its "
       "budget (ApiCall.unchecked_writes: the storage around a large written view); the JSON "
       "record says what."},
      {"parity_server_result_rows_lost_total", "counter", "reason",
       "Calls (and replica comparisons) whose result rows could not all be written: disk_full "
       "(no space or a file size limit), not_writable (read-only or no permission), io_error; "
       "vanished: rows written to a result file deleted or replaced while the server ran (it is "
       "reopened before the next row). Each file keeps whole rows: a failed write is truncated "
       "back."},
      {"parity_server_replica_checks_total", "counter", "kind, verdict",
       "Replica reports compared across their process group (docs/replicas.md), by kind "
       "(gradients, parameters, collective) and outcome: pass (every rank agrees), error (a "
       "digest differs: silent data corruption on a rank, named in the result file and the "
       "ranks' verdicts), skip (fewer than two ranks reported within parity.replica_wait_ms)."},
      {"parity_server_replica_mismatches_total", "counter", "kind",
       "Digests that differed across a group's ranks (each tensor once per comparison)."},
      {"parity_server_replica_missing_total", "counter", "",
       "Ranks whose replica report did not come within parity.replica_wait_ms (a rank killed or "
       "stalled): counted, not blamed."},
      {"parity_server_error_data_total", "counter", "outcome",
       "Calls judged error by what became of their error data: saved, over_budget "
       "(parity.error_data_max_bytes), over_op_count (parity.error_data_per_op), failed."},
  };
  return catalogue;
}

ServerMetrics::ServerMetrics(prometheus::Registry& registry, std::size_t max_op_labels)
    : max_op_labels_(max_op_labels) {
  Build(prometheus::BuildGauge(), "parity_build_info", registry)
      .Add({{"version", PARITY_VERSION}, {"revision", PARITY_REVISION}})
      .Set(1);
  received_ = &Build(prometheus::BuildCounter(), "parity_server_calls_received_total", registry);
  checked_ = &Build(prometheus::BuildCounter(), "parity_server_calls_checked_total", registry);
  op_errors_ = &Build(prometheus::BuildCounter(), "parity_server_op_errors_total", registry);
  received_bytes_ = Unlabelled("parity_server_received_bytes_total", registry);
  received_messages_ = Unlabelled("parity_server_messages_received_total", registry);
  sent_messages_ = Unlabelled("parity_server_messages_sent_total", registry);
  stream_errors_ =
      &Build(prometheus::BuildCounter(), "parity_server_stream_errors_total", registry);
  tls_refusals_ = &Build(prometheus::BuildCounter(), "parity_server_tls_refusals_total", registry);
  queue_calls_ = &Build(prometheus::BuildGauge(), "parity_server_queue_calls", registry).Add({});
  queue_bytes_ = &Build(prometheus::BuildGauge(), "parity_server_queue_bytes", registry).Add({});
  queue_capacity_calls_ =
      &Build(prometheus::BuildGauge(), "parity_server_queue_capacity_calls", registry).Add({});
  queue_capacity_bytes_ =
      &Build(prometheus::BuildGauge(), "parity_server_queue_capacity_bytes", registry).Add({});
  workers_ = &Build(prometheus::BuildGauge(), "parity_server_workers", registry).Add({});
  agents_ = &Build(prometheus::BuildGauge(), "parity_server_connected_agents", registry).Add({});
  waiting_for_reader_ =
      &Build(prometheus::BuildGauge(), "parity_server_streams_waiting_for_reader", registry)
           .Add({});
  replay_seconds_ = &Build(prometheus::BuildHistogram(), "parity_server_replay_seconds", registry)
                         .Add({}, LatencyBuckets());
  compare_seconds_ = &Build(prometheus::BuildHistogram(), "parity_server_compare_seconds", registry)
                          .Add({}, LatencyBuckets());
  auto& stage_cpu =
      Build(prometheus::BuildCounter(), "parity_server_stage_cpu_seconds_total", registry);
  auto& stage_runs = Build(prometheus::BuildCounter(), "parity_server_stage_runs_total", registry);
  for (std::size_t i = 0; i < stage_cpu_.size(); ++i) {
    stage_cpu_[i] = &stage_cpu.Add({{"stage", kStages[i]}});
    stage_runs_[i] = &stage_runs.Add({{"stage", kStages[i]}});
  }
  agent_dropped_ =
      &Build(prometheus::BuildCounter(), "parity_server_agent_dropped_calls_total", registry);
  agent_captured_ = Unlabelled("parity_server_agent_captured_calls_total", registry);
  inputs_written_ = Unlabelled("parity_server_inputs_written_total", registry);
  unchecked_writes_ = Unlabelled("parity_server_unchecked_writes_total", registry);
  rows_lost_ = &Build(prometheus::BuildCounter(), "parity_server_result_rows_lost_total", registry);
  rank_checked_ = &Build(prometheus::BuildCounter(), "parity_server_rank_checked_total", registry);
  rank_errors_ = &Build(prometheus::BuildCounter(), "parity_server_rank_errors_total", registry);
  error_data_ = &Build(prometheus::BuildCounter(), "parity_server_error_data_total", registry);
  replica_checks_ =
      &Build(prometheus::BuildCounter(), "parity_server_replica_checks_total", registry);
  replica_mismatches_ =
      &Build(prometheus::BuildCounter(), "parity_server_replica_mismatches_total", registry);
  replica_missing_ = Unlabelled("parity_server_replica_missing_total", registry);
  AddKnownSeries();
}

// Known series start at zero so that rate() and alerts see them before the first event: every
// family has one from start-up but the two labelled by rank (RankSeen).
void ServerMetrics::AddKnownSeries() {
  for (const char* reason : {"disk_full", "not_writable", "io_error", "vanished"}) {
    rows_lost_->Add({{"reason", reason}});
  }
  for (const char* outcome : kErrorDataOutcomeNames) {
    error_data_->Add({{"outcome", outcome}});
  }
  for (const std::string& cause : common::ClientCertificateRefusalNames()) {
    tls_refusals_->Add({{"cause", cause}});
  }
  for (const char* phase : {"forward", "backward"}) {
    received_->Add({{"phase", phase}});
    for (const char* verdict : kVerdicts) checked_->Add({{"phase", phase}, {"verdict", verdict}});
  }
  for (const char* reason : kDropReasons) {
    agent_dropped_->Add({{"reason", reason}});
  }
  // Every status a stream can end with but OK: the first failure is an increase from 0, which
  // alerts see (a series born at 1 is not).
  for (int code = 1; code <= 16; ++code) {
    stream_errors_->Add({{"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}});
  }
  // An op's series is born at its first error; "other" (the ops past the label cap) exists from
  // start-up, so the family does.
  op_errors_->Add({{"op", "other"}});
  for (const char* kind : {"gradients", "parameters", "collective"}) {
    for (const char* verdict : {"pass", "error", "skip"}) {
      replica_checks_->Add({{"kind", kind}, {"verdict", verdict}});
    }
    replica_mismatches_->Add({{"kind", kind}});
  }
}

ServerMetrics::~ServerMetrics() = default;

prometheus::Counter& ServerMetrics::Cached(std::atomic<prometheus::Counter*>& slot,
                                           prometheus::Family<prometheus::Counter>* family,
                                           const std::map<std::string, std::string>& labels) {
  prometheus::Counter* c = slot.load(std::memory_order_acquire);
  if (c == nullptr) {
    // Two threads may both get here: Add returns the same series to both.
    c = &family->Add(labels);
    slot.store(c, std::memory_order_release);
  }
  return *c;
}

namespace {

int PhaseIndex(wire::Phase p) {
  return p == wire::kPhaseForward ? 0 : p == wire::kPhaseBackward ? 1 : 2;
}

int VerdictIndex(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return 0;
    case CheckStatus::kWarning:
      return 1;
    case CheckStatus::kError:
      return 2;
    case CheckStatus::kSkip:
      return 3;
    default:
      return 4;
  }
}

}  // namespace

void ServerMetrics::CallReceived(wire::Phase phase) {
  const int p = PhaseIndex(phase);
  Cached(received_by_phase_[p], received_, {{"phase", kPhases[p]}}).Increment();
}

void ServerMetrics::MessageBytes(uint64_t bytes) {
  received_bytes_->Increment(static_cast<double>(bytes));
  received_messages_->Increment();
}

void ServerMetrics::MessageSent() { sent_messages_->Increment(); }

void ServerMetrics::InputsWritten() { inputs_written_->Increment(); }
void ServerMetrics::UncheckedWrites() { unchecked_writes_->Increment(); }

void ServerMetrics::CallChecked(wire::Phase phase, CheckStatus status, absl::string_view op,
                                double replay_seconds, double compare_seconds) {
  const int p = PhaseIndex(phase), v = VerdictIndex(status);
  Cached(checked_by_phase_verdict_[p][v], checked_,
         {{"phase", kPhases[p]}, {"verdict", kVerdicts[v]}})
      .Increment();
  if (status == CheckStatus::kError) OpErrors(op).Increment();
  if (status != CheckStatus::kRejected && status != CheckStatus::kSkip) {
    replay_seconds_->Observe(replay_seconds);
    compare_seconds_->Observe(compare_seconds);
  }
}

void ServerMetrics::StageCpu(Stage stage, double cpu_seconds) {
  const auto i = static_cast<std::size_t>(stage);
  stage_cpu_[i]->Increment(cpu_seconds > 0 ? cpu_seconds : 0);
  stage_runs_[i]->Increment();
}

prometheus::Counter& ServerMetrics::OpErrors(absl::string_view op) {
  absl::MutexLock lock(&mu_);
  auto it = op_counters_.find(op);
  if (it != op_counters_.end()) return *it->second;
  // Bounded cardinality: past the cap every new op shares one series.
  const std::string label = op_counters_.size() < max_op_labels_ ? std::string(op) : "other";
  auto existing = op_counters_.find(label);
  if (existing != op_counters_.end()) return *existing->second;
  prometheus::Counter* c = &op_errors_->Add({{"op", label}});
  op_counters_.emplace(label, c);
  return *c;
}

std::pair<prometheus::Counter*, prometheus::Counter*> ServerMetrics::RankSeries(int32_t rank) {
  const int32_t key = rank >= 0 && rank < kMaxRankLabels ? rank : kMaxRankLabels;
  absl::MutexLock lock(&mu_);
  auto it = rank_counters_.find(key);
  if (it == rank_counters_.end()) {
    const std::string label = key == kMaxRankLabels ? "other" : absl::StrCat(key);
    it = rank_counters_
             .emplace(key, std::make_pair(&rank_checked_->Add({{"rank", label}}),
                                          &rank_errors_->Add({{"rank", label}})))
             .first;
  }
  return it->second;
}

void ServerMetrics::RankSeen(int32_t rank) { RankSeries(rank); }

void ServerMetrics::RankChecked(int32_t rank, CheckStatus status) {
  const std::pair<prometheus::Counter*, prometheus::Counter*> series = RankSeries(rank);
  series.first->Increment();
  if (status == CheckStatus::kError) series.second->Increment();
}

void ServerMetrics::TlsRefused(absl::string_view cause) {
  tls_refusals_->Add({{"cause", std::string(cause)}}).Increment();
}

void ServerMetrics::StreamError(absl::string_view code) {
  stream_errors_->Add({{"code", std::string(code)}}).Increment();
}

void ServerMetrics::QueueCapacity(int64_t calls, int64_t bytes, int workers) {
  queue_capacity_calls_->Set(static_cast<double>(calls));
  queue_capacity_bytes_->Set(static_cast<double>(bytes));
  workers_->Set(workers);
}

void ServerMetrics::QueueDepth(int64_t calls, int64_t bytes) {
  queue_calls_->Set(static_cast<double>(calls));
  queue_bytes_->Set(static_cast<double>(bytes));
}

void ServerMetrics::AgentConnected() { agents_->Increment(); }
void ServerMetrics::AgentDisconnected() { agents_->Decrement(); }
void ServerMetrics::StreamWaitingForReader(int delta) {
  waiting_for_reader_->Increment(static_cast<double>(delta));
}

void ServerMetrics::AgentDropped(absl::string_view reason, uint64_t delta) {
  if (delta == 0) return;
  constexpr int kOther = static_cast<int>(std::size(kDropReasons)) - 1;
  int r = kOther;
  for (int i = 0; i < kOther; ++i) {
    if (reason == kDropReasons[i]) r = i;
  }
  Cached(dropped_by_reason_[r], agent_dropped_, {{"reason", kDropReasons[r]}})
      .Increment(static_cast<double>(delta));
}

void ServerMetrics::AgentCaptured(uint64_t delta) {
  agent_captured_->Increment(static_cast<double>(delta));
}

void ServerMetrics::ResultRowsLost(absl::string_view reason, uint64_t calls) {
  rows_lost_->Add({{"reason", std::string(reason)}}).Increment(static_cast<double>(calls));
}

void ServerMetrics::ReplicaChecked(absl::string_view kind, CheckStatus status, uint64_t mismatches,
                                   uint64_t missing) {
  const char* verdict = status == CheckStatus::kError  ? "error"
                        : status == CheckStatus::kSkip ? "skip"
                                                       : "pass";
  replica_checks_->Add({{"kind", std::string(kind)}, {"verdict", verdict}}).Increment();
  if (mismatches > 0) {
    replica_mismatches_->Add({{"kind", std::string(kind)}})
        .Increment(static_cast<double>(mismatches));
  }
  if (missing > 0) replica_missing_->Increment(static_cast<double>(missing));
}

void ServerMetrics::ErrorData(absl::string_view outcome) {
  error_data_->Add({{"outcome", std::string(outcome)}}).Increment();
}

}  // namespace parity::server
