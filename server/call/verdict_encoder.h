// The one encoder of the Verdict proto: the typed result of a check (server/call/call_outcome.h)
// as the message streamed back to the agent. Nothing on the server reads a Verdict back: the
// result files render from the same types (server/results/), with the metric names below.
// Names of standards and metrics are made here and in the result files (and, for messages
// only, in the places docs/design.md lists).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "parity/v1/parity.pb.h"
#include "server/call/call_outcome.h"
#include "server/call/server_call.h"

namespace parity::server {

// The verdict for `call`: status, message, code, times, api name, and per output its status,
// standard, dtype, shape, failed metric, message and every metric by name (device-vs-reference
// metrics by their names, bench-vs-golden ones as "bench_{name}", three-way ratios as
// "ratio_{name}", the statistics standard's as "stats_*").
v1::Verdict ToVerdict(const ServerCall& call, const CallOutcome& check);

// A verdict's fields that every verdict has: the call's sequence, api name, op name, phase,
// step and module path, `status` and `message`, and `code` as Verdict.error_code when `status`
// is SKIP or REJECTED (0 for any other status: the contract says a code explains why a call
// was not checked). Given alone, without a check, for a server list's SKIP, --replay=false or a
// failure inside the server (no outputs); ToVerdict starts from it.
v1::Verdict DecidedVerdict(const ServerCall& call, CheckStatus status, std::string message,
                           absl::StatusCode code = absl::StatusCode::kOk);

// The proto's name for a status: the one place a CheckStatus becomes a VerdictStatus.
v1::VerdictStatus ToProto(CheckStatus status);
// And back (a Verdict read by a client or a test): kUnspecified for a value outside the enum.
CheckStatus FromProto(v1::VerdictStatus status);
// msprobe's spelling of a status as the wire carries it (server/compare/judge.h: StatusText).
inline absl::string_view StatusText(v1::VerdictStatus s) { return StatusText(FromProto(s)); }

// One output's part of it.
void FillOutputVerdict(const OutputOutcome& out, v1::OutputVerdict* verdict);

}  // namespace parity::server
