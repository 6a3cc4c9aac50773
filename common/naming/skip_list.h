// Operators whose results mean nothing (uninitialised memory), shared by the agent (which sends
// them as SKIP without data) and the server (which never replays them). Random operators are
// checked: common/naming/random_ops.h.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace parity::common {

// Why `op_name` ("aten::empty", "empty") is never replayed; empty if it can be.
std::string SkipReasonForOp(absl::string_view op_name);

// A collective or point-to-point communication op (`c10d::allreduce_`, `c10d::broadcast_`,
// `_c10d_functional::all_reduce`, ...): its result depends on the other ranks, so one rank's
// call cannot be replayed. The agent skips them before copying anything.
bool IsCommunicationOp(absl::string_view op_name);

}  // namespace parity::common
