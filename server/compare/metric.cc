#include "server/compare/metric.h"

#include <iterator>
#include <utility>

namespace parity::server {

namespace {

// Indexed by the enum; the static_assert below keeps the two in step.
constexpr std::pair<Metric, absl::string_view> kMetricNames[] = {
    {Metric::kNone, ""},
    {Metric::kCosine, "cosine"},
    {Metric::kMaxAbsError, "max_abs_error"},
    {Metric::kHundredthRatio, "hundredth_ratio"},
    {Metric::kThousandthRatio, "thousandth_ratio"},
    {Metric::kTenThousandthRatio, "ten_thousandth_ratio"},
    {Metric::kMismatchRate, "mismatch_rate"},
    {Metric::kErrorBalance, "error_balance"},
    {Metric::kRmse, "rmse"},
    {Metric::kSmallValueErrorRatio, "small_value_error_ratio"},
    {Metric::kMaxRelError, "max_rel_error"},
    {Metric::kMeanRelError, "mean_rel_error"},
    {Metric::kInfNanErrorRate, "inf_nan_error_rate"},
    {Metric::kRelErrorRate, "rel_error_rate"},
    {Metric::kAbsErrorRate, "abs_error_rate"},
    {Metric::kUlpMax, "ulp_max"},
    {Metric::kUlpMean, "ulp_mean"},
    {Metric::kUlpOverThresholdRatio, "ulp_over_threshold_ratio"},
    {Metric::kUlpError, "ulp_error"},
    {Metric::kUlpShare, "ulp_share"},
    {Metric::kStructure, "structure"},
    {Metric::kValue, "value"},
    {Metric::kInputWritten, "input_written"},
    {Metric::kStatsInfNanCount, "stats_inf_nan_count"},
    {Metric::kStatsMean, "stats_mean"},
    {Metric::kStatsL2Norm, "stats_l2_norm"},
    {Metric::kStatsMin, "stats_min"},
    {Metric::kStatsMax, "stats_max"},
    {Metric::kRandomSupport, "support"},
    {Metric::kRandomScale, "kept_scale"},
    {Metric::kRandomMask, "mask"},
    {Metric::kRandomRate, "rate"},
    {Metric::kRandomMean, "mean"},
    {Metric::kRandomVariance, "variance"},
    {Metric::kRandomCdf, "cdf_distance"},
    {Metric::kRandomPermutation, "permutation"},
    {Metric::kRandomFrequency, "frequency"},
};

constexpr bool NamesFollowTheEnum() {
  for (size_t i = 0; i < std::size(kMetricNames); ++i) {
    if (static_cast<size_t>(kMetricNames[i].first) != i) return false;
  }
  return std::size(kMetricNames) == static_cast<size_t>(Metric::kRandomLast) + 1;
}
static_assert(NamesFollowTheEnum(), "kMetricNames must list every Metric in enum order");

}  // namespace

absl::string_view MetricName(Metric m) { return kMetricNames[static_cast<size_t>(m)].second; }

std::optional<double> FieldValue(const PairMetrics& m, Metric field) {
  if (field == Metric::kMaxAbsError) return m.max_abs_error;
  if (field == Metric::kMismatchRate) return m.mismatch_rate;
  if (!m.has_float_metrics) return std::nullopt;
  switch (field) {
    case Metric::kCosine:
      if (m.cosine_blank || m.cosine_one_side_zero) return std::nullopt;
      return m.cosine;
    case Metric::kHundredthRatio:
      return m.hundredth_ratio;
    case Metric::kThousandthRatio:
      return m.thousandth_ratio;
    case Metric::kTenThousandthRatio:
      return m.ten_thousandth_ratio;
    case Metric::kErrorBalance:
      return m.error_balance;
    case Metric::kRmse:
      return m.rmse;
    case Metric::kSmallValueErrorRatio:
      return m.small_value_error_ratio;
    case Metric::kMaxRelError:
      return m.max_rel_error;
    case Metric::kMeanRelError:
      return m.mean_rel_error;
    case Metric::kInfNanErrorRate:
      return m.inf_nan_error_rate;
    case Metric::kRelErrorRate:
      return m.rel_error_rate;
    case Metric::kAbsErrorRate:
      return m.abs_error_rate;
    case Metric::kUlpMax:
      return m.ulp_max;
    case Metric::kUlpMean:
      return m.ulp_mean;
    case Metric::kUlpOverThresholdRatio:
      return m.ulp_over_threshold_ratio;
    default:
      return std::nullopt;
  }
}

}  // namespace parity::server
