// Verdict rules of the precision standard: one output judged by its API's standard, the two-way
// chain, and strict per-call aggregation. Torch-free.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parity/v1/parity.pb.h"
#include "server/compare/metrics.h"
#include "server/compare/standards.h"

namespace parity::server {

// A benchmark-style ratio |tested| / max(|bench|, floor) and whether it is within `limit`.
struct Ratio {
  double value = kNaN;
  bool pass = true;
};
Ratio BenchmarkRatio(double tested, double bench, double floor, double limit);

// Everything decided about one output.
struct OutputJudgement {
  v1::VerdictStatus status = v1::VERDICT_STATUS_PASS;
  Standard standard = Standard::kBenchmark;
  std::string failed_metric;          // first metric that decided a non-pass status
  std::string message;                // newline-joined notes
  std::optional<PairMetrics> device;  // device vs golden (or vs bench without golden)
  std::optional<PairMetrics> bench;   // bench vs golden, when both exist
  // Three-way ratios (benchmark / ULP / statistics standards), by metric name.
  std::vector<std::pair<std::string, Ratio>> ratios;
  // Named values of the statistics standard (no PairMetrics there).
  std::vector<std::pair<std::string, double>> statistics;
  // msprobe's two-way status of the device metrics (the details CSV's Status column).
  v1::VerdictStatus two_way_status = v1::VERDICT_STATUS_PASS;
};

// msprobe's legacy chain on device-vs-reference metrics (cosine, max abs, hundredth/thousandth/
// ten-thousandth ratios). Sets `failed_metric` and `message` when not pass.
v1::VerdictStatus TwoWayChain(const PairMetrics& m, v1::DType device_dtype,
                              const TwoWayThresholds& t, std::string* failed_metric,
                              std::string* message);

// Judges one output. `bench` and `golden` may be null when that replay could not run (the
// reason goes into the message by the caller). `standard` is the API's standard from the table.
OutputJudgement JudgeOutput(const HostTensor& device, const HostTensor* bench,
                            const HostTensor* golden, Standard standard,
                            const StandardsTable& table);

// msprobe's spelling: "pass", "Warning", "error", "SKIP".
absl::string_view StatusText(v1::VerdictStatus s);

// Strict aggregation: any error -> error; else any Warning -> Warning; else any pass -> pass;
// empty or all SKIP -> SKIP. REJECTED dominates everything.
v1::VerdictStatus Aggregate(const std::vector<v1::VerdictStatus>& statuses);

}  // namespace parity::server
