#include "common/naming/api_names.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/naming/msprobe_tables.h"
#include "common/naming/naming.h"

namespace parity::common {

using internal::DistributedOps;
using internal::FunctionalOps;

// ---- msprobe's names ----------------------------------------------------------------------------

std::string MsprobeApi(absl::string_view op, absl::string_view overload) {
  const std::size_t colon = op.rfind("::");
  if (colon == absl::string_view::npos) return "";
  const absl::string_view ns = op.substr(0, colon), name = op.substr(colon + 2);
  if (ns == "npu") return absl::StrCat("NPU.", name);
  if (ns == "c10d") {
    for (const auto& [api, c10d] : DistributedOps()) {
      if (c10d == name) return absl::StrCat("Distributed.", api);
    }
    return absl::StrCat("Distributed.", name);
  }
  if (ns != "aten") return "";
  for (const auto& [api, ops] : FunctionalOps()) {
    if (ops.front() == name) return absl::StrCat("Functional.", api);
  }
  const bool internal = absl::StartsWith(name, "_") || absl::StrContains(name, "_backward");
  if (!internal && absl::EndsWith(name, "_")) return absl::StrCat("Tensor.", name);
  if (!internal) return absl::StrCat("Torch.", name);
  return absl::StrCat("Aten.", name, ".", overload.empty() ? "default" : overload);
}

std::string MsprobeName(const CallNaming& call) {
  const bool backward = call.phase() == wire::kPhaseBackward;
  if (!call.api().empty()) {
    return absl::StrCat(call.api(), ".", call.api_index(), backward ? ".backward" : ".forward");
  }
  if (backward && call.forward_op_name().empty()) return "";
  const std::string api = backward ? MsprobeApi(call.forward_op_name(), call.forward_overload())
                                   : MsprobeApi(call.op_name(), call.overload());
  if (api.empty()) return "";
  return absl::StrCat(api, ".", call.call_index(), backward ? ".backward" : ".forward");
}

std::string MsprobeCsvName(const CallNaming& call) {
  if (!call.api().empty()) return absl::StrCat(call.api(), ".", call.api_index());  // call site
  const bool backward = call.phase() == wire::kPhaseBackward;
  std::string api;
  if (!backward) {
    api = MsprobeApi(call.op_name(), call.overload());
  } else if (!call.forward_op_name().empty()) {
    api = MsprobeApi(call.forward_op_name(), call.forward_overload());
  }
  if (api.empty()) {
    const absl::string_view op = call.op_name();
    const std::size_t colon = op.rfind("::");
    const absl::string_view ns = colon == absl::string_view::npos ? "" : op.substr(0, colon);
    const absl::string_view name = colon == absl::string_view::npos ? op : op.substr(colon + 2);
    api = absl::StrCat(ns.empty() || ns == "aten" ? "Aten" : ns, ".", name);
  }
  return absl::StrCat(api, ".", call.call_index());
}

}  // namespace parity::common
