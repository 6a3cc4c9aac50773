// Error data (msprobe's error_data_path / -save_error_data): for each call judged error, its
// inputs and the device's, the bench's and the golden's outputs as files torch.load reads, and a
// manifest line saying what they are, so that `parity-repro` (or `python3 -m parity.repro`)
// reruns the call elsewhere. Bounded by a byte budget and a count per operator; what is over
// is counted and logged, never an error of the check.
//
// Layout, under `{error_data_path}/ut_error_data{YYYYMMDDhhmmss}/`:
//   manifest.jsonl                            one JSON line per saved call
//   {run_id}/rank{r}/step{s}/{name}.input.{i}.pt
//   {run_id}/rank{r}/step{s}/{name}.output.{device|bench|golden}.{i}.pt
// where {name} is common::DataName: `aten::gelu.0.forward`, `aten::linear.0.backward.2`: the
// output files are named as the details CSVs name the outputs' rows.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "server/call/call_outcome.h"
#include "server/compare/standards.h"
#include "server/results/error_data_options.h"
#include "server/results/result_rows.h"

namespace parity::server {

enum class ErrorDataOutcome { kSaved, kOverBudget, kOverOpCount, kFailed };
// The metric's outcome labels, in the enum's order.
inline constexpr const char* kErrorDataOutcomeNames[] = {"saved", "over_budget", "over_op_count",
                                                         "failed"};
static_assert(std::size(kErrorDataOutcomeNames) ==
              static_cast<std::size_t>(ErrorDataOutcome::kFailed) + 1);
inline const char* ErrorDataOutcomeName(ErrorDataOutcome outcome) {
  return kErrorDataOutcomeNames[static_cast<int>(outcome)];
}

class ErrorData {
 public:
  // Each save's outcome is told to `counted` (the server counts them in its metrics), when set.
  using Counted = std::function<void(ErrorDataOutcome)>;
  ErrorData(ErrorDataOptions options, const StandardsTable& standards, Counted counted = nullptr);

  // Saves a call judged error whose CallOutcome holds its values. Thread-safe; never throws.
  ErrorDataOutcome Save(const CallOrigin& origin, const ServerCall& call, const CallOutcome& check);

  // The ut_error_data folder; "" until the first call is saved.
  std::string folder() const;

 private:
  ErrorDataOutcome Account(ErrorDataOutcome outcome, const ServerCall& call, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ErrorDataOutcome Failed(const std::string& why, const ServerCall& call, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ErrorDataOptions options_;
  const StandardsTable& standards_;
  const Counted counted_;
  mutable absl::Mutex mu_;
  std::string folder_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint32_t> per_op_ ABSL_GUARDED_BY(mu_);
  bool warned_budget_ ABSL_GUARDED_BY(mu_) = false;
  common::RateLimiter failures_{std::chrono::seconds(10)};  // a full disk logs once in a while
};

}  // namespace parity::server
