#include "server/service/ordered_outbox.h"

#include <utility>
#include <vector>

#include "common/transport/wire.h"

namespace parity::server {

void OrderedOutbox::Push(grpc::ByteBuffer message) {
  if (!failed_ && !stopped_) ready_.push_back({std::move(message), false, Clock::now()});
}

void OrderedOutbox::Complete(uint64_t slot, std::optional<grpc::ByteBuffer> message,
                             Clock::time_point now) {
  completed_.emplace(slot, std::move(message));
  for (auto it = completed_.find(next_to_release_); it != completed_.end();
       it = completed_.find(next_to_release_)) {
    if (!it->second) stopped_ = true;  // the message that did not parse: the stream ends here
    if (!failed_ && !stopped_) ready_.push_back({std::move(*it->second), true, now});
    completed_.erase(it);
    ++next_to_release_;
  }
}

bool OrderedOutbox::StartWrite(Clock::time_point now, grpc::ByteBuffer* out, bool* more,
                               std::optional<Clock::time_point>* held_until) {
  if (writing_ || ready_.empty()) return false;
  // The verdicts ready at the front, as many as fit in one batch (each item's field header and
  // the batch's own counted at their largest, so that the whole stays within the cap).
  constexpr std::size_t kHeaderBytes = 11;
  std::size_t count = 0, bytes = kHeaderBytes;
  bool over_bytes = false;
  while (count < ready_.size() && count < max_batch_items_ && ready_[count].verdict) {
    const std::size_t length = ready_[count].message.Length() + kHeaderBytes;
    if (count > 0 && bytes + length > max_batch_bytes_) {
      over_bytes = true;
      break;
    }
    bytes += length;
    ++count;
  }
  const bool full = over_bytes || count == max_batch_items_;  // nothing to wait for
  // Later calls of the stream are still being checked: their verdicts will come, so these wait
  // for them, within the hold.
  const bool later_calls = next_to_release_ < next_slot_;
  if (count > 0 && !full && later_calls && !stopped_ && hold_ > Clock::duration::zero()) {
    const Clock::time_point until = ready_.front().since + hold_;
    if (now < until) {
      if (held_until != nullptr) *held_until = until;
      return false;
    }
  }
  if (count <= 1) {
    *out = std::move(ready_.front().message);
    ready_.pop_front();
  } else {
    std::vector<grpc::ByteBuffer> items;
    items.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      items.push_back(std::move(ready_.front().message));
      ready_.pop_front();
    }
    *out = common::SerializeBatch(common::kServerBatchField, items);
  }
  *more = !ready_.empty();
  writing_ = true;
  return true;
}

void OrderedOutbox::WriteDone(bool ok) {
  writing_ = false;
  if (!ok) {
    failed_ = true;  // the client is gone: drop what is left to send
    ready_.clear();
  }
}

}  // namespace parity::server
