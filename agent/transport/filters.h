// Which captured calls go to the server: msprobe's filters (rank, step, scope, list) plus
// Parity's white/black lists and the per-signature sampling budget. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/config/config.h"
#include "common/naming/selection.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

// Stateless filters. Thread-safe. The names in `list`, `white_list` and `black_list` take every
// form common/naming/selection.h accepts (Parity's, msprobe's, bare); the config was validated, so
// they parse.
class CallFilter {
 public:
  // msprobe's rank, step and list, Parity's parity.white_list and parity.black_list.
  CallFilter(std::vector<int64_t> ranks, std::vector<int64_t> steps,
             const std::vector<std::string>& list, const std::vector<std::string>& white_list,
             const std::vector<std::string>& black_list);
  // The same keys of a parsed configuration.
  static CallFilter Of(const common::AgentConfig& config);

  // msprobe `rank`: empty = every rank.
  bool RankSelected(int64_t rank) const;
  // msprobe `step`: empty = every step.
  bool StepSelected(int64_t step) const;
  // `list` (names, or substrings of a call's Parity or msprobe name), white_list / black_list.
  // Black wins over white. `call` carries its names (op, overload, index, phase, forward call).
  bool CallSelected(const common::CallNaming& call) const;
  // One line per configured name that selects no operator in `known`, naming the closest.
  std::vector<std::string> UnknownNames(const common::OpNameIndex& known) const;

 private:
  std::vector<int64_t> ranks_, steps_;
  common::NameList list_, white_, black_;
};

// msprobe `scope`: [first, last] names ("Functional.linear.0.forward", "aten::gelu.3"); the calls
// from the first call matching the first through the first call matching the last, per step.
// Thread-safe.
class ScopeFilter {
 public:
  explicit ScopeFilter(const std::vector<std::string>& scope);
  bool Selected(const common::CallNaming& call);
  void NewStep();
  std::vector<std::string> UnknownNames(const common::OpNameIndex& known) const;

 private:
  common::NameList scope_;
  absl::Mutex mu_;
  bool inside_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Check each signature (op, overload, dtypes, shapes) at most N times, per step or per run, so
// steady-state overhead tends to zero while every distinct call shape is still checked.
// Thread-safe. Memory is bounded: past `max_signatures` distinct signatures, new ones are
// sampled out (counted) until the next reset.
class SignatureBudget {
 public:
  SignatureBudget(uint32_t max_per_signature, bool per_step, std::size_t max_signatures = 200000);
  // True if a call with this signature may be checked now (and counts it).
  bool Take(const std::string& signature);
  void NewStep();
  bool unlimited() const { return max_ == 0; }

 private:
  const uint32_t max_;
  const bool per_step_;
  const std::size_t max_signatures_;
  absl::Mutex mu_;
  std::unordered_map<std::string, uint32_t> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::agent
