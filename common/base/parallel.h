// The server's helper threads: one pool shared by every comparison and every large decode copy,
// instead of threads spawned per call. A large comparison or copy splits into chunks that the
// pool's threads and the calling worker run together; concurrent callers (several replay
// workers) share the pool. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace parity::common {

// Runs task(0), ..., task(tasks - 1), each exactly once, on up to `threads` threads (the caller
// included: it always runs some itself), and returns when all have run. Thread-safe. The pool
// grows to the largest `threads` - 1 asked for and lives until the process exits.
void ParallelFor(int64_t tasks, int threads, const std::function<void(int64_t)>& task);

// memcpy(dst, src, bytes), split over up to `threads` threads in pieces of at least
// kParallelCopyPiece bytes (below twice that, one memcpy on the caller).
inline constexpr std::size_t kParallelCopyPiece = std::size_t{2} << 20;
void ParallelCopy(void* dst, const void* src, std::size_t bytes, int threads);

// The threads a decode copies a tensor's bytes with (the server's decoder reads it for every
// tensor). Default: every core, at most 8; parity-server sets its workers' share of the cores
// (at most 8). One core's memcpy is bound by its own outstanding misses, not by the memory:
// 64 MiB into page-locked memory took 11.2 ms on one thread of an H200 host's Xeon, 5.0 on two,
// 2.8 on four and 1.7 on eight (decode_bench, 2026-11-27); on the 2-core development VM two
// threads were 1.9x one. The environment's PARITY_DECODE_THREADS, read once, overrides it.
void SetDecodeThreads(int threads);
int DecodeThreads();

}  // namespace parity::common
