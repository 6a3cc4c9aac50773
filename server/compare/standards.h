// The API -> standard table and every threshold, loaded from a data file (server/data/
// standards.json, compiled in as the default) so users tune a standard without rebuilding.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/wire/fields.h"
#include "nlohmann/json_fwd.hpp"
#include "server/compare/metrics.h"

namespace parity::common {
class ConfigReader;  // common/config/config_reader.h
}  // namespace parity::common

namespace parity::server {

enum class Standard {
  kBenchmark,          // three-way ratios against the bench (标杆比对法)
  kAbsoluteThreshold,  // 绝对阈值法
  kBinary,             // 二进制一致法 (exact)
  kUlp,                // ULP误差比对法
  kThousandth,         // 双千指标法
  kTwoWay,             // msprobe's legacy chain, when no golden can be made
  kStatistics,         // a device output sent as statistics only (too large to send)
  kExact,              // a non-tensor output (a Python scalar, a string): equal or not
  kRandomProperty,     // a random op judged by properties any correct generator gives
  kNone,               // not judged (a skipped output)
};

// "benchmark", "absolute_threshold", ... (the wire/JSON-lines name).
absl::string_view StandardName(Standard s);
// msprobe's display name for the 比对算法 column: 标杆比对法, ...
absl::string_view StandardDisplayName(Standard s);

struct BenchmarkRatioThresholds {
  double small_value_error_ratio = 2, rmse = 2, max_rel_error = 10, mean_rel_error = 2,
         error_balance = 2;
  // Parity: the largest absolute error against the bench's, floored at minimum_err times the
  // golden's largest magnitude. msprobe's four ratios are blind to an output whose every value
  // is below the small-value threshold (a bfloat16 gradient under 2^-10): its RMSE and relative
  // errors mask them all, and its small-value error ratio counts any error at all, the bench's
  // too.
  double max_abs_error = 2;
};
struct UlpRules {
  double float32_mean_ulp = 64, float32_share = 0.05, low_precision_share = 0.001, share_ratio = 1;
  // The share ratio condemns a device only when its excess of elements over the threshold is
  // significant: a one-sided sign test on the over-threshold counts (device d, bench b: the
  // chance of at least d of d + b under equal odds) below this. One element of 16,384 at a
  // rounding tie, or an accumulation order's few, is not evidence (issue 36).
  double share_excess_alpha = 1e-3;
};
struct TwoWayThresholds {
  double cosine = 0.99, max_abs_error = 0.001, hundredth = 0.99, thousandth = 0.999,
         ten_thousandth = 0.9999;
};

class StandardsTable {
 public:
  // The table shipped with the server.
  static const StandardsTable& Default();
  // Parses a standards file; errors name the key (`dtypes.float16.rtol: expected a number`).
  static absl::StatusOr<StandardsTable> Parse(absl::string_view json_text,
                                              absl::string_view source);
  static absl::StatusOr<StandardsTable> Load(const std::string& path);

  // Standard for an op, matched on the bare name ("aten::mul" -> "mul", in-place forms included).
  // `input_rank` (of the first tensor argument, -1 if unknown) decides whether
  // aten::convolution is a 1-D/2-D convolution (thousandth standard).
  Standard Lookup(absl::string_view op_name, int input_rank = -1) const;

  // Constants of a floating dtype (float16, bfloat16, float32, float64); nullptr otherwise.
  const DTypeConstants* Constants(wire::DType dtype) const;

  // Why output `index` (of the call's flattened outputs) of `op_name` is not compared (random
  // generator bookkeeping, say), matched on the bare name; nullptr when it is compared.
  const std::string* UncomparedReason(absl::string_view op_name, int index) const;

  // Whether `op_name` (bare name, in-place forms included) is listed under
  // "exact_by_construction": its outputs only move, select or fill values (views, copies, cat,
  // gather, fills, max), so a call whose floating tensors all share one dtype is judged by the
  // binary standard against the bench replay, and no float64 golden is made for it.
  bool ExactByConstruction(absl::string_view op_name) const;

  const BenchmarkRatioThresholds& benchmark() const { return benchmark_; }
  const UlpRules& ulp() const { return ulp_; }
  const TwoWayThresholds& two_way() const { return two_way_; }
  double thousandth_pass() const { return thousandth_pass_; }

 private:
  // Parse's sections, each read into this table; errors go to the reader's issues.
  void ReadStandards(common::ConfigReader& top);
  void ReadUncompared(const nlohmann::json& doc, common::ConfigReader& top);
  void ReadExact(common::ConfigReader& top);
  void ReadDTypes(common::ConfigReader& top);
  void ReadThresholds(common::ConfigReader& top);

  std::map<std::string, Standard, std::less<>> by_name_;
  Standard default_standard_ = Standard::kBenchmark;
  std::set<int> convolution_ranks_;
  std::set<std::string, std::less<>> exact_;
  struct Uncompared {
    std::set<int> outputs;
    std::string reason;
  };
  std::map<std::string, Uncompared, std::less<>> uncompared_;
  std::map<wire::DType, DTypeConstants> constants_;
  BenchmarkRatioThresholds benchmark_;
  UlpRules ulp_;
  TwoWayThresholds two_way_;
  double thousandth_pass_ = 0.999;
};

}  // namespace parity::server
