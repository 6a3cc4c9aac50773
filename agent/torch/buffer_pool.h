// A cache of host buffers for the agent's snapshot copies. A fresh multi-page allocation costs
// the training thread its page faults (the kernel zeroes every page on first touch) and, freed,
// an munmap; at 500 calls a step those were half of the time the snapshots took
// (docs/performance.md). Buffers come back here when the sender is done with a call and are
// handed out again for a copy of a similar size.
//
// Sizes are rounded up to one of four classes per power of two (at most 25% larger than asked);
// a request is served only from its own class. Free buffers are kept up to `max_cached_bytes`;
// a buffer given back beyond that evicts the largest cached ones. Thread-safe (a mutex around the
// free lists; Take and Give are a few hundred nanoseconds against the microseconds of a copy).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace parity::agent {

class BufferPool {
 public:
  explicit BufferPool(uint64_t max_cached_bytes) : max_cached_(max_cached_bytes) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A 64-byte-aligned buffer of `*capacity` >= `bytes` bytes (its size class); nullptr when
  // memory is exhausted. Return it with Give(buffer, *capacity).
  void* Take(uint64_t bytes, uint64_t* capacity);
  void Give(void* buffer, uint64_t capacity);
  // Changes the cap, freeing the largest cached buffers down to it.
  void SetMaxCached(uint64_t max_cached_bytes);

  // The size class of a request: `bytes` rounded up to a multiple of a quarter of its power of
  // two (minimum 4 KiB).
  static uint64_t ClassOf(uint64_t bytes);

  struct Stats {
    uint64_t hits = 0, misses = 0, cached_bytes = 0, freed = 0;
  };
  Stats stats() const;

 private:
  // Frees (into `evicted`, to be freed outside the lock) the largest cached buffers until at
  // most `target` bytes stay cached.
  // (The torch half includes no abseil header, so std::mutex and no annotations: the members
  // below are guarded by mu_, and EvictDownTo runs with it held.)
  void EvictDownTo(uint64_t target, std::vector<void*>* evicted);
  uint64_t max_cached_;
  mutable std::mutex mu_;
  std::map<uint64_t, std::vector<void*>> free_;
  Stats stats_;
};

}  // namespace parity::agent
