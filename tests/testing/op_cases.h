// Real operator calls for the server's tests and benchmarks: run an op here (this process plays
// the device) and encode the call as the agent does.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/torch/torch_pch.h"
#include "parity/v1/parity.pb.h"

namespace parity::testing {

using Stack = std::vector<c10::IValue>;

// A seeded random tensor.
at::Tensor R(std::vector<int64_t> shape, int seed, at::ScalarType dtype = at::kFloat);

// Runs op(args) on copies and builds the ApiCall the agent would send. `tamper` may change the
// outputs (a planted fault) before they are encoded.
v1::ApiCall BuildCall(const std::string& name, const std::string& overload, Stack args,
                      v1::Phase phase = v1::PHASE_FORWARD,
                      const std::function<void(Stack&)>& tamper = nullptr, uint64_t sequence = 0);

struct OpCase {
  std::string name, overload;
  std::function<Stack()> args;
  v1::Phase phase = v1::PHASE_FORWARD;
  const char* standard;  // expected standard of output 0
};

// 40+ clean calls over 30+ distinct ops, every standard, forward and backward.
std::vector<OpCase> CleanCases();

}  // namespace parity::testing
