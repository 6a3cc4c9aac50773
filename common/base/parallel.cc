#include "common/base/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace parity::common {
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
        // The condition held when this thread was woken, but owners take tasks outside the
        // lock (Job::Work): the job may have none left by now. Then wait again.
        job = Available();
        if (job == nullptr) continue;
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

void ParallelCopy(void* dst, const void* src, std::size_t bytes, int threads) {
  const std::size_t pieces = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)),
                                                   bytes / kParallelCopyPiece);
  if (pieces <= 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  // Equal pieces, each starting on a 4 KiB boundary (whole pages for the stores).
  const std::size_t piece = (bytes / pieces + 4095) & ~std::size_t{4095};
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  ParallelFor(static_cast<int64_t>(pieces), static_cast<int>(pieces), [&](int64_t k) {
    const std::size_t begin = std::min(bytes, static_cast<std::size_t>(k) * piece);
    const std::size_t end = std::min(bytes, begin + piece);
    if (end > begin) std::memcpy(d + begin, s + begin, end - begin);
  });
}

namespace {

std::atomic<int>& DecodeThreadsSetting() {
  static std::atomic<int> threads{[] {
    if (const char* env = std::getenv("PARITY_DECODE_THREADS")) {
      const int n = std::atoi(env);
      if (n > 0) return std::min(n, 64);
    }
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return std::clamp(cores, 1, 8);
  }()};
  return threads;
}

}  // namespace

void SetDecodeThreads(int threads) { DecodeThreadsSetting().store(std::clamp(threads, 1, 64)); }
int DecodeThreads() { return DecodeThreadsSetting().load(); }

}  // namespace parity::common
