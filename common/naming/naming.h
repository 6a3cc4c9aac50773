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

#include <string>

#include "absl/strings/string_view.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

// "aten::add.Tensor", "aten::gelu" (the default overload has no suffix).
std::string OpName(absl::string_view op, absl::string_view overload);

// The call's API name (the first column of the result CSVs, Verdict.api_name).
std::string ApiName(const v1::ApiCall& call);

// The call's name with its phase, as msprobe names its data: "X.forward", "X.backward.{k}" for a
// linked backward call, "{api}.backward" for one without a forward call.
std::string DataName(const v1::ApiCall& call);

// The name of output `index` of the call (the details CSVs' row name): DataName + ".output.i".
std::string OutputName(const v1::ApiCall& call, uint32_t index);

// The API name and phase for a log line: "aten::linear.1.backward.2 (aten::mm)", naming the
// backward op a linked backward call ran.
std::string LogName(const v1::ApiCall& call);

// The forward call a row belongs to: X for a forward call and a linked backward call
// ("aten::linear.1"), the call's own API name otherwise.
std::string ForwardApiName(const v1::ApiCall& call);

// "aten::gelu" -> "gelu" (the namespace stripped; an overload is not part of an op name here).
absl::string_view BareOpName(absl::string_view op_name);

}  // namespace parity::common
