#include "server/service/ordered_outbox.h"

#include <utility>
#include <vector>

#include "common/wire.h"

namespace parity::server {

void OrderedOutbox::Push(grpc::ByteBuffer message) {
  if (!failed_ && !stopped_) ready_.push_back({std::move(message), false});
}

void OrderedOutbox::Complete(uint64_t slot, std::optional<grpc::ByteBuffer> message) {
  completed_.emplace(slot, std::move(message));
  for (auto it = completed_.find(next_to_release_); it != completed_.end();
       it = completed_.find(next_to_release_)) {
    if (!it->second) stopped_ = true;  // the message that did not parse: the stream ends here
    if (!failed_ && !stopped_) ready_.push_back({std::move(*it->second), true});
    completed_.erase(it);
    ++next_to_release_;
  }
}

bool OrderedOutbox::StartWrite(grpc::ByteBuffer* out, bool* more) {
  if (writing_ || ready_.empty()) return false;
  // The verdicts ready at the front, as many as fit in one batch (each item's field header and
  // the batch's own counted at their largest, so that the whole stays within the cap).
  constexpr std::size_t kHeaderBytes = 11;
  std::size_t count = 0, bytes = kHeaderBytes;
  while (count < ready_.size() && count < max_batch_items_ && ready_[count].verdict) {
    const std::size_t length = ready_[count].message.Length() + kHeaderBytes;
    if (count > 0 && bytes + length > max_batch_bytes_) break;
    bytes += length;
    ++count;
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
