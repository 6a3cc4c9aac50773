#include "server/service/work_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"

namespace parity::server {

WorkQueue::WorkQueue(std::size_t max_items, uint64_t max_bytes, int workers,
                     std::function<void(int64_t, int64_t)> on_depth)
    : max_items_(max_items == 0 ? 1 : max_items),
      max_bytes_(max_bytes),
      workers_(workers < 1 ? 1 : workers),
      on_depth_(std::move(on_depth)) {}

WorkQueue::~WorkQueue() { Stop(); }

void WorkQueue::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

void WorkQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

bool WorkQueue::HasRoom(uint64_t bytes) const {
  if (queue_.empty()) return true;  // an oversized item still gets through, alone
  return queue_.size() < max_items_ && queued_bytes_ + bytes <= max_bytes_;
}

bool WorkQueue::PushOrPark(WorkItem item, std::function<void()> resume) {
  {
    absl::MutexLock lock(&mu_);
    // Parked items go first: a new item may not overtake them (FIFO across streams).
    if (!parked_.empty() || !HasRoom(item.bytes)) {
      parked_.push_back({std::move(item), std::move(resume)});
      return false;
    }
    queued_bytes_ += item.bytes;
    queue_.push_back(std::move(item));
    ReportDepth();
  }
  return true;
}

std::size_t WorkQueue::parked() const {
  absl::MutexLock lock(&mu_);
  return parked_.size();
}

void WorkQueue::ReportDepth() {
  if (on_depth_) {
    on_depth_(static_cast<int64_t>(queue_.size()) + running_,
              static_cast<int64_t>(queued_bytes_ + running_bytes_));
  }
}

void WorkQueue::WorkerLoop() {
  for (;;) {
    WorkItem item;
    std::vector<std::function<void()>> resumes;
    {
      absl::MutexLock lock(&mu_);
      // No timeout needed: Stop() and every push change the condition, and the mutex re-checks
      // it whenever it is released.
      mu_.Await(absl::Condition(
          +[](WorkQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return !q->queue_.empty() || (q->stopping_ && q->parked_.empty());
          },
          this));
      if (queue_.empty()) return;  // stopping, nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= item.bytes;
      ++running_;
      running_bytes_ += item.bytes;
      // Room freed: admit parked items in order while they fit.
      while (!parked_.empty() && HasRoom(parked_.front().item.bytes)) {
        queued_bytes_ += parked_.front().item.bytes;
        queue_.push_back(std::move(parked_.front().item));
        resumes.push_back(std::move(parked_.front().resume));
        parked_.pop_front();
      }
      ReportDepth();
    }
    for (auto& resume : resumes) {
      if (resume) resume();
    }
    try {
      item.run();  // must not throw; this catch keeps a worker alive if it does
    } catch (const std::exception& e) {
      common::LogError(absl::StrCat("a replay worker caught an exception: ", e.what()));
    } catch (...) {
      common::LogError("a replay worker caught an unknown exception");
    }
    {
      absl::MutexLock lock(&mu_);
      --running_;
      running_bytes_ -= item.bytes;
      ReportDepth();
    }
  }
}

}  // namespace parity::server
