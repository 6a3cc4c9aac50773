#include "common/naming/random_ops.h"

#include <map>

#include "common/naming/naming.h"

namespace parity::common {
namespace {

const std::map<std::string, RandomFamily, std::less<>>& Registry() {
  using F = RandomFamily;
  static const auto* reg = new std::map<std::string, RandomFamily, std::less<>>{
      {"dropout", F::kDropout},
      {"dropout_", F::kDropout},
      {"feature_dropout", F::kFeatureDropout},
      {"feature_dropout_", F::kFeatureDropout},
      {"alpha_dropout", F::kAlphaDropout},
      {"alpha_dropout_", F::kAlphaDropout},
      {"feature_alpha_dropout", F::kFeatureAlphaDropout},
      {"feature_alpha_dropout_", F::kFeatureAlphaDropout},
      {"native_dropout", F::kNativeDropout},
      {"bernoulli", F::kBernoulli},
      {"bernoulli_", F::kBernoulli},
      {"rand", F::kUniform},
      {"rand_like", F::kUniform},
      {"uniform_", F::kUniform},
      {"randn", F::kNormal},
      {"randn_like", F::kNormal},
      {"normal", F::kNormal},
      {"normal_", F::kNormal},
      {"log_normal_", F::kLogNormal},
      {"exponential_", F::kExponential},
      {"cauchy_", F::kCauchy},
      {"geometric_", F::kGeometric},
      {"randint", F::kRandint},
      {"randint_like", F::kRandint},
      {"random_", F::kRandint},
      {"randperm", F::kRandperm},
      {"multinomial", F::kMultinomial},
      {"poisson", F::kPoisson},
      {"rrelu", F::kRrelu},
      {"rrelu_", F::kRrelu},
      {"rrelu_with_noise", F::kRrelu},
      {"rrelu_with_noise_", F::kRrelu},
      {"binomial", F::kUnchecked},
      {"_standard_gamma", F::kUnchecked},
      {"_sample_dirichlet", F::kUnchecked},
      {"_fused_dropout", F::kUnchecked},
  };
  return *reg;
}

}  // namespace

RandomFamily RandomFamilyOf(absl::string_view op_name) {
  auto it = Registry().find(BareOpName(op_name));
  return it == Registry().end() ? RandomFamily::kNone : it->second;
}

std::vector<std::string> RandomOpNames() {
  std::vector<std::string> names;
  for (const auto& [name, family] : Registry()) names.push_back(name);
  return names;
}

}  // namespace parity::common
