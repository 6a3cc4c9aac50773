#include "server/compare/metric.h"

namespace parity::server {

absl::string_view MetricName(Metric m) {
  switch (m) {
    case Metric::kNone:
      return "";
    case Metric::kCosine:
      return "cosine";
    case Metric::kMaxAbsError:
      return "max_abs_error";
    case Metric::kHundredthRatio:
      return "hundredth_ratio";
    case Metric::kThousandthRatio:
      return "thousandth_ratio";
    case Metric::kTenThousandthRatio:
      return "ten_thousandth_ratio";
    case Metric::kMismatchRate:
      return "mismatch_rate";
    case Metric::kErrorBalance:
      return "error_balance";
    case Metric::kRmse:
      return "rmse";
    case Metric::kSmallValueErrorRatio:
      return "small_value_error_ratio";
    case Metric::kMaxRelError:
      return "max_rel_error";
    case Metric::kMeanRelError:
      return "mean_rel_error";
    case Metric::kInfNanErrorRate:
      return "inf_nan_error_rate";
    case Metric::kRelErrorRate:
      return "rel_error_rate";
    case Metric::kAbsErrorRate:
      return "abs_error_rate";
    case Metric::kUlpMax:
      return "ulp_max";
    case Metric::kUlpMean:
      return "ulp_mean";
    case Metric::kUlpOverThresholdRatio:
      return "ulp_over_threshold_ratio";
    case Metric::kUlpError:
      return "ulp_error";
    case Metric::kUlpShare:
      return "ulp_share";
    case Metric::kStructure:
      return "structure";
    case Metric::kValue:
      return "value";
    case Metric::kStatsInfNanCount:
      return "stats_inf_nan_count";
    case Metric::kStatsMean:
      return "stats_mean";
    case Metric::kStatsL2Norm:
      return "stats_l2_norm";
    case Metric::kStatsMin:
      return "stats_min";
    case Metric::kStatsMax:
      return "stats_max";
  }
  return "";
}

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
