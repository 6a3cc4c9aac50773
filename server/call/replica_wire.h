// Replica reports and verdicts to and from the wire (parity.v1.ReplicaReport, ReplicaVerdict):
// the one place they are converted. The report's limits are checked here.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "parity/v1/parity.pb.h"
#include "server/call/replica.h"

namespace parity::server {

// Most ranks in a group, digests in a report, and bytes in a digest's name (parity.proto).
inline constexpr std::size_t kMaxReplicaGroup = 65536;
inline constexpr std::size_t kMaxReplicaDigests = 65536;
inline constexpr std::size_t kMaxReplicaNameBytes = 1024;

// `report` from the stream of `run_id`'s rank `rank`. INVALID_ARGUMENT naming the field: a group
// that is empty, not ascending, or without `rank`; an unknown kind or algorithm; an empty op; a
// negative step. RESOURCE_EXHAUSTED over a limit above.
absl::StatusOr<ReplicaReport> ReplicaReportFromWire(const v1::ReplicaReport& report,
                                                    const std::string& run_id, int32_t rank);

v1::ReplicaVerdict ReplicaVerdictToWire(const ReplicaOutcome& outcome);

}  // namespace parity::server
