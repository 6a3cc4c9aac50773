// CPU time of the calling thread, for the per-stage cost counters of the server and the agent
// (docs/performance.md). A thread's CPU time is what a stage costs whatever else runs on the
// machine: wall time would count the time the scheduler gave the core to the training.
#pragma once

#include <time.h>

namespace parity::common {

// Seconds of CPU the calling thread has used (CLOCK_THREAD_CPUTIME_ID); 0 if unavailable.
inline double ThreadCpuSeconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Adds the thread CPU time between construction and destruction to `*sink`.
class ScopedCpuTimer {
 public:
  explicit ScopedCpuTimer(double* sink) : sink_(sink), start_(ThreadCpuSeconds()) {}
  ScopedCpuTimer(const ScopedCpuTimer&) = delete;
  ScopedCpuTimer& operator=(const ScopedCpuTimer&) = delete;
  ~ScopedCpuTimer() { *sink_ += ThreadCpuSeconds() - start_; }

 private:
  double* sink_;
  double start_;
};

}  // namespace parity::common
