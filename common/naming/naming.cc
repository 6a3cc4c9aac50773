#include "common/naming/naming.h"

#include "absl/strings/str_cat.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

CallNaming::CallNaming(const v1::ApiCall& call)
    : f_{call.op_name(),
         call.overload(),
         call.forward_op_name(),
         call.forward_overload(),
         call.api(),
         call.call_index(),
         call.api_index(),
         call.backward_index(),
         static_cast<wire::Phase>(call.phase())} {}

CallNaming::CallNaming(const CallIdentity& id)
    : f_{id.op_name,
         id.overload,
         id.forward_op_name,
         id.forward_overload,
         id.api,
         id.call_index,
         id.api_index,
         id.backward_index,
         static_cast<wire::Phase>(id.phase)} {}

std::string OpName(absl::string_view op, absl::string_view overload) {
  return overload.empty() ? std::string(op) : absl::StrCat(op, ".", overload);
}

namespace {

bool Linked(const CallNaming& call) {
  return call.phase() == wire::kPhaseBackward && !call.forward_op_name().empty();
}

}  // namespace

std::string ForwardApiName(const CallNaming& call) {
  return Linked(call)
             ? absl::StrCat(OpName(call.forward_op_name(), call.forward_overload()), ".",
                            call.call_index())
             : absl::StrCat(OpName(call.op_name(), call.overload()), ".", call.call_index());
}

std::string ApiName(const CallNaming& call) {
  std::string name = ForwardApiName(call);
  if (Linked(call)) absl::StrAppend(&name, ".backward.", call.backward_index());
  return name;
}

std::string DataName(const CallNaming& call) {
  if (Linked(call)) return ApiName(call);
  return absl::StrCat(ApiName(call),
                      call.phase() == wire::kPhaseBackward ? ".backward" : ".forward");
}

std::string OutputName(const CallNaming& call, uint32_t index) {
  return absl::StrCat(DataName(call), ".output.", index);
}

std::string LogName(const CallNaming& call) {
  if (Linked(call))
    return absl::StrCat(ApiName(call), " (", OpName(call.op_name(), call.overload()), ")");
  return absl::StrCat(ApiName(call),
                      call.phase() == wire::kPhaseBackward ? " backward" : " forward");
}

absl::string_view BareOpName(absl::string_view op_name) {
  const std::size_t colon = op_name.rfind("::");
  return colon == absl::string_view::npos ? op_name : op_name.substr(colon + 2);
}

}  // namespace parity::common
