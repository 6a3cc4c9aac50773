// Verdict rules, table-driven from ../shared/precision-standard.md.
#include "server/compare/judge.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/naming/operator_catalogue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/compare/float_types.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// One row: float32 device and bench against a float64 golden, judged by `standard`.
struct Case {
  const char* name;
  Standard standard;
  std::vector<float> device;
  std::vector<float> bench;  // empty: no bench result
  std::vector<double> golden;
  CheckStatus expected;
  const char* failed_metric;
  const char* message = "";  // what a failed output's message must say
};

// Golden values, and copies scaled by a relative error.
std::vector<double> Golden() {
  std::vector<double> g;
  for (int i = 0; i < 200; ++i) g.push_back(0.5 + 0.01 * i);
  return g;
}
std::vector<float> Scaled(const std::vector<double>& g, double rel, int every = 1) {
  std::vector<float> out;
  for (size_t i = 0; i < g.size(); ++i) {
    out.push_back(static_cast<float>(i % every == 0 ? g[i] * (1 + rel) : g[i]));
  }
  return out;
}
std::vector<float> Round(const std::vector<double>& g) { return Scaled(g, 0); }

class JudgeTest : public ::testing::TestWithParam<Case> {};

TEST_P(JudgeTest, Decides) {
  const Case& c = GetParam();
  auto view = [](const auto& v, wire::DType d) {
    return TensorView{
        d, {static_cast<int64_t>(v.size())}, v.data(), static_cast<int64_t>(v.size())};
  };
  TensorView device = view(c.device, wire::kFloat32);
  TensorView bench = view(c.bench, wire::kFloat32);
  TensorView golden = view(c.golden, wire::kFloat64);
  OutputJudgement j = JudgeOutput(device, c.bench.empty() ? nullptr : &bench, &golden, c.standard,
                                  StandardsTable::Default());
  EXPECT_EQ(StatusText(j.status), StatusText(c.expected)) << j.message;
  EXPECT_EQ(MetricName(j.failed_metric), c.failed_metric) << j.message;
  // Every failed output names its failure in words (one case of each standard below).
  if (c.expected == CheckStatus::kPass) return;
  EXPECT_THAT(j.message, HasSubstr(c.message)) << c.name;
  EXPECT_NE(std::string(c.message), "") << c.name << ": give the case its message";
}

const std::vector<double> g = Golden();

// Every value below float32's small-value threshold (2^-20): a gradient's scale.
std::vector<double> SmallGolden() {
  std::vector<double> out;
  for (double v : Golden()) out.push_back(v * 1e-7);
  return out;
}
const std::vector<double> gs = SmallGolden();

std::vector<float> WithNan(std::vector<float> v) {
  v[7] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

// One element near zero (a sum that cancels), the rest as Golden(); and a copy of it with only
// that element off by `rel`.
std::vector<double> CancellingGolden() {
  std::vector<double> out = Golden();
  out[0] = 1e-4;
  return out;
}
const std::vector<double> gc = CancellingGolden();
std::vector<float> OffAtTheCancellation(double rel) {
  std::vector<float> out = Round(gc);
  out[0] = static_cast<float>(gc[0] * (1 + rel));
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Standards, JudgeTest,
    ::testing::Values(
        // Absolute threshold: rel_err must stay within rtol = 2^-20 on normal values.
        Case{"abs_exact", Standard::kAbsoluteThreshold, Round(g), Round(g), g, CheckStatus::kPass,
             ""},
        Case{"abs_rel_1e5", Standard::kAbsoluteThreshold, Scaled(g, 1e-5, 50), Round(g), g,
             CheckStatus::kError, "rel_error_rate", "相对误差错误率超过阈值"},
        // ...unless the bench is as far from the golden (cancellation in a correct kernel):
        // no worse than the bench passes; worse than it fails.
        Case{"abs_as_bench", Standard::kAbsoluteThreshold, Scaled(g, 1e-5, 50), Scaled(g, 1e-5, 50),
             g, CheckStatus::kPass, ""},
        Case{"abs_worse_than_bench", Standard::kAbsoluteThreshold, Scaled(g, 1e-5, 25),
             Scaled(g, 1e-5, 50), g, CheckStatus::kError, "rel_error_rate",
             "相对误差错误率超过阈值"},
        // Binary: any difference is an error.
        Case{"binary_equal", Standard::kBinary, Round(g), Round(g), g, CheckStatus::kPass, ""},
        Case{"binary_one_off", Standard::kBinary, Scaled(g, 1e-6, 199), Round(g), g,
             CheckStatus::kError, "mismatch_rate", "二进制一致错误率超过阈值"},
        // Thousandth: >= 99.9% of elements within 1e-3 relative.
        Case{"thousandth_ok", Standard::kThousandth, Scaled(g, 1e-4), Round(g), g,
             CheckStatus::kPass, ""},
        Case{"thousandth_bad", Standard::kThousandth, Scaled(g, 2e-3, 100), Round(g), g,
             CheckStatus::kError, "thousandth_ratio", "双千指标不达标"},
        // ULP fp32: a device identical to the bench passes even with large ULP errors (Parity
        // deviation: ratio <= 1), a device worse than the bench fails.
        Case{"ulp_same_as_bench", Standard::kUlp, Scaled(g, 1e-4), Scaled(g, 1e-4), g,
             CheckStatus::kPass, ""},
        Case{"ulp_worse_than_bench", Standard::kUlp, Scaled(g, 1e-4), Round(g), g,
             CheckStatus::kError, "ulp_error", "ULP误差不满足标准"},
        // A worse share condemns only when the excess is significant (a sign test on the
        // over-threshold counts, alpha 1e-3): 67 elements over 32 ULP against the bench's 50 is
        // chance (p = 0.07), 100 against 50 is not (p = 3e-5).
        Case{"ulp_excess_within_chance", Standard::kUlp, Scaled(g, 1e-4, 3), Scaled(g, 1e-4, 4), g,
             CheckStatus::kPass, ""},
        Case{"ulp_excess_significant", Standard::kUlp, Scaled(g, 1e-4, 2), Scaled(g, 1e-4, 4), g,
             CheckStatus::kError, "ulp_error", "ULP误差不满足标准"},
        // Benchmark, all values small: msprobe's ratios mask them all; the largest absolute
        // error at the output's scale (Parity) still sees a device 1e-3 off where the bench
        // rounds.
        Case{"benchmark_all_small_rounding", Standard::kBenchmark, Round(gs), Round(gs), gs,
             CheckStatus::kPass, ""},
        // A bench with a NaN where the golden is finite has no largest error to compare with:
        // a correct device is not an error for it.
        Case{"benchmark_bench_nan_device_fine", Standard::kBenchmark, Round(g), WithNan(Round(g)),
             g, CheckStatus::kPass, ""},
        Case{"benchmark_all_small_worse", Standard::kBenchmark, Scaled(gs, 1e-3), Round(gs), gs,
             CheckStatus::kError, "max_abs_error",
             "largest absolute error over the bench's, at the output's scale"},
        // The largest relative error at an element a sum cancels, 200x the bench's, with the
        // largest absolute error below the bench's: not evidence (Parity); 10x the bench's
        // absolute error as well: an error.
        Case{"benchmark_max_rel_at_a_cancellation", Standard::kBenchmark,
             OffAtTheCancellation(2e-3), Scaled(gc, 1e-5), gc, CheckStatus::kPass, ""},
        Case{"benchmark_max_rel_and_abs_worse", Standard::kBenchmark, OffAtTheCancellation(0.5),
             Scaled(gc, 1e-5), gc, CheckStatus::kError, "max_rel_error",
             "相对误差最大值比值超过阈值"},
        Case{"ulp_within_thresholds", Standard::kUlp, Scaled(g, 1e-6, 40), Round(g), g,
             CheckStatus::kPass, ""},
        // Benchmark: device errors up to 2x (rmse, mean rel) / 10x (max rel) the bench's.
        Case{"bench_equal", Standard::kBenchmark, Scaled(g, 1e-6), Scaled(g, 1e-6), g,
             CheckStatus::kPass, ""},
        Case{"bench_rmse_3x", Standard::kBenchmark, Scaled(g, 3e-3), Scaled(g, 1e-3), g,
             CheckStatus::kError, "rmse", "均方根误差比值超过阈值"},
        Case{"bench_1_5x", Standard::kBenchmark, Scaled(g, 1.5e-3), Scaled(g, 1e-3), g,
             CheckStatus::kPass, ""},
        // Errors below the dtype's floor (2^-14 for float32) never fail, whatever the ratio.
        Case{"bench_under_floor", Standard::kBenchmark, Scaled(g, 3e-5), Scaled(g, 1e-7), g,
             CheckStatus::kPass, ""},
        Case{"bench_nan_device", Standard::kBenchmark,
             [] {
               auto d = Round(g);
               d[3] = NAN;
               return d;
             }(),
             Round(g), g, CheckStatus::kError, "inf_nan_error_rate",
             "device output has 1 inf/NaN where the reference is finite (first at element 3: nan, "
             "reference 0.53)\nERROR: inf/nan错误率超过标杆"},
        // No bench result: benchmark falls back to the two-way chain against the golden.
        Case{"bench_missing_two_way_pass",
             Standard::kBenchmark,
             Scaled(g, 1e-7),
             {},
             g,
             CheckStatus::kPass,
             ""},
        Case{"bench_missing_two_way_error",
             Standard::kBenchmark,
             Scaled(g, 3e-3),
             {},
             g,
             CheckStatus::kError,
             "thousandth_ratio",
             "No bench result: judged by the two-way chain against the golden.\nERROR: "
             "双千指标不达标"}),
    [](const ::testing::TestParamInfo<Case>& p) { return p.param.name; });

// bfloat16 rounding alone (up to 2^-9 relative) fails the thousandth standard's 1e-3, so the
// bfloat16 output of a thousandth op is judged against the bench: correctly rounded passes, 2% off
// is an error.
TEST(JudgeHalfPrecisionTest, BFloat16ThousandthOpsAreJudgedAgainstTheBench) {
  std::vector<float> golden;
  for (int i = 0; i < 512; ++i) golden.push_back(0.5f + 0.0137f * static_cast<float>(i));
  auto to_bf16 = [&](double rel) {
    std::vector<uint16_t> out;
    for (float x : golden) {
      const float y = static_cast<float>(x * (1 + rel));
      uint32_t bits;
      std::memcpy(&bits, &y, sizeof bits);
      bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
      out.push_back(static_cast<uint16_t>(bits >> 16));
    }
    return out;
  };
  const std::vector<uint16_t> rounded = to_bf16(0), off = to_bf16(0.02);
  const int64_t n = static_cast<int64_t>(golden.size());
  const TensorView gold{wire::kFloat32, {n}, golden.data(), n};
  const TensorView bench{wire::kBFloat16, {n}, rounded.data(), n};
  const TensorView good{wire::kBFloat16, {n}, rounded.data(), n};
  const TensorView bad{wire::kBFloat16, {n}, off.data(), n};
  const StandardsTable& table = StandardsTable::Default();

  OutputJudgement j = JudgeOutput(good, &bench, &gold, Standard::kThousandth, table);
  EXPECT_EQ(StatusText(j.status), "pass") << j.message;
  EXPECT_EQ(j.standard, Standard::kBenchmark);
  EXPECT_THAT(j.message, HasSubstr("bfloat16 rounding alone"));
  ASSERT_TRUE(j.device.has_value());
  EXPECT_LT(j.device->thousandth_ratio, table.thousandth_pass());  // what it would have failed
  j = JudgeOutput(bad, &bench, &gold, Standard::kThousandth, table);
  EXPECT_EQ(StatusText(j.status), "error") << j.message;
  EXPECT_EQ(j.standard, Standard::kBenchmark);
  j = JudgeOutput(good, nullptr, &gold, Standard::kThousandth, table);  // no bench
  EXPECT_EQ(j.standard, Standard::kTwoWay);
  EXPECT_NE(StatusText(j.status), "error") << j.message;
}

// A float64 output judged exactly (an op of the binary standard, a random op replayed from its
// generator state) stays exact: one element changed by 5e-4 is an error, not a two-way pass.
TEST(JudgeFloat64Test, ExactComparisonsStayExactInFloat64) {
  std::vector<double> ref(1000), same(1000), off(1000);
  for (int i = 0; i < 1000; ++i) ref[i] = same[i] = off[i] = std::sin(0.37 * i);
  off[123] += 5e-4;
  const TensorView r{wire::kFloat64, {1000}, ref.data(), 1000};
  const TensorView s{wire::kFloat64, {1000}, same.data(), 1000};
  const TensorView o{wire::kFloat64, {1000}, off.data(), 1000};
  const StandardsTable& table = StandardsTable::Default();
  OutputJudgement j = JudgeOutput(s, &r, &r, Standard::kBinary, table);
  EXPECT_EQ(StatusText(j.status), "pass") << j.message;
  EXPECT_EQ(j.standard, Standard::kBinary);
  j = JudgeOutput(o, &r, &r, Standard::kBinary, table);
  EXPECT_EQ(StatusText(j.status), "error") << j.message;
  EXPECT_EQ(MetricName(j.failed_metric), "mismatch_rate");
  // Other standards keep msprobe's rule for float64: the two-way chain (which passes it).
  j = JudgeOutput(o, &r, &r, Standard::kBenchmark, table);
  EXPECT_EQ(j.standard, Standard::kTwoWay);
  EXPECT_EQ(StatusText(j.status), "pass") << j.message;
}

TEST(TwoWayChainTest, FollowsMsprobeOrder) {
  const TwoWayThresholds t;
  Metric metric = Metric::kNone;
  std::string message;
  PairMetrics m;
  m.cosine = 0.98;
  EXPECT_EQ(TwoWayChain(m, wire::kFloat32, t, &metric, &message), CheckStatus::kError);
  EXPECT_EQ(metric, Metric::kCosine);
  m.cosine = 0.999;
  m.max_abs_error = 0.0005;
  m.thousandth_ratio = 0.5;  // ignored: max abs error < 0.001 passes first
  EXPECT_EQ(TwoWayChain(m, wire::kFloat32, t, &metric, &message), CheckStatus::kPass);
  m.max_abs_error = 0.01;
  m.hundredth_ratio = 0.98;
  EXPECT_EQ(TwoWayChain(m, wire::kFloat16, t, &metric, &message), CheckStatus::kError);
  EXPECT_EQ(metric, Metric::kHundredthRatio);
  m.hundredth_ratio = 0.995;
  m.thousandth_ratio = 0.998;
  EXPECT_EQ(TwoWayChain(m, wire::kBFloat16, t, &metric, &message), CheckStatus::kWarning);
  EXPECT_EQ(TwoWayChain(m, wire::kFloat32, t, &metric, &message), CheckStatus::kError);
  m.thousandth_ratio = 0.9995;
  m.ten_thousandth_ratio = 0.999;
  EXPECT_EQ(TwoWayChain(m, wire::kFloat32, t, &metric, &message), CheckStatus::kWarning);
  m.cosine = kNaN;
  EXPECT_EQ(TwoWayChain(m, wire::kFloat32, t, &metric, &message), CheckStatus::kError);
  m.cosine_blank = true;  // blank cosine passes the first step
  m.max_abs_error = 0;
  EXPECT_EQ(TwoWayChain(m, wire::kFloat32, t, &metric, &message), CheckStatus::kPass);
}

TEST(BenchmarkRatioTest, HandlesFloorsInfinitiesAndNaN) {
  EXPECT_DOUBLE_EQ(BenchmarkRatio(4e-5, 1e-6, 6.1e-5, 2).value, 4e-5 / 6.1e-5);  // floor
  EXPECT_TRUE(BenchmarkRatio(2, 1, 0.1, 2).pass);  // exactly at the limit passes
  EXPECT_FALSE(BenchmarkRatio(2.01, 1, 0.1, 2).pass);
  EXPECT_TRUE(BenchmarkRatio(kNaN, kNaN, 0.1, 2).pass);
  EXPECT_TRUE(BenchmarkRatio(kInf, kInf, 0.1, 2).pass);
  EXPECT_FALSE(BenchmarkRatio(kInf, -kInf, 0.1, 2).pass);
  EXPECT_FALSE(BenchmarkRatio(kNaN, 1, 0.1, 2).pass);
  EXPECT_TRUE(std::isnan(BenchmarkRatio(kNaN, 1, 0.1, 2).value));
}

TEST(AggregateTest, IsStrictAndOrderIndependent) {
  using S = std::vector<CheckStatus>;
  const auto P = CheckStatus::kPass, W = CheckStatus::kWarning, E = CheckStatus::kError,
             K = CheckStatus::kSkip;
  EXPECT_EQ(Aggregate(S{P, W, E}), E);
  EXPECT_EQ(Aggregate(S{E, W}), E);  // msprobe let the later Warning win: a hidden error
  EXPECT_EQ(Aggregate(S{P, W}), W);
  EXPECT_EQ(Aggregate(S{K, P}), P);
  EXPECT_EQ(Aggregate(S{K, K}), K);
  EXPECT_EQ(Aggregate(S{}), K);
}

TEST(StandardsTableTest, ShippedTableMapsOpsToStandards) {
  const StandardsTable& t = StandardsTable::Default();
  EXPECT_EQ(t.Lookup("aten::mul"), Standard::kAbsoluteThreshold);
  EXPECT_EQ(t.Lookup("aten::mul_"), Standard::kAbsoluteThreshold);
  EXPECT_EQ(t.Lookup("aten::relu"), Standard::kBinary);
  EXPECT_EQ(t.Lookup("aten::relu_"), Standard::kBinary);
  EXPECT_EQ(t.Lookup("aten::linear"), Standard::kUlp);
  EXPECT_EQ(t.Lookup("aten::addmm"), Standard::kUlp);
  EXPECT_EQ(t.Lookup("aten::conv2d"), Standard::kThousandth);
  EXPECT_EQ(t.Lookup("aten::convolution", 4), Standard::kThousandth);
  EXPECT_EQ(t.Lookup("aten::convolution", 5), Standard::kBenchmark);
  EXPECT_EQ(t.Lookup("aten::gelu"), Standard::kBenchmark);
  EXPECT_EQ(t.Lookup("aten::softmax"), Standard::kBenchmark);
  ASSERT_NE(t.Constants(wire::kBFloat16), nullptr);
  EXPECT_DOUBLE_EQ(t.Constants(wire::kBFloat16)->rtol, 0.00390625);
  EXPECT_EQ(t.Constants(wire::kInt32), nullptr);
}

TEST(StandardsTableTest, UserTableOverridesAndErrorsNameTheKey) {
  auto t = StandardsTable::Parse(R"({"standards": {"binary": ["gelu"]},
      "dtypes": {"float16": {"rtol": 0.01}, "bfloat16": {}, "float32": {}, "float64": {}}})",
                                 "mine.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->Lookup("aten::gelu"), Standard::kBinary);
  EXPECT_DOUBLE_EQ(t->Constants(wire::kFloat16)->rtol, 0.01);
  auto bad = StandardsTable::Parse(R"({"dtypes": {"float16": {"rtol": "tiny"}}})", "mine.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("dtypes.float16.rtol: expected a number"));
  EXPECT_THAT(bad.status().message(), HasSubstr("dtypes.bfloat16: missing"));
  auto dup = StandardsTable::Parse(
      R"({"standards": {"binary": ["gelu"], "ulp": ["gelu"]}, "dtypes": {"float16": {},
          "bfloat16": {}, "float32": {}, "float64": {}}})",
      "dup.json");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("\"gelu\" is also listed under"));
}

TEST(StandardsTableTest, UncomparedOutputsAreNamedWithAReasonAndMalformedEntriesRefused) {
  const StandardsTable& shipped = StandardsTable::Default();
  for (int i : {4, 5, 6}) {
    const std::string* why = shipped.UncomparedReason("npu::npu_fusion_attention", i);
    ASSERT_NE(why, nullptr) << i;
    EXPECT_THAT(*why, HasSubstr("seed, offset and numels"));
  }
  EXPECT_EQ(shipped.UncomparedReason("npu::npu_fusion_attention", 0), nullptr);
  EXPECT_EQ(shipped.UncomparedReason("aten::add", 4), nullptr);
  const std::string dtypes =
      R"("dtypes": {"float16": {}, "bfloat16": {}, "float32": {}, "float64": {}})";
  for (const char* entry :
       {R"([1])", R"({"op": {"outputs": [1]}})", R"({"op": {"outputs": [-1], "reason": "x"}})",
        R"({"op": {"outputs": [1], "reason": ""}})",
        R"({"op": {"outputs": "1", "reason": "x"}})"}) {
    auto bad = StandardsTable::Parse(
        absl::StrCat(R"({"uncompared_outputs": )", entry, ", ", dtypes, "}"), "mine.json");
    ASSERT_FALSE(bad.ok()) << entry;
    EXPECT_THAT(bad.status().message(), HasSubstr("uncompared_outputs: expected"));
  }
}

// The table lists every random op of the operator catalogue (common/naming/operators.json) under
// random_property and nothing else there; a file that puts a random op under another standard, or
// another op under random_property, is refused naming it.
TEST(StandardsTableTest, RandomOpsAreListedUnderRandomPropertyOnly) {
  const StandardsTable& shipped = StandardsTable::Default();
  for (const std::string& op : common::RandomOpNames()) {
    EXPECT_EQ(shipped.Lookup(absl::StrCat("aten::", op)), Standard::kRandomProperty) << op;
  }
  EXPECT_EQ(StandardName(Standard::kRandomProperty), "random_property");
  const std::string dtypes =
      R"("dtypes": {"float16": {}, "bfloat16": {}, "float32": {}, "float64": {}})";
  auto bad = StandardsTable::Parse(
      absl::StrCat(R"({"standards": {"binary": ["dropout"]}, )", dtypes, "}"), "mine.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"dropout\" draws random numbers"));
  bad = StandardsTable::Parse(
      absl::StrCat(R"({"standards": {"random_property": ["gelu"]}, )", dtypes, "}"), "mine.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"gelu\" draws no random numbers"));
}

// exact_by_construction: views, copies, fills and selections, in-place forms included; a random
// op, or an op listed under a standard that tolerates error, is refused naming it.
TEST(StandardsTableTest, ExactOpsAreListedAndMisplacedOnesRefused) {
  const StandardsTable& shipped = StandardsTable::Default();
  for (const char* op : {"aten::t", "aten::view", "aten::cat", "aten::copy_", "aten::zero_",
                         "aten::_to_copy", "aten::index_select", "aten::fill_"}) {
    EXPECT_TRUE(shipped.ExactByConstruction(op)) << op;
  }
  for (const char* op : {"aten::mm", "aten::gelu", "aten::sum", "aten::index_put_",
                         "aten::embedding_dense_backward", "aten::dropout"}) {
    EXPECT_FALSE(shipped.ExactByConstruction(op)) << op;
  }
  const std::string dtypes =
      R"("dtypes": {"float16": {}, "bfloat16": {}, "float32": {}, "float64": {}})";
  auto bad = StandardsTable::Parse(
      absl::StrCat(R"({"exact_by_construction": ["t", "bernoulli"], )", dtypes, "}"), "mine.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"bernoulli\" draws random numbers"));
  bad = StandardsTable::Parse(absl::StrCat(R"({"standards": {"ulp": ["mm"]},
      "exact_by_construction": ["mm"], )",
                                           dtypes, "}"),
                              "mine.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"mm\" is listed under ulp"));
  auto ok = StandardsTable::Parse(
      absl::StrCat(R"({"standards": {"binary": ["t"]}, "exact_by_construction": ["t"], )", dtypes,
                   "}"),
      "mine.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->ExactByConstruction("aten::t"));
  EXPECT_FALSE(ok->ExactByConstruction("aten::cat"));
}

// An fp16 attention score overflowing to inf: the message says so first, with the count and the
// first element, before any ratio ("mean ULP NaN" said nothing of why), by every standard that
// fails it; a bench that overflowed too makes no such claim.
TEST(JudgeNonFiniteTest, AnOverflowIsNamedFirst) {
  std::vector<double> golden;
  for (int i = 0; i < 64; ++i) golden.push_back(100.0 + 3.0 * i);
  golden[5] = 60000;  // within float16's range (65504): a kernel that overflowed on the way
  golden[40] = -61000;
  golden[63] = 70000;  // beyond it: inf is float16's right answer there, not named
  std::vector<uint16_t> device, bench;
  for (double v : golden) {
    bench.push_back(fp::FloatToHalf(static_cast<float>(v)));
    device.push_back(bench.back());
  }
  device[5] = fp::FloatToHalf(std::numeric_limits<float>::infinity());
  device[40] = fp::FloatToHalf(-std::numeric_limits<float>::infinity());
  const TensorView d{wire::kFloat16, {64}, device.data(), 64};
  const TensorView b{wire::kFloat16, {64}, bench.data(), 64};
  const TensorView g{wire::kFloat64, {64}, golden.data(), 64};
  for (Standard standard : {Standard::kBenchmark, Standard::kUlp, Standard::kAbsoluteThreshold}) {
    const OutputJudgement j = JudgeOutput(d, &b, &g, standard, StandardsTable::Default());
    EXPECT_EQ(StatusText(j.status), "error") << StandardName(standard) << ": " << j.message;
    EXPECT_THAT(j.message, ::testing::StartsWith(
                               "device output has 2 inf/NaN where the reference is finite (first "
                               "at element 5: inf, reference 60000)"))
        << StandardName(standard);
    ASSERT_TRUE(j.nonfinite.has_value());
    EXPECT_EQ(j.nonfinite->count, 2);
  }
  // Only the element beyond float16's range overflowing: right, nothing named.
  const OutputJudgement right =
      JudgeOutput(b, &b, &g, Standard::kBenchmark, StandardsTable::Default());
  EXPECT_EQ(StatusText(right.status), "pass") << right.message;
  EXPECT_FALSE(right.nonfinite.has_value());
}

}  // namespace
}  // namespace parity::server
