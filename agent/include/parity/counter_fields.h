// The counters both halves name alike (parity::agent::Counters in parity/agent.h and
// parity_counters in parity/transport.h), one list: X(field) for each field copied as it is.
// The dropped calls (a map on one side, a field per reason on the other: PARITY_DROP_REASONS) and
// `connected` (bool and int) are converted by hand. No dependencies: either half includes it.
#pragma once

// clang-format off
#define PARITY_AGENT_COUNTER_FIELDS(X)                                                     \
  X(captured) X(sent) X(sent_bytes) X(reused_bytes) X(lost_in_flight) X(unencodable)       \
  X(sampled_out) X(reconnects) X(verdicts) X(pass) X(warning) X(error) X(skip)             \
  X(rejected) X(unreadable) X(queue_depth) X(snapshot_seconds) X(encode_cpu_seconds)       \
  X(serialize_cpu_seconds) X(step) X(blocked_seconds) X(compiled_forward)                 \
  X(compiled_backward) X(compiled_calls) X(replica_reports) X(replica_pass)                 \
  X(replica_error) X(replica_skip) X(replica_unsent)
// clang-format on

// parity_counters' dropped_<reason> fields, one per PARITY_DROP_REASONS entry.
#include "common/naming/drop_reasons.h"
