// The rules a ReplicaReport keeps (proto/parity/v1/parity.proto), in one place for both sides:
// the server refuses a report that breaks one (the stream ends, as at any malformed message), and
// the agent checks its own before sending, so that a bad report (a replica group without this
// rank, an over-long tensor name) is refused with its reason and the stream, with the calls in
// flight on it, goes on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

// Most ranks in a group, digests in a report, and bytes in a digest's or the op's name.
inline constexpr std::size_t kMaxReplicaGroup = 65536;
inline constexpr std::size_t kMaxReplicaDigests = 65536;
inline constexpr std::size_t kMaxReplicaNameBytes = 1024;

// OK, or the first rule `report` from rank `rank` breaks: INVALID_ARGUMENT naming the field (a
// group that is empty, not ascending or without `rank`; an unknown kind or algorithm; an op
// empty, too long or with control characters; a negative step; a digest's name too long or with
// control characters), RESOURCE_EXHAUSTED over a count above.
absl::Status CheckReplicaReport(const v1::ReplicaReport& report, int32_t rank);

}  // namespace parity::common
