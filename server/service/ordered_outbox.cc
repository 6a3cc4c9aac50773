#include "server/service/ordered_outbox.h"

#include <utility>

namespace parity::server {

void OrderedOutbox::Push(grpc::ByteBuffer message) {
  if (!failed_ && !stopped_) ready_.push_back(std::move(message));
}

void OrderedOutbox::Complete(uint64_t slot, std::optional<grpc::ByteBuffer> message) {
  completed_.emplace(slot, std::move(message));
  for (auto it = completed_.find(next_to_release_); it != completed_.end();
       it = completed_.find(next_to_release_)) {
    if (!it->second) stopped_ = true;  // the message that did not parse: the stream ends here
    if (!failed_ && !stopped_) ready_.push_back(std::move(*it->second));
    completed_.erase(it);
    ++next_to_release_;
  }
}

bool OrderedOutbox::StartWrite(grpc::ByteBuffer* out, bool* more) {
  if (writing_ || ready_.empty()) return false;
  *out = std::move(ready_.front());
  ready_.pop_front();
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
