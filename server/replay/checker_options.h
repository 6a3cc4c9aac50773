// The checker's options (server/replay/call_checker.h): the keys of the server's configuration it
// reads, with their defaults, nested in the parsed configuration as ServerConfig::check.checker
// (server/config/server_config.h binds each key to its member here). Torch-free, a leaf.
#pragma once

#include <string>

#include "common/wire/limits.h"

namespace parity::server {

// Where the float64 golden runs (parity.golden_device): kAuto on the checking thread's bench
// device (a GPU's golden falls back to the CPU for an op it cannot run there), kCpu always on
// the CPU.
enum class GoldenDevice { kAuto, kCpu };

// How random ops are checked (parity.random_checks, docs/results.md#random-operators): kAuto
// replays them from the training's generator state when the bench has a generator of that kind
// and the same libtorch, else judges them by the random_property standard; kStatistical always
// does that; kSkip answers SKIP.
enum class RandomChecks { kAuto, kStatistical, kSkip };

struct CheckerOptions {
  // parity.bench_device: "auto" (every GPU, else the CPU), "cpu", "cuda" (every GPU), "cuda:N",
  // "cuda:0,cuda:2".
  std::string bench_device = "auto";
  bool golden = true;                                // parity.golden: three-way standards
  GoldenDevice golden_device = GoldenDevice::kAuto;  // parity.golden_device
  RandomChecks random_checks = RandomChecks::kAuto;  // parity.random_checks
  // parity.random_false_alarm: the property checks' false-alarm probability per call
  double random_false_alarm = 1e-6;

  // Set by the call pipeline, not keys of their own here: parity.limits.* (one message's
  // tensors) and parity.save_error_data (CallOutcome::values kept for the calls judged error).
  common::DecodeLimits limits;
  bool save_error_data = true;
};

}  // namespace parity::server
