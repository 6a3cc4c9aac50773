// Every quantity a verdict may name: the metrics of a pair (PairMetrics' fields), the judgements
// built on them, and the statistics standard's. The server passes them as this enum; names (the
// wire's, the CSVs', the JSON-lines') come only from MetricName, where text is written.
// Torch-free.
#pragma once

#include <optional>

#include "absl/strings/string_view.h"
#include "server/compare/metrics.h"

namespace parity::server {

enum class Metric {
  kNone,
  // PairMetrics' fields, in msprobe's details-column order.
  kCosine,
  kMaxAbsError,
  kHundredthRatio,
  kThousandthRatio,
  kTenThousandthRatio,
  kMismatchRate,
  kErrorBalance,
  kRmse,
  kSmallValueErrorRatio,
  kMaxRelError,
  kMeanRelError,
  kInfNanErrorRate,
  kRelErrorRate,
  kAbsErrorRate,
  kUlpMax,
  kUlpMean,
  kUlpOverThresholdRatio,
  // Judgements on them.
  kUlpError,      // the ULP standard's verdict
  kUlpShare,      // its device / bench ratio of the shares over threshold
  kStructure,     // the outputs differ in kind or shape
  kValue,         // a non-tensor output differs
  kInputWritten,  // the call changed an argument its schema marks read-only
                  // (ApiCall.inputs_written)
  // The statistics standard (an output sent as statistics only).
  kStatsInfNanCount,
  kStatsMean,
  kStatsL2Norm,
  kStatsMin,
  kStatsMax,
  // The random_property standard (a random op judged by properties of its draws).
  kRandomSupport,      // values outside the distribution's support (range, integer-ness)
  kRandomScale,        // dropout: an element neither dropped (0) nor input x 1/(1-p)
  kRandomMask,         // dropout: the mask disagrees with the output; a channel split
  kRandomRate,         // the share kept / drawn 1 outside its binomial bound
  kRandomMean,         // the sample mean outside its bound
  kRandomVariance,     // the sample variance outside its bound
  kRandomCdf,          // the largest distance to the distribution's CDF over its DKW bound
  kRandomPermutation,  // randperm: a value missing or repeated; multinomial: a repeat
  kRandomFrequency,    // multinomial: a category's count outside its bound
  kRandomLast = kRandomFrequency,  // keep last: metric.cc's table checks it covers the enum
};

// "cosine", "max_abs_error", ..., "ulp_error", "stats_mean"; "" for kNone.
absl::string_view MetricName(Metric m);

// PairMetrics' fields, in the details CSV's column order (cosine .. ULP share over threshold).
inline constexpr Metric kPairFields[] = {
    Metric::kCosine,
    Metric::kMaxAbsError,
    Metric::kHundredthRatio,
    Metric::kThousandthRatio,
    Metric::kTenThousandthRatio,
    Metric::kMismatchRate,
    Metric::kErrorBalance,
    Metric::kRmse,
    Metric::kSmallValueErrorRatio,
    Metric::kMaxRelError,
    Metric::kMeanRelError,
    Metric::kInfNanErrorRate,
    Metric::kRelErrorRate,
    Metric::kAbsErrorRate,
    Metric::kUlpMax,
    Metric::kUlpMean,
    Metric::kUlpOverThresholdRatio,
};

// The value of a field of `m`, or nullopt where it was not computed: the float metrics of an
// integer pair, a blank cosine (N = 1, both sides ~0) and one left out (one side ~0).
std::optional<double> FieldValue(const PairMetrics& m, Metric field);

}  // namespace parity::server
