// Recycled call records. A training thread takes one per captured call (Session::Begin); the
// sender gives it back once the call is written (or a call not captured after all is given back
// at once), its values released and its fields reset, the buffers of its strings kept: a call
// whose names fit the buffers of an earlier one costs the training thread no allocation for its
// record. Bounded: at most `capacity` records wait; beyond, a record given back is freed.
// Thread-safe (one uncontended lock a take or a give). tests/bench/capture_alloc_bench.cc counts
// what it saves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/transport/captured_call.h"

namespace parity::agent {

class CallPool {
 public:
  static constexpr std::size_t kDefaultCapacity = 512;
  explicit CallPool(std::size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // A record as new: a recycled one, or a fresh one when none waits.
  std::unique_ptr<CapturedCall> Take();
  // Clears `call` (CapturedCall::Clear) and keeps it for a Take, or frees it when the pool is
  // full. Null is ignored.
  void Give(std::unique_ptr<CapturedCall> call);

  void set_capacity(std::size_t capacity);  // 0: every record freed (benchmarks, tests)
  uint64_t reused() const;                  // Takes that found a record
  std::size_t size() const;                 // records waiting

 private:
  mutable absl::Mutex mu_;
  std::size_t capacity_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<CapturedCall>> free_ ABSL_GUARDED_BY(mu_);
  uint64_t reused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace parity::agent
