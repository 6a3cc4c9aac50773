#include "server/compare/judge.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/wire/dtype.h"

namespace parity::server {
namespace {

void Note(std::string* message, absl::string_view line) {
  if (!message->empty()) message->push_back('\n');
  message->append(line.data(), line.size());
}

int Severity(CheckStatus s) {
  return s == CheckStatus::kError ? 2 : s == CheckStatus::kWarning ? 1 : 0;
}

// Raises the output's status to `status` (never lowers it); the first metric to raise it is kept.
void Fail(OutputJudgement& j, CheckStatus status, Metric metric, absl::string_view why) {
  if (Severity(status) > Severity(j.status)) {
    j.status = status;
    j.failed_metric = metric;
  }
  Note(&j.message, why);
}

bool IsLowPrecision(wire::DType d) { return d == wire::kFloat16 || d == wire::kBFloat16; }

// Each error rate must be 0, or (Parity) no higher than the bench's own: a float32 add with
// alpha, say, rounds alpha*b before adding, and where the sum cancels the result is more than
// rtol from the float64 golden on a correct device too (seen: SGD's param.add_(grad, alpha=-lr)
// flagged with the device bit-identical to the bench). msprobe judged only against the golden.
void JudgeAbsoluteThreshold(OutputJudgement& j, const PairMetrics& m, const PairMetrics* bench) {
  auto worse = [&](double dev, double ref) { return dev != 0 && (bench == nullptr || dev > ref); };
  if (worse(m.inf_nan_error_rate, bench ? bench->inf_nan_error_rate : 0)) {
    Fail(j, CheckStatus::kError, Metric::kInfNanErrorRate, "ERROR: inf/nan错误率超过阈值");
  }
  if (worse(m.rel_error_rate, bench ? bench->rel_error_rate : 0)) {
    Fail(j, CheckStatus::kError, Metric::kRelErrorRate, "ERROR: 相对误差错误率超过阈值");
  }
  if (worse(m.abs_error_rate, bench ? bench->abs_error_rate : 0)) {
    Fail(j, CheckStatus::kError, Metric::kAbsErrorRate, "ERROR: 绝对误差错误率超过阈值");
  }
}

// P(X >= d) for X ~ Binomial(d + b, 1/2): how likely a device as good as the bench, its
// over-threshold elements each as likely to be either's, has at least d of the d + b. Exact up to
// 1,000 trials, then the normal approximation with continuity correction.
double SignTestTail(int64_t d, int64_t b) {
  const int64_t n = d + b;
  if (d <= 0 || n <= 0) return 1;
  if (n > 1000) {
    const double z = (static_cast<double>(d) - 0.5 - 0.5 * static_cast<double>(n)) /
                     (0.5 * std::sqrt(static_cast<double>(n)));
    return 0.5 * std::erfc(z / std::sqrt(2.0));
  }
  // C(n, x) / 2^n in log space, the constant part once.
  const double log_total =
      std::lgamma(static_cast<double>(n + 1)) - static_cast<double>(n) * std::log(2.0);
  double tail = 0;
  for (int64_t x = d; x <= n; ++x) {
    tail += std::exp(log_total - std::lgamma(static_cast<double>(x + 1)) -
                     std::lgamma(static_cast<double>(n - x + 1)));
  }
  return std::min(1.0, tail);
}

void JudgeUlp(OutputJudgement& j, wire::DType dtype, const PairMetrics& dev,
              const PairMetrics* bench, const DTypeConstants& c, const UlpRules& rules) {
  bool pass = false;
  if (dtype == wire::kFloat32 || dtype == wire::kFloat64) {
    pass =
        dev.ulp_mean < rules.float32_mean_ulp || dev.ulp_over_threshold_ratio < rules.float32_share;
  } else {
    pass = dev.ulp_over_threshold_ratio < rules.low_precision_share;
  }
  if (bench != nullptr) {
    // Parity: no worse than the bench is a pass (msprobe demanded ratio < 1 strictly, which
    // flags a device identical to the bench whenever the op's own rounding is large).
    Ratio r = BenchmarkRatio(dev.ulp_over_threshold_ratio, bench->ulp_over_threshold_ratio,
                             c.minimum_err, rules.share_ratio);
    j.ratios.emplace_back(Metric::kUlpShare, r);
    pass = pass || (std::isfinite(r.value) && r.pass);
    // Parity: a worse share condemns only when its excess is significant (a sign test on the
    // counts): a few elements at rounding ties or in a reduction's cancellation, where another
    // correct accumulation order lands on the other side, do not decide.
    if (!pass && std::isfinite(r.value) && std::isfinite(bench->ulp_over_threshold_ratio)) {
      const auto count = [&](double share) {
        return static_cast<int64_t>(std::llround(share * static_cast<double>(dev.numel)));
      };
      pass = SignTestTail(count(dev.ulp_over_threshold_ratio),
                          count(bench->ulp_over_threshold_ratio)) >= rules.share_excess_alpha;
    }
  }
  if (std::isnan(dev.ulp_mean) && !(bench != nullptr && std::isnan(bench->ulp_mean))) {
    pass = false;  // inf/NaN where the bench has none
  }
  // More inf/NaN errors than the bench has (the ULP metrics leave inf/NaN elements out, and a
  // NaN mean ULP on both sides hid a device overflowing where the bench did not: issue 50).
  if (dev.inf_nan_error_rate > (bench != nullptr ? bench->inf_nan_error_rate : 0.0)) {
    Fail(j, CheckStatus::kError, Metric::kInfNanErrorRate,
         "ERROR: inf/nan错误率超过标杆 (inf/NaN where the bench has finite values)");
    return;
  }
  if (!pass) Fail(j, CheckStatus::kError, Metric::kUlpError, "ERROR: ULP误差不满足标准");
}

void JudgeBenchmark(OutputJudgement& j, const PairMetrics& dev, const PairMetrics& bench,
                    const DTypeConstants& c, const BenchmarkRatioThresholds& t) {
  struct Item {
    Metric metric;
    double dev, bench, limit;
    const char* error;
    bool decides;
  };
  const Item items[] = {
      {Metric::kSmallValueErrorRatio, dev.small_value_error_ratio, bench.small_value_error_ratio,
       t.small_value_error_ratio, "ERROR: 小值域错误比值超过阈值", true},
      {Metric::kRmse, dev.rmse, bench.rmse, t.rmse, "ERROR: 均方根误差比值超过阈值", true},
      // Parity: the largest relative error is one element's, and at an element that a sum
      // cancels (a near-zero attention output, say) a correct kernel's relative error is
      // large: it decides only when the device's largest absolute error is also worse than the
      // bench's (seen: a flash-style attention at 23x the bench's max relative error, 0.86x
      // its max absolute error, a false error).
      {Metric::kMaxRelError, dev.max_rel_error, bench.max_rel_error, t.max_rel_error,
       "ERROR: 相对误差最大值比值超过阈值", !(dev.max_abs_error <= bench.max_abs_error)},
      {Metric::kMeanRelError, dev.mean_rel_error, bench.mean_rel_error, t.mean_rel_error,
       "ERROR: 相对误差平均值比值超过阈值", true},
      // Error balance is reported but does not decide (as in msprobe).
      {Metric::kErrorBalance, dev.error_balance, bench.error_balance, t.error_balance, "", false},
  };
  // Parity addition: msprobe's benchmark metrics mask inf/NaN positions, so a device that turns
  // finite results into NaN/inf (an overflowing softmax, say) would pass. More inf/NaN errors
  // than the bench has is an error.
  if (dev.inf_nan_error_rate > bench.inf_nan_error_rate) {
    Fail(j, CheckStatus::kError, Metric::kInfNanErrorRate,
         "ERROR: inf/nan错误率超过标杆 (inf/NaN where the bench has finite values)");
  }
  for (const Item& it : items) {
    Ratio r = BenchmarkRatio(it.dev, it.bench, c.minimum_err, it.limit);
    j.ratios.emplace_back(it.metric, r);
    if (!r.pass && it.decides) Fail(j, CheckStatus::kError, it.metric, it.error);
  }
  // Parity addition: the largest absolute error, floored relative to the output's own scale.
  // msprobe's ratios mask every element below the small-value threshold, so an output made only
  // of such values (a bfloat16 gradient under 2^-10) was judged by the small-value error ratio
  // alone, which counts any error at all and so saturates for device and bench alike: a
  // backward missing a whole term passed (found by the fused suite's random faults).
  // A bench with inf/NaN errors has no largest error to compare with (the inf/NaN rule above
  // judges those positions): the rule does not decide then.
  const double scale = std::isfinite(bench.max_abs_reference) ? bench.max_abs_reference : 0;
  Ratio r = BenchmarkRatio(dev.max_abs_error, bench.max_abs_error,
                           std::max(c.minimum_err * scale, 1e-300), t.max_abs_error);
  j.ratios.emplace_back(Metric::kMaxAbsError, r);
  if (!r.pass && std::isfinite(bench.max_abs_error)) {
    Fail(
        j, CheckStatus::kError, Metric::kMaxAbsError,
        "ERROR: 最大绝对误差比值超过阈值 (largest absolute error over the bench's, at the output's "
        "scale)");
  }
}

}  // namespace

const Ratio* OutputJudgement::FindRatio(Metric m) const {
  for (const auto& [metric, r] : ratios) {
    if (metric == m) return &r;
  }
  return nullptr;
}

Ratio BenchmarkRatio(double tested, double bench, double floor, double limit) {
  Ratio r;
  if (!std::isfinite(tested) || !std::isfinite(bench)) {
    const bool both_nan = std::isnan(tested) && std::isnan(bench);
    const bool same_inf = std::isinf(tested) && tested == bench;
    r.pass = both_nan || same_inf;
    return r;
  }
  r.value = std::fabs(tested) / std::max(std::fabs(bench), floor);
  r.pass = r.value <= limit;
  return r;
}

absl::string_view StatusText(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kWarning:
      return "Warning";
    case CheckStatus::kError:
      return "error";
    case CheckStatus::kSkip:
      return "SKIP";
    case CheckStatus::kRejected:
      return "rejected";
    default:
      return " ";
  }
}

CheckStatus Aggregate(const std::vector<CheckStatus>& statuses) {
  bool error = false, warning = false, pass = false, rejected = false;
  for (CheckStatus s : statuses) {
    rejected |= s == CheckStatus::kRejected;
    error |= s == CheckStatus::kError;
    warning |= s == CheckStatus::kWarning;
    pass |= s == CheckStatus::kPass;
  }
  if (rejected) return CheckStatus::kRejected;
  if (error) return CheckStatus::kError;
  if (warning) return CheckStatus::kWarning;
  if (pass) return CheckStatus::kPass;
  return CheckStatus::kSkip;
}

CheckStatus TwoWayChain(const PairMetrics& m, wire::DType dtype, const TwoWayThresholds& t,
                        Metric* failed_metric, std::string* message) {
  auto fail = [&](CheckStatus s, Metric metric, absl::string_view why) {
    *failed_metric = metric;
    Note(message, why);
    return s;
  };
  if (!m.has_float_metrics) {
    return m.mismatch_rate == 0 ? CheckStatus::kPass
                                : fail(CheckStatus::kError, Metric::kMismatchRate,
                                       "ERROR: 二进制一致错误率超过阈值");
  }
  if (m.cosine_one_side_zero) {
    return fail(CheckStatus::kError, Metric::kCosine,
                "Cosine similarity is not computed: one side is all zeros and the other is not.");
  }
  if (!m.cosine_blank && !(m.cosine > t.cosine)) {
    return fail(CheckStatus::kError, Metric::kCosine,
                absl::StrCat("Cosine similarity is less than ", t.cosine, "."));
  }
  if (m.max_abs_error < t.max_abs_error) {
    Note(message,
         "Max abs error is less than 0.001, consider as pass, skip other check and set to SPACE.");
    return CheckStatus::kPass;
  }
  if (IsLowPrecision(dtype)) {
    if (!(m.hundredth_ratio > t.hundredth)) {
      return fail(CheckStatus::kError, Metric::kHundredthRatio, "ERROR: 双百指标不达标");
    }
    return m.thousandth_ratio > t.thousandth
               ? CheckStatus::kPass
               : fail(CheckStatus::kWarning, Metric::kThousandthRatio, "WARNING: 双千指标不达标");
  }
  if (dtype == wire::kFloat32 || dtype == wire::kFloat64) {
    if (!(m.thousandth_ratio > t.thousandth)) {
      return fail(CheckStatus::kError, Metric::kThousandthRatio, "ERROR: 双千指标不达标");
    }
    return m.ten_thousandth_ratio > t.ten_thousandth
               ? CheckStatus::kPass
               : fail(CheckStatus::kWarning, Metric::kTenThousandthRatio,
                      "WARNING: 双万指标不达标");
  }
  return CheckStatus::kPass;
}

namespace {

// The standard that applies to this output, given the API's: a missing golden or bench, or a
// bfloat16 output of a thousandth op, changes it (each with a note in the message).
Standard EffectiveStandard(Standard standard, wire::DType dtype, bool have_golden, bool have_bench,
                           std::string* message) {
  if (!have_golden && standard != Standard::kTwoWay) {
    Note(message, "No golden reference: judged by the two-way chain against the bench.");
    return Standard::kTwoWay;
  }
  if (standard == Standard::kBenchmark && !have_bench) {
    Note(message, "No bench result: judged by the two-way chain against the golden.");
    return Standard::kTwoWay;
  }
  // A bfloat16 result carries 8 significant bits: rounding alone is off by up to 2^-9 relative,
  // twice the thousandth standard's 1e-3, so a convolution that agrees with the bench bit for
  // bit fails it (on an H100: thousandth ratio 0.37, device and bench alike). bfloat16 outputs
  // of thousandth ops are judged against the bench, as every other op is.
  if (standard == Standard::kThousandth && dtype == wire::kBFloat16) {
    Note(message, absl::StrCat("bfloat16 rounding alone exceeds the thousandth standard's "
                               "1e-3: judged by the ",
                               have_bench ? "benchmark standard." : "two-way chain."));
    return have_bench ? Standard::kBenchmark : Standard::kTwoWay;
  }
  return standard;
}

// Applies j.standard's rules to the device metrics (and the bench's, for the three-way ones).
void ApplyStandard(OutputJudgement& j, wire::DType dtype, const DTypeConstants& c,
                   const StandardsTable& table, Metric two_way_metric,
                   const std::string& two_way_message) {
  const PairMetrics& dev = *j.device;
  const PairMetrics* bench = j.bench ? &*j.bench : nullptr;
  switch (j.standard) {
    case Standard::kAbsoluteThreshold:
      JudgeAbsoluteThreshold(j, dev, bench);
      break;
    case Standard::kBinary:
      if (dev.mismatch_rate != 0) {
        Fail(j, CheckStatus::kError, Metric::kMismatchRate, "ERROR: 二进制一致错误率超过阈值");
      }
      break;
    case Standard::kThousandth:
      if (!(dev.thousandth_ratio >= table.thousandth_pass())) {
        Fail(j, CheckStatus::kError, Metric::kThousandthRatio, "ERROR: 双千指标不达标");
      }
      break;
    case Standard::kUlp:
      JudgeUlp(j, dtype, dev, bench, c, table.ulp());
      break;
    case Standard::kBenchmark:
      JudgeBenchmark(j, dev, *bench, c, table.benchmark());
      break;
    case Standard::kTwoWay:
      j.status = j.two_way_status;
      j.failed_metric = two_way_metric;
      Note(&j.message, two_way_message);
      break;
    case Standard::kStatistics:  // chosen by the checker, never by the table
    case Standard::kExact:
    case Standard::kRandomProperty:  // judged by server/random/random_property.h
    case Standard::kNone:
      break;
  }
}

// Outputs the new standards do not cover: float64 (and complex) and integer or bool outputs.
void JudgeWithoutNewStandard(wire::DType dtype, bool floating, Standard standard,
                             Metric two_way_metric, const std::string& two_way_message,
                             OutputJudgement& j) {
  // A float64 output of an exact comparison (an op of the binary standard, or a random op
  // replayed from its generator state) is exact too: msprobe's "no new standard for float64"
  // sent it to the two-way chain, where a float64 randn with an element changed by 5e-4 passed.
  if (dtype == wire::kFloat64 && standard == Standard::kBinary) {
    j.standard = Standard::kBinary;
    j.status = CheckStatus::kPass;
    if (j.device->mismatch_rate != 0) {
      Fail(j, CheckStatus::kError, Metric::kMismatchRate, "ERROR: 二进制一致错误率超过阈值");
    }
    return;
  }
  // Integer and bool outputs: exact. float64/complex: two-way only (no "new standard").
  j.standard = floating ? Standard::kTwoWay : Standard::kBinary;
  j.status = j.two_way_status;
  j.failed_metric = two_way_metric;
  j.message = two_way_message;
  if (floating) {
    Note(&j.message, "The data type torch.float64 is not supported for new precision standard.");
  }
}

}  // namespace

OutputJudgement JudgeOutput(const TensorView& device, const TensorView* bench,
                            const TensorView* golden, Standard standard,
                            const StandardsTable& table) {
  OutputJudgement j;
  j.standard = standard;
  const TensorView* reference = golden != nullptr ? golden : bench;
  if (reference == nullptr) {
    j.status = CheckStatus::kSkip;
    j.message = "Bench output is None, skip this test.";
    return j;
  }
  const bool floating = common::IsFloating(device.dtype);
  const DTypeConstants* c = floating ? table.Constants(device.dtype) : nullptr;
  static const DTypeConstants kNone;
  absl::StatusOr<PairMetrics> dev = ComputeMetrics(device, *reference, c ? *c : kNone);
  if (!dev.ok()) {
    j.status = CheckStatus::kError;
    j.failed_metric = Metric::kStructure;
    j.message = std::string(dev.status().message());
    return j;
  }
  j.device = *dev;
  Metric two_way_metric = Metric::kNone;
  std::string two_way_message;
  j.two_way_status =
      TwoWayChain(*dev, device.dtype, table.two_way(), &two_way_metric, &two_way_message);
  if (golden != nullptr && bench != nullptr && floating) {
    absl::StatusOr<PairMetrics> b = ComputeMetrics(*bench, *golden, *c);
    if (b.ok()) j.bench = *b;
  }
  if (!floating || device.dtype == wire::kFloat64) {
    JudgeWithoutNewStandard(device.dtype, floating, standard, two_way_metric, two_way_message, j);
    return j;
  }
  j.standard =
      EffectiveStandard(standard, device.dtype, golden != nullptr, j.bench.has_value(), &j.message);
  ApplyStandard(j, device.dtype, *c, table, two_way_metric, two_way_message);
  // Inconclusive reference: the bench itself disagrees with the golden on inf/NaN positions, so
  // the golden may be the odd one out (e.g. an op that overflows at this dtype by design).
  if (j.status == CheckStatus::kError && j.bench && j.bench->inf_nan_error_rate > 0 &&
      dev->inf_nan_error_rate > 0) {
    j.status = CheckStatus::kWarning;
    Note(&j.message, absl::StrCat("Inconclusive reference: the bench replay disagrees with the "
                                  "float64 golden on inf/nan positions (rate ",
                                  j.bench->inf_nan_error_rate, "); not blamed on the device."));
  }
  // An overflow says so first, in its own words (a ratio over an inf, "mean ULP NaN", does not).
  if (j.status != CheckStatus::kPass) {
    j.nonfinite = FindDeviceNonFinite(device, *reference);
    if (j.nonfinite) {
      j.message = NonFiniteMessage(*j.nonfinite) + (j.message.empty() ? "" : "\n") + j.message;
    }
  }
  return j;
}

}  // namespace parity::server
