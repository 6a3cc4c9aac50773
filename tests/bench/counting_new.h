// The allocation benchmarks' operator new (capture_alloc_bench, agent_alloc_bench): every
// allocation made on a thread while its counting is on is counted. Replaces the global
// operator new and delete, so it is included by exactly one source file of a program.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>

// GCC sees inlined library code (libtorch's make_unique) meet these replacements and takes them
// for a mismatched pair.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace parity::bench {

inline thread_local uint64_t t_allocations = 0;  // counted on this thread
inline thread_local bool t_counting = false;     // counting on this thread

}  // namespace parity::bench

void* operator new(std::size_t n) {
  if (parity::bench::t_counting) ++parity::bench::t_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
