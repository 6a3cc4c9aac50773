// Boxed calls through the dispatcher and their results: which arguments stand for an operator's
// results when it returns nothing, and a call that collects them.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
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

// Calls `op` on `stack` (the dispatcher's boxed convention); afterwards `stack` holds the call's
// results: its returns, or, for an op that returns nothing, the arguments it wrote (references
// kept across the call, so they read the written values). The server's replays and the tests'
// device side both judge calls by these results.
inline void CallBoxedForResults(const c10::OperatorHandle& op, std::vector<c10::IValue>& stack) {
  std::vector<c10::IValue> written;
  for (std::size_t i : WrittenArguments(op.schema())) {
    if (i < stack.size()) written.push_back(stack[i]);
  }
  op.callBoxed(stack);
  if (!written.empty()) stack = std::move(written);
}

}  // namespace parity::common
