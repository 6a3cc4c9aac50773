#include "agent/filters.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/naming.h"

namespace parity::agent {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

bool NameListed(const std::vector<std::string>& list, absl::string_view op) {
  absl::string_view bare = common::BareOpName(op);
  absl::string_view no_inplace = bare;
  if (no_inplace.size() > 1) absl::ConsumeSuffix(&no_inplace, "_");
  for (const std::string& item : list) {
    if (item == op || item == bare || item == no_inplace) return true;
  }
  return false;
}

}  // namespace

CallFilter::CallFilter(const common::AgentConfig& c)
    : ranks_(c.rank),
      steps_(c.step),
      list_(c.list),
      white_(c.parity.white_list),
      black_(c.parity.black_list) {}

bool CallFilter::RankSelected(int64_t rank) const { return Contains(ranks_, rank); }
bool CallFilter::StepSelected(int64_t step) const { return Contains(steps_, step); }

bool CallFilter::OpSelected(absl::string_view op) const {
  if (!black_.empty() && NameListed(black_, op)) return false;
  if (!white_.empty() && !NameListed(white_, op)) return false;
  if (!list_.empty()) {
    bool any = false;
    for (const std::string& item : list_) any = any || absl::StrContains(op, item);
    if (!any) return false;
  }
  return true;
}

ScopeFilter::ScopeFilter(std::vector<std::string> scope) : scope_(std::move(scope)) {}

bool ScopeFilter::Selected(absl::string_view call_name) {
  if (scope_.empty()) return true;
  absl::MutexLock lock(&mu_);
  if (done_) return false;
  if (!inside_ && call_name == scope_.front()) inside_ = true;
  if (!inside_) return false;
  if (call_name == scope_.back()) {
    inside_ = false;
    done_ = true;
  }
  return true;
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
