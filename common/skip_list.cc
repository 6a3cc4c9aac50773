#include "common/skip_list.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/naming.h"

namespace parity::common {
namespace {

const std::map<std::string, std::string, std::less<>>& SkipRegistry() {
  static const auto* reg = new std::map<std::string, std::string, std::less<>>{
      {"bernoulli", "random"},
      {"bernoulli_", "random"},
      {"dropout", "random"},
      {"native_dropout", "random"},
      {"feature_dropout", "random"},
      {"alpha_dropout", "random"},
      {"feature_alpha_dropout", "random"},
      {"rand", "random"},
      {"rand_like", "random"},
      {"randn", "random"},
      {"randn_like", "random"},
      {"randint", "random"},
      {"randint_like", "random"},
      {"randperm", "random"},
      {"normal", "random"},
      {"normal_", "random"},
      {"uniform_", "random"},
      {"multinomial", "random"},
      {"exponential_", "random"},
      {"geometric_", "random"},
      {"cauchy_", "random"},
      {"log_normal_", "random"},
      {"random_", "random"},
      {"poisson", "random"},
      {"rrelu", "random"},
      {"rrelu_with_noise", "random"},
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
  return it->second == "random"
             ? absl::StrCat(op_name, " draws random numbers; its result cannot be replayed")
             : absl::StrCat(op_name, " returns ", it->second, "; nothing to compare");
}

}  // namespace parity::common
