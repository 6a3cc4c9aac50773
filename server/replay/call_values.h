// The values of one checked call, kept for its error data: the inputs as replayed, and the
// device's, the bench's and the golden's outputs. Saved as files torch.load reads (libtorch's
// pickle format, what torch.save writes), and loaded back by parity-repro. Uses libtorch types.
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/call/error_files.h"

namespace parity::server {

struct CallValues {
  std::string schema;               // the operator's schema as the bench's dispatcher has it
  std::vector<c10::IValue> inputs;  // the full argument stack, defaults filled in
  std::vector<c10::IValue> device;  // output leaves as OutputOutcome::index counts them
  std::vector<c10::IValue> bench;   // empty when the bench could not run
  std::vector<c10::IValue> golden;  // empty when the golden could not run or is off
};

// One file written by SaveCallValues (or by torch.save in Python).
absl::StatusOr<c10::IValue> LoadValue(const std::string& path);

}  // namespace parity::server
