// A call captured on a training thread, waiting for the sender: its name and metadata, and its
// values as the torch half holds them (parity/transport.h's parity_values: snapshots it encodes
// on the sender thread). Torch-free.
#pragma once

#include <cstdint>

#include "parity/transport.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

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

  v1::ApiCall meta;  // every field but inputs/outputs
  parity_values values{};
  bool has_values = false;  // without: sent as a record only (skip_reason says why)
  uint64_t bytes = 0;
  double snapshot_seconds = 0;
  bool watch_generator = false;  // PARITY_CALL_WATCH_GENERATOR was given
};

}  // namespace parity::agent
