// The random_property standard: a random op's result judged by properties any correct generator
// gives, when its draws cannot be replayed (an NPU's generator on a GPU or CPU bench). Two kinds
// of check:
//   - exact properties, which a correct kernel never breaks whatever it drew: the support (range,
//     integer-ness), dropout's kept elements equal to input x 1/(1-p) and dropped ones to 0, the
//     mask agreeing with the output, randperm being a permutation;
//   - statistical tests of the draws (a keep rate, a mean, a variance, the distance to the
//     distribution's CDF) against bounds that hold for every sample size: Chernoff bounds in
//     relative-entropy form for counts, the exact normal law for a normal mean, Laurent-Massart
//     for a chi-square, Hoeffding for bounded means, Dvoretzky-Kiefer-Wolfowitz (Massart's
//     constant) for the CDF. Each test of a call gets alpha / (the call's test count), so a call
//     of a correct generator is judged error with probability at most alpha (union bound).
// Bounds are widened by what rounding to the output's dtype can move a statistic (from the unit
// roundoff), so a bfloat16 draw is not blamed for being bfloat16. Torch-free: the server's replay
// code hands the values over as doubles. docs/results.md#random-operators.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "server/compare/judge.h"

namespace parity::server {

struct Interval {
  double low = 0, high = 0;
  bool Contains(double v) const { return v >= low && v <= high; }
};

// The rate k/n of n Bernoulli trials whose success probabilities average q stays in the
// interval but with probability at most alpha (each tail alpha/2; Chernoff: n KL(r || q) <= L).
Interval BinomialRateBounds(double n, double q, double alpha);
// S / lambda for S ~ Poisson(lambda) (or a sum of independent Poissons of total mean lambda).
Interval PoissonRatioBounds(double lambda, double alpha);
// The mean of n independent Exp(1) draws.
Interval GammaMeanBounds(double n, double alpha);
// The mean of n squared standard normals (chi-square / n; Laurent and Massart 2000).
Interval ChiSquareMeanBounds(double n, double alpha);
// z with P(Z > z) = p for a standard normal Z (0 < p < 1).
double NormalUpperQuantile(double p);
// The largest |empirical CDF - CDF| of n draws that DKW allows with probability 1 - alpha.
double DkwEpsilon(double n, double alpha);
// Hoeffding: the deviation of the mean of n draws in [0, 1] from its expectation.
double HoeffdingEpsilon(double n, double alpha);

// A value that is either a scalar or one per element (a broadcast tensor argument).
struct PerElement {
  const double* values = nullptr;  // null: `scalar` for every element
  double scalar = 0;
  double at(int64_t i) const { return values != nullptr ? values[i] : scalar; }
};

// One output's values as doubles, and the unit roundoff of its dtype (2^-24 for float32, 2^-8
// for bfloat16, ...; 0 for integer and bool outputs).
struct Draws {
  const double* values = nullptr;
  int64_t n = 0;
  double unit_roundoff = 0;
};

// dropout, feature_dropout, alpha_dropout, feature_alpha_dropout, native_dropout.
struct DropoutParams {
  double p = 0.5;
  bool train = true;
  bool alpha = false;   // alpha_dropout's affine form
  int64_t channel = 1;  // feature variants: elements per channel (dims 2.. of the input); else 1
};
struct DropoutJudgement {
  OutputJudgement output;
  std::optional<OutputJudgement> mask;  // native_dropout's second output
};
DropoutJudgement JudgeDropout(const double* input, const Draws& output, const double* mask,
                              const DropoutParams& params, double alpha);

// bernoulli / bernoulli_: 0 or 1 with probability `p` (per element).
OutputJudgement JudgeBernoulli(const Draws& draws, const PerElement& p, double alpha);

// A continuous distribution, by its parameters (per element where the op takes tensors).
enum class Continuous { kUniform, kNormal, kLogNormal, kExponential, kCauchy };
struct ContinuousParams {
  Continuous kind = Continuous::kUniform;
  PerElement a;  // uniform: from; normal/log-normal: mean; exponential: lambda; cauchy: median
  PerElement b;  // uniform: to;   normal/log-normal: std;  cauchy: sigma
};
OutputJudgement JudgeContinuous(const Draws& draws, const ContinuousParams& params, double alpha);

// Integers uniform on [low, high] (both included): randint, random_.
OutputJudgement JudgeDiscreteUniform(const Draws& draws, double low, double high, double alpha);
// geometric_: integers >= 1, P(k) = (1-p)^(k-1) p.
OutputJudgement JudgeGeometric(const Draws& draws, double p, double alpha);
// poisson: non-negative integers of the given rates.
OutputJudgement JudgePoisson(const Draws& draws, const PerElement& rates, double alpha);
// randperm(n): a permutation of 0 .. n-1.
OutputJudgement JudgeRandperm(const Draws& draws, int64_t n);
// multinomial: `rows` x `samples` indices into `categories` weights per row (`weights` is rows x
// categories, not necessarily normalised).
OutputJudgement JudgeMultinomial(const Draws& draws, const double* weights, int64_t rows,
                                 int64_t categories, int64_t samples, bool replacement,
                                 double alpha);
// rrelu / rrelu_with_noise: x >= 0 unchanged, x < 0 times a slope from U[lower, upper] (training)
// or (lower + upper) / 2 (evaluation).
OutputJudgement JudgeRrelu(const double* input, const Draws& output, double lower, double upper,
                           bool training, double alpha);

}  // namespace parity::server
