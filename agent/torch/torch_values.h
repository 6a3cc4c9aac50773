// A captured call's values as the torch half holds them (snapshots of its inputs and outputs),
// handed to the transport as a parity_values: encoded on the sender thread into parity.v1.Value
// wire bytes (common/torch/wire_encoder.h), released when the transport is done with them.
// No gRPC, protobuf, abseil or OpenSSL header (docs/design.md#two-halves).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/torch/torch_pch.h"
#include "parity/transport.h"

namespace parity::agent {

struct TorchValues {
  std::string op, overload;  // for the schema's type hints
  std::vector<c10::IValue> inputs, outputs;
  uint64_t bytes = 0;
  double snapshot_seconds = 0;  // the training thread's time in this call's snapshot copies
  // Accelerator tensors are snapshotted on their device (an asynchronous device-side copy, so
  // the training thread never waits for the device); the sender waits for this event, recorded
  // on the training's stream after the last copy, then copies them to the host.
  std::optional<c10::Event> device_ready;
  std::optional<c10::Device> accelerator;  // the first accelerator among the snapshots
  // Read-only arguments compared at exit (agent/torch/input_writes.h): how many of their elements
  // changed; on an accelerator `after` holds their copy at exit (on the device, queued after the
  // kernel) until the sender compares it with the snapshot on the host.
  struct InputWrite {
    uint32_t index = 0;
    std::string name;
    int64_t elements = 0;  // the argument's (input_writes.h: WatchedInput::elements)
    int64_t changed = 0;
    int64_t member = -1;  // a tensor list's member
    at::Tensor after;
    at::Tensor before, inside;  // around a written view (WatchedInput)
  };
  std::vector<InputWrite> input_writes;
  // What the read-only check did not compare, and why (ApiCall.unchecked_writes).
  std::vector<std::string> unchecked_writes;
  // Device snapshots that may hold the bits of an earlier snapshot of the same tensor
  // (agent/torch/snapshot_cache.h): `changed`, a 0-dim bool the device computes on the training's
  // stream, says whether any bit differs. The sender resolves them after its wait for the device:
  // each unchanged one with a kept host copy becomes a pair of `host_copies`.
  struct HostCandidate {
    at::Tensor snapshot, earlier, changed;
  };
  std::vector<HostCandidate> host_candidates;
  // (snapshot, host copy): device snapshots the sender gives an earlier call's host copy instead
  // of copying them out of the device again.
  std::vector<std::pair<at::Tensor, at::Tensor>> host_copies;
};

// A TorchValues for a new call: one the transport released earlier when there is one, emptied
// with its vectors' capacity kept (so a call does not allocate them again), else a new one.
std::unique_ptr<TorchValues> NewTorchValues();

// `values` as the transport takes them (it owns them from here; released through the struct,
// into the pool NewTorchValues takes from).
parity_values MakeParityValues(std::unique_ptr<TorchValues> values);

// What MakeParityValues's encode does, for tests: the ApiCall's inputs and outputs fields.
// Returns 0 or a status code, with the reason in *error.
int EncodeTorchValues(TorchValues& values, const parity_encode_limits& limits,
                      const parity_blob_sink* sink, std::string* out, std::string* error);

// `v` with every accelerator tensor copied to the host (lists and tuples included).
c10::IValue ToHost(const c10::IValue& v);
// The same, using `call`'s host_copies where a snapshot has one.
c10::IValue ToHost(const c10::IValue& v, const TorchValues& call);

}  // namespace parity::agent
