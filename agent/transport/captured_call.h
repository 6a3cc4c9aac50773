// A call captured on a training thread, waiting for the sender: its name and metadata as a plain
// record, and its values as the torch half holds them (parity/transport.h's parity_values:
// snapshots it encodes on the sender thread). The training thread fills no proto: the sender
// writes the ApiCall (call_encoder.h: ToApiCall). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/naming/naming.h"
#include "common/wire/call_identity.h"
#include "parity/transport.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

class Session;

// Every field of the call's ApiCall but its values (inputs, outputs, inputs_written, which the
// torch half writes as bytes): the call's identity as the agent captures it
// (common/wire/call_identity.h; the server reads the same struct back).
using CallRecord = common::CallIdentity;

struct CapturedCall {
  CapturedCall() = default;
  CapturedCall(const CapturedCall&) = delete;
  CapturedCall& operator=(const CapturedCall&) = delete;
  ~CapturedCall() { ReleaseValues(); }

  // Takes `v` (released when this call is).
  void SetValues(const parity_values& v) {
    ReleaseValues();
    values = v;
    has_values = true;
    bytes = v.bytes;
    snapshot_seconds = v.snapshot_seconds;
  }
  void ReleaseValues() {
    if (has_values && values.release != nullptr) values.release(values.ctx);
    has_values = false;
  }
  // Back to a fresh record's state for another call (agent/transport/call_pool.h): the values
  // released, every field as a new record has it, the strings' buffers kept.
  void Clear();

  CallRecord meta;  // every field but the values
  parity_values values{};
  bool has_values = false;  // without: sent as a record only (skip_reason says why)
  uint64_t bytes = 0;
  double snapshot_seconds = 0;
  bool watch_generator = false;  // PARITY_CALL_WATCH_GENERATOR was given
  Session* session = nullptr;    // the session it was begun in (the C API's parity_call)
};

}  // namespace parity::agent
