#include "server/random/random_report.h"

#include <algorithm>
#include <cmath>

namespace parity::server::random_internal {

double LogTwoOver(double alpha) { return std::log(2.0 / alpha); }

// x in [lo, hi] where the monotone g crosses `level` (bisection; g(lo) and g(hi) straddle it).
double Crossing(const std::function<double(double)>& g, double lo, double hi, double level) {
  const bool rising = g(hi) > g(lo);
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if ((g(mid) > level) == rising) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return 0.5 * (lo + hi);
}

double CrossingAboveOne(const std::function<double(double)>& g, double level) {
  double hi = 2;
  while (g(hi) <= level) hi *= 2;
  return Crossing(g, 1, hi, level);
}

double Kl(double r, double q) {
  double v = 0;
  if (r > 0) v += r * std::log(r / q);
  if (r < 1) v += (1 - r) * std::log((1 - r) / (1 - q));
  return v;
}

// The largest finite value of the dtype whose unit roundoff is `u` (float16, bfloat16, float32,
// float64).
double MaxFinite(double u) {
  if (u >= std::ldexp(1.0, -11) && u < std::ldexp(1.0, -8)) return 65504.0;
  if (u >= std::ldexp(1.0, -24)) return 3.3895313892515355e38;
  return std::numeric_limits<double>::max();
}

// The smallest positive (subnormal) value of that dtype: the absolute rounding step near 0.
double DenormMin(double u) {
  if (u >= std::ldexp(1.0, -11) && u < std::ldexp(1.0, -8)) return std::ldexp(1.0, -24);
  if (u >= std::ldexp(1.0, -8)) return std::ldexp(1.0, -133);
  if (u >= std::ldexp(1.0, -24)) return std::ldexp(1.0, -149);
  return std::numeric_limits<double>::denorm_min();
}

// A standard normal's CDF.

// A standard normal's CDF.
double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// max_j |F_n(point j) - j / (kCdfPoints + 1)| of values already mapped through their CDF.
double UniformCdfDistance(const std::vector<double>& w) {
  if (w.empty()) return 0;
  std::vector<int64_t> bins(kCdfPoints + 1, 0);
  for (double v : w) {
    int b = static_cast<int>(std::floor(v * (kCdfPoints + 1)));
    bins[static_cast<std::size_t>(std::clamp(b, 0, kCdfPoints))]++;
  }
  double worst = 0, below = 0;
  const double n = static_cast<double>(w.size());
  for (int j = 1; j <= kCdfPoints; ++j) {
    below += static_cast<double>(bins[static_cast<std::size_t>(j - 1)]);
    worst = std::max(worst, std::fabs(below / n - static_cast<double>(j) / (kCdfPoints + 1)));
  }
  return worst;
}

// max_j |F_n(t_j) - cdf_j| for integer draws at thresholds t (increasing).
double DiscreteCdfDistance(const Draws& d, const std::vector<double>& t,
                           const std::vector<double>& cdf) {
  if (t.empty() || d.n == 0) return 0;
  std::vector<int64_t> bins(t.size() + 1, 0);
  for (int64_t i = 0; i < d.n; ++i) {
    const auto at = std::lower_bound(t.begin(), t.end(), d.values[i]) - t.begin();
    bins[static_cast<std::size_t>(at)]++;
  }
  double worst = 0, below = 0;
  const double n = static_cast<double>(d.n);
  for (std::size_t j = 0; j < t.size(); ++j) {
    below += static_cast<double>(bins[j]);
    worst = std::max(worst, std::fabs(below / n - cdf[j]));
  }
  return worst;
}

bool IsInteger(double v) { return std::isfinite(v) && v == std::floor(v); }

}  // namespace parity::server::random_internal
