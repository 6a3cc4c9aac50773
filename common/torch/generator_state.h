// Random-number generator states on the wire (parity.v1.GeneratorState): read by the agent at a
// random op's entry, written into a bench generator by the server before it replays the call.
// Include only from torch translation units.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/torch/generator_read.h"
#include "common/wire/proto_fwd.h"

namespace parity::common {

// `gen`'s state, read under its lock, with its device and this libtorch's version.
v1::GeneratorState ReadGeneratorState(at::Generator gen);

// The default generator of `device` (the one an op without a generator argument draws from).
// Errors for a device type libtorch has no default generator for.
absl::StatusOr<at::Generator> DefaultGenerator(const c10::Device& device);

// Writes `state` (a GeneratorState.state) into `gen` under its lock. libtorch checks the size
// and layout; its refusal comes back as INVALID_ARGUMENT with its text.
absl::Status WriteGeneratorState(at::Generator gen, const std::string& state);

}  // namespace parity::common
