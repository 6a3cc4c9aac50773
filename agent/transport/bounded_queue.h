// The agent's send queue: bounded by item count and by bytes. Producers are training threads
// (never blocked under the drop policy), the consumer is the sender thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::agent {

// kTimedOut: PushWait waited its whole timeout for room (the queue was full throughout).
enum class PushResult { kOk, kFull, kTimedOut, kClosed };
enum class PopResult { kItem, kTimeout, kClosed };

template <typename T>
class BoundedQueue {
 public:
  BoundedQueue(std::size_t max_items, uint64_t max_bytes)
      : max_items_(max_items == 0 ? 1 : max_items), max_bytes_(max_bytes) {}

  // Whether an item of `bytes` would fit now (a cheap pre-check before copying tensors).
  bool HasRoom(uint64_t bytes) const {
    absl::MutexLock lock(&mu_);
    return RoomFor(bytes);
  }

  // Whether the queue holds at most half its bounds (items and bytes): a congestion is over.
  bool AtMostHalfFull() const {
    absl::MutexLock lock(&mu_);
    return items_.size() <= max_items_ / 2 && bytes_ <= max_bytes_ / 2;
  }

  // Never waits. kFull when over either bound (an item larger than max_bytes fits only an empty
  // queue).
  PushResult TryPush(T item, uint64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (closed_) return PushResult::kClosed;
    if (!RoomFor(bytes)) return PushResult::kFull;
    Add(std::move(item), bytes);
    return PushResult::kOk;
  }

  // Waits for room while `keep_waiting()` holds, at most `timeout` (zero = no limit): kFull when
  // `keep_waiting()` turned false, kTimedOut when the timeout ran out. Every wait is bounded
  // (100 ms slices) so a changed `keep_waiting` (server gone) is seen promptly.
  PushResult PushWait(T item, uint64_t bytes, std::chrono::milliseconds timeout,
                      const std::function<bool()>& keep_waiting) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    absl::MutexLock lock(&mu_);
    while (!closed_ && !RoomFor(bytes)) {
      if (!keep_waiting()) return PushResult::kFull;
      if (timeout.count() > 0 && std::chrono::steady_clock::now() >= deadline) {
        return PushResult::kTimedOut;
      }
      changed_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
    }
    if (closed_) return PushResult::kClosed;
    Add(std::move(item), bytes);
    return PushResult::kOk;
  }

  // Takes the oldest item (kItem); kTimeout after `timeout`; kClosed when closed and empty.
  PopResult Pop(T* out, std::chrono::milliseconds timeout) {
    return PopGathered(out, timeout, absl::ZeroDuration(), 1);
  }

  // As Pop (which Wake() also ends, with kTimeout when nothing came), and once an item is there,
  // waits up to `linger` for `batch` items (or half the byte bound) to gather before taking the
  // oldest, unless Wake() or Close() ends the wait: the consumer wakes once for a batch of items,
  // not once for each, and the producers do not signal it until the batch is there. The first item
  // into an empty queue wakes a consumer waiting for one, as in Pop. `batch` <= 1 or a zero
  // `linger`: Pop.
  PopResult PopGathered(T* out, std::chrono::milliseconds timeout, absl::Duration linger,
                        std::size_t batch) {
    absl::MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::FromChrono(timeout);
    ++waiting_;
    bool timed_out = false;
    const uint64_t woken = wakes_;
    while (items_.empty() && !closed_ && !timed_out && wakes_ == woken) {
      timed_out = changed_.WaitWithDeadline(&mu_, deadline);
    }
    batch = std::min(batch, max_items_);
    if (!items_.empty() && !closed_ && batch > 1 && linger > absl::ZeroDuration()) {
      gather_ = batch;
      const uint64_t wakes = wakes_;
      const absl::Time until = absl::Now() + linger;
      while (!Gathered() && !closed_ && wakes_ == wakes &&
             !changed_.WaitWithDeadline(&mu_, until)) {
      }
      gather_ = 0;
    }
    --waiting_;
    if (items_.empty()) return closed_ ? PopResult::kClosed : PopResult::kTimeout;
    TakeFront(out);
    return PopResult::kItem;
  }

  // Takes the oldest item without waiting; false when there is none.
  bool TryPop(T* out) {
    absl::MutexLock lock(&mu_);
    if (items_.empty()) return false;
    TakeFront(out);
    return true;
  }

  // Whether a consumer is gathering a batch in PopGathered (for tests that act while it does).
  bool GatheringForTesting() const {
    absl::MutexLock lock(&mu_);
    return gather_ > 0;
  }

  // Consumers blocked in Pop() now (for tests that must act while one waits).
  int WaitingForTesting() const {
    absl::MutexLock lock(&mu_);
    return waiting_;
  }

  // Removes everything (counted as dropped by the caller); returns how many.
  std::size_t Clear() {
    absl::MutexLock lock(&mu_);
    const std::size_t n = items_.size();
    items_.clear();
    bytes_ = 0;
    changed_.SignalAll();
    return n;
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    changed_.SignalAll();
  }

  // Wakes waiters so they re-check their predicates; a consumer gathering a batch
  // (PopGathered) takes what is there now.
  void Wake() {
    absl::MutexLock lock(&mu_);
    ++wakes_;
    changed_.SignalAll();
  }

  std::size_t size() const {
    absl::MutexLock lock(&mu_);
    return items_.size();
  }
  uint64_t bytes() const {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  bool RoomFor(uint64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (items_.empty()) return true;
    return items_.size() < max_items_ && bytes_ + bytes <= max_bytes_;
  }
  // The oldest item out, its room back (producers waiting for room are woken).
  void TakeFront(T* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    *out = std::move(items_.front().first);
    bytes_ -= items_.front().second;
    items_.pop_front();
    changed_.SignalAll();
  }
  // While a consumer gathers (gather_ > 0), it is signalled only once the batch is there.
  void Add(T item, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    items_.emplace_back(std::move(item), bytes);
    bytes_ += bytes;
    if (gather_ == 0 || Gathered()) changed_.SignalAll();
  }
  bool Gathered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return items_.size() >= gather_ || bytes_ >= max_bytes_ / 2;
  }

  const std::size_t max_items_;
  const uint64_t max_bytes_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // signalled whenever items, bytes or closed_ change
  std::deque<std::pair<T, uint64_t>> items_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t gather_ ABSL_GUARDED_BY(mu_) = 0;  // a consumer waits for this many items; 0: none
  uint64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;      // Wake() calls, to end a gathering wait
};

}  // namespace parity::agent
