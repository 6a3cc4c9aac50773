#include "server/service/work_queue.h"

#include <utility>

namespace parity::server {

WorkQueue::WorkQueue(std::size_t max_items, uint64_t max_bytes, int workers,
                     std::function<void(int64_t, int64_t)> on_depth)
    : max_items_(max_items == 0 ? 1 : max_items),
      max_bytes_(max_bytes),
      workers_(workers < 1 ? 1 : workers),
      on_depth_(std::move(on_depth)) {}

WorkQueue::~WorkQueue() { Stop(); }

void WorkQueue::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

void WorkQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

bool WorkQueue::HasRoom(uint64_t bytes) const {
  if (queue_.empty()) return true;  // an oversized item still gets through, alone
  return queue_.size() < max_items_ && queued_bytes_ + bytes <= max_bytes_;
}

bool WorkQueue::PushOrPark(WorkItem item, std::function<void()> resume) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Parked items go first: a new item may not overtake them (FIFO across streams).
    if (!parked_.empty() || !HasRoom(item.bytes)) {
      parked_.push_back({std::move(item), std::move(resume)});
      return false;
    }
    queued_bytes_ += item.bytes;
    queue_.push_back(std::move(item));
    ReportDepth();
  }
  cv_.notify_one();
  return true;
}

std::size_t WorkQueue::parked() const {
  std::lock_guard<std::mutex> lock(mu_);
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
      std::unique_lock<std::mutex> lock(mu_);
      // No timeout needed: Stop() and every push notify, and both change the predicate.
      cv_.wait(lock, [this] { return !queue_.empty() || (stopping_ && parked_.empty()); });
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
    if (!resumes.empty()) cv_.notify_all();
    for (auto& resume : resumes) {
      if (resume) resume();
    }
    item.run();
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      running_bytes_ -= item.bytes;
      ReportDepth();
    }
  }
}

}  // namespace parity::server
