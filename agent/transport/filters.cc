#include "agent/transport/filters.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/naming/naming.h"

namespace parity::agent {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

// The config was validated (ValidateAgentConfig parses every name): a name that does not parse
// here cannot happen, and would select nothing.
common::NameList Names(const std::vector<std::string>& names, bool substrings = false) {
  absl::StatusOr<common::NameList> list = common::NameList::Parse(names, substrings);
  return list.ok() ? *std::move(list) : common::NameList();
}

void Append(std::vector<std::string>& out, absl::string_view key, const common::NameList& list,
            const common::OpNameIndex& known) {
  for (const std::string& line : list.Unknown(known)) out.push_back(absl::StrCat(key, ": ", line));
}

}  // namespace

CallFilter::CallFilter(std::vector<int64_t> ranks, std::vector<int64_t> steps,
                       const std::vector<std::string>& list,
                       const std::vector<std::string>& white_list,
                       const std::vector<std::string>& black_list)
    : ranks_(std::move(ranks)),
      steps_(std::move(steps)),
      list_(Names(list, /*substrings=*/true)),
      white_(Names(white_list)),
      black_(Names(black_list)) {}

CallFilter CallFilter::Of(const common::AgentConfig& c) {
  return CallFilter(c.rank, c.step, c.list, c.parity.white_list, c.parity.black_list);
}

bool CallFilter::RankSelected(int64_t rank) const { return Contains(ranks_, rank); }
bool CallFilter::StepSelected(int64_t step) const { return Contains(steps_, step); }

bool CallFilter::CallSelected(const common::CallNaming& call) const {
  if (!black_.empty() && black_.Matches(call)) return false;
  if (!white_.empty() && !white_.Matches(call)) return false;
  return list_.empty() || list_.Matches(call);
}

std::vector<std::string> CallFilter::UnknownNames(const common::OpNameIndex& known) const {
  std::vector<std::string> out;
  Append(out, "tensor.list", list_, known);
  Append(out, "parity.white_list", white_, known);
  Append(out, "parity.black_list", black_, known);
  return out;
}

ScopeFilter::ScopeFilter(const std::vector<std::string>& scope) : scope_(Names(scope)) {}

bool ScopeFilter::Selected(const common::CallNaming& call) {
  if (scope_.empty()) return true;
  const auto& ends = scope_.patterns();
  absl::MutexLock lock(&mu_);
  if (done_) return false;
  if (!inside_ && ends.front().Matches(call)) inside_ = true;
  if (!inside_) return false;
  if (ends.back().Matches(call)) {
    inside_ = false;
    done_ = true;
  }
  return true;
}

std::vector<std::string> ScopeFilter::UnknownNames(const common::OpNameIndex& known) const {
  std::vector<std::string> out;
  Append(out, "tensor.scope", scope_, known);
  return out;
}

void ScopeFilter::NewStep() {
  absl::MutexLock lock(&mu_);
  inside_ = false;
  done_ = false;
}

SignatureBudget::SignatureBudget(uint32_t max_per_signature, bool per_step,
                                 std::size_t max_signatures)
    : max_(max_per_signature), per_step_(per_step), max_signatures_(max_signatures) {}

bool SignatureBudget::Take(const std::string& signature) {
  if (max_ == 0) return true;
  absl::MutexLock lock(&mu_);
  auto it = counts_.find(signature);
  if (it == counts_.end()) {
    if (counts_.size() >= max_signatures_) return false;
    counts_.emplace(signature, 1);
    return true;
  }
  if (it->second >= max_) return false;
  ++it->second;
  return true;
}

void SignatureBudget::NewStep() {
  if (!per_step_) return;
  absl::MutexLock lock(&mu_);
  counts_.clear();
}

}  // namespace parity::agent
