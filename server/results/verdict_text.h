// The typed result of a check, as text: the Verdict streamed back to the agent. Names of
// standards and metrics are made here and in the result files (and, for messages only, in the
// places docs/design.md lists).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "parity/v1/parity.pb.h"
#include "server/replay/call_check.h"
#include "server/replay/server_call.h"

namespace parity::server {

// The verdict for `call`: status, message, code, times, api name, and per output its status,
// standard, dtype, shape, failed metric, message and every metric by name (device-vs-reference
// metrics by their names, bench-vs-golden ones as "bench_{name}", three-way ratios as
// "ratio_{name}", the statistics standard's as "stats_*").
v1::Verdict ToVerdict(const ServerCall& call, const CallCheck& check);

// A verdict given without a check (a server list's SKIP, --replay=false, a failure inside the
// server): the call's sequence, api name, phase, step and module path, `status`, `message` and
// `code`; no outputs. ToVerdict starts from it too.
v1::Verdict DecidedVerdict(const ServerCall& call, v1::VerdictStatus status, std::string message,
                           absl::StatusCode code = absl::StatusCode::kOk);

// One output's part of it.
void FillOutputVerdict(const OutputCheck& out, v1::OutputVerdict* verdict);

}  // namespace parity::server
