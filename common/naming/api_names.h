// msprobe's names for a call: its API ("Functional.linear"), its full name
// ("Functional.linear.0.forward") and the API name of its rows in the result CSVs. The names a
// config may write to select calls are the selection language's (common/naming/selection.h).
// The mapping table from msprobe's API names to operators is in msprobe_tables.cc.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "common/naming/naming.h"

namespace parity::common {

// msprobe's API for a call's operator: "Functional.linear", "Torch.matmul", "Tensor.add_",
// "NPU.npu_rms_norm", "Distributed.all_reduce", "Aten._foreach_add_.List"; empty where none maps.
std::string MsprobeApi(absl::string_view op, absl::string_view overload);
// msprobe's name for a call: "Functional.linear.0.forward"; a linked backward call has its
// forward call's, "Functional.linear.0.backward". From the call site where the agent saw it
// (ApiCall.api and api_index: "Tensor.add.3.forward", msprobe's own counter); else from the
// operator, with Parity's call index, which is msprobe's wherever one msprobe API maps to one
// operator. Empty where none maps (a backward call with no forward call).
std::string MsprobeName(const CallNaming& call);
// The API name of a call's rows in the result CSVs, msprobe's "{Type}.{api}.{index}" without a
// direction, for every call, so that msprobe's readers (which split names on dots: 6 or 7
// segments for a details row) parse each one: msprobe's API where it has one, from the call
// site (ApiCall.api, "Tensor.add.3") or else from the operator ("Functional.linear.0"; a linked
// backward call has its forward call's); for a backward call
// with no forward call (gradient accumulation), msprobe's online name for the engine's work,
// "Aten.{op}.{index}" (the overload dropped, as msprobe drops it); for an operator of another
// namespace, "{namespace}.{op}.{index}".
std::string MsprobeCsvName(const CallNaming& call);

}  // namespace parity::common
