// Replica reports and verdicts to and from the wire (parity.v1.ReplicaReport, ReplicaVerdict):
// the one place they are converted, the report's rules checked (replica_rules.h).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/transport/replica_rules.h"
#include "parity/v1/parity.pb.h"
#include "server/call/replica.h"

namespace parity::server {

// `report` from the stream of `run_id`'s rank `rank`, or the rule it breaks
// (common/transport/replica_rules.h: CheckReplicaReport).
absl::StatusOr<ReplicaReport> ReplicaReportFromWire(const v1::ReplicaReport& report,
                                                    const std::string& run_id, int32_t rank);

v1::ReplicaVerdict ReplicaVerdictToWire(const ReplicaOutcome& outcome);

}  // namespace parity::server
