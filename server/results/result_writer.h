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
// last two steps (their details stay). A restart on the same directory appends to the newest
// existing set of a rank (msprobe's resume) instead of starting a new one, after removing a
// last line that a crash cut short.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/parity.pb.h"
#include "server/call/call_check.h"
#include "server/results/result_rows.h"

namespace parity::server {

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
  absl::Status Write(const CallOrigin& origin, const ServerCall& call, const CallCheck& check);

  // Writes the result rows still waiting for `rank` (its stream ended: every call it sent has
  // been written). Thread-safe.
  absl::Status EndOfStream(int32_t rank);

  // Paths of every file written so far (for logs and the demo summary).
  std::vector<std::string> Paths() const;

 private:
  struct RankFiles;
  struct PendingStep;
  ResultWriter(std::string dir, const StandardsTable& standards, std::string timestamp);
  absl::StatusOr<RankFiles*> FilesFor(int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the waiting result rows of the steps before `step` (all: INT64_MAX).
  static absl::Status WriteResultsBefore(RankFiles* f, int64_t step);

  const std::string dir_;
  const StandardsTable& standards_;
  const std::string timestamp_;
  mutable absl::Mutex mu_;
  std::map<int32_t, std::unique_ptr<RankFiles>> ranks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
