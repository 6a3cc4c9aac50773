// Verdict rules of the precision standard: one output judged by its API's standard, the two-way
// chain, and strict per-call aggregation. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/wire/fields.h"
#include "server/compare/check_status.h"
#include "server/compare/metric.h"
#include "server/compare/metrics.h"
#include "server/compare/nonfinite.h"
#include "server/compare/standards.h"

namespace parity::server {

// A benchmark-style ratio |tested| / max(|bench|, floor) and whether it is within `limit`.
struct Ratio {
  double value = kNaN;
  bool pass = true;
};
Ratio BenchmarkRatio(double tested, double bench, double floor, double limit);

// What the statistics standard computed (an output sent as statistics only).
struct StatisticsDetail {
  uint64_t nan_count = 0, inf_count = 0;  // the device's
  // Per statistic (kStatsMean, kStatsL2Norm, kStatsMin, kStatsMax): the device's scaled
  // distance to the golden, and the bench's when both replays ran.
  std::vector<std::pair<Metric, double>> device_error, bench_error;
};

// Everything decided about one output, typed: the standard stays an enum and the metrics a
// struct up to where text is written (the verdict's map, the CSVs, the JSON-lines record).
struct OutputJudgement {
  CheckStatus status = CheckStatus::kPass;
  Standard standard = Standard::kNone;
  Metric failed_metric = Metric::kNone;  // the first metric that decided a non-pass status
  std::string message;                   // newline-joined notes
  std::optional<PairMetrics> device;     // device vs golden (or vs bench without golden)
  std::optional<PairMetrics> bench;      // bench vs golden, when both exist
  // Three-way ratios (benchmark, ULP, statistics standards).
  std::vector<std::pair<Metric, Ratio>> ratios;
  std::optional<StatisticsDetail> statistics;
  // The random_property standard's quantities, by name ("keep_rate", "keep_rate_low", ...).
  std::vector<std::pair<std::string, double>> random;
  // msprobe's two-way status of the device metrics (the details CSV's Status column).
  CheckStatus two_way_status = CheckStatus::kPass;
  // On a non-pass output: where the device has inf/NaN and the reference does not. The message
  // then starts with it, before any ratio.
  std::optional<NonFinite> nonfinite;

  // The ratio of `m`, or null.
  const Ratio* FindRatio(Metric m) const;
};

// msprobe's legacy chain on device-vs-reference metrics (cosine, max abs, hundredth/thousandth/
// ten-thousandth ratios). Sets `failed_metric` and `message` when not pass.
CheckStatus TwoWayChain(const PairMetrics& m, wire::DType device_dtype, const TwoWayThresholds& t,
                        Metric* failed_metric, std::string* message);

// Judges one output. `bench` and `golden` may be null when that replay could not run (the
// reason goes into the message by the caller). `standard` is the API's standard from the table.
OutputJudgement JudgeOutput(const TensorView& device, const TensorView* bench,
                            const TensorView* golden, Standard standard,
                            const StandardsTable& table);

// msprobe's spelling: "pass", "Warning", "error", "SKIP".
absl::string_view StatusText(CheckStatus s);

// Strict aggregation: any error -> error; else any Warning -> Warning; else any pass -> pass;
// empty or all SKIP -> SKIP. REJECTED dominates everything.
CheckStatus Aggregate(const std::vector<CheckStatus>& statuses);

}  // namespace parity::server
