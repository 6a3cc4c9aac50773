#include "agent/transport/call_names.h"

#include <utility>

namespace parity::agent {
namespace {

// A step with millions of calls must not grow the links without bound.
constexpr std::size_t kMaxForwardLinks = 1 << 20;

}  // namespace

void CallNames::NewStep() {
  absl::MutexLock lock(&mu_);
  step_.fetch_add(1, std::memory_order_relaxed);
  call_index_.clear();
  forward_by_seq_.clear();
}

uint64_t CallNames::NextCallIndex(const std::string& op) {
  absl::MutexLock lock(&mu_);
  return call_index_[op]++;
}

void CallNames::RecordForward(int64_t sequence_nr, Forward call) {
  absl::MutexLock lock(&mu_);
  if (forward_by_seq_.size() >= kMaxForwardLinks) forward_by_seq_.erase(forward_by_seq_.begin());
  // Several forward ops may start at one sequence number (ops creating no node): the last one
  // before the node's creation owns it.
  forward_by_seq_[sequence_nr] = std::move(call);
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
