// Reading libtorch's random-number generators, with no protobuf or abseil header (the agent's
// torch half reads a random op's generator at its entry; common/torch/generator_state.h gives
// the server's side).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace parity::common {

// The libtorch version this binary was built against: "1.13.1".
std::string TorchVersion();

// `gen`'s raw state bytes, read under its lock.
std::string GeneratorStateBytes(at::Generator gen);

// A mark of `gen`'s state that changes whenever it draws, read under its lock, cheaper than its
// state: for the CPU generator its Mersenne Twister's position (seed, remaining words, next
// index, first word) and the cached normal samples, without copying the 5 KB state into a
// tensor; for a device generator (CUDA's and torch_npu's Philox: seed and offset, a few bytes)
// its state.
std::string GeneratorMark(at::Generator gen);

// The default generator of `device` (the one an op without a generator argument draws from);
// nullopt, with libtorch's reason in `error` (may be null), for a device type without one.
std::optional<at::Generator> DefaultGeneratorOf(const c10::Device& device, std::string* error);

}  // namespace parity::common
