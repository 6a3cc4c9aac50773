// Every Prometheus metric the server exports: one owner that builds the families once and keeps
// the handles. Call sites use the typed helpers. Passed by reference (tests use a private
// registry). The catalogue below is data: it drives the families, the docs and the dashboard check.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/naming/drop_reasons.h"
#include "common/wire/fields.h"
#include "server/compare/check_status.h"

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace parity::server {

struct MetricInfo {
  const char* name;
  const char* type;  // "counter", "gauge", "histogram"
  const char* labels;
  const char* help;
};

// The catalogue of every metric, in export order.
const std::vector<MetricInfo>& MetricCatalogue();

class ServerMetrics {
 public:
  // Registers every family in `registry` and pre-creates the known series at zero.
  // `max_op_labels` bounds the `op` label of the per-op error counter: ops beyond it count
  // as op="other". prometheus-cpp throws only for invalid or duplicate names, which the
  // catalogue's fixed names are not (a duplicate registry is a programming error).
  explicit ServerMetrics(prometheus::Registry& registry, std::size_t max_op_labels = 512);
  ~ServerMetrics();

  // All helpers are thread-safe.
  void CallReceived(wire::Phase phase);
  void MessageBytes(uint64_t bytes);
  void MessageSent();  // a gRPC message to an agent (a VerdictBatch counts once)
  void CallChecked(wire::Phase phase, CheckStatus status, absl::string_view op,
                   double replay_seconds, double compare_seconds);
  // CPU seconds a worker spent in one stage of a call (parse, decode, bench, golden, compare,
  // random, write: ServerMetrics::kStages); each call adds one run to the stage's run counter.
  enum class Stage { kParse, kDecode, kBench, kGolden, kCompare, kRandom, kWrite };
  void StageCpu(Stage stage, double cpu_seconds);
  void StreamError(absl::string_view code);  // a stream ended by a protocol or transport error
  // A stream refused for its client certificate (common::ClientCertificateCauseName).
  void TlsRefused(absl::string_view cause);
  void QueueDepth(int64_t calls, int64_t bytes);
  void QueueCapacity(int64_t calls, int64_t bytes, int workers);
  void AgentConnected();
  // A stream stopped (+1) or resumed (-1) reading because its verdicts wait for its reader.
  void StreamWaitingForReader(int delta);
  void AgentDisconnected();
  // Agent-reported counters are cumulative; pass the increase since the stream's last report.
  void AgentDropped(absl::string_view reason, uint64_t delta);
  void AgentCaptured(uint64_t delta);
  // A call that changed a read-only argument (ApiCall.inputs_written).
  void InputsWritten();
  // A call whose agent did not compare all it must leave unchanged (ApiCall.unchecked_writes).
  void UncheckedWrites();
  // A call judged error and its error data: "saved", "over_budget", "over_op_count", "failed".
  void ErrorData(absl::string_view outcome);
  // A replica comparison (server/check/replica_check.h): its kind ("gradients", "parameters",
  // "collective"; the kinds a report may carry), its outcome, how many digests differed and how
  // many of the group's ranks never reported.
  void ReplicaChecked(absl::string_view kind, CheckStatus status, uint64_t mismatches,
                      uint64_t missing);
  // Calls whose result rows could not all be written: disk_full, not_writable or io_error; or
  // were written to a result file that then vanished (vanished).
  void ResultRowsLost(absl::string_view reason, uint64_t calls = 1);
  // A judged call of rank `rank` (calls and errors by rank). Ranks from kMaxRankLabels up share
  // rank="other": each family has at most kMaxRankLabels + 1 series.
  void RankChecked(int32_t rank, CheckStatus status);
  // An agent of rank `rank` said Hello: its two series exist from then on, at zero (the rank
  // families' labels are known only then; every other family exists from start-up).
  void RankSeen(int32_t rank);
  static constexpr int32_t kMaxRankLabels = 4096;

 private:
  prometheus::Counter& OpErrors(absl::string_view op);
  void AddKnownSeries();  // the constructor's zero series
  // The (checked, errors) series of a rank, made at the first use.
  std::pair<prometheus::Counter*, prometheus::Counter*> RankSeries(int32_t rank);
  // The series of a family for one label set, resolved once: calls index these instead of
  // looking labels up in the family on every call.
  static prometheus::Counter& Cached(std::atomic<prometheus::Counter*>& slot,
                                     prometheus::Family<prometheus::Counter>* family,
                                     const std::map<std::string, std::string>& labels);

  prometheus::Family<prometheus::Counter>* received_;
  prometheus::Family<prometheus::Counter>* checked_;
  prometheus::Family<prometheus::Counter>* op_errors_;
  prometheus::Family<prometheus::Counter>* stream_errors_;
  prometheus::Family<prometheus::Counter>* tls_refusals_;
  prometheus::Family<prometheus::Counter>* agent_dropped_;
  prometheus::Family<prometheus::Counter>* error_data_;
  prometheus::Family<prometheus::Counter>* rows_lost_;
  prometheus::Family<prometheus::Counter>* rank_checked_;
  prometheus::Family<prometheus::Counter>* rank_errors_;
  prometheus::Family<prometheus::Counter>* replica_checks_;
  prometheus::Family<prometheus::Counter>* replica_mismatches_;
  prometheus::Counter* replica_missing_ = nullptr;
  prometheus::Counter* received_bytes_;
  prometheus::Counter* received_messages_;
  prometheus::Counter* sent_messages_;
  prometheus::Counter* agent_captured_;
  prometheus::Counter* inputs_written_;
  prometheus::Counter* unchecked_writes_;
  prometheus::Gauge* queue_calls_;
  prometheus::Gauge* queue_bytes_;
  prometheus::Gauge* queue_capacity_calls_;
  prometheus::Gauge* queue_capacity_bytes_;
  prometheus::Gauge* workers_;
  prometheus::Gauge* agents_;
  prometheus::Gauge* waiting_for_reader_;
  prometheus::Histogram* replay_seconds_;
  prometheus::Histogram* compare_seconds_;
  std::array<prometheus::Counter*, 7> stage_cpu_{};   // by Stage
  std::array<prometheus::Counter*, 7> stage_runs_{};  // by Stage
  std::array<std::atomic<prometheus::Counter*>, 3> received_by_phase_{};
  std::array<std::array<std::atomic<prometheus::Counter*>, 5>, 3> checked_by_phase_verdict_{};
  // The agents' reasons, lost_in_flight and other (metrics.cc's kDropReasons).
  std::array<std::atomic<prometheus::Counter*>, PARITY_DROP_REASON_COUNT + 2> dropped_by_reason_{};
  std::size_t max_op_labels_;
  absl::Mutex mu_;
  std::map<std::string, prometheus::Counter*, std::less<>> op_counters_ ABSL_GUARDED_BY(mu_);
  // rank (kMaxRankLabels: "other") -> its checked and errors series.
  std::map<int32_t, std::pair<prometheus::Counter*, prometheus::Counter*>> rank_counters_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
