#include "server/service/ordered_outbox.h"

#include <utility>
#include <vector>

#include "common/transport/wire.h"

namespace parity::server {

void OrderedOutbox::Push(grpc::ByteBuffer message) {
  if (failed_ || stopped_) return;
  unsent_bytes_ += message.Length();
  ready_.push_back({std::move(message), false, Clock::now()});
}

void OrderedOutbox::Complete(uint64_t slot, std::optional<grpc::ByteBuffer> message,
                             Clock::time_point now) {
  if (message) unsent_bytes_ += message->Length();
  completed_.emplace(slot, std::move(message));
  for (auto it = completed_.find(next_to_release_); it != completed_.end();
       it = completed_.find(next_to_release_)) {
    if (!it->second) stopped_ = true;  // the message that did not parse: the stream ends here
    if (!failed_ && !stopped_) {
      ready_.push_back({std::move(*it->second), true, now});
    } else if (it->second) {
      unsent_bytes_ -= it->second->Length();  // dropped: the stream stopped or its client left
    }
    completed_.erase(it);
    ++next_to_release_;
  }
}

OrderedOutbox::Plan OrderedOutbox::PlanWrite(Clock::time_point now) const {
  // The verdicts ready at the front, as many as fit in one batch (each item's field header and
  // the batch's own counted at their largest, so that the whole stays within the cap).
  constexpr std::size_t kHeaderBytes = 11;
  Plan plan;
  std::size_t bytes = kHeaderBytes;
  bool over_bytes = false;
  while (plan.count < ready_.size() && plan.count < max_batch_items_ &&
         ready_[plan.count].verdict) {
    const std::size_t length = ready_[plan.count].message.Length() + kHeaderBytes;
    if (plan.count > 0 && bytes + length > max_batch_bytes_) {
      over_bytes = true;
      break;
    }
    bytes += length;
    ++plan.count;
  }
  const bool full = over_bytes || plan.count == max_batch_items_;  // nothing to wait for
  // Later calls of the stream are still being checked: their verdicts will come, so these wait
  // for them, within the hold.
  const bool later_calls = next_to_release_ < next_slot_;
  if (plan.count > 0 && !full && later_calls && !stopped_ && hold_ > Clock::duration::zero()) {
    const Clock::time_point until = ready_.front().since + hold_;
    if (now < until) plan.held_until = until;
  }
  return plan;
}

bool OrderedOutbox::StartWrite(Clock::time_point now, grpc::ByteBuffer* out, bool* more,
                               std::optional<Clock::time_point>* held_until) {
  if (writing_ || ready_.empty()) return false;
  const Plan plan = PlanWrite(now);
  if (plan.held_until) {
    if (held_until != nullptr) *held_until = plan.held_until;
    return false;
  }
  if (plan.count <= 1) {
    unsent_bytes_ -= ready_.front().message.Length();
    *out = std::move(ready_.front().message);
    ready_.pop_front();
  } else {
    std::vector<grpc::ByteBuffer> items;
    items.reserve(plan.count);
    for (std::size_t i = 0; i < plan.count; ++i) {
      unsent_bytes_ -= ready_.front().message.Length();
      items.push_back(std::move(ready_.front().message));
      ready_.pop_front();
    }
    *out = common::SerializeBatch(common::kServerBatchField, items);
  }
  // The buffer hint only when the next write goes now: a write hinted while its successor is held
  // would sit in gRPC's buffer until the hold ends (a full batch waiting out the hold).
  *more = !ready_.empty() && !PlanWrite(now).held_until;
  writing_ = true;
  return true;
}

void OrderedOutbox::WriteDone(bool ok) {
  writing_ = false;
  if (!ok) {
    failed_ = true;  // the client is gone: drop what is left to send
    for (const Ready& r : ready_) unsent_bytes_ -= r.message.Length();
    ready_.clear();  // (those held back are dropped as they are released)
  }
}

}  // namespace parity::server
