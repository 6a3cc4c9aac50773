// Result files, one set per rank in the output directory:
//   accuracy_checking_result_{ts}_rank{r}.csv    per API and step: forward and backward status
//   accuracy_checking_details_{ts}_rank{r}.csv   per output, 23 msprobe columns
//   api_precision_compare_result_{ts}_rank{r}.csv  the same rows as accuracy_checking_result
//   api_precision_compare_details_{ts}_rank{r}.csv per output, 28 msprobe columns
//   parity_results_{ts}_rank{r}.jsonl            per call, with everything the CSVs cannot hold
// CSV rows carry msprobe's names (server/results/result_rows.h); the JSON lines Parity's.
// UTF-8 with BOM, floats with 14 decimals, " " for an empty cell. Details and JSON rows are
// written with one write(2) each as their call is checked. A result row waits for its API's
// backward calls: the rows of step s are written once a call of step s + 2 arrives for the rank
// (a step's stragglers, checked out of order by parallel workers, still find their row), when a
// stream of the rank ends, and when the writer closes; so a crash loses the result rows of the
// last two steps (their details stay). A step with more than kMaxPendingResultRows rows waiting
// (a training that never calls step(), an inference run: every call's API is a new row) writes
// its oldest half as they stand; a later call of one of those APIs in that step gets a row of
// its own, so the memory a rank's waiting rows take stays bounded. A restart on the same directory
// appends to the newest existing set of a rank (msprobe's resume) instead of starting a new one,
// after removing a last line that a crash cut short. A file deleted, moved away or replaced while
// the server writes it (a cleanup job, logrotate) is noticed before the next row (its path no
// longer names the inode the server appends to), reopened as a new file (with its header), logged,
// and the calls whose rows went to the vanished file reported lost (OnVanished).
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/call/call_outcome.h"
#include "server/results/result_rows.h"

namespace parity::server {

// Result rows of one rank waiting for their step to end, at most (about 300 bytes each).
inline constexpr std::size_t kMaxPendingResultRows = 8192;

class ResultWriter {
 public:
  // Creates `output_dir` (0750) if needed. `timestamp` ("%Y%m%d%H%M%S"; empty = now) names new
  // file sets. `standards` provides the thresholds recorded in the JSON-lines file.
  static absl::StatusOr<std::unique_ptr<ResultWriter>> Create(const std::string& output_dir,
                                                              const StandardsTable& standards,
                                                              std::string timestamp = "");
  ~ResultWriter();  // writes the result rows still waiting

  // Appends the rows of one checked call and flushes.
  // Each file gets its whole row or none (a failed write is truncated back); a failure stops at
  // that file (the details go first, so a call never has a summary row without its details) and
  // says why in its code: RESOURCE_EXHAUSTED no space, PERMISSION_DENIED not writable, DATA_LOSS
  // another I/O error. Thread-safe.
  absl::Status Write(const CallOrigin& origin, const ServerCall& call, const CallOutcome& check);

  // Writes the result rows still waiting for `rank` (its stream ended: every call it sent has
  // been written). Thread-safe.
  absl::Status EndOfStream(int32_t rank);

  // Paths of every file written so far (for logs and the demo summary).
  std::vector<std::string> Paths() const;
  // Result rows of `rank` waiting for their steps to end.
  std::size_t PendingRowsForTesting(int32_t rank) const;

  // Called (under the writer's lock) with the number of calls whose rows were in result files
  // that vanished: the largest row count among those files. Set before the first Write.
  void OnVanished(std::function<void(uint64_t calls)> report) { on_vanished_ = std::move(report); }

 private:
  struct RankFiles;
  struct PendingStep;
  // Writes `rows` to both result files; the first failure is returned.
  static absl::Status AppendResultRows(RankFiles* f, const std::string& rows);
  // Writes the oldest rows of `step` (all but half the bound) as they stand.
  static absl::Status WriteOldestRows(RankFiles* f, PendingStep* step);
  ResultWriter(std::string dir, const StandardsTable& standards, std::string timestamp);
  absl::StatusOr<RankFiles*> FilesFor(int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the waiting result rows of the steps before `step` (all: INT64_MAX).
  static absl::Status WriteResultsBefore(RankFiles* f, int64_t step);
  // Reopens the files of `rank` whose path no longer names what the writer appends to.
  absl::Status ReopenVanished(int32_t rank, RankFiles* f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const StandardsTable& standards_;
  const std::string timestamp_;
  mutable absl::Mutex mu_;
  std::map<int32_t, std::unique_ptr<RankFiles>> ranks_ ABSL_GUARDED_BY(mu_);
  std::function<void(uint64_t)> on_vanished_;
};

}  // namespace parity::server
