// The SIMD comparison kernel against the scalar one (the definition), on data built to hit every
// branch: normal values near their reference, small values, zeros of both signs, subnormals,
// infinities, NaNs and values near each dtype's maximum; and ComputeMetrics' independence from
// the number of threads.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "common/wire/dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/compare/accumulate.h"
#include "server/compare/float_types.h"
#include "server/compare/standards.h"

namespace parity::server::internal {
namespace {

namespace fp = parity::server::fp;

size_t ElementBytes(wire::DType d) { return d == wire::kFloat64 ? 8 : d == wire::kFloat32 ? 4 : 2; }

void Store(wire::DType d, std::vector<char>& buf, size_t i, double v) {
  switch (d) {
    case wire::kFloat64:
      std::memcpy(&buf[i * 8], &v, 8);
      break;
    case wire::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(&buf[i * 4], &f, 4);
      break;
    }
    case wire::kFloat16: {
      const uint16_t h = fp::FloatToHalf(static_cast<float>(v));
      std::memcpy(&buf[i * 2], &h, 2);
      break;
    }
    default: {
      const uint16_t b = fp::FloatToBFloat16(static_cast<float>(v));
      std::memcpy(&buf[i * 2], &b, 2);
      break;
    }
  }
}

// Pairs (reference, tested-offset) covering every branch of the pass. `sparse`: each special
// kind is rare (one element in about 256), as in real outputs, so most groups of elements are
// finite throughout (the SIMD kernel's fast path for float16/bfloat16) and a few are not.
std::vector<std::pair<double, double>> Values(int n, uint32_t seed, bool sparse = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> kind(0, 25);
  std::uniform_real_distribution<double> unit;
  std::uniform_int_distribution<int> binade(-150, 128);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<double, double>> out;
  for (int i = 0; i < n; ++i) {
    const double r = normal(rng);
    int k = kind(rng);
    if (sparse && unit(rng) > 1.0 / 256) {
      constexpr int kFinite[] = {0, 1, 2, 10, 11, 25};  // finite in every dtype
      k = kFinite[k % 6];
    }
    switch (k) {
      case 0:
        out.emplace_back(0.0, -0.0);
        break;
      case 1:
        out.emplace_back(r * 1e-7, r * 1e-7 * 1.5);
        break;  // small values
      case 2:
        out.emplace_back(r * 1e-42, r * 3e-42);
        break;  // subnormal in float32
      case 3:
        out.emplace_back(inf, inf);
        break;
      case 4:
        out.emplace_back(inf, -inf);
        break;
      case 5:
        out.emplace_back(nan, nan);
        break;
      case 6:
        out.emplace_back(r, nan);
        break;
      case 7:
        out.emplace_back(nan, r);
        break;
      case 8:
        out.emplace_back(60000.0 * r, 70000.0 * r);
        break;  // float16 overflow
      case 9:
        out.emplace_back(r * 1e300, r * 1e300 * (1 + 1e-9));
        break;  // near float64 max
      case 10:
        out.emplace_back(r, r * (1 + 1e-2));
        break;
      case 11:
        out.emplace_back(r, r * (1 + 1e-5));
        break;
      case 12:
        out.emplace_back(r * 1e-30, r * 1e38);
        break;  // a huge error on a tiny reference: its ULP error is beyond float32
      case 13:
        out.emplace_back(r * 1e-39, r * 1e-3);
        break;  // a float32-subnormal reference
      case 14:
        out.emplace_back(r * 1e30, r * 1e30 * (1 + 1e-3));
        break;  // a large reference: a negative ULP exponent
      case 15: {
        // References about where rounding to float16 overflows (65520) or to bfloat16
        // (0x1.ffp127), either side of it and on it.
        const double edge = i % 2 == 0 ? 65520.0 : 0x1.ffp127;
        const double ref = edge * (1 + (unit(rng) - 0.5) * 1e-3);
        out.emplace_back(i % 3 == 0 ? edge : ref, ref);
        break;
      }
      case 16:
        out.emplace_back(r * 1e-310, r * 1e-310 * (1 + 1e-3));
        break;  // a float64-subnormal reference (zero in the narrower dtypes)
      case 17: {
        // Any float32 binade, subnormals to the largest: where each dtype's rounding overflows,
        // flushes to zero or keeps its last bits.
        const double ref = std::ldexp(r, binade(rng));
        out.emplace_back(ref, ref * (1 + 1e-3 * unit(rng)));
        break;
      }
      default:
        out.emplace_back(r, r * (1 + 1e-7 * normal(rng)));
        break;
    }
  }
  return out;
}

// The float16/bfloat16 pass (a device of those dtypes against a reference of at most float32)
// adds its non-negative float32 terms (rel_err, squared abs_err, ULP error) in float32 for runs
// of at most 32 groups before float64: each run's sum is within 32 * 2^-24 of its exact value
// (31 additions, and the square's rounding), so the whole sum is too.
constexpr double kFloatRunTolerance = 32 * 0x1p-24;

bool SumsInFloatRuns(wire::DType td, wire::DType rd) {
  return (td == wire::kFloat16 || td == wire::kBFloat16) && rd != wire::kFloat64;
}

// `float_runs`: the SIMD kernel summed rel_err, squared abs_err and the ULP error in float32
// runs (SumsInFloatRuns).
void ExpectSame(const Accumulator& s, const Accumulator& v, bool float_runs = false) {
  // Counts, flags and maxima are computed element by element: identical.
  EXPECT_EQ(s.hundredth, v.hundredth);
  EXPECT_EQ(s.thousandth, v.thousandth);
  EXPECT_EQ(s.ten_thousandth, v.ten_thousandth);
  EXPECT_EQ(s.mismatches, v.mismatches);
  EXPECT_EQ(s.above, v.above);
  EXPECT_EQ(s.below, v.below);
  EXPECT_EQ(s.n_masked, v.n_masked);
  EXPECT_EQ(s.n_small, v.n_small);
  EXPECT_EQ(s.small_bench_fail, v.small_bench_fail);
  EXPECT_EQ(s.small_abs_fail, v.small_abs_fail);
  EXPECT_EQ(s.n_normal, v.n_normal);
  EXPECT_EQ(s.rel_fail, v.rel_fail);
  EXPECT_EQ(s.n_inf_nan, v.n_inf_nan);
  EXPECT_EQ(s.inf_nan_fail, v.inf_nan_fail);
  EXPECT_EQ(s.ulp_over, v.ulp_over);
  EXPECT_EQ(s.nan_error, v.nan_error);
  EXPECT_EQ(s.ulp_nan, v.ulp_nan);
  EXPECT_EQ(s.max_abs_tested, v.max_abs_tested);
  EXPECT_EQ(s.max_abs_ref, v.max_abs_ref);
  EXPECT_EQ(s.max_abs_error, v.max_abs_error);
  EXPECT_EQ(s.max_rel, v.max_rel);
  EXPECT_EQ(s.ulp_max, v.ulp_max);
  // Sums differ only in the order of additions, and the float32 runs' rounding.
  for (auto [a, b, runs] : {std::tuple{s.dot, v.dot, false},
                            {s.norm_t, v.norm_t, false},
                            {s.norm_r, v.norm_r, false},
                            {s.sum_sq_masked, v.sum_sq_masked, float_runs},
                            {s.sum_rel, v.sum_rel, float_runs},
                            {s.ulp_sum, v.ulp_sum, float_runs}}) {
    if (std::isfinite(a)) {
      // Float32 runs: relative to the sum itself, whose terms are all >= 0.
      EXPECT_NEAR(a, b,
                  runs ? kFloatRunTolerance * std::fabs(a) : 1e-12 * std::max(1.0, std::fabs(a)));
    } else {
      EXPECT_EQ(std::isnan(a), std::isnan(b));
      if (!std::isnan(a)) {
        EXPECT_EQ(a, b);
      }
    }
  }
}

void ExpectKernelMatchesScalar(Kernel simd, void (*tune)(DTypeConstants&) = nullptr,
                               bool sparse = false);

constexpr char kNoSimd[] = "no SIMD kernel in this build: the scalar kernel is used";

// A device `t` of dtype `td` against a reference `r` of dtype `rd` (n elements, the standards
// table's constants for `td`, `tune`d): every SIMD kernel must give the scalar kernel's results.
// Returns the scalar kernel's, for the test to check that its data reached the case it is about.
Accumulator ExpectSimdMatchesScalarOn(wire::DType td, wire::DType rd, const std::vector<char>& t,
                                      const std::vector<char>& r, size_t n, double eps,
                                      void (*tune)(DTypeConstants&) = nullptr) {
  DTypeConstants c = *StandardsTable::Default().Constants(td);
  if (tune != nullptr) tune(c);
  Accumulator scalar;
  ScalarKernel(td, rd, t.data(), r.data(), 0, n, c, eps, scalar);
  for (const NamedKernel& k : SimdKernels()) {
    SCOPED_TRACE(k.name);
    Accumulator vector;
    k.kernel(td, rd, t.data(), r.data(), 0, n, c, eps, vector);
    ExpectSame(scalar, vector, SumsInFloatRuns(td, rd));
  }
  return scalar;
}

// The same for a float16/bfloat16 device against a float32 reference.
Accumulator ExpectSimdMatchesScalarOnFloat32Reference(wire::DType td, const std::vector<char>& t,
                                                      const std::vector<char>& r, size_t n,
                                                      double eps,
                                                      void (*tune)(DTypeConstants&) = nullptr) {
  return ExpectSimdMatchesScalarOn(td, wire::kFloat32, t, r, n, eps, tune);
}

TEST(MetricsKernelTest, SimdMatchesScalarOnEveryBranch) {
  const std::vector<NamedKernel> kernels = SimdKernels();
  if (kernels.empty()) GTEST_SKIP() << kNoSimd;
  for (const NamedKernel& k : kernels) {
    SCOPED_TRACE(k.name);
    ExpectKernelMatchesScalar(k.kernel);
  }
}

TEST(MetricsKernelTest, SimdMatchesScalarOnMostlyFiniteData) {
  const std::vector<NamedKernel> kernels = SimdKernels();
  if (kernels.empty()) GTEST_SKIP() << kNoSimd;
  for (const NamedKernel& k : kernels) {
    SCOPED_TRACE(k.name);
    ExpectKernelMatchesScalar(k.kernel, nullptr, /*sparse=*/true);
  }
}

// The float32 pass compares float32 errors with float64 thresholds (1e-2, 1e-3, 1e-4 are not
// float32 values) through the nearest float32 bounds: relative errors equal to the float32 just
// below and just above each threshold must count as the scalar kernel counts them.
TEST(MetricsKernelTest, SimdMatchesScalarOnEitherSideOfTheRatioThresholds) {
  if (SimdKernels().empty()) GTEST_SKIP() << kNoSimd;
  const double eps = 1e-7;
  const float eps_f = static_cast<float>(eps);
  // A device 0 against a tiny positive reference r: rel = r / (r + eps) in float32, as the
  // scalar kernel computes it; it grows with r, so a scan of the float32 values of r around
  // x * eps / (1 - x) finds the ones whose rel is each float32 next to x.
  std::vector<float> refs;
  for (double x : {1e-2, 1e-3, 1e-4}) {
    float lo = static_cast<float>(x);  // the float32 just below x, then just above
    if (lo > x) lo = std::nextafter(lo, 0.0f);
    const float hi = std::nextafter(lo, 1.0f);
    ASSERT_LT(lo, x);
    ASSERT_GT(hi, x);
    bool found_lo = false, found_hi = false;
    float r = std::nextafter(static_cast<float>(x * eps / (1 - x)), 0.0f);
    for (int step = 0; step < 4096; ++step) r = std::nextafter(r, 0.0f);
    for (int step = 0; step < 8192; ++step, r = std::nextafter(r, 1.0f)) {
      const float rel = r / (r + eps_f);
      if (rel == lo || rel == hi) refs.push_back(r);
      found_lo |= rel == lo;
      found_hi |= rel == hi;
    }
    ASSERT_TRUE(found_lo && found_hi) << x;
  }
  for (wire::DType td : {wire::kFloat16, wire::kBFloat16}) {
    SCOPED_TRACE(std::string(common::TorchName(td)));
    // Repeated to fill whole vectors of the float32 pass.
    const size_t n = refs.size() * 16;
    std::vector<char> t(n * ElementBytes(td)), r(n * 4);
    for (size_t i = 0; i < n; ++i) {
      Store(td, t, i, 0.0);
      Store(wire::kFloat32, r, i, refs[i % refs.size()]);
    }
    const Accumulator scalar = ExpectSimdMatchesScalarOnFloat32Reference(td, t, r, n, eps);
    EXPECT_GT(scalar.hundredth, 0);
    EXPECT_LT(scalar.ten_thousandth, static_cast<int64_t>(n));
  }
}

// A finite float32 reference that rounds to infinity in the device's dtype (float16 from 65520,
// bfloat16 from 0x1.ffp127) makes its element inf/nan for the rules, though err and the ULP error
// are finite: each such reference, alone among finite values in its group, must be judged as the
// scalar kernel judges it, on either side of the rounding's edge.
TEST(MetricsKernelTest, SimdMatchesScalarWhereTheReferenceRoundsToInfinity) {
  if (SimdKernels().empty()) GTEST_SKIP() << kNoSimd;
  for (wire::DType td : {wire::kFloat16, wire::kBFloat16}) {
    SCOPED_TRACE(std::string(common::TorchName(td)));
    const bool half = td == wire::kFloat16;
    const float edge = half ? 65520.0f : 0x1.ffp127f;
    const float largest = half ? 65504.0f : 0x1.fep127f;  // the dtype's largest finite value
    std::vector<float> refs = {largest, std::numeric_limits<float>::max()};
    float below = edge, above = edge;
    for (int i = 0; i < 3; ++i) {
      below = std::nextafter(below, 0.0f);
      above = std::nextafter(above, std::numeric_limits<float>::infinity());
      refs.push_back(below);
      refs.push_back(above);
    }
    refs.push_back(edge);
    if (half) refs.insert(refs.end(), {65535.0f, 65536.0f, 65600.0f, 1e6f});
    // One edge reference per group of 32 (a whole float32-lane group on either ISA), the device
    // at its largest finite value there; the rest ordinary values.
    const size_t group = 32, n = refs.size() * group;
    std::vector<char> t(n * ElementBytes(td)), r(n * 4);
    std::mt19937 rng(7);
    std::normal_distribution<double> normal;
    for (size_t i = 0; i < n; ++i) {
      const double v = normal(rng);
      const bool edge_element = i % group == 5;
      Store(wire::kFloat32, r, i, edge_element ? refs[i / group] : v);
      Store(td, t, i, edge_element ? largest : v * (1 + 1e-3));
    }
    const Accumulator scalar = ExpectSimdMatchesScalarOnFloat32Reference(td, t, r, n, 1e-7);
    EXPECT_GT(scalar.n_inf_nan, 0);                                  // the edge was crossed
    EXPECT_LT(scalar.n_inf_nan, static_cast<int64_t>(refs.size()));  // and not always
  }
}

// The float16/bfloat16 pass sums in float32 runs: bfloat16 errors near 1e20 square beyond
// float32's range, where the scalar kernel's float64 sum is finite. The kernel must find that and
// sum those blocks in float64, counting once the groups it had already taken through its slow path
// (a NaN in the first group of some blocks).
TEST(MetricsKernelTest, SimdMatchesScalarWhereFloat32SumsWouldOverflow) {
  if (SimdKernels().empty()) GTEST_SKIP() << kNoSimd;
  const wire::DType td = wire::kBFloat16;
  const size_t n = 3 * 4096 + 5;
  std::vector<char> t(n * 2), r(n * 4);
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  for (size_t i = 0; i < n; ++i) {
    // Ordinary values, then a stretch whose errors (about 1e20) overflow float32 when squared.
    const bool huge = i >= 4096 && i < 2 * 4096 + 100;
    const double v = normal(rng) * (huge ? 1e21 : 1.0);
    Store(wire::kFloat32, r, i, v);
    Store(td, t, i, i % 2048 == 3 && i < 8192 ? std::nan("") : v * (1 + 0.1 * normal(rng)));
  }
  const Accumulator scalar = ExpectSimdMatchesScalarOnFloat32Reference(td, t, r, n, 1e-7);
  EXPECT_TRUE(std::isfinite(scalar.sum_sq_masked));
  EXPECT_GT(scalar.sum_sq_masked, 1e40);  // beyond float32 (3.4e38)
}

// The fast passes add up a run of groups with no branch per group, and take the run again group
// by group when one of its groups is slow. The slow groups here are finite: references that round
// to infinity in the device's dtype (float16: 70000 as float32; float32: 1e39 as float64), so no
// sum turns inf or NaN, which would send the run or the block elsewhere and hide a group counted
// twice. They sit at the start, middle and end of runs (32 groups: 128 to 512 elements) and of
// blocks (2048), with more in one block than a pass takes through its slow path (the rest of that
// block goes to the float64 passes).
TEST(MetricsKernelTest, SimdMatchesScalarWhereRunsHoldFiniteSlowGroups) {
  if (SimdKernels().empty()) GTEST_SKIP() << kNoSimd;
  const size_t n = 4 * 2048 + 7;
  std::vector<bool> edge(n);
  for (size_t i : {0, 127, 128, 200, 255, 256, 511, 512, 1023, 2047, 3 * 2048 + 1000}) {
    edge[i] = true;
  }
  for (size_t i = 2048; i < 2048 + 12 * 64; i += 64) edge[i] = true;  // 12 groups in block 1
  struct Case {
    wire::DType td, rd;
    double edge_ref, edge_device;
  };
  for (const Case& k :
       {Case{wire::kFloat16, wire::kFloat32, 70000.0, 65504.0},
        Case{wire::kFloat32, wire::kFloat64, 1e39, std::numeric_limits<float>::max()}}) {
    SCOPED_TRACE(std::string(common::TorchName(k.td)));
    std::vector<char> t(n * ElementBytes(k.td)), r(n * ElementBytes(k.rd));
    std::mt19937 rng(13);
    std::normal_distribution<double> normal;
    int64_t edges = 0;
    for (size_t i = 0; i < n; ++i) {
      const double v = normal(rng);
      edges += edge[i];
      Store(k.rd, r, i, edge[i] ? k.edge_ref : v);
      Store(k.td, t, i, edge[i] ? k.edge_device : v * (1 + 1e-3 * normal(rng)));
    }
    const Accumulator scalar = ExpectSimdMatchesScalarOn(k.td, k.rd, t, r, n, 1e-7);
    EXPECT_EQ(scalar.n_inf_nan, edges);
    EXPECT_EQ(scalar.n_small + scalar.n_normal + scalar.n_inf_nan, static_cast<int64_t>(n));
  }
}

// With a tuned ULP exponent floor (min_exponent 110: every |r| below 2^110 counts as 2^110), a
// bfloat16 rounding error on references near 1e-8 has a ULP error below float32's normal range,
// which the float32 pass cannot compute exactly: every group is slow, from the first run on.
TEST(MetricsKernelTest, SimdMatchesScalarWhereUlpErrorsAreBelowFloat32Normals) {
  if (SimdKernels().empty()) GTEST_SKIP() << kNoSimd;
  const wire::DType td = wire::kBFloat16;
  const size_t n = 2 * 2048;
  std::vector<char> t(n * 2), r(n * 4);
  std::mt19937 rng(17);
  std::normal_distribution<double> normal;
  for (size_t i = 0; i < n; ++i) {
    const double v = 1e-8 * normal(rng);
    Store(wire::kFloat32, r, i, v);
    Store(td, t, i, v * (1 + 1e-3 * normal(rng)));
  }
  const Accumulator scalar = ExpectSimdMatchesScalarOnFloat32Reference(
      td, t, r, n, 1e-7, [](DTypeConstants& c) { c.ulp_min_exponent = 110; });
  EXPECT_GT(scalar.ulp_max, 0);
  EXPECT_LT(scalar.ulp_max, std::numeric_limits<float>::min());
}

// The ULP constants come from the standards file and may be tuned: values outside what the
// narrow types' float32 pass handles (min_e below -126, other mantissa widths) must give the
// scalar kernel's results too.
TEST(MetricsKernelTest, SimdMatchesScalarWithTunedUlpConstants) {
  const std::vector<NamedKernel> kernels = SimdKernels();
  if (kernels.empty()) GTEST_SKIP() << kNoSimd;
  for (auto tune : std::vector<void (*)(DTypeConstants&)>{
           [](DTypeConstants& c) { c.ulp_min_exponent = -149; },
           // The standards file's lowest: below float64's normals, so e comes from a
           // float64-subnormal reference's own exponent.
           [](DTypeConstants& c) { c.ulp_min_exponent = -1100; },
           [](DTypeConstants& c) { c.ulp_min_exponent = 4; },
           [](DTypeConstants& c) { c.ulp_mantissa_bits = 23; },
           [](DTypeConstants& c) { c.ulp_mantissa_bits = 0; },
           // Not a float32: rounds up to 1.0f, which a one-ulp error equals.
           [](DTypeConstants& c) { c.ulp_threshold = 0.99999999; },
           // Beyond float32's range either way: no error is over, or every finite one is.
           [](DTypeConstants& c) { c.ulp_threshold = 1e300; },
           [](DTypeConstants& c) { c.ulp_threshold = -1e300; }}) {
    for (const NamedKernel& k : kernels) {
      SCOPED_TRACE(k.name);
      ExpectKernelMatchesScalar(k.kernel, tune);
      ExpectKernelMatchesScalar(k.kernel, tune, /*sparse=*/true);
    }
  }
}

void ExpectKernelMatchesScalar(Kernel simd, void (*tune)(DTypeConstants&), bool sparse) {
  const auto& table = StandardsTable::Default();
  const wire::DType types[] = {wire::kFloat16, wire::kBFloat16, wire::kFloat32, wire::kFloat64};
  for (wire::DType td : types) {
    for (wire::DType rd : types) {
      SCOPED_TRACE(std::string(common::TorchName(td)) + " vs " +
                   std::string(common::TorchName(rd)));
      const int n = 4099;  // a tail of 3 after the vectors
      const auto values = Values(n, static_cast<uint32_t>(td * 16 + rd), sparse);
      std::vector<char> t(n * ElementBytes(td)), r(n * ElementBytes(rd));
      for (int i = 0; i < n; ++i) {
        Store(rd, r, i, values[i].first);
        Store(td, t, i, values[i].second);
      }
      DTypeConstants c = *table.Constants(td);
      if (tune != nullptr) tune(c);
      for (auto [begin, end] :
           {std::pair<int64_t, int64_t>{0, n}, {5, n}, {1, 7}, {5, 6}, {3, 3}}) {
        Accumulator scalar, vector;
        ScalarKernel(td, rd, t.data(), r.data(), begin, end, c, 1e-7, scalar);
        simd(td, rd, t.data(), r.data(), begin, end, c, 1e-7, vector);
        ExpectSame(scalar, vector, SumsInFloatRuns(td, rd));
      }
    }
  }
}

// ctest runs these tests as the CPU allows (the best SIMD kernel) and with
// PARITY_COMPARE_KERNEL naming each other kernel (tests/CMakeLists.txt).
TEST(MetricsKernelTest, ActiveKernelFollowsTheCpuAndTheOverride) {
  const char* env = std::getenv("PARITY_COMPARE_KERNEL");
  const std::string wanted = env != nullptr ? env : "";
  const std::vector<NamedKernel> simd = SimdKernels();
  Kernel expected = simd.empty() || wanted == "scalar" ? &ScalarKernel : simd.front().kernel;
  for (const NamedKernel& k : simd) {
    if (wanted == k.name) expected = k.kernel;
  }
  EXPECT_EQ(ActiveKernel(), expected);
}

TEST(MetricsKernelTest, AnUnknownKernelNameFallsBackToTheBestWithAWarning) {
  const std::vector<NamedKernel> simd = SimdKernels();
  const Kernel best = simd.empty() ? &ScalarKernel : simd.front().kernel;
  std::string warning;
  EXPECT_EQ(ChooseKernel("", simd, &warning), best);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(ChooseKernel("scalar", simd, &warning), &ScalarKernel);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(ChooseKernel("avx-512", simd, &warning), best);
  EXPECT_THAT(warning, ::testing::StartsWith("PARITY_COMPARE_KERNEL=avx-512 is not a kernel this "
                                             "CPU can run (scalar"));
  // A CPU without SIMD kernels: a SIMD name is refused the same way.
  warning.clear();
  EXPECT_EQ(ChooseKernel("avx2", {}, &warning), &ScalarKernel);
  EXPECT_EQ(warning,
            "PARITY_COMPARE_KERNEL=avx2 is not a kernel this CPU can run (scalar); "
            "using scalar");
}

TEST(MetricsKernelTest, ResultsDoNotDependOnTheNumberOfThreads) {
  const int64_t n = int64_t{1} << 20;
  // Each kernel path: float32 (its fused pass), float16 and bfloat16 (the float32-lane pass).
  for (auto [td, rd] : {std::pair{wire::kFloat32, wire::kFloat64},
                        {wire::kFloat16, wire::kFloat32},
                        {wire::kBFloat16, wire::kFloat32}}) {
    SCOPED_TRACE(std::string(common::TorchName(td)));
    std::vector<char> t(n * ElementBytes(td)), r(n * ElementBytes(rd));
    std::mt19937 rng(7);
    std::normal_distribution<double> normal;
    for (int64_t i = 0; i < n; ++i) {
      const double v = normal(rng);
      Store(rd, r, i, v);
      Store(td, t, i, v * (1 + 1e-3 * normal(rng)));
    }
    const TensorView tt{td, {n}, t.data(), n};
    const TensorView rr{rd, {n}, r.data(), n};
    const DTypeConstants& c = *StandardsTable::Default().Constants(td);
    const int saved = CompareThreads();
    SetCompareThreads(1);
    const PairMetrics one = *ComputeMetrics(tt, rr, c);
    SetCompareThreads(4);
    const PairMetrics four = *ComputeMetrics(tt, rr, c);
    SetCompareThreads(saved);
    EXPECT_GT(one.rmse, 0);
    EXPECT_EQ(std::memcmp(&one, &four, sizeof(PairMetrics)), 0);
  }
}

}  // namespace
}  // namespace parity::server::internal
