// One call's identity: who it is, what it is named after and what the agent knew of it, with the
// meaning of ApiCall's fields (proto/parity/v1/parity.proto) and the project's own enums
// (common/wire/fields.h), no proto. The agent fills it while it captures a call; the server reads
// it back and every stage after the service edge uses it. common/transport/call_wire.h converts
// it to and from the message, the one place that names both: a new field of a call's identity
// is added here and there (tests/common/transport/call_wire_test.cc fails on an ApiCall field
// that neither carries nor lists as a payload).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/wire/fields.h"

namespace parity::common {

struct CallIdentity {
  uint64_t sequence = 0;  // at least 1, increasing on a stream
  int64_t step = 0;
  wire::Phase phase = wire::kPhaseUnspecified;
  std::string op_name;   // "aten::add"
  std::string overload;  // "Tensor"
  uint64_t call_index = 0;
  // A backward call linked to its forward call: that call's operator (and overload).
  std::string forward_op_name, forward_overload;
  uint32_t backward_index = 0;
  std::string autograd_node;
  int64_t autograd_sequence_nr = 0;
  std::string module_path;
  bool in_optimizer = false;
  std::string skip_reason;  // the agent's reason for sending no values (a record only)
  int64_t capture_unix_nanos = 0;
  std::string api;  // msprobe's API at the Python call site ("Functional.linear"); may be empty
  uint64_t api_index = 0;
  bool drew_random = false;  // the agent saw the call move its generator
  wire::DType autocast_dtype = wire::kDTypeUnspecified;
  struct Generator {  // the state the call drew from (GeneratorState)
    std::string device_type;
    wire::GeneratorDevice device = wire::kGeneratorUnspecified;
    int32_t device_index = 0;
    std::string state;
    std::string torch_version;
  };
  std::optional<Generator> generator;

  bool backward() const { return phase == wire::kPhaseBackward; }
};

}  // namespace parity::common
