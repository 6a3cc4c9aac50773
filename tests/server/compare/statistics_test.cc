// The statistics standard (outputs sent as statistics only): what passes, and what each failure
// says.
#include "server/compare/statistics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

common::TensorStatsValues Stats(double mean, double l2, double min, double max, uint64_t inf = 0,
                                uint64_t nan = 0) {
  common::TensorStatsValues s;
  s.any_finite = true;
  s.mean = mean;
  s.l2_norm = l2;
  s.min = min;
  s.max = max;
  s.inf_count = inf;
  s.nan_count = nan;
  return s;
}

constexpr uint64_t kNumel = 1 << 20;

TEST(StatisticsTest, TheBenchsOwnDistanceOrTheFloorPasses) {
  const common::TensorStatsValues golden = Stats(0.25, 512.0, -4.0, 4.0);
  const common::TensorStatsValues bench = Stats(0.25 + 1e-4, 512.05, -4.0, 4.0);
  const common::TensorStatsValues device = Stats(0.25 + 1.2e-4, 512.04, -4.0, 4.001);
  const OutputJudgement j =
      JudgeStatistics(device, &bench, &golden, wire::kFloat16, kNumel, StandardsTable::Default());
  EXPECT_EQ(StatusText(j.status), "pass") << j.message;
  EXPECT_EQ(j.standard, Standard::kStatistics);
  EXPECT_THAT(j.message, StartsWith("The device sent this output as statistics only"));
}

// An overflow: the device counts infs the bench does not. The message says so first.
TEST(StatisticsTest, AnInfTheBenchDoesNotHaveIsNamedFirst) {
  const common::TensorStatsValues golden = Stats(0.25, 512.0, -4.0, 4.0);
  const common::TensorStatsValues bench = Stats(0.25, 512.0, -4.0, 4.0);
  const common::TensorStatsValues device = Stats(0.25, 512.0, -4.0, 4.0, /*inf=*/3);
  const OutputJudgement j =
      JudgeStatistics(device, &bench, &golden, wire::kFloat16, kNumel, StandardsTable::Default());
  EXPECT_EQ(StatusText(j.status), "error");
  EXPECT_EQ(MetricName(j.failed_metric), "stats_inf_nan_count");
  EXPECT_THAT(j.message, StartsWith("ERROR: inf/NaN counts differ: device 3 inf and 0 NaN, bench "
                                    "0 inf and 0 NaN\n"));
}

// A statistic far from the golden, well beyond the bench's own distance: named with its value.
TEST(StatisticsTest, AStatisticOffNamesItself) {
  const common::TensorStatsValues golden = Stats(0.25, 512.0, -4.0, 4.0);
  const common::TensorStatsValues bench = Stats(0.25, 512.0, -4.0, 4.0);
  const common::TensorStatsValues device = Stats(0.35, 512.0, -4.0, 4.0);
  const OutputJudgement j =
      JudgeStatistics(device, &bench, &golden, wire::kFloat16, kNumel, StandardsTable::Default());
  EXPECT_EQ(StatusText(j.status), "error") << j.message;
  EXPECT_EQ(MetricName(j.failed_metric), "stats_mean");
  EXPECT_THAT(j.message, HasSubstr("ERROR: stats_mean is "));
  EXPECT_THAT(j.message, HasSubstr(" times the bench's own distance or floor "));
}

}  // namespace
}  // namespace parity::server
