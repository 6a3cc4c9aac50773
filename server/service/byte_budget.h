// A byte budget that the server's streams draw on together (server/service/).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace parity::server {

// Bytes that all streams draw on together, up to a cap. Thread-safe.
class ByteBudget {
 public:
  explicit ByteBudget(uint64_t cap) : cap_(cap) {}
  uint64_t cap() const { return cap_; }
  uint64_t used() const { return used_.load(); }
  // Takes `n` if the total stays within the cap and returns 0; else takes nothing and returns
  // the total it would have reached.
  uint64_t TryTake(uint64_t n) {
    const uint64_t all = used_.fetch_add(n) + n;
    if (all <= cap_) return 0;
    used_.fetch_sub(n);
    return all;
  }
  // As much of `want` as is left; returns what it took.
  uint64_t TakeUpTo(uint64_t want) {
    uint64_t used = used_.load();
    for (;;) {
      const uint64_t left = used >= cap_ ? 0 : cap_ - used;
      const uint64_t take = std::min(want, left);
      if (used_.compare_exchange_weak(used, used + take)) return take;
    }
  }
  void Give(uint64_t n) { used_.fetch_sub(n); }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace parity::server
