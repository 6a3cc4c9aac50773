// Caps that every decoder enforces before allocating anything.
#pragma once

#include <cstddef>
#include <cstdint>

namespace parity::common {

// Resource caps for decoding untrusted values. Defaults suit a benchmark host with tens of GiB.
struct DecodeLimits {
  uint64_t max_tensor_bytes = uint64_t{1} << 30;  // one tensor's payload: 1 GiB
  uint64_t max_tensor_numel = uint64_t{1} << 30;  // one tensor's element count
  uint64_t max_call_bytes = uint64_t{4} << 30;    // all tensor payloads of one call: 4 GiB
  uint32_t max_dims = 16;                         // tensor rank
  uint32_t max_depth = 8;                         // nesting of lists inside lists
  uint32_t max_list_length = 65536;               // items in one list
  uint32_t max_string_bytes = 65536;              // one string value
};

// Longest ApiCall strings the server accepts (a call over them is rejected with
// RESOURCE_EXHAUSTED): names of ops, overloads and autograd nodes; module paths; skip reasons.
inline constexpr std::size_t kMaxNameBytes = 256;
inline constexpr std::size_t kMaxModulePathBytes = 1024;
inline constexpr std::size_t kMaxSkipReasonBytes = 4096;
// Items one MessageBatch may hold (parity.proto): the agent flushes a batch at this many, the
// server ends a stream whose batch holds more. Each item costs the server a buffer of a few
// hundred bytes however small it is on the wire (a 7.6 MiB batch of two million empty releases
// took 700 MiB before the cap).
inline constexpr std::size_t kMaxBatchItems = 4096;
// A random op's generator state (ApiCall.generator.state): libtorch's are 16 to 5056 bytes.
inline constexpr std::size_t kMaxGeneratorStateBytes = 65536;

// In a RESOURCE_EXHAUSTED from a decoder (common/torch/value_codec.h): the server's memory ran
// out, not a cap of the call (which the checker answers SKIP, not REJECTED).
inline constexpr char kOutOfMemoryDecoding[] = "out of memory decoding";

}  // namespace parity::common
