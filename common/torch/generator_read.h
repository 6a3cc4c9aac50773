// Reading libtorch's random-number generators, with no protobuf or abseil header (the agent's
// torch half reads a random op's generator at its entry; common/torch/generator_state.h gives
// the server's side).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/MT19937RNGEngine.h>
#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace parity::common {

// The libtorch version this binary was built against: "1.13.1".
std::string TorchVersion();

// `gen`'s raw state bytes, read under its lock.
std::string GeneratorStateBytes(at::Generator gen);

// A generator's state at one moment (a call's entry), kept so that whether the call drew can be
// told exactly at its exit and, if it did, the state it drew from sent. For the CPU generator:
// its Mersenne Twister and cached normal samples copied here (2.5 KB, no tensor, no allocation);
// for a device generator (CUDA's and torch_npu's Philox: seed and offset, a few bytes): its
// state bytes. Reusable: Take overwrites.
class GeneratorEntry {
 public:
  // Reads `gen` under its lock.
  void Take(at::Generator gen);
  // Whether any bit of `gen`'s state (the generator given to Take) differs from then.
  bool Moved(at::Generator gen) const;
  // The state at Take, byte for byte as GeneratorStateBytes would have read it then.
  std::string StateBytes() const;

 private:
  bool cpu_ = false;
  at::mt19937_data_pod engine_;  // a POD: no seeding when the entry is made
  bool has_float_ = false, has_double_ = false;
  float next_float_ = 0;
  double next_double_ = 0;
  std::string device_state_;
};

// The default generator of `device` (the one an op without a generator argument draws from);
// nullopt, with libtorch's reason in `error` (may be null), for a device type without one.
std::optional<at::Generator> DefaultGeneratorOf(const c10::Device& device, std::string* error);

}  // namespace parity::common
