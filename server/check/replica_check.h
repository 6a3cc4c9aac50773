// Comparing what every rank of a process group must hold alike (docs/replicas.md): each rank's
// ReplicaReport waits, keyed by run, group, step, kind, operation and sequence, until every rank
// of the group has reported (or parity.replica_wait_ms has passed since the first did); then the
// reports are compared digest by digest, the outcome is written (server/results/replica_writer.h),
// counted (parity_server_replica_*) and delivered to every rank that reported. Nothing is
// replayed. Torch-free.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/call/replica.h"
#include "server/check/replica_options.h"

namespace parity::server {

class ReplicaWriter;
class ServerMetrics;

// The comparison of one group's reports (each of the group's ranks at most once; `group` the
// group they name). Per digest name (those of every report, in the first report's order): the
// ranks grouped by what they hold (the algorithm, the digest and the size; "nothing" for a rank
// whose report lacks the name); more than half of the reporting ranks holding one value make it
// the majority's, and the others differ; without such a majority every reporting rank differs.
// Fewer than two reports: SKIP.
ReplicaOutcome CompareReplicas(const std::vector<const ReplicaReport*>& reports);

class ReplicaChecker final : public ReplicaSink {
 public:
  // `writer` and `metrics` may be null, and outlive the checker.
  ReplicaChecker(ReplicaOptions options, ReplicaWriter* writer, ServerMetrics* metrics);
  ~ReplicaChecker() override;  // compares what still waits, then stops

  // A rank's report; the group's comparison runs here when it completes the group (on this
  // thread), else on the checker's timer once the wait runs out. A second report of one rank for
  // the same key replaces nothing: it is dropped and logged. Thread-safe.
  void Report(ReplicaReport report, std::shared_ptr<ReplicaMailbox> mailbox) override;

  // Compares every group that waits now with what it has (the end of the server; tests).
  void CompareWaiting();

  std::size_t waiting() const;  // groups waiting

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiting {
    Clock::time_point deadline;
    std::vector<std::pair<ReplicaReport, std::shared_ptr<ReplicaMailbox>>> reports;
  };
  static std::string KeyOf(const ReplicaReport& r);
  void Conclude(Waiting waiting);  // compares, writes, counts, delivers; without mu_
  void RunTimer();

  const ReplicaOptions options_;
  ReplicaWriter* const writer_;
  ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::string, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace parity::server
