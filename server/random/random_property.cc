#include "server/random/random_property.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/random/random_report.h"

namespace parity::server {

using random_internal::Crossing;
using random_internal::CrossingAboveOne;
using random_internal::DenormMin;
using random_internal::kFloatProbability;
using random_internal::kInf;
using random_internal::Kl;
using random_internal::LogTwoOver;
using random_internal::MaxFinite;
using random_internal::Phi;
using random_internal::Report;
using random_internal::UniformCdfDistance;
using random_internal::Widen;

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
  i.high = CrossingAboveOne(g, level);
  return i;
}

Interval GammaMeanBounds(double n, double alpha) {
  if (n <= 0) return {0, kInf};
  const double level = LogTwoOver(alpha);
  auto g = [&](double r) { return n * (r - 1 - std::log(r)); };
  Interval i;
  i.low = Crossing(g, 1e-300, 1, level);
  i.high = CrossingAboveOne(g, level);
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

namespace {

// What dropout with these parameters makes of an input element (libtorch's _dropout_impl):
// kept = scale * x + kept_offset; dropped = dropped_value.
struct DropoutForm {
  bool identity = false, all_dropped = false, random = false;
  double scale = 1, kept_offset = 0, dropped_value = 0;
  double terms = 0;  // alpha dropout adds terms this large before they cancel: rounding scales so
};

DropoutForm FormOf(const DropoutParams& prm) {
  DropoutForm f;
  f.identity = !prm.train || prm.p == 0;
  f.all_dropped = !f.identity && prm.p >= 1;
  f.random = !f.identity && !f.all_dropped;
  if (f.all_dropped) {
    f.scale = 0;
  } else if (f.random && prm.alpha) {
    constexpr double kSeluAlpha = 1.7580993408473766;
    const double a = 1 / std::sqrt((kSeluAlpha * kSeluAlpha * prm.p + 1) * (1 - prm.p));
    f.scale = a;
    f.kept_offset = kSeluAlpha * a * prm.p;
    f.dropped_value = kSeluAlpha * a * (prm.p - 1);
    f.terms = kSeluAlpha * a;
  } else if (f.random) {
    f.scale = 1 / (1 - prm.p);
  }
  return f;
}

// The elements (or, for feature dropout, channels) seen kept and dropped, and those that are
// neither or disagree with the mask.
struct DropoutTally {
  uint64_t scale_bad = 0, mask_bad = 0, kept = 0, dropped = 0, mask_kept = 0, split = 0;
};

DropoutTally TallyDropout(const double* x, const Draws& out, const double* mask,
                          const DropoutForm& f, int64_t channel) {
  const double u = out.unit_roundoff;
  const double* y = out.values;
  const double max_finite = MaxFinite(u);
  const double step = u > 0 ? 2 * DenormMin(u) : 0;
  constexpr uint8_t kUnknown = 0, kKept = 1, kDropped = 2, kSplit = 3;
  std::vector<uint8_t> channels(static_cast<std::size_t>((out.n + channel - 1) / channel),
                                kUnknown);
  DropoutTally t;
  for (int64_t i = 0; i < out.n; ++i) {
    if (mask != nullptr && mask[i] != 0) ++t.mask_kept;
    if (!std::isfinite(x[i])) continue;  // NaN or inf times a 0 mask is NaN: tells nothing
    const double kv = f.scale * x[i] + f.kept_offset;
    const double tol_k =
        4 * u * (std::fabs(f.scale * x[i]) + std::fabs(f.kept_offset) + f.terms) + step;
    const bool overflow = std::fabs(kv) > max_finite;
    bool near_k = std::fabs(y[i] - kv) <= tol_k || (overflow && std::isinf(y[i]));
    const bool near_d = !f.identity && std::fabs(y[i] - f.dropped_value) <=
                                           4 * u * (std::fabs(f.dropped_value) + f.terms) + step;
    if (f.all_dropped) near_k = false;
    if (!near_k && !near_d) {
      ++t.scale_bad;
      continue;
    }
    if (mask != nullptr) {
      const bool m = mask[i] != 0;
      if ((m && !near_k) || (!m && !near_d)) ++t.mask_bad;
    }
    if (near_k == near_d) continue;  // 0 kept is 0 dropped: tells nothing
    near_k ? ++t.kept : ++t.dropped;
    uint8_t& c = channels[static_cast<std::size_t>(i / channel)];
    const uint8_t now = near_k ? kKept : kDropped;
    if (c == kUnknown) {
      c = now;
    } else if (c != now) {
      c = kSplit;
    }
  }
  if (mask != nullptr && f.identity) t.mask_bad += static_cast<uint64_t>(out.n) - t.mask_kept;
  if (mask != nullptr && f.all_dropped) t.mask_bad += t.mask_kept;
  if (channel > 1) {  // feature dropout: count channels, not elements
    t.kept = t.dropped = 0;
    for (uint8_t c : channels) {
      t.split += c == kSplit;
      t.kept += c == kKept;
      t.dropped += c == kDropped;
    }
  }
  return t;
}

}  // namespace

DropoutJudgement JudgeDropout(const double* x, const Draws& out, const double* mask,
                              const DropoutParams& prm, double alpha) {
  const DropoutForm f = FormOf(prm);
  const int64_t channel = std::max<int64_t>(prm.channel, 1);
  const DropoutTally t = TallyDropout(x, out, mask, f, channel);
  DropoutJudgement result;
  Report r(alpha, f.random ? 1 : 0);
  r.Put("samples", static_cast<double>(out.n));
  r.Exact(Metric::kRandomScale, "kept_scale", t.scale_bad,
          f.identity ? "elements differ from the input (dropout in evaluation or with p = 0 is "
                       "the identity)"
          : f.all_dropped
              ? "elements are not 0 (p = 1 drops everything)"
              : absl::StrFormat("elements are neither dropped (%.6g) nor kept (%.6g x input%s)",
                                f.dropped_value, f.scale,
                                prm.alpha ? absl::StrFormat(" + %.6g", f.kept_offset) : ""));
  if (channel > 1) {
    r.Exact(Metric::kRandomMask, "channel", t.split,
            "channels are partly kept and partly dropped (feature dropout keeps or drops whole "
            "channels)");
  }
  if (f.random) {
    // With a mask, every element's fate is known, zeros included.
    const bool by_mask = mask != nullptr && channel == 1;
    const double n = by_mask ? static_cast<double>(out.n) : static_cast<double>(t.kept + t.dropped);
    const double k = by_mask ? static_cast<double>(t.mask_kept) : static_cast<double>(t.kept);
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
    m.Exact(Metric::kRandomMask, "mask", t.mask_bad,
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

}  // namespace parity::server
