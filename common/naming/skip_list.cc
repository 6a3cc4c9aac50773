#include "common/naming/skip_list.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/naming/naming.h"

namespace parity::common {
namespace {

const std::map<std::string, std::string, std::less<>>& SkipRegistry() {
  static const auto* reg = new std::map<std::string, std::string, std::less<>>{
      {"empty", "uninitialised output"},
      {"empty_like", "uninitialised output"},
      {"empty_strided", "uninitialised output"},
      {"new_empty", "uninitialised output"},
      {"new_empty_strided", "uninitialised output"},
      {"resize_", "uninitialised output"},
  };
  return *reg;
}

}  // namespace

bool IsCommunicationOp(absl::string_view op_name) {
  for (absl::string_view ns :
       {"c10d::", "c10d_functional::", "_c10d_functional::", "_c10d_functional_autograd::"}) {
    if (absl::StartsWith(op_name, ns)) return true;
  }
  // The aten spellings of the base collectives some releases and NPU builds register.
  for (absl::string_view name :
       {"aten::_allgather_base", "aten::_reduce_scatter_base", "aten::all_reduce",
        "aten::all_gather_into_tensor", "aten::reduce_scatter_tensor"}) {
    if (op_name == name) return true;
  }
  return false;
}

std::string SkipReasonForOp(absl::string_view op_name) {
  auto it = SkipRegistry().find(BareOpName(op_name));
  if (it == SkipRegistry().end()) return "";
  return absl::StrCat(op_name, " returns ", it->second, "; nothing to compare");
}

}  // namespace parity::common
