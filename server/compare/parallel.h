// The compare threads: one pool shared by every comparison, instead of threads spawned per call.
// A large comparison splits into chunks that the pool's threads and the calling worker run
// together; concurrent comparisons (several replay workers) share the pool. Torch-free.
#pragma once

#include <cstdint>
#include <functional>

namespace parity::server::internal {

// Runs task(0), ..., task(tasks - 1), each exactly once, on up to `threads` threads (the caller
// included: it always runs some itself), and returns when all have run. Thread-safe. The pool
// grows to the largest `threads` - 1 asked for and lives until the process exits.
void ParallelFor(int64_t tasks, int threads, const std::function<void(int64_t)>& task);

}  // namespace parity::server::internal
