// Torch-free: the kind of a random-number generator's device (parity.v1.GeneratorDevice), from
// the name libtorch gives its device type. The agent sends both; a server reads the name only
// from an agent that sends no kind.
#pragma once

#include "absl/strings/string_view.h"
#include "common/wire/call_identity.h"
#include "common/wire/fields.h"
#include "common/wire/proto_fwd.h"

namespace parity::common {

// "cpu", "cuda", "npu", "privateuseone" to their kinds; any other name (and "") OTHER.
wire::GeneratorDevice GeneratorDeviceOf(absl::string_view device_type);

// The kind a GeneratorState says: its `device`, or, from an agent that does not send one, the
// kind its `device_type` names.
wire::GeneratorDevice GeneratorDeviceOf(const v1::GeneratorState& state);
wire::GeneratorDevice GeneratorDeviceOf(const CallIdentity::Generator& generator);

}  // namespace parity::common
