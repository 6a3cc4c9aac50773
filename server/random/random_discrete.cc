// The random_property standard's judges of discrete draws: integers on a range, geometric,
// Poisson, permutations, categories; and rrelu's slopes.
#include "server/random/random_property.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/random/random_report.h"

namespace parity::server {

using random_internal::DiscreteCdfDistance;
using random_internal::IsInteger;
using random_internal::kCdfPoints;
using random_internal::kFloatProbability;
using random_internal::kInf;
using random_internal::Report;
using random_internal::UniformCdfDistance;
using random_internal::Widen;

OutputJudgement JudgeDiscreteUniform(const Draws& d, double low, double high, double alpha) {
  const bool spread = high > low;
  Report r(alpha, spread ? 2 : 0);
  r.Put("samples", static_cast<double>(d.n));
  uint64_t bad = 0;
  double sum = 0;
  std::vector<double> ok;
  ok.reserve(static_cast<std::size_t>(d.n));
  for (int64_t i = 0; i < d.n; ++i) {
    const double y = d.values[i];
    if (!IsInteger(y) || y < low || y > high) {
      ++bad;
      continue;
    }
    ok.push_back(y);
    if (spread) sum += (y - low) / (high - low);
  }
  r.Exact(Metric::kRandomSupport, "support", bad,
          absl::StrFormat("values are not integers in [%.17g, %.17g]", low, high));
  const double n = static_cast<double>(ok.size());
  if (!spread || n == 0) return std::move(r).Done();
  const double ta = r.test_alpha();
  const double values = high - low + 1;
  // Rounding of a float dtype's large integers, relative to the range.
  const double e = d.unit_roundoff * std::max(std::fabs(low), std::fabs(high)) / (high - low);
  const double eps = HoeffdingEpsilon(n, ta);
  r.Within(Metric::kRandomMean, "mean", sum / n, 0.5, Widen({0.5 - eps, 0.5 + eps}, e),
           "mean of (value - low) / (high - low)");
  std::vector<double> t, cdf;
  const int points = static_cast<int>(std::min<double>(kCdfPoints, values - 1));
  for (int j = 1; j <= points; ++j) {
    const double at = low + std::floor(j * values / (points + 1)) - 1;
    if (!t.empty() && at <= t.back()) continue;
    t.push_back(at);
    cdf.push_back((at - low + 1) / values);
  }
  Draws kept{ok.data(), static_cast<int64_t>(ok.size()), d.unit_roundoff};
  r.AtMost(Metric::kRandomCdf, "cdf_distance", DiscreteCdfDistance(kept, t, cdf),
           DkwEpsilon(n, ta) + 2 * e,
           "largest distance between the draws' empirical CDF and the distribution's");
  return std::move(r).Done();
}

OutputJudgement JudgeGeometric(const Draws& d, double p, double alpha) {
  const bool spread = p > 0 && p < 1;
  Report r(alpha, spread ? 1 : 0);
  r.Put("samples", static_cast<double>(d.n));
  uint64_t bad = 0;
  std::vector<double> ok;
  for (int64_t i = 0; i < d.n; ++i) {
    const double y = d.values[i];
    const bool fits = IsInteger(y) && y >= 1 && (spread || y == 1);
    if (fits) {
      ok.push_back(y);
    } else {
      ++bad;
    }
  }
  r.Exact(Metric::kRandomSupport, "support", bad,
          spread ? "values are not integers >= 1" : "values differ from 1 (p = 1)");
  if (!spread || ok.empty()) return std::move(r).Done();
  std::vector<double> t, cdf;
  for (int j = 1; j <= kCdfPoints; ++j) {
    const double target = static_cast<double>(j) / (kCdfPoints + 1);
    // The smallest k with 1 - (1-p)^k >= target.
    const double k = std::max(1.0, std::ceil(std::log1p(-target) / std::log1p(-p) - 1e-9));
    if (!t.empty() && k <= t.back()) continue;
    t.push_back(k);
    cdf.push_back(-std::expm1(k * std::log1p(-p)));
  }
  Draws kept{ok.data(), static_cast<int64_t>(ok.size()), 0};
  const double n = static_cast<double>(ok.size());
  r.AtMost(Metric::kRandomCdf, "cdf_distance", DiscreteCdfDistance(kept, t, cdf),
           DkwEpsilon(n, r.test_alpha()) + 2 * d.unit_roundoff,
           "largest distance between the draws' empirical CDF and the distribution's");
  return std::move(r).Done();
}

OutputJudgement JudgePoisson(const Draws& d, const PerElement& rates, double alpha) {
  uint64_t bad = 0;
  double sum = 0, lambda = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const double y = d.values[i], l = rates.at(i);
    if (!IsInteger(y) || y < 0 || (l == 0 && y != 0)) {
      ++bad;
      continue;
    }
    if (l > 0 && std::isfinite(l)) {
      sum += y;
      lambda += l;
    }
  }
  Report r(alpha, lambda > 0 ? 1 : 0);
  r.Put("samples", static_cast<double>(d.n));
  r.Exact(Metric::kRandomSupport, "support", bad,
          "values are not non-negative integers (or not 0 where the rate is 0)");
  if (lambda > 0) {
    r.Within(Metric::kRandomMean, "total_over_rates", sum / lambda, 1,
             Widen(PoissonRatioBounds(lambda, r.test_alpha()), 4 * d.unit_roundoff),
             "sum of draws / sum of rates");
  }
  return std::move(r).Done();
}

OutputJudgement JudgeRandperm(const Draws& d, int64_t n) {
  Report r(0, 0);
  r.Put("samples", static_cast<double>(d.n));
  uint64_t bad = 0, repeated = 0;
  std::vector<bool> seen(static_cast<std::size_t>(std::max<int64_t>(n, 0)), false);
  for (int64_t i = 0; i < d.n; ++i) {
    const double y = d.values[i];
    if (!IsInteger(y) || y < 0 || y >= static_cast<double>(n)) {
      ++bad;
      continue;
    }
    const auto at = static_cast<std::size_t>(y);
    if (seen[at]) {
      ++repeated;
    } else {
      seen[at] = true;
    }
  }
  r.Exact(Metric::kRandomSupport, "support", bad,
          absl::StrCat("values are not integers in [0, ", n, ")"));
  r.Exact(Metric::kRandomPermutation, "repeat", repeated, "values are repeated");
  const uint64_t missing_count = static_cast<uint64_t>(
      d.n != n ? std::llabs(static_cast<long long>(d.n - n)) : 0);  // NOLINT(runtime/int)
  r.Exact(Metric::kRandomPermutation, "length", missing_count,
          absl::StrCat("values more or fewer than n = ", n));
  return std::move(r).Done();
}

namespace {

// multinomial's draws counted per category, with what a correct generator is expected to give:
// every draw with replacement, each row's first without.
struct CategoryCounts {
  uint64_t bad = 0, repeated = 0;
  std::vector<double> counts, expected;
  double trials = 0;
};

CategoryCounts CountCategories(const Draws& d, const double* weights, int64_t rows,
                               int64_t categories, int64_t samples, bool replacement) {
  CategoryCounts k;
  uint64_t& bad = k.bad;
  uint64_t& repeated = k.repeated;
  std::vector<double>& counts = k.counts;
  std::vector<double>& expected = k.expected;
  double& trials = k.trials;
  counts.assign(static_cast<std::size_t>(categories), 0.0);
  expected.assign(static_cast<std::size_t>(categories), 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    const double* w = weights + row * categories;
    double total = 0;
    for (int64_t c = 0; c < categories; ++c) total += w[c] > 0 ? w[c] : 0;
    const int64_t counted = replacement ? samples : std::min<int64_t>(samples, 1);
    std::unordered_set<int64_t> in_row;
    for (int64_t s = 0; s < samples; ++s) {
      const double y = d.values[row * samples + s];
      if (!IsInteger(y) || y < 0 || y >= static_cast<double>(categories) ||
          !(w[static_cast<int64_t>(y)] > 0)) {
        ++bad;
        continue;
      }
      if (!replacement && !in_row.insert(static_cast<int64_t>(y)).second) ++repeated;
      if (s < counted) counts[static_cast<std::size_t>(y)] += 1;
    }
    if (total > 0) {
      for (int64_t c = 0; c < categories; ++c) {
        expected[static_cast<std::size_t>(c)] += counted * (w[c] > 0 ? w[c] : 0) / total;
      }
      trials += static_cast<double>(counted);
    }
  }
  return k;
}

}  // namespace

OutputJudgement JudgeMultinomial(const Draws& d, const double* weights, int64_t rows,
                                 int64_t categories, int64_t samples, bool replacement,
                                 double alpha) {
  const CategoryCounts k = CountCategories(d, weights, rows, categories, samples, replacement);
  const std::vector<double>& counts = k.counts;
  const std::vector<double>& expected = k.expected;
  const double trials = k.trials;
  int tests = 0;
  for (double e : expected) tests += e > 0 && e < trials;
  Report r(alpha, tests);
  r.Put("samples", static_cast<double>(d.n));
  r.Exact(Metric::kRandomSupport, "support", k.bad,
          "indices are outside the categories or name a category of weight 0");
  if (!replacement) {
    r.Exact(Metric::kRandomPermutation, "repeat", k.repeated,
            "indices repeat within a row drawn without replacement");
  }
  if (tests == 0) return std::move(r).Done();
  // Every category's count (over all rows; without replacement, of each row's first draw).
  double worst = -kInf;
  int64_t worst_c = 0;
  Interval worst_bound;
  for (int64_t c = 0; c < categories; ++c) {
    const double e = expected[static_cast<std::size_t>(c)];
    if (!(e > 0 && e < trials)) continue;
    const Interval b =
        Widen(BinomialRateBounds(trials, e / trials, r.test_alpha()), kFloatProbability);
    const double rate = counts[static_cast<std::size_t>(c)] / trials;
    const double excess = rate < b.low ? (b.low - rate) : rate > b.high ? (rate - b.high) : -1;
    if (excess > worst) {
      worst = excess;
      worst_c = c;
      worst_bound = b;
    }
  }
  const double e = expected[static_cast<std::size_t>(worst_c)];
  r.Put("category", static_cast<double>(worst_c));
  r.Within(Metric::kRandomFrequency, "frequency",
           counts[static_cast<std::size_t>(worst_c)] / trials, e / trials, worst_bound,
           absl::StrCat("share of category ", worst_c,
                        " (the one nearest to or farthest past its bound)"));
  return std::move(r).Done();
}

OutputJudgement JudgeRrelu(const double* x, const Draws& out, double lower, double upper,
                           bool training, double alpha) {
  const double u = out.unit_roundoff;
  const bool spread = training && upper > lower;
  Report r(alpha, spread ? 2 : 0);
  r.Put("samples", static_cast<double>(out.n));
  uint64_t bad = 0;
  std::vector<double> w;
  double sum = 0;
  const double slack = 4 * u * std::max(std::fabs(lower), std::fabs(upper));
  for (int64_t i = 0; i < out.n; ++i) {
    const double xi = x[i], y = out.values[i];
    if (!std::isfinite(xi)) continue;
    if (xi >= 0) {
      bad += std::fabs(y - xi) > 4 * u * std::fabs(xi);
      continue;
    }
    const double slope = y / xi;
    if (!spread) {
      bad += std::fabs(slope - (lower + upper) / 2) > slack + 4 * u;
      continue;
    }
    if (!(slope >= lower - slack && slope <= upper + slack)) {
      ++bad;
      continue;
    }
    const double v = std::clamp((slope - lower) / (upper - lower), 0.0, 1.0);
    sum += v;
    w.push_back(v);
  }
  r.Exact(Metric::kRandomSupport, "support", bad,
          spread ? "elements are changed where the input is >= 0, or scaled by a slope outside "
                   "[lower, upper] where it is negative"
                 : "elements differ from input x (lower + upper) / 2 (negative) or the input");
  const double n = static_cast<double>(w.size());
  if (!spread || n == 0) return std::move(r).Done();
  const double e = slack / (upper - lower);
  const double eps = HoeffdingEpsilon(n, r.test_alpha());
  r.Within(Metric::kRandomMean, "mean", sum / n, 0.5, Widen({0.5 - eps, 0.5 + eps}, e),
           "mean of (slope - lower) / (upper - lower)");
  r.AtMost(Metric::kRandomCdf, "cdf_distance", UniformCdfDistance(w),
           DkwEpsilon(n, r.test_alpha()) + e,
           "largest distance between the slopes' empirical CDF and U[lower, upper]'s");
  return std::move(r).Done();
}

}  // namespace parity::server
