// A call captured on a training thread, waiting for the sender: its name and metadata as a plain
// record, and its values as the torch half holds them (parity/transport.h's parity_values:
// snapshots it encodes on the sender thread). The training thread fills no proto: the sender
// writes the ApiCall (call_encoder.h: ToApiCall). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/naming/naming.h"
#include "parity/transport.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

// Every field of the call's ApiCall but its values (inputs, outputs, inputs_written, which the
// torch half writes as bytes): parity.proto's ApiCall documents each.
struct CallRecord {
  uint64_t sequence = 0;
  int64_t step = 0;
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  std::string op_name, overload;
  uint64_t call_index = 0;
  std::string forward_op_name, forward_overload;
  uint32_t backward_index = 0;
  std::string autograd_node;
  int64_t autograd_sequence_nr = 0;
  std::string module_path;
  bool in_optimizer = false;
  std::string skip_reason;
  int64_t capture_unix_nanos = 0;
  std::string api;
  uint64_t api_index = 0;
  bool drew_random = false;
  v1::DType autocast_dtype = v1::DTYPE_UNSPECIFIED;
  struct Generator {
    std::string device_type;
    v1::GeneratorDevice device = v1::GENERATOR_DEVICE_UNSPECIFIED;
    int32_t device_index = 0;
    std::string state;
    std::string torch_version;
  };
  std::optional<Generator> generator;

  // What its names are made of (common/naming/naming.h), viewing this record.
  common::CallNaming Naming() const {
    return common::CallNaming({op_name, overload, forward_op_name, forward_overload, api,
                               call_index, api_index, backward_index, phase});
  }
};

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

  CallRecord meta;  // every field but the values
  parity_values values{};
  bool has_values = false;  // without: sent as a record only (skip_reason says why)
  uint64_t bytes = 0;
  double snapshot_seconds = 0;
  bool watch_generator = false;  // PARITY_CALL_WATCH_GENERATOR was given
};

}  // namespace parity::agent
