#include "server/compare/statistics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace parity::server {
namespace {

struct Scaled {
  Metric metric;
  double (*value)(const common::TensorStatsValues&);
  double (*scale)(const common::TensorStatsValues&, uint64_t numel);
};

double Finite(const common::TensorStatsValues& s, uint64_t numel) {
  const uint64_t bad = s.nan_count + s.inf_count;
  return bad >= numel ? 0 : static_cast<double>(numel - bad);
}

const Scaled kStats[] = {
    {Metric::kStatsMean, [](const common::TensorStatsValues& s) { return s.mean; },
     [](const common::TensorStatsValues& s, uint64_t n) {
       const double finite = Finite(s, n);
       return finite > 0 ? s.l2_norm / std::sqrt(finite) : 0.0;
     }},
    {Metric::kStatsL2Norm, [](const common::TensorStatsValues& s) { return s.l2_norm; },
     [](const common::TensorStatsValues& s, uint64_t) { return s.l2_norm; }},
    {Metric::kStatsMin, [](const common::TensorStatsValues& s) { return s.min; },
     [](const common::TensorStatsValues& s, uint64_t) {
       return std::max(std::fabs(s.min), std::fabs(s.max));
     }},
    {Metric::kStatsMax, [](const common::TensorStatsValues& s) { return s.max; },
     [](const common::TensorStatsValues& s, uint64_t) {
       return std::max(std::fabs(s.min), std::fabs(s.max));
     }},
};

// |a - b| / scale; the plain distance when the scale is 0 (an all-zero reference).
double Distance(double a, double b, double scale) {
  const double d = std::fabs(a - b);
  return scale > 0 ? d / scale : d;
}

}  // namespace

OutputJudgement JudgeStatistics(const common::TensorStatsValues& device,
                                const common::TensorStatsValues* bench,
                                const common::TensorStatsValues* golden, wire::DType dtype,
                                uint64_t numel, const StandardsTable& table) {
  OutputJudgement j;
  j.standard = Standard::kStatistics;
  j.message =
      "The device sent this output as statistics only (larger than its "
      "parity.max_tensor_bytes): compared by min, max, mean, L2 norm and inf/NaN counts.";
  const common::TensorStatsValues* reference = golden != nullptr ? golden : bench;
  if (reference == nullptr) {
    j.status = CheckStatus::kSkip;
    j.message = "Bench output is None, skip this test.";
    return j;
  }
  auto fail = [&](Metric metric, const std::string& why) {
    if (j.status != CheckStatus::kError) j.failed_metric = metric;
    j.status = CheckStatus::kError;
    absl::StrAppend(&j.message, "\n", why);
  };
  const common::TensorStatsValues& counts = bench != nullptr ? *bench : *golden;
  StatisticsDetail& detail = j.statistics.emplace();
  detail.nan_count = device.nan_count;
  detail.inf_count = device.inf_count;
  if (device.nan_count != counts.nan_count || device.inf_count != counts.inf_count) {
    // What broke, first (before the note and any statistic): an overflow reads as one.
    j.status = CheckStatus::kError;
    j.failed_metric = Metric::kStatsInfNanCount;
    j.message = absl::StrCat("ERROR: inf/NaN counts differ: device ", device.inf_count, " inf and ",
                             device.nan_count, " NaN, ", bench != nullptr ? "bench " : "golden ",
                             counts.inf_count, " inf and ", counts.nan_count, " NaN\n", j.message);
  }
  const DTypeConstants* c = table.Constants(dtype);
  // A statistic of many elements is more precise than any one of them, so the floor is the
  // dtype's relative tolerance (float32 2^-20), not the per-element ratio floor (2^-14).
  const double floor = c != nullptr ? c->rtol : 0;
  const double limit = table.benchmark().rmse;
  for (const Scaled& s : kStats) {
    const double scale = s.scale(*reference, numel);
    const double dev = Distance(s.value(device), s.value(*reference), scale);
    const double ref = bench != nullptr && golden != nullptr
                           ? Distance(s.value(*bench), s.value(*golden), scale)
                           : 0.0;
    const Ratio r = BenchmarkRatio(dev, ref, floor, limit);
    detail.device_error.emplace_back(s.metric, dev);
    if (bench != nullptr && golden != nullptr) detail.bench_error.emplace_back(s.metric, ref);
    j.ratios.emplace_back(s.metric, r);
    if (!r.pass) {
      fail(s.metric,
           absl::StrCat("ERROR: ", MetricName(s.metric), " is ", dev, " from the golden (scaled), ",
                        r.value, " times the bench's own distance or floor ", floor));
    }
  }
  j.two_way_status = j.status;
  return j;
}

}  // namespace parity::server
