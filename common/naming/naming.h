// Display names of a call: one scheme for the verdicts, every result file and the logs, on the
// agent and on the server. docs/results.md documents it.
//   forward call          X = "{op}[.{overload}].{call index}"      "aten::add.Tensor.3"
//     its output i        "X.forward.output.{i}"                    msprobe's row name
//   backward call linked  "X.backward.{k}"  (X: the forward call whose autograd node ran it, k:
//   to forward call X     how many backward calls of X came before it in the step)
//     its output i        "X.backward.{k}.output.{i}"
//   backward call with no forward call (gradient accumulation): "{op}[.{overload}].{call index}"
//     its output i        "... .backward.output.{i}"
// Every name is unique within a step, and a backward call's name starts with its forward call's.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "common/wire/call_identity.h"
#include "common/wire/fields.h"
#include "common/wire/proto_fwd.h"

namespace parity::common {

// What a call's names are made of, viewed without a copy: an ApiCall's fields (the server, and
// any reader of the wire), or the fields of the agent's own call record (its training thread
// fills no proto). Every naming function and the selection language (selection.h) take it; an
// ApiCall converts implicitly. The viewed strings must outlive it.
class CallNaming {
 public:
  struct Fields {
    absl::string_view op_name, overload;                  // "aten::add", "Tensor"
    absl::string_view forward_op_name, forward_overload;  // a linked backward's forward call
    absl::string_view api;                                // msprobe's API at the call site
    uint64_t call_index = 0, api_index = 0;
    uint32_t backward_index = 0;
    wire::Phase phase = wire::kPhaseUnspecified;
  };
  explicit CallNaming(const Fields& fields) : f_(fields) {}
  CallNaming(const v1::ApiCall& call);  // NOLINT(runtime/explicit): an ApiCall names itself
  CallNaming(const CallIdentity& id);   // NOLINT(runtime/explicit): so does a call's identity

  absl::string_view op_name() const { return f_.op_name; }
  absl::string_view overload() const { return f_.overload; }
  absl::string_view forward_op_name() const { return f_.forward_op_name; }
  absl::string_view forward_overload() const { return f_.forward_overload; }
  absl::string_view api() const { return f_.api; }
  uint64_t call_index() const { return f_.call_index; }
  uint64_t api_index() const { return f_.api_index; }
  uint32_t backward_index() const { return f_.backward_index; }
  wire::Phase phase() const { return f_.phase; }

 private:
  Fields f_;
};

// "aten::add.Tensor", "aten::gelu" (the default overload has no suffix).
std::string OpName(absl::string_view op, absl::string_view overload);

// The call's API name (the first column of the result CSVs, Verdict.api_name).
std::string ApiName(const CallNaming& call);

// The call's name with its phase, as msprobe names its data: "X.forward", "X.backward.{k}" for a
// linked backward call, "{api}.backward" for one without a forward call.
std::string DataName(const CallNaming& call);

// The name of output `index` of the call (the details CSVs' row name): DataName + ".output.i".
std::string OutputName(const CallNaming& call, uint32_t index);

// The API name and phase for a log line: "aten::linear.1.backward.2 (aten::mm)", naming the
// backward op a linked backward call ran.
std::string LogName(const CallNaming& call);

// The forward call a row belongs to: X for a forward call and a linked backward call
// ("aten::linear.1"), the call's own API name otherwise.
std::string ForwardApiName(const CallNaming& call);

// "aten::gelu" -> "gelu" (the namespace stripped; an overload is not part of an op name here).
absl::string_view BareOpName(absl::string_view op_name);

}  // namespace parity::common
