#include "agent/transport/call_names.h"

#include <utility>

namespace parity::agent {
namespace {

// A step with millions of calls must not grow the links without bound.
constexpr std::size_t kMaxForwardLinks = 1 << 20;
// Links kept for reuse across steps: an LLM step's forward calls (a few thousand) and more.
constexpr std::size_t kMaxSpareLinks = 1 << 13;
// Names whose call counters are kept across steps (reset, not erased), at most.
constexpr std::size_t kMaxKeptNames = 1 << 14;

}  // namespace

void CallNames::NewStep() {
  absl::MutexLock lock(&mu_);
  step_.fetch_add(1, std::memory_order_relaxed);
  // The indices start afresh; the names stay (an op of this step is likely in the next), unless
  // they grew past any model's operator count.
  if (call_index_.size() > kMaxKeptNames) {
    call_index_.clear();
  } else {
    for (auto& [name, index] : call_index_) index = 0;
  }
  while (!forward_by_seq_.empty() && spare_.size() < kMaxSpareLinks) {
    spare_.push_back(forward_by_seq_.extract(forward_by_seq_.begin()));
  }
  forward_by_seq_.clear();
}

uint64_t CallNames::NextCallIndex(const std::string& op) {
  absl::MutexLock lock(&mu_);
  return call_index_[op]++;
}

void CallNames::RecordForward(int64_t sequence_nr, const ForwardSite& call) {
  absl::MutexLock lock(&mu_);
  // Several forward ops may start at one sequence number (ops creating no node): the last one
  // before the node's creation owns it.
  auto it = forward_by_seq_.find(sequence_nr);
  if (it == forward_by_seq_.end()) {
    if (forward_by_seq_.size() >= kMaxForwardLinks) {
      spare_.push_back(forward_by_seq_.extract(forward_by_seq_.begin()));
    }
    if (!spare_.empty()) {
      auto node = std::move(spare_.back());
      spare_.pop_back();
      node.key() = sequence_nr;
      it = forward_by_seq_.insert(std::move(node)).position;
    } else {
      it = forward_by_seq_.try_emplace(sequence_nr).first;
    }
  }
  Forward& f = it->second;
  f.op.assign(call.op.data(), call.op.size());
  f.overload.assign(call.overload.data(), call.overload.size());
  f.call_index = call.call_index;
  f.backward_calls = 0;
  f.module.assign(call.module.data(), call.module.size());
  f.api.assign(call.api.data(), call.api.size());
  f.api_index = call.api_index;
}

bool CallNames::LinkBackward(int64_t sequence_nr, Forward* call) {
  absl::MutexLock lock(&mu_);
  auto it = forward_by_seq_.upper_bound(sequence_nr);
  if (it == forward_by_seq_.begin()) return false;
  --it;
  *call = it->second;
  ++it->second.backward_calls;
  return true;
}

}  // namespace parity::agent
