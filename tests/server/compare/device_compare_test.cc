// The comparison on a CUDA device against the host's: every metric, every verdict and the inf/NaN
// scan agree for every dtype pair, standard and awkward value (NaN, inf, zeros, subnormals, values
// under the small-value threshold, values near the float64 range). The device cases need a GPU
// host (ctest label gpu: device_compare_tests_gpu); without one they skip. The placement errors
// run everywhere.
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/torch/dtype_map.h"
#include "common/torch/torch_pch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/compare/device_compare.h"
#include "server/compare/judge.h"
#include "server/compare/metric.h"

namespace parity::server {
namespace {

using ::testing::HasSubstr;

bool HaveGpu() { return internal::DeviceCompareBuilt() && at::hasCUDA(); }

#define PARITY_NEED_GPU()                                                           \
  if (!HaveGpu()) {                                                                 \
    GTEST_SKIP() << "no CUDA device in this libtorch, or a build without the CUDA " \
                    "compare: the device cases need a GPU host";                    \
  }

TensorView ViewOf(const at::Tensor& t) {
  TensorView v;
  v.dtype = *common::ToWireDType(t.scalar_type());
  v.shape.assign(t.sizes().begin(), t.sizes().end());
  v.data = t.data_ptr();
  v.numel = t.numel();
  v.cuda_device = t.device().is_cuda() ? t.device().index() : -1;
  return v;
}

// A reference of n float64 values with every awkward kind of value, and a tested side in `dtype`
// close to it: relative noise of `noise`, plus planted differences (an inf where the reference is
// finite, a NaN, a sign flip, a large error).
std::pair<at::Tensor, at::Tensor> Pair(int64_t n, at::ScalarType tested_dtype,
                                       at::ScalarType ref_dtype, double noise, double scale = 1) {
  at::manual_seed(n + 17 * static_cast<int>(tested_dtype));
  at::Tensor ref = at::randn({n}, at::kDouble) * scale;
  auto* r = ref.data_ptr<double>();
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {0.0, -0.0, 1e-9, -3e-7, 5e-41, inf, -inf, NAN, 1e5, 70000.0};
  for (int64_t i = 0; i < n; i += 97) r[i] = specials[(i / 97) % 10];
  at::Tensor tested = ref * (1 + noise * at::randn({n}, at::kDouble));
  auto* t = tested.data_ptr<double>();
  for (int64_t i = 13; i < n; i += 211)
    t[i] = (i / 211) % 3 == 0 ? inf : ((i / 211) % 3 == 1 ? NAN : -t[i]);
  for (int64_t i = 29; i < n; i += 503) t[i] += 1.0;
  return {tested.to(tested_dtype), ref.to(ref_dtype)};
}

const DTypeConstants& ConstantsOf(at::ScalarType t) {
  return *StandardsTable::Default().Constants(*common::ToWireDType(t));
}

// Counts and maxima agree exactly; sums up to their summation order: 1e-12 relative, or the host
// SIMD kernel's float32 runs' bound (32 * 2^-24, metrics_kernel_test.cc) where it adds a
// float16/bfloat16 output's errors in float32 first (the GPU adds every term in float64).
void ExpectSame(const PairMetrics& host, const PairMetrics& gpu, double sum_tolerance,
                const std::string& where) {
  auto same = [&](const char* name, double h, double g, double rel) {
    if (!std::isfinite(h) || !std::isfinite(g)) {  // NaN as NaN, inf as the same inf
      EXPECT_TRUE(std::isnan(h) ? std::isnan(g) : h == g)
          << where << ": " << name << " " << h << " vs " << g;
      return;
    }
    EXPECT_NEAR(h, g, rel * std::max(1.0, std::fabs(h))) << where << ": " << name;
  };
  EXPECT_EQ(host.numel, gpu.numel) << where;
  EXPECT_EQ(host.cosine_blank, gpu.cosine_blank) << where;
  EXPECT_EQ(host.cosine_one_side_zero, gpu.cosine_one_side_zero) << where;
  same("max_abs_reference", host.max_abs_reference, gpu.max_abs_reference, 0);
  for (Metric field : kPairFields) {  // every CSV column of the pair
    const std::optional<double> h = FieldValue(host, field), g = FieldValue(gpu, field);
    ASSERT_EQ(h.has_value(), g.has_value()) << where << ": " << MetricName(field);
    if (!h) continue;
    const bool sum =
        field == Metric::kRmse || field == Metric::kMeanRelError || field == Metric::kUlpMean;
    const double tolerance = field == Metric::kCosine ? 1e-12 : (sum ? sum_tolerance : 0);
    same(std::string(MetricName(field)).c_str(), *h, *g, tolerance);
  }
}

using DTypes = std::tuple<at::ScalarType, at::ScalarType>;  // tested, reference

class DeviceCompareTest : public ::testing::TestWithParam<DTypes> {};

TEST_P(DeviceCompareTest, EveryMetricAsOnTheHost) {
  PARITY_NEED_GPU();
  const auto [td, rd] = GetParam();
  const at::Device gpu(at::kCUDA, 0);
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, (int64_t{1} << 20) + 3}) {
    for (double noise : {0.0, 1e-4, 3e-2}) {
      const auto [t, r] = Pair(n, td, rd, noise);
      const at::Tensor tg = t.to(gpu), rg = r.to(gpu);
      const std::string where =
          absl::StrCat(c10::toString(td), " vs ", c10::toString(rd), ", n ", n, ", noise ", noise);
      absl::StatusOr<PairMetrics> host = ComputeMetrics(ViewOf(t), ViewOf(r), ConstantsOf(td));
      absl::StatusOr<PairMetrics> dev = ComputeMetrics(ViewOf(tg), ViewOf(rg), ConstantsOf(td));
      ASSERT_TRUE(host.ok()) << host.status();
      ASSERT_TRUE(dev.ok()) << dev.status();
      const bool float_runs = (td == at::kHalf || td == at::kBFloat16) && rd != at::kDouble;
      ExpectSame(*host, *dev, float_runs ? 32 * 0x1p-24 : 1e-12, where);
      const std::optional<NonFinite> h = FindDeviceNonFinite(ViewOf(t), ViewOf(r));
      const std::optional<NonFinite> g = FindDeviceNonFinite(ViewOf(tg), ViewOf(rg));
      ASSERT_EQ(h.has_value(), g.has_value()) << where;
      if (h) {
        EXPECT_EQ(NonFiniteMessage(*h), NonFiniteMessage(*g)) << where;
      }
    }
  }
}

// Every standard's verdict, with a bench between the device and the golden.
TEST_P(DeviceCompareTest, EveryStandardsVerdictAsOnTheHost) {
  PARITY_NEED_GPU();
  const auto [td, rd] = GetParam();
  if (rd != at::kDouble) GTEST_SKIP() << "the verdicts take a float64 golden";
  const at::Device gpu(at::kCUDA, 0);
  for (Standard standard : {Standard::kBenchmark, Standard::kUlp, Standard::kAbsoluteThreshold,
                            Standard::kThousandth, Standard::kTwoWay, Standard::kBinary}) {
    for (double noise : {0.0, 1e-3, 3e-2}) {
      const auto [device, golden] = Pair(4099, td, at::kDouble, noise);
      const at::Tensor bench = (golden * (1 + 1e-3 * at::randn({4099}, at::kDouble))).to(td);
      const at::Tensor dg = device.to(gpu), bg = bench.to(gpu), gg = golden.to(gpu);
      const TensorView dv = ViewOf(device), bv = ViewOf(bench), gv = ViewOf(golden);
      const TensorView dgv = ViewOf(dg), bgv = ViewOf(bg), ggv = ViewOf(gg);
      const OutputJudgement host = JudgeOutput(dv, &bv, &gv, standard, StandardsTable::Default());
      const OutputJudgement dev = JudgeOutput(dgv, &bgv, &ggv, standard, StandardsTable::Default());
      const std::string where =
          absl::StrCat(c10::toString(td), " ", StandardName(standard), ", noise ", noise);
      EXPECT_EQ(StatusText(host.status), StatusText(dev.status)) << where << "\n" << host.message;
      EXPECT_EQ(MetricName(host.failed_metric), MetricName(dev.failed_metric)) << where;
      EXPECT_EQ(StandardName(host.standard), StandardName(dev.standard)) << where;
      EXPECT_EQ(host.nonfinite.has_value(), dev.nonfinite.has_value()) << where;
      ASSERT_EQ(host.ratios.size(), dev.ratios.size()) << where;
      for (size_t i = 0; i < host.ratios.size(); ++i) {
        EXPECT_EQ(host.ratios[i].second.pass, dev.ratios[i].second.pass) << where;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, DeviceCompareTest,
    ::testing::Values(DTypes{at::kHalf, at::kDouble}, DTypes{at::kBFloat16, at::kDouble},
                      DTypes{at::kFloat, at::kDouble}, DTypes{at::kDouble, at::kDouble},
                      DTypes{at::kHalf, at::kFloat}, DTypes{at::kBFloat16, at::kFloat},
                      DTypes{at::kHalf, at::kHalf}, DTypes{at::kBFloat16, at::kBFloat16},
                      DTypes{at::kFloat, at::kFloat}),
    [](const ::testing::TestParamInfo<DTypes>& p) {
      return absl::StrCat(c10::toString(std::get<0>(p.param)), "_vs_",
                          c10::toString(std::get<1>(p.param)));
    });

// Values near the float64 range overflow the cosine's raw sums: both recompute it scaled.
TEST(DeviceCompareScaledCosine, AsOnTheHost) {
  PARITY_NEED_GPU();
  at::manual_seed(3);
  const at::Tensor r = at::randn({10000}, at::kDouble) * 1e200;
  const at::Tensor t = r * (1 + 1e-6 * at::randn({10000}, at::kDouble));
  const at::Tensor tg = t.to(at::kCUDA), rg = r.to(at::kCUDA);
  const DTypeConstants& c = ConstantsOf(at::kFloat);
  absl::StatusOr<PairMetrics> host = ComputeMetrics(ViewOf(t), ViewOf(r), c);
  absl::StatusOr<PairMetrics> dev = ComputeMetrics(ViewOf(tg), ViewOf(rg), c);
  ASSERT_TRUE(host.ok() && dev.ok());
  ASSERT_TRUE(std::isfinite(host->cosine)) << "the scaled pass gives a cosine";
  EXPECT_NEAR(host->cosine, dev->cosine, 1e-12);
  EXPECT_GT(dev->cosine, 0.999);
}

// Runs everywhere: a pair split between the host and a GPU, or not floating, is refused in words;
// a build without the CUDA compare says so instead of reading device memory.
TEST(DeviceComparePlacement, RefusedInWords) {
  std::vector<float> a(4, 1.0f), b(4, 1.0f);
  TensorView host{wire::kFloat32, {4}, a.data(), 4};
  TensorView gpu{wire::kFloat32, {4}, b.data(), 4, /*cuda_device=*/0};
  absl::StatusOr<PairMetrics> split = ComputeMetrics(host, gpu, ConstantsOf(at::kFloat));
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(std::string(split.status().message()), HasSubstr("one device"));
  std::vector<int32_t> ints(4, 1);
  TensorView int_gpu{wire::kInt32, {4}, ints.data(), 4, 0};
  EXPECT_FALSE(ComputeMetrics(int_gpu, int_gpu, ConstantsOf(at::kFloat)).ok());
  if (internal::DeviceCompareBuilt()) return;
  absl::StatusOr<PairMetrics> none = ComputeMetrics(gpu, gpu, ConstantsOf(at::kFloat));
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("without the CUDA compare"));
  EXPECT_FALSE(FindDeviceNonFinite(gpu, gpu).has_value());
}

}  // namespace
}  // namespace parity::server
