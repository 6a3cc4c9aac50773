// Torch-free: the kind of a random-number generator's device (parity.v1.GeneratorDevice), from
// the name libtorch gives its device type. The agent sends both; a server reads the name only
// from an agent that sends no kind.
#pragma once

#include "absl/strings/string_view.h"
#include "common/wire/call_identity.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

// "cpu", "cuda", "npu", "privateuseone" to their kinds; any other name (and "") OTHER.
v1::GeneratorDevice GeneratorDeviceOf(absl::string_view device_type);

// The kind a GeneratorState says: its `device`, or, from an agent that does not send one, the
// kind its `device_type` names.
v1::GeneratorDevice GeneratorDeviceOf(const v1::GeneratorState& state);
v1::GeneratorDevice GeneratorDeviceOf(const CallIdentity::Generator& generator);

}  // namespace parity::common
