// Operators that draw random numbers, shared by the agent (which reads the generator's state at
// the call's entry) and the server (which replays the call from that state, or judges its
// result by properties any correct generator gives). docs/results.md#random-operators.
#pragma once

namespace parity::common {

// What a random op computes, as far as the statistical checks need to know.
enum class RandomFamily {
  kNone,            // not a random op
  kDropout,         // dropout, dropout_: kept elements scaled by 1/(1-p), dropped are 0
  kFeatureDropout,  // feature_dropout(_): whole channels (dims 0 and 1) kept or dropped
  kAlphaDropout,    // alpha_dropout(_): SELU-preserving affine form
  kFeatureAlphaDropout,
  kNativeDropout,  // native_dropout: (output, mask)
  kBernoulli,      // bernoulli, bernoulli_: 0/1 with the given probabilities
  kUniform,        // rand, rand_like, uniform_: U[from, to)
  kNormal,         // randn, randn_like, normal, normal_: N(mean, std)
  kLogNormal,      // log_normal_: exp(N(mean, std))
  kExponential,    // exponential_: Exp(lambd)
  kCauchy,         // cauchy_: Cauchy(median, sigma)
  kGeometric,      // geometric_: Geometric(p) on 1, 2, ...
  kRandint,        // randint, randint_like, random_: integers, uniform on a range
  kRandperm,       // randperm: a permutation of 0..n-1
  kMultinomial,    // multinomial: category indices
  kPoisson,        // poisson: Poisson(rates)
  kRrelu,          // rrelu, rrelu_with_noise: negative slopes drawn from U[lower, upper]
  kUnchecked,      // draws, but no property check is defined (binomial, _standard_gamma, ...)
};

// Which ops are random, and their families: the operator catalogue
// (common/naming/operator_catalogue.h).

}  // namespace parity::common
