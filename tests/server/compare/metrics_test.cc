// Metric values against numbers worked out by hand from the definitions in
// ../shared/precision-standard.md.
#include "server/compare/metrics.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/compare/float_types.h"
#include "server/compare/standards.h"

namespace parity::server {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
TensorView View(wire::DType dtype, const std::vector<T>& v) {
  return TensorView{
      dtype, {static_cast<int64_t>(v.size())}, v.data(), static_cast<int64_t>(v.size())};
}

const DTypeConstants& C(wire::DType d) { return *StandardsTable::Default().Constants(d); }

std::vector<uint16_t> Halves(std::initializer_list<float> v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(fp::FloatToHalf(f));
  return out;
}

TEST(MetricsTest, Float32AgainstFloat64GoldenHandComputed) {
  std::vector<float> dev = {1, 2, 3, 4};
  std::vector<double> gold = {1, 2, 3, 4.004};
  auto m = ComputeMetrics(View(wire::kFloat32, dev), View(wire::kFloat64, gold), C(wire::kFloat32));
  ASSERT_TRUE(m.ok()) << m.status();
  const double err = 4.004 - 4.0;
  const double rel = err / (4.004 + std::numeric_limits<double>::epsilon());
  EXPECT_NEAR(m->cosine, 30.016 / std::sqrt(30.0 * 30.032016), 1e-12);
  EXPECT_DOUBLE_EQ(m->max_abs_error, err);
  EXPECT_DOUBLE_EQ(m->hundredth_ratio, 1.0);
  EXPECT_DOUBLE_EQ(m->thousandth_ratio, 1.0);  // rel = 0.000999 < 0.001
  EXPECT_DOUBLE_EQ(m->ten_thousandth_ratio, 0.75);
  EXPECT_DOUBLE_EQ(m->mismatch_rate, 0.25);
  EXPECT_DOUBLE_EQ(m->error_balance, 0.25);   // one element below, none above
  EXPECT_DOUBLE_EQ(m->rel_error_rate, 0.25);  // rel > 2^-20 for one of four normal elements
  EXPECT_DOUBLE_EQ(m->abs_error_rate, 0.0);   // no small elements
  EXPECT_DOUBLE_EQ(m->max_rel_error, rel);
  EXPECT_DOUBLE_EQ(m->mean_rel_error, rel / 4);
  EXPECT_DOUBLE_EQ(m->rmse, std::sqrt(err * err / 4 * (4 / (4 + 1e-4) + 1e-4)));
  // ULP: e = floor(log2 4.004) = 2, ulp = 0.004 * 2^(23-2).
  EXPECT_NEAR(m->ulp_max, err * 2097152.0, 1e-6);
  EXPECT_NEAR(m->ulp_mean, err * 2097152.0 / 4, 1e-6);
  EXPECT_DOUBLE_EQ(m->ulp_over_threshold_ratio, 0.25);
  EXPECT_DOUBLE_EQ(m->inf_nan_error_rate, 0.0);
}

TEST(MetricsTest, SmallValuesUseAbsoluteToleranceAndLeaveRmse) {
  // 1e-4 in float16 is small against a zero reference (|ref| <= 2^-10).
  auto dev = Halves({1e-4f, 0.5f});
  std::vector<float> gold = {0.0f, 0.5f};
  auto m = ComputeMetrics(View(wire::kFloat16, dev), View(wire::kFloat32, gold), C(wire::kFloat16));
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->abs_error_rate, 1.0);           // 1e-4 > 2^-16
  EXPECT_DOUBLE_EQ(m->small_value_error_ratio, 1.0);  // 1e-4 > 1e-16
  EXPECT_DOUBLE_EQ(m->rel_error_rate, 0.0);
  EXPECT_DOUBLE_EQ(m->rmse, 0.0);  // small elements are masked out
  // A small element within the absolute tolerance passes that check.
  auto tiny = Halves({1e-5f, 0.5f});  // 1e-5 rounds to a float16 subnormal ~1.0014e-5 < 2^-16
  m = ComputeMetrics(View(wire::kFloat16, tiny), View(wire::kFloat32, gold), C(wire::kFloat16));
  EXPECT_DOUBLE_EQ(m->abs_error_rate, 0.0);
}

TEST(MetricsTest, InfAndNaNConsistencyAndSignedZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<float> dev = {static_cast<float>(kInf), static_cast<float>(nan), -0.0f, 1.0f};
  std::vector<double> gold = {kInf, nan, 0.0, 1.0};
  auto m = ComputeMetrics(View(wire::kFloat32, dev), View(wire::kFloat64, gold), C(wire::kFloat32));
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->inf_nan_error_rate, 0.0);  // same inf, NaN on both sides: consistent
  EXPECT_DOUBLE_EQ(m->mismatch_rate, 0.0);       // NaN==NaN and -0.0==0.0 count as equal
  EXPECT_DOUBLE_EQ(m->error_balance, 0.0);

  std::vector<float> bad = {static_cast<float>(nan), 1.0f};
  std::vector<double> ok = {2.0, 1.0};
  m = ComputeMetrics(View(wire::kFloat32, bad), View(wire::kFloat64, ok), C(wire::kFloat32));
  EXPECT_DOUBLE_EQ(m->inf_nan_error_rate, 1.0);
  EXPECT_DOUBLE_EQ(m->mismatch_rate, 0.5);
  EXPECT_TRUE(std::isnan(m->max_abs_error));
  EXPECT_DOUBLE_EQ(m->hundredth_ratio, 0.5);  // NaN counts as failing
  EXPECT_TRUE(std::isnan(m->cosine));         // a NaN value makes the cosine NaN (an error)
  EXPECT_FALSE(m->cosine_blank);

  // A golden beyond float32's range casts to inf; a device at FLT_MAX is consistent with it.
  std::vector<float> big = {std::numeric_limits<float>::max(), 1.0f};
  std::vector<double> huge = {3.5e38, 1.0};
  m = ComputeMetrics(View(wire::kFloat32, big), View(wire::kFloat64, huge), C(wire::kFloat32));
  EXPECT_DOUBLE_EQ(m->inf_nan_error_rate, 0.0);
}

TEST(MetricsTest, CosineBlankAndOneSideZero) {
  std::vector<float> one = {3.0f};
  std::vector<double> one_ref = {3.0};
  auto m =
      ComputeMetrics(View(wire::kFloat32, one), View(wire::kFloat64, one_ref), C(wire::kFloat32));
  EXPECT_TRUE(m->cosine_blank);
  std::vector<float> zeros = {0, 0};
  std::vector<double> nonzero = {0, 1};
  m = ComputeMetrics(View(wire::kFloat32, zeros), View(wire::kFloat64, nonzero), C(wire::kFloat32));
  EXPECT_TRUE(m->cosine_one_side_zero);
  std::vector<double> zeros_ref = {0, 0};
  m = ComputeMetrics(View(wire::kFloat32, zeros), View(wire::kFloat64, zeros_ref),
                     C(wire::kFloat32));
  EXPECT_TRUE(m->cosine_blank);
  EXPECT_FALSE(m->cosine_one_side_zero);
  // Opposite directions: cosine -1 (clipped, computed).
  std::vector<float> a = {1, 2};
  std::vector<double> b = {-1, -2};
  m = ComputeMetrics(View(wire::kFloat32, a), View(wire::kFloat64, b), C(wire::kFloat32));
  EXPECT_DOUBLE_EQ(m->cosine, -1.0);
}

TEST(MetricsTest, CosineSurvivesValuesNearDoubleRange) {
  std::vector<double> a = {1e300, 2e300};
  std::vector<double> b = {1e300, 2e300};
  auto m = ComputeMetrics(View(wire::kFloat64, a), View(wire::kFloat64, b), C(wire::kFloat64));
  EXPECT_NEAR(m->cosine, 1.0, 1e-12);
}

TEST(MetricsTest, EmptyTensors) {
  std::vector<float> e;
  std::vector<double> g;
  auto m = ComputeMetrics(View(wire::kFloat32, e), View(wire::kFloat64, g), C(wire::kFloat32));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->numel, 0);
  EXPECT_TRUE(m->cosine_blank);
  EXPECT_DOUBLE_EQ(m->thousandth_ratio, 1.0);  // 1 when N = 0
  EXPECT_DOUBLE_EQ(m->mismatch_rate, 0.0);
}

TEST(MetricsTest, Float16UlpAndBFloat16Epsilon) {
  // 1 + 2^-10 is one float16 ULP above 1: ulp 1, not over the threshold of 1.
  auto one_ulp = Halves({1.0009765625f});
  auto two_ulp = Halves({1.001953125f});
  std::vector<float> g = {1.0f};
  auto m =
      ComputeMetrics(View(wire::kFloat16, one_ulp), View(wire::kFloat32, g), C(wire::kFloat16));
  EXPECT_DOUBLE_EQ(m->ulp_max, 1.0);
  EXPECT_DOUBLE_EQ(m->ulp_over_threshold_ratio, 0.0);
  m = ComputeMetrics(View(wire::kFloat16, two_ulp), View(wire::kFloat32, g), C(wire::kFloat16));
  EXPECT_DOUBLE_EQ(m->ulp_max, 2.0);
  EXPECT_DOUBLE_EQ(m->ulp_over_threshold_ratio, 1.0);
  // bfloat16 devices use eps = 2^-8 in the relative error.
  std::vector<uint16_t> bf = {fp::FloatToBFloat16(0.5f)};
  std::vector<float> gb = {0.501f};
  m = ComputeMetrics(View(wire::kBFloat16, bf), View(wire::kFloat32, gb), C(wire::kBFloat16));
  // Computed in float32, as msprobe's numpy does for a bfloat16 device cast to float32 against a
  // float32 golden; float64 would give another value in the last digits.
  const float err = std::fabs(0.5f - 0.501f);
  const float rel = err / (0.501f + 0.00390625f);
  EXPECT_EQ(m->max_rel_error, static_cast<double>(rel));
  EXPECT_EQ(m->max_abs_error, static_cast<double>(err));
  EXPECT_NE(m->max_rel_error, std::fabs(0.5 - static_cast<double>(0.501f)) /
                                  (static_cast<double>(0.501f) + 0.00390625));
}

TEST(MetricsTest, Float32DevicesKeepFloat64Errors) {
  // A float32 device against its float64 golden: errors in float64, nothing rounded to float32.
  std::vector<float> t = {1.0f};
  const double golden = 1.0 + 1e-7 / 3;  // 1 + a difference with 29 significant bits
  std::vector<double> g = {golden};
  auto m = ComputeMetrics(View(wire::kFloat32, t), View(wire::kFloat64, g), C(wire::kFloat32));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_abs_error, golden - 1.0);
  EXPECT_NE(m->max_abs_error, static_cast<double>(static_cast<float>(golden - 1.0)));
}

TEST(MetricsTest, IntegerOutputsAreComparedExactly) {
  std::vector<int64_t> a = {1, 2, 3, 4};
  std::vector<int64_t> b = {1, 2, 3, 5};
  auto m = ComputeMetrics(View(wire::kInt64, a), View(wire::kInt64, b), {});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->has_float_metrics);
  EXPECT_DOUBLE_EQ(m->mismatch_rate, 0.25);
}

TEST(MetricsTest, ShapeMismatchIsAnErrorNamingBothShapes) {
  std::vector<float> a = {1, 2};
  std::vector<double> b = {1, 2, 3};
  auto m = ComputeMetrics(View(wire::kFloat32, a), View(wire::kFloat64, b), C(wire::kFloat32));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "The shape of bench(3) and npu(2) not equal.");
}

TEST(FloatTypesTest, HalfAndBFloat16RoundTripAndRound) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp::HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp::FloatToHalf(f), h) << "half bits " << h;
  }
  EXPECT_EQ(fp::FloatToHalf(65520.0f), 0x7C00);              // rounds to inf
  EXPECT_EQ(fp::FloatToHalf(65519.0f), 0x7BFF);              // largest finite
  EXPECT_DOUBLE_EQ(fp::Half::Round(1.0 + 1.0 / 4096), 1.0);  // tie below half-ULP rounds down
  EXPECT_EQ(fp::FloatToBFloat16(1.00390625f), 0x3F80);       // tie to even
  EXPECT_EQ(fp::FloatToBFloat16(1.01171875f), 0x3F82);       // tie to even, up
}

}  // namespace
}  // namespace parity::server
