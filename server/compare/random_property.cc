#include "server/compare/random_property.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace parity::server {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The CDF test compares the empirical CDF with the true one at this many interior points.
constexpr int kCdfPoints = 31;
// A float probability (bernoulli_'s p rounded to float32 by the kernel) is off by up to this.
constexpr double kFloatProbability = 1.0 / (1 << 23);

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
double Phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

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
    if (j_.status != v1::VERDICT_STATUS_ERROR) {
      j_.status = v1::VERDICT_STATUS_ERROR;
      j_.failed_metric = m;
    }
    Note(why);
  }

  double test_alpha_;
  OutputJudgement j_;
};

Interval Widen(Interval i, double by) { return {i.low - by, i.high + by}; }

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

}  // namespace

Interval BinomialRateBounds(double n, double q, double alpha) {
  if (n <= 0) return {0, 1};
  if (q <= 0) return {0, 0};
  if (q >= 1) return {1, 1};
  const double level = LogTwoOver(alpha);
  auto g = [&](double r) { return n * Kl(r, q); };
  Interval i;
  i.low = g(0) <= level ? 0 : Crossing(g, 0, q, level);
  i.high = g(1) <= level ? 1 : Crossing(g, q, 1, level);
  return i;
}

Interval PoissonRatioBounds(double lambda, double alpha) {
  if (lambda <= 0) return {0, kInf};
  const double level = LogTwoOver(alpha);
  auto g = [&](double r) { return lambda * (r > 0 ? r * std::log(r) - r + 1 : 1.0); };
  Interval i;
  i.low = g(0) <= level ? 0 : Crossing(g, 0, 1, level);
  double hi = 2;
  while (g(hi) <= level) hi *= 2;
  i.high = Crossing(g, 1, hi, level);
  return i;
}

Interval GammaMeanBounds(double n, double alpha) {
  if (n <= 0) return {0, kInf};
  const double level = LogTwoOver(alpha);
  auto g = [&](double r) { return n * (r - 1 - std::log(r)); };
  Interval i;
  i.low = Crossing(g, 1e-300, 1, level);
  double hi = 2;
  while (g(hi) <= level) hi *= 2;
  i.high = Crossing(g, 1, hi, level);
  return i;
}

Interval ChiSquareMeanBounds(double n, double alpha) {
  if (n <= 0) return {0, kInf};
  const double x = LogTwoOver(alpha);
  return {std::max(0.0, 1 - 2 * std::sqrt(x / n)), 1 + 2 * std::sqrt(x / n) + 2 * x / n};
}

double NormalUpperQuantile(double p) {
  return Crossing([](double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }, -40, 40, p);
}

double DkwEpsilon(double n, double alpha) {
  return n <= 0 ? kInf : std::sqrt(LogTwoOver(alpha) / (2 * n));
}

double HoeffdingEpsilon(double n, double alpha) { return DkwEpsilon(n, alpha); }

DropoutJudgement JudgeDropout(const double* x, const Draws& out, const double* mask,
                              const DropoutParams& prm, double alpha) {
  const double u = out.unit_roundoff;
  const double* y = out.values;
  const bool identity = !prm.train || prm.p == 0;
  const bool all_dropped = !identity && prm.p >= 1;
  const bool random = !identity && !all_dropped;
  // kept = scale * x + kept_offset; dropped = dropped_value (libtorch's _dropout_impl).
  double scale = 1, kept_offset = 0, dropped_value = 0;
  double terms = 0;  // alpha dropout adds terms this large before they cancel: rounding scales so
  if (all_dropped) {
    scale = 0;
  } else if (random && prm.alpha) {
    constexpr double kSeluAlpha = 1.7580993408473766;
    const double a = 1 / std::sqrt((kSeluAlpha * kSeluAlpha * prm.p + 1) * (1 - prm.p));
    scale = a;
    kept_offset = kSeluAlpha * a * prm.p;
    dropped_value = kSeluAlpha * a * (prm.p - 1);
    terms = kSeluAlpha * a;
  } else if (random) {
    scale = 1 / (1 - prm.p);
  }
  const double max_finite = MaxFinite(u);
  const double step = u > 0 ? 2 * DenormMin(u) : 0;
  const int64_t channel = std::max<int64_t>(prm.channel, 1);
  constexpr uint8_t kUnknown = 0, kKept = 1, kDropped = 2, kSplit = 3;
  std::vector<uint8_t> channels(static_cast<std::size_t>((out.n + channel - 1) / channel),
                                kUnknown);
  uint64_t scale_bad = 0, mask_bad = 0, kept = 0, dropped = 0, mask_kept = 0;
  for (int64_t i = 0; i < out.n; ++i) {
    if (mask != nullptr && mask[i] != 0) ++mask_kept;
    if (!std::isfinite(x[i])) continue;  // NaN or inf times a 0 mask is NaN: tells nothing
    const double kv = scale * x[i] + kept_offset;
    const double tol_k = 4 * u * (std::fabs(scale * x[i]) + std::fabs(kept_offset) + terms) + step;
    const bool overflow = std::fabs(kv) > max_finite;
    bool near_k = std::fabs(y[i] - kv) <= tol_k || (overflow && std::isinf(y[i]));
    bool near_d = !identity && std::fabs(y[i] - dropped_value) <=
                                   4 * u * (std::fabs(dropped_value) + terms) + step;
    if (all_dropped) near_k = false;
    if (!near_k && !near_d) {
      ++scale_bad;
      continue;
    }
    if (mask != nullptr) {
      const bool m = mask[i] != 0;
      if ((m && !near_k) || (!m && !near_d)) ++mask_bad;
    }
    if (near_k == near_d) continue;  // 0 kept is 0 dropped: tells nothing
    near_k ? ++kept : ++dropped;
    uint8_t& c = channels[static_cast<std::size_t>(i / channel)];
    const uint8_t now = near_k ? kKept : kDropped;
    if (c == kUnknown) {
      c = now;
    } else if (c != now) {
      c = kSplit;
    }
  }
  if (mask != nullptr && identity) mask_bad += static_cast<uint64_t>(out.n) - mask_kept;
  if (mask != nullptr && all_dropped) mask_bad += mask_kept;

  DropoutJudgement result;
  Report r(alpha, random ? 1 : 0);
  r.Put("samples", static_cast<double>(out.n));
  r.Exact(Metric::kRandomScale, "kept_scale", scale_bad,
          identity ? "elements differ from the input (dropout in evaluation or with p = 0 is the "
                     "identity)"
          : all_dropped
              ? "elements are not 0 (p = 1 drops everything)"
              : absl::StrFormat("elements are neither dropped (%.6g) nor kept (%.6g x input%s)",
                                dropped_value, scale,
                                prm.alpha ? absl::StrFormat(" + %.6g", kept_offset) : ""));
  uint64_t split = 0;
  if (channel > 1) {
    kept = dropped = 0;
    for (uint8_t c : channels) {
      split += c == kSplit;
      kept += c == kKept;
      dropped += c == kDropped;
    }
    r.Exact(Metric::kRandomMask, "channel", split,
            "channels are partly kept and partly dropped (feature dropout keeps or drops whole "
            "channels)");
  }
  if (random) {
    // With a mask, every element's fate is known, zeros included.
    const double n = mask != nullptr && channel == 1 ? static_cast<double>(out.n)
                                                     : static_cast<double>(kept + dropped);
    const double k = mask != nullptr && channel == 1 ? static_cast<double>(mask_kept)
                                                     : static_cast<double>(kept);
    r.Put(channel > 1 ? "channels_judged" : "elements_judged", n);
    if (n > 0) {
      r.Within(Metric::kRandomRate, "keep_rate", k / n, 1 - prm.p,
               Widen(BinomialRateBounds(n, 1 - prm.p, r.test_alpha()), kFloatProbability),
               "keep rate");
    } else {
      r.Note(
          "no element tells kept from dropped (all inputs 0 or not finite): keep rate not tested");
    }
  }
  result.output = std::move(r).Done();
  if (mask != nullptr) {
    Report m(alpha, 0);
    m.Put("samples", static_cast<double>(out.n));
    m.Exact(Metric::kRandomMask, "mask", mask_bad,
            "mask elements disagree with the output (true where the element was dropped, or "
            "false where it was kept)");
    result.mask = std::move(m).Done();
  }
  return result;
}

OutputJudgement JudgeBernoulli(const Draws& d, const PerElement& p, double alpha) {
  uint64_t bad = 0, fixed_bad = 0;
  double ones = 0, expected = 0, n = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const double y = d.values[i], q = p.at(i);
    if (y != 0 && y != 1) {
      ++bad;
      continue;
    }
    if (!(q >= 0 && q <= 1)) continue;  // libtorch refuses these; nothing to say
    if (q == 0 || q == 1) {
      fixed_bad += y != q;
      continue;
    }
    ones += y;
    expected += q;
    n += 1;
  }
  Report r(alpha, n > 0 ? 1 : 0);
  r.Put("samples", static_cast<double>(d.n));
  r.Exact(Metric::kRandomSupport, "support", bad, "values are neither 0 nor 1");
  r.Exact(Metric::kRandomSupport, "certain", fixed_bad,
          "values differ from a probability of exactly 0 or 1");
  if (n > 0) {
    const double q = expected / n;
    r.Within(Metric::kRandomRate, "ones_rate", ones / n, q,
             Widen(BinomialRateBounds(n, q, r.test_alpha()), kFloatProbability), "share of ones");
  }
  return std::move(r).Done();
}

// The draws of a continuous distribution, each through its CDF (uniform on [0, 1] for a correct
// generator), with the moments and the rounding allowances the tests widen their bounds by.
struct ContinuousSums {
  uint64_t bad = 0, degenerate_bad = 0;
  std::vector<double> w;
  double sum = 0, sum_sq = 0, allow_mean = 0, allow_var = 0, allow_cdf = 0;

  void AddUniform(double y, double a, double b, double u) {
    const double width = b - a;
    const double slack = 2 * u * std::max(std::fabs(a), std::fabs(b));
    if (!(y >= a - slack && y <= b + slack)) {
      ++bad;
      return;
    }
    if (!(width > 0)) {
      degenerate_bad += std::fabs(y - a) > slack;
      return;
    }
    const double v = std::clamp((y - a) / width, 0.0, 1.0);
    // Low-precision draws come on a grid of 2^-digits of the range, then round.
    const double e = 2 * u * (std::max(std::fabs(a), std::fabs(b)) / width + 1);
    allow_mean += e;
    allow_cdf = std::max(allow_cdf, e);
    sum += v;
    sum_sq += (v - 0.5) * (v - 0.5);
    w.push_back(v);
  }

  void AddNormal(double y, double a, double b, double u, bool log) {
    if (log ? !(y >= 0 && std::isfinite(y)) : !std::isfinite(y)) {
      ++bad;
      return;
    }
    const double x = log ? std::log(y) : y;
    if (!(b > 0)) {  // std 0: the mean itself
      const double m = log ? std::exp(a) : a;
      degenerate_bad += std::fabs(y - m) > 4 * u * std::fabs(m);
      return;
    }
    const double z = (x - a) / b;
    // Rounding moves z by a few unit roundoffs of |y| (in units of std); near a CDF point t that
    // moves the CDF by at most phi(t) times that.
    const double e = log ? 2 * u / b : u * (std::fabs(y) / b + std::fabs(z));
    allow_mean += e;
    allow_var += 2 * std::fabs(z) * e + e * e;
    allow_cdf = std::max(allow_cdf, log ? 1.2 * u / b : 3 * u * (0.4 * std::fabs(a) / b + 0.5));
    sum += z;
    sum_sq += z * z;
    w.push_back(std::isfinite(z) ? Phi(z) : (z < 0 ? 0.0 : 1.0));
  }

  void AddExponential(double y, double a, double u) {
    if (!(y >= 0 && std::isfinite(y))) {
      ++bad;
      return;
    }
    const double s = a * y;
    allow_mean += 2 * u * s;
    sum += s;
    w.push_back(-std::expm1(-s));
  }

  void AddCauchy(double y, double a, double b, double u) {
    if (std::isnan(y)) {
      ++bad;
      return;
    }
    if (!(b > 0)) return;
    const double z = (y - a) / b;
    allow_cdf = std::max(allow_cdf, 2 * u * (std::fabs(a) / b + 1));
    w.push_back(0.5 + std::atan(z) / M_PI);
  }

  void Add(Continuous kind, double y, double a, double b, double u) {
    switch (kind) {
      case Continuous::kUniform:
        return AddUniform(y, a, b, u);
      case Continuous::kNormal:
      case Continuous::kLogNormal:
        return AddNormal(y, a, b, u, kind == Continuous::kLogNormal);
      case Continuous::kExponential:
        return AddExponential(y, a, u);
      case Continuous::kCauchy:
        return AddCauchy(y, a, b, u);
    }
  }
};

// The moment tests of a continuous distribution (its CDF distance is tested apart). Low-precision
// kernels draw from a coarse grid and compute in their dtype (libtorch's bfloat16 Box-Muller on
// CPU draws 8-bit uniforms: variance ~0.986, |z| <= 3.33): `grid` bounds that bias for
// float16/bfloat16 and vanishes for float32/float64. The exponential's CDF allowance is set here.
void JudgeMoments(Continuous kind, double n, double grid, double u, ContinuousSums* c, Report* r) {
  const double ta = r->test_alpha();
  switch (kind) {
    case Continuous::kUniform: {
      const double eps = HoeffdingEpsilon(n, ta);
      r->Within(Metric::kRandomMean, "mean", c->sum / n, 0.5,
                Widen({0.5 - eps, 0.5 + eps}, c->allow_mean / n + grid),
                "mean of (value - from) / (to - from)");
      r->Within(Metric::kRandomVariance, "variance", c->sum_sq / n, 1.0 / 12,
                Widen({1.0 / 12 - eps / 4, 1.0 / 12 + eps / 4}, c->allow_mean / n + grid),
                "variance of (value - from) / (to - from)");
      break;
    }
    case Continuous::kNormal: {
      const double z = NormalUpperQuantile(ta / 2) / std::sqrt(n);
      r->Within(Metric::kRandomMean, "mean", c->sum / n, 0,
                Widen({-z, z}, c->allow_mean / n + grid), "mean of (value - mean) / std");
      r->Within(Metric::kRandomVariance, "variance", c->sum_sq / n, 1,
                Widen(ChiSquareMeanBounds(n, ta), c->allow_var / n + 3 * grid),
                "mean square of (value - mean) / std");
      break;
    }
    case Continuous::kExponential: {
      const Interval g = GammaMeanBounds(n, ta);
      const double slack = c->allow_mean / n + grid;
      r->Within(Metric::kRandomMean, "mean", c->sum / n, 1, {g.low - slack, g.high + slack},
                "mean of lambda x value");
      c->allow_cdf = u + grid;
      break;
    }
    default:
      break;
  }
}

OutputJudgement JudgeContinuous(const Draws& d, const ContinuousParams& prm, double alpha) {
  const double u = d.unit_roundoff;
  const Continuous kind = prm.kind;
  const int tests = kind == Continuous::kUniform || kind == Continuous::kNormal ? 3
                    : kind == Continuous::kExponential                          ? 2
                                                                                : 1;
  Report r(alpha, tests);
  r.Put("samples", static_cast<double>(d.n));
  ContinuousSums c;
  c.w.reserve(static_cast<std::size_t>(d.n));
  for (int64_t i = 0; i < d.n; ++i) c.Add(kind, d.values[i], prm.a.at(i), prm.b.at(i), u);
  r.Exact(Metric::kRandomSupport, "support", c.bad,
          kind == Continuous::kUniform       ? "values outside [from, to]"
          : kind == Continuous::kNormal      ? "values not finite"
          : kind == Continuous::kLogNormal   ? "values negative or not finite"
          : kind == Continuous::kExponential ? "values negative or not finite"
                                             : "values NaN");
  r.Exact(Metric::kRandomSupport, "degenerate", c.degenerate_bad,
          "values differ from a distribution of zero width (std 0, or from = to)");
  const double n = static_cast<double>(c.w.size());
  if (n == 0) return std::move(r).Done();
  const double grid = 2 * u;
  JudgeMoments(kind, n, grid, u, &c, &r);
  r.AtMost(Metric::kRandomCdf, "cdf_distance", UniformCdfDistance(c.w),
           DkwEpsilon(n, r.test_alpha()) + c.allow_cdf + 2 * grid,
           "largest distance between the draws' empirical CDF and the distribution's");
  return std::move(r).Done();
}

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

OutputJudgement JudgeMultinomial(const Draws& d, const double* weights, int64_t rows,
                                 int64_t categories, int64_t samples, bool replacement,
                                 double alpha) {
  uint64_t bad = 0, repeated = 0;
  std::vector<double> counts(static_cast<std::size_t>(categories), 0.0);
  std::vector<double> expected(static_cast<std::size_t>(categories), 0.0);
  double trials = 0;
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
  int tests = 0;
  for (double e : expected) tests += e > 0 && e < trials;
  Report r(alpha, tests);
  r.Put("samples", static_cast<double>(d.n));
  r.Exact(Metric::kRandomSupport, "support", bad,
          "indices are outside the categories or name a category of weight 0");
  if (!replacement) {
    r.Exact(Metric::kRandomPermutation, "repeat", repeated,
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
