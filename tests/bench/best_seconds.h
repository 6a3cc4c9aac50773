// The benchmarks' timer: the best of `reps` runs of `f`, in seconds (the least disturbed run of a
// pass bound by memory or the CPU, which is what a per-byte rate compares).
#pragma once

#include <algorithm>
#include <chrono>

namespace parity::bench {

template <typename F>
double BestSeconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace parity::bench
