#include "server/compare/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity::server::internal {
namespace {

// One ParallelFor call: its tasks are taken in order by whoever is free.
struct Job {
  const std::function<void(int64_t)>* task;
  int64_t tasks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int helpers_wanted;  // pool threads that may join (threads - 1)
  // Guarded by the pool's mutex: pool threads that joined, and those still inside Work() (the
  // job lives on its owner's stack: it may go only when none is).
  int joined = 0;
  int working = 0;

  // Runs tasks until none is left.
  void Work() {
    for (int64_t k; (k = next.fetch_add(1)) < tasks;) {
      (*task)(k);
      done.fetch_add(1);
    }
  }
  bool Released() const { return done.load() == tasks && working == 0; }
};

class Pool {
 public:
  // Never destroyed; its threads are stopped and joined at exit, before static destruction
  // could pull anything from under them.
  static Pool& Instance() {
    static Pool* pool = [] {
      auto* p = new Pool();
      std::atexit([] { Instance().Shutdown(); });
      return p;
    }();
    return *pool;
  }

  void Run(Job& job) {
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && static_cast<int>(threads_.size()) < job.helpers_wanted) {
        threads_.emplace_back([this] { Loop(); });
      }
      jobs_.push_back(&job);
    }
    job.Work();
    absl::MutexLock lock(&mu_);
    // Every task done and every helper out of the job: then it may be forgotten (and freed).
    mu_.Await(absl::Condition(&job, &Job::Released));
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
  }

 private:
  void Shutdown() {
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      threads.swap(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  // A pool thread: helps the oldest job that still wants helpers and has tasks left.
  void Loop() {
    for (;;) {
      Job* job = nullptr;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Pool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
              return p->stopping_ || p->Available() != nullptr;
            },
            this));
        if (stopping_) return;
        job = Available();
        ++job->joined;
        ++job->working;
      }
      job->Work();
      absl::MutexLock lock(&mu_);  // releasing it re-evaluates the owner's Await
      --job->working;
    }
  }

  Job* Available() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (Job* j : jobs_) {
      if (j->joined < j->helpers_wanted && j->next.load() < j->tasks) return j;
    }
    return nullptr;
  }

  absl::Mutex mu_;
  std::deque<Job*> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // at exit: no new threads, the old ones return
};

}  // namespace

void ParallelFor(int64_t tasks, int threads, const std::function<void(int64_t)>& task) {
  if (tasks <= 0) return;
  Job job;
  job.task = &task;
  job.tasks = tasks;
  job.helpers_wanted = static_cast<int>(std::min<int64_t>(std::max(threads, 1), tasks)) - 1;
  if (job.helpers_wanted == 0) {
    job.Work();
    return;
  }
  Pool::Instance().Run(job);
}

}  // namespace parity::server::internal
