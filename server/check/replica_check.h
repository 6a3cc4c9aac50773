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

  // A rank's report. The group's comparison (and its result rows' write) runs on the checker's
  // own thread once the report completes the group, or once the wait runs out: not on the
  // caller's (a stream's reading thread), unless the reports held reach max_waiting_bytes while
  // complete groups queue for that thread, when the caller compares them itself (memory stays
  // bounded; the caller slows down instead). A second report of one rank for the same key
  // replaces nothing: it is dropped and logged. Thread-safe.
  void Report(ReplicaReport report, std::shared_ptr<ReplicaMailbox> mailbox) override;

  // Compares every group that waits or queues now with what it has, on this thread (the end of
  // the server; tests).
  void CompareWaiting();

  std::size_t waiting() const;                      // groups waiting for a rank
  uint64_t waiting_bytes() const;                   // bytes of reports held (waiting or queued)
  static uint64_t BytesOf(const ReplicaReport& r);  // what a report held costs, about

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiting {
    Clock::time_point deadline;
    uint64_t bytes = 0;
    std::vector<std::pair<ReplicaReport, std::shared_ptr<ReplicaMailbox>>> reports;
  };
  static std::string KeyOf(const ReplicaReport& r);
  // Moves the group that waited longest to `out`; false when none waits.
  bool TakeOldest(std::vector<Waiting>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Conclude(Waiting waiting);  // compares, writes, counts, delivers; without mu_
  void Release(uint64_t bytes);    // a concluded group's bytes
  void Run();                      // the checker's thread: queued groups, then expired ones

  const ReplicaOptions options_;
  ReplicaWriter* const writer_;
  ServerMetrics* const metrics_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  std::map<std::string, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiting> ready_ ABSL_GUARDED_BY(mu_);  // complete or cut short, to compare
  uint64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;     // waiting_'s and ready_'s, and in hand
  bool warned_bytes_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace parity::server
