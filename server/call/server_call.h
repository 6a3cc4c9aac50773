// One call as the server works on it: who it is (CallIdentity), its names and its operator's
// traits, each read once from its message here, at the edge, and the message itself, whose values
// only server/call/decode_values.h reads (`message`). The checker (server/replay/call_checker.h),
// the verdict encoder, the result rows and the error data take it; none of the later stages reads
// the call's identity back out of the proto. Torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/naming/random_ops.h"
#include "common/wire/call_identity.h"
#include "common/wire/proto_fwd.h"
#include "server/call/call_outcome.h"

namespace parity::server {

// What the server knows of an operator by its name alone ("aten::dropout"), resolved once per
// name and shared by every call of it (OperatorTraitsOf).
struct OperatorTraits {
  std::string op_name;             // as the call names it: "aten::dropout"
  absl::string_view bare() const;  // "dropout"
  // Why it is never replayed (common/naming/operator_catalogue.h: uninitialised memory, a
  // collective); empty when it can be.
  std::string skip_reason;
  common::RandomFamily random_family = common::RandomFamily::kNone;  // kNone: draws nothing
};

// The traits of `op_name`, from a process-wide cache (bounded: names past its first 4,096 are
// resolved per call and not kept, so a client sending made-up names cannot grow it).
// Thread-safe.
std::shared_ptr<const OperatorTraits> OperatorTraitsOf(absl::string_view op_name);

// A call's names (common/naming/naming.h, api_names.h), each made once.
struct CallNames {
  std::string api;          // Parity's: "aten::linear.0", "aten::linear.0.backward.0"
  std::string forward_api;  // a call naming its forward call (a backward): that call's; else empty
  std::string csv_api;      // the result CSVs' API name: "Functional.linear.0"
  std::string msprobe;      // msprobe's: "Functional.linear.0.forward"; empty where none maps
  std::string msprobe_api;  // its API part, "Functional.linear"; empty when `msprobe` is
};

// Who a call is: its identity (common/wire/call_identity.h), read from its ApiCall once.
using CallIdentity = common::CallIdentity;

struct ServerCall {
  // `framework`: the training's, as its agent's Hello says it ("torch 2.1.0"), or empty.
  explicit ServerCall(const v1::ApiCall& wire, std::string framework = {});
  explicit ServerCall(const v1::ApiCall&& wire,
                      std::string framework = {}) = delete;  // kept by reference

  // The message it came in: read by server/call/decode_values.h (its values) and nowhere else.
  // Opaque past server/call/ and server/service/, which alone include parity.pb.h.
  const v1::ApiCall& message;
  CallIdentity id;
  std::string framework;
  std::shared_ptr<const OperatorTraits> op;
  CallNames names;
  // What the agent found of the call's writes to its read-only arguments (ApiCall
  // .inputs_written; .unchecked_writes, at most as many as a verdict carries), and how many
  // inputs the call has.
  std::vector<InputWritten> inputs_written;
  std::vector<std::string> unchecked_writes;
  int input_count = 0;

  // The call's files in error data: "aten::add.Tensor.0.forward" (common::DataName).
  std::string DataName() const;
};

}  // namespace parity::server
