// Internals shared by the random_property judges (random_property.cc, random_discrete.cc): the
// report one output's findings are collected in, and the numeric helpers. Not for other code:
// the standard's interface is server/random/random_property.h.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/random/random_property.h"

namespace parity::server::random_internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
// The CDF test compares the empirical CDF with the true one at this many interior points.
inline constexpr int kCdfPoints = 31;
// A float probability (bernoulli_'s p rounded to float32 by the kernel) is off by up to this.
inline constexpr double kFloatProbability = 1.0 / (1 << 23);

double LogTwoOver(double alpha);
// x in [lo, hi] where the monotone g crosses `level` (bisection; g(lo) and g(hi) straddle it).
double Crossing(const std::function<double(double)>& g, double lo, double hi, double level);
// x > 1 where g, increasing from g(1) <= level, crosses `level`: the bracket [1, 2^k] is doubled
// until it holds the crossing, then bisected.
double CrossingAboveOne(const std::function<double(double)>& g, double level);
double Kl(double r, double q);
// The largest finite value of the dtype whose unit roundoff is `u` (float16, bfloat16, float32,
// float64).
double MaxFinite(double u);
// The smallest positive (subnormal) value of that dtype: the absolute rounding step near 0.
double DenormMin(double u);
// A standard normal's CDF.
double Phi(double z);
// max_j |F_n(point j) - j / (kCdfPoints + 1)| of values already mapped through their CDF.
double UniformCdfDistance(const std::vector<double>& w);
// max_j |F_n(t_j) - cdf_j| for integer draws at thresholds t (increasing).
double DiscreteCdfDistance(const Draws& d, const std::vector<double>& t,
                           const std::vector<double>& cdf);
bool IsInteger(double v);

// Collects one output's findings as an OutputJudgement of the random_property standard.
class Report {
 public:
  Report(double alpha, int tests) : test_alpha_(alpha / std::max(tests, 1)) {
    j_.standard = Standard::kRandomProperty;
    if (tests > 0) Put("false_alarm_bound", alpha);
  }

  double test_alpha() const { return test_alpha_; }

  void Put(const std::string& name, double v) { j_.random.emplace_back(name, v); }

  // An exact property: `bad` elements break it (a correct kernel never does, whatever it drew).
  void Exact(Metric m, const std::string& name, uint64_t bad, absl::string_view what) {
    Put(absl::StrCat(name, "_violations"), static_cast<double>(bad));
    if (bad > 0) Fail(m, absl::StrCat("ERROR: ", bad, " ", what));
  }

  // A statistic and the interval a correct generator keeps it in but with probability
  // test_alpha().
  void Within(Metric m, const std::string& name, double value, double expected, Interval bound,
              absl::string_view what) {
    Put(name, value);
    Put(absl::StrCat(name, "_expected"), expected);
    Put(absl::StrCat(name, "_low"), bound.low);
    Put(absl::StrCat(name, "_high"), bound.high);
    if (!bound.Contains(value)) {
      Fail(m, absl::StrFormat("ERROR: %s %.6g outside [%.6g, %.6g] (expected %.6g)", what, value,
                              bound.low, bound.high, expected));
    }
  }

  // A distance that must stay at most `bound`.
  void AtMost(Metric m, const std::string& name, double value, double bound,
              absl::string_view what) {
    Put(name, value);
    Put(absl::StrCat(name, "_bound"), bound);
    if (!(value <= bound)) {
      Fail(m, absl::StrFormat("ERROR: %s %.6g over its bound %.6g", what, value, bound));
    }
  }

  void Note(absl::string_view line) {
    if (!j_.message.empty()) j_.message.push_back('\n');
    j_.message.append(line.data(), line.size());
  }

  OutputJudgement Done() && {
    j_.two_way_status = j_.status;
    return std::move(j_);
  }

 private:
  void Fail(Metric m, absl::string_view why) {
    if (j_.status != CheckStatus::kError) {
      j_.status = CheckStatus::kError;
      j_.failed_metric = m;
    }
    Note(why);
  }

  double test_alpha_;
  OutputJudgement j_;
};

inline Interval Widen(Interval i, double by) { return {i.low - by, i.high + by}; }

}  // namespace parity::server::random_internal
