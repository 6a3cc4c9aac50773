// The replica comparisons' files (docs/replicas.md), one set per server in the output directory:
//   replica_checking_result_{ts}.csv   one row per comparison of a group's reports
//   parity_replicas_{ts}.jsonl          the same, with every mismatch named (up to 64 each)
// A row names the run, step, kind, operation and group, the outcome (pass, error, SKIP), the
// first differing tensor with its agreeing and differing ranks, and the ranks that never
// reported. UTF-8 with BOM, one write(2) per row (server/results/append_file.h). Torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/call/replica.h"
#include "server/results/append_file.h"

namespace parity::server {

class ReplicaWriter {
 public:
  // Creates `output_dir` (0750) if needed; `timestamp` ("%Y%m%d%H%M%S"; empty = now) names the
  // files. Nothing is created until the first row.
  static absl::StatusOr<std::unique_ptr<ReplicaWriter>> Create(const std::string& output_dir,
                                                               std::string timestamp = "");

  // Appends one comparison's row to both files. Errors as AppendFile::Append's. Thread-safe.
  absl::Status Write(const ReplicaOutcome& outcome);

  std::vector<std::string> Paths() const;  // the files written so far
  static const std::vector<std::string>& Header();

 private:
  ReplicaWriter(std::string output_dir, std::string timestamp);
  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string output_dir_;
  const std::string timestamp_;
  mutable absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  AppendFile csv_ ABSL_GUARDED_BY(mu_);
  AppendFile jsonl_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::server
