// The bounded queue between gRPC reactions and the replay workers. A reaction never blocks on
// it: when it is full the item is parked with a resume callback, and the stream reads nothing
// more until a worker admits the parked item; HTTP/2 flow control then pushes back on the agent.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity::server {

struct WorkItem {
  std::function<void()> run;  // must not throw
  uint64_t bytes = 0;         // payload size, counted against the byte bound
};

class WorkQueue {
 public:
  // `on_depth` (may be empty) is called with (calls, bytes) queued or running after each change.
  WorkQueue(std::size_t max_items, uint64_t max_bytes, int workers,
            std::function<void(int64_t, int64_t)> on_depth = {});
  ~WorkQueue();  // Stop()

  void Start();  // idempotent
  // Runs what is queued and parked, then joins the workers. Idempotent.
  void Stop();

  // Queues `item` if there is room (an item larger than the byte bound is admitted when the
  // queue is empty) and returns true. Otherwise parks it and returns false: a worker admits it
  // in FIFO order when room frees and then calls `resume` on that worker's thread (outside any
  // lock). Thread-safe; never blocks.
  bool PushOrPark(WorkItem item, std::function<void()> resume);

  std::size_t parked() const;

 private:
  struct Parked {
    WorkItem item;
    std::function<void()> resume;
  };
  bool HasRoom(uint64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop();
  void ReportDepth() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::size_t max_items_;
  const uint64_t max_bytes_;
  const int workers_;
  const std::function<void(int64_t, int64_t)> on_depth_;
  mutable absl::Mutex mu_;
  std::deque<WorkItem> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<Parked> parked_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t running_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace parity::server
