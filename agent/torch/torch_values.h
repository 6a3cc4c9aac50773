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
    int64_t elements = 0;
    int64_t changed = 0;
    at::Tensor after;
  };
  std::vector<InputWrite> input_writes;
  // Device snapshots given again by the snapshot cache with the host copy an earlier call made:
  // (snapshot, host copy). The sender uses these instead of copying them out again.
  std::vector<std::pair<at::Tensor, at::Tensor>> host_copies;
};

// `values` as the transport takes them (it owns them from here; released through the struct).
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
