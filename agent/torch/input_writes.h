// Read-only arguments a call must leave as they were (ApiCall.inputs_written,
// parity.detect_input_writes): at entry the agent notes each read-only tensor argument of a call
// it sends with its values; at exit it compares each with its entry snapshot, bit for bit (a
// memcmp on the host; on an accelerator, a second copy queued on the call's stream, compared by
// the sender on the host with the snapshot). A kernel that uses an input as scratch passes its own
// comparison and corrupts what autograd saved: only this sees it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/torch/torch_values.h"
#include "common/torch/torch_pch.h"
#include "common/wire/proto_writer.h"

namespace parity::agent {

// A read-only tensor argument, referenced (not copied) from entry to exit.
struct WatchedInput {
  uint32_t index = 0;
  std::string name;
  at::Tensor live;
};

// The read-only tensor arguments of `schema` among the first `sent` of `inputs` that are worth
// comparing: not written by the schema (`(a!)`), not sharing memory with an argument that is,
// not the running statistics torch's batch norms update without an annotation, not empty.
std::vector<WatchedInput> WatchReadOnlyInputs(const c10::FunctionSchema& schema,
                                              c10::ArrayRef<const c10::IValue> inputs,
                                              std::size_t sent);

// After the call: each watched argument against its snapshot (`values.inputs[index]`, taken at
// entry). On the host, compared now; on an accelerator, copied on its current stream (call
// before MarkDeviceReady, so the sender's wait covers the copy). Never throws: an argument that
// cannot be compared is left out (logged once).
void CompareWatchedInputs(const std::vector<WatchedInput>& watched, TorchValues& values);

// The sender's side, after the wait for the device's copies: compares the accelerator
// arguments' copies at exit with their snapshots.
void ResolveInputWrites(TorchValues& values);

// The ApiCall's inputs_written fields, one per argument that changed.
void EncodeInputWrites(const TorchValues& values, wire::Message* api_call_fields);

}  // namespace parity::agent
