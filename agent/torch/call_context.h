// What the hook keeps of a top-level call between its entry and its exit (agent_hook.cc). One
// captured call is in flight on a thread at a time (the calls nested in it are not captured), so
// its context's memory, and the capacity of its read-only arguments' list, are kept for the
// thread's next call: a captured call allocates neither.
#pragma once

#include <ATen/record_function.h>

#include <memory>
#include <optional>
#include <vector>

#include "agent/torch/input_writes.h"
#include "agent/torch/torch_values.h"
#include "common/torch/generator_read.h"
#include "common/torch/torch_pch.h"
#include "parity/transport.h"

namespace parity::agent {

struct CallContext : at::ObserverContext {
  ~CallContext() override {
    if (call != nullptr) parity_call_discard(call);  // begun, never captured (an exception)
  }
  // The thread's spare context's memory, when it has one.
  static void* operator new(std::size_t n);
  static void operator delete(void* p);

  // Empties read_only and swaps it with the thread's spare list: at entry it takes the spare's
  // capacity, at exit it gives it back.
  void SwapReadOnlyList();

  parity_call* call = nullptr;
  std::unique_ptr<TorchValues> values;
  // For an op that returns nothing: the arguments it writes (references, not copies), whose
  // values at exit are its results. libtorch 2.x does not keep fn.inputs() alive until then.
  std::vector<c10::IValue> written;
  // PARITY_CALL_WATCH_GENERATOR: the generator the call would draw from, and its state at entry.
  std::optional<at::Generator> watched;
  common::GeneratorEntry entry;
  // PARITY_CALL_CHECK_INPUTS: the read-only tensor arguments, compared at exit with their
  // snapshots (agent/torch/input_writes.h).
  std::vector<WatchedInput> read_only;
};

}  // namespace parity::agent
