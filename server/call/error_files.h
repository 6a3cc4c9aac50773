// Writing a checked call's values as files torch.load reads, for the error data. Torch-free:
// the server's result code calls it with the CallValues a CallOutcome holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace parity::server {

struct CallValues;  // server/replay/call_values.h

// The operator's schema as the bench's dispatcher has it.
const std::string& SchemaOf(const CallValues& values);

// Bytes the files of `values` take, near enough to budget by (tensor payloads plus a little
// per value).
uint64_t SavedBytes(const CallValues& values);

// The files of one call, relative to the folder they were written to.
struct SavedFiles {
  std::vector<std::string> inputs, device, bench, golden;
};
// Writes `{prefix}.input.{i}.pt` and `{prefix}.output.{device|bench|golden}.{i}.pt` into `dir`
// (msprobe's names, with the golden added). Tensors are written from host memory; an undefined
// tensor is written as None. Errors name the file.
absl::StatusOr<SavedFiles> SaveCallValues(const CallValues& values, const std::string& dir,
                                          const std::string& prefix);

}  // namespace parity::server
