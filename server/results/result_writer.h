// Result files, one set per rank in the output directory:
//   accuracy_checking_result_{ts}_rank{r}.csv    per call, msprobe's two-way status
//   accuracy_checking_details_{ts}_rank{r}.csv   per output, 23 msprobe columns
//   api_precision_compare_result_{ts}_rank{r}.csv  per call, Parity's verdict by the API's standard
//   api_precision_compare_details_{ts}_rank{r}.csv per output, 28 msprobe columns
//   parity_results_{ts}_rank{r}.jsonl            everything the CSVs cannot hold
// UTF-8 with BOM, floats with 14 decimals, " " for an empty cell. Each row is written with one
// write(2) as its call is checked, so a crash loses only the calls in flight; a restart on the
// same directory appends to the newest existing set of a rank (msprobe's resume) instead of
// starting a new one, after removing a last line that a crash cut short.
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
#include "server/replay/call_checker.h"
#include "server/results/result_rows.h"

namespace parity::server {

class ResultWriter {
 public:
  // Creates `output_dir` (0750) if needed. `timestamp` ("%Y%m%d%H%M%S"; empty = now) names new
  // file sets. `standards` provides the thresholds recorded in the JSON-lines file.
  static absl::StatusOr<std::unique_ptr<ResultWriter>> Create(const std::string& output_dir,
                                                              const StandardsTable& standards,
                                                              std::string timestamp = "");
  ~ResultWriter();

  // Appends the rows of one checked call (`verdict` = ToVerdict(call, check)) and flushes.
  // Each file gets its whole row or none (a failed write is truncated back); a failure stops at
  // that file (the details go first, so a call never has a summary row without its details) and
  // says why in its code: RESOURCE_EXHAUSTED no space, PERMISSION_DENIED not writable, DATA_LOSS
  // another I/O error. Thread-safe.
  absl::Status Write(const CallOrigin& origin, const v1::ApiCall& call, const CallCheck& check,
                     const v1::Verdict& verdict);

  // Paths of every file written so far (for logs and the demo summary).
  std::vector<std::string> Paths() const;

 private:
  struct RankFiles;
  ResultWriter(std::string dir, const StandardsTable& standards, std::string timestamp);
  absl::StatusOr<RankFiles*> FilesFor(int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const StandardsTable& standards_;
  const std::string timestamp_;
  mutable absl::Mutex mu_;
  std::map<int32_t, std::unique_ptr<RankFiles>> ranks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
