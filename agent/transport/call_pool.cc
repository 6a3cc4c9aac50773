#include "agent/transport/call_pool.h"

#include <utility>

namespace parity::agent {

void CapturedCall::Clear() {
  ReleaseValues();
  values = {};
  bytes = 0;
  snapshot_seconds = 0;
  watch_generator = false;
  session = nullptr;
  // Every field as a fresh record's, then the string buffers swapped back in (cleared): a field
  // added to CallIdentity is reset without being named here (CallPoolTest checks it through the
  // wire).
  CallRecord fresh;
  std::string* const kept[] = {
      &meta.op_name,       &meta.overload,    &meta.forward_op_name, &meta.forward_overload,
      &meta.autograd_node, &meta.module_path, &meta.skip_reason,     &meta.api};
  std::string* const into[] = {
      &fresh.op_name,       &fresh.overload,    &fresh.forward_op_name, &fresh.forward_overload,
      &fresh.autograd_node, &fresh.module_path, &fresh.skip_reason,     &fresh.api};
  for (std::size_t i = 0; i < std::size(kept); ++i) {
    kept[i]->clear();
    into[i]->swap(*kept[i]);
  }
  meta = std::move(fresh);
}

std::unique_ptr<CapturedCall> CallPool::Take() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      std::unique_ptr<CapturedCall> call = std::move(free_.back());
      free_.pop_back();
      ++reused_;
      return call;
    }
  }
  return std::make_unique<CapturedCall>();
}

void CallPool::Give(std::unique_ptr<CapturedCall> call) {
  if (!call) return;
  call->Clear();  // its values released here, outside the lock
  absl::MutexLock lock(&mu_);
  if (free_.size() < capacity_) free_.push_back(std::move(call));
}

void CallPool::set_capacity(std::size_t capacity) {
  absl::MutexLock lock(&mu_);
  capacity_ = capacity;
  if (free_.size() > capacity_) free_.resize(capacity_);
}

uint64_t CallPool::reused() const {
  absl::MutexLock lock(&mu_);
  return reused_;
}

std::size_t CallPool::size() const {
  absl::MutexLock lock(&mu_);
  return free_.size();
}

}  // namespace parity::agent
