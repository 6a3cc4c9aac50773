// Which arguments stand for an operator's results when it returns nothing.
#pragma once

#include <ATen/core/function_schema.h>

#include <cstddef>
#include <vector>

namespace parity::common {

// The arguments an operator writes when it returns nothing (the in-place _foreach_ ops that
// optimizers run on GPUs, fused optimizers such as _fused_adam_): their values after the call
// are its results, in schema order. Empty when the op returns something (an in-place op that
// returns `self` is judged by that return).
inline std::vector<std::size_t> WrittenArguments(const c10::FunctionSchema& schema) {
  std::vector<std::size_t> written;
  if (!schema.returns().empty()) return written;
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].alias_info() != nullptr && args[i].alias_info()->isWrite()) written.push_back(i);
  }
  return written;
}

}  // namespace parity::common
