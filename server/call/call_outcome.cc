#include "server/call/call_outcome.h"

#include <optional>

#include "absl/strings/str_cat.h"

namespace parity::server {
namespace {

void PutPairMetrics(const PairMetrics& m, absl::string_view prefix,
                    std::vector<std::pair<std::string, double>>& out) {
  for (Metric field : kPairFields) {
    if (std::optional<double> v = FieldValue(m, field)) {
      out.emplace_back(absl::StrCat(prefix, MetricName(field)), *v);
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, double>> OutputMetricValues(const OutputJudgement& j) {
  std::vector<std::pair<std::string, double>> out;
  if (j.device) PutPairMetrics(*j.device, "", out);
  if (j.bench) PutPairMetrics(*j.bench, "bench_", out);
  for (const auto& [metric, r] : j.ratios) {
    out.emplace_back(absl::StrCat("ratio_", MetricName(metric)), r.value);
  }
  for (const auto& [name, v] : j.random) out.emplace_back(name, v);
  if (j.statistics) {
    out.emplace_back("stats_nan_count", static_cast<double>(j.statistics->nan_count));
    out.emplace_back("stats_inf_count", static_cast<double>(j.statistics->inf_count));
    for (const auto& [metric, v] : j.statistics->device_error) {
      out.emplace_back(absl::StrCat(MetricName(metric), "_error"), v);
    }
    for (const auto& [metric, v] : j.statistics->bench_error) {
      out.emplace_back(absl::StrCat("bench_", MetricName(metric), "_error"), v);
    }
  }
  return out;
}

}  // namespace parity::server
