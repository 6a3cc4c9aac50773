// The comparison's running sums and per-dtype constants, in a header that both the host kernels and
// the CUDA kernel (device_compare.cu) compile: no absl, no protobuf, nothing but the language.
#pragma once

#include <cstdint>

#include "server/compare/host_device.h"

namespace parity::server {

// Per-dtype constants (msprobe StandardConfig); loaded from the standards file.
struct DTypeConstants {
  double small_value = 0;                 // |ref| <= this is "small"
  double small_value_atol_absolute = 0;   // absolute-threshold standard
  double small_value_atol_benchmark = 0;  // benchmark standard
  double rtol = 0;
  double minimum_err = 0;  // ratio denominator floor
  int ulp_min_exponent = 0;
  int ulp_mantissa_bits = 0;
  double ulp_threshold = 0;  // an element "over threshold" has ulp > this
};

namespace internal {

// The fields of Accumulator by how partial results combine (used by Merge and by the SIMD
// kernel's lanes, so that a new metric is added in one place).
// clang-format off
#define PARITY_ACCUMULATOR_SUMS(X) X(dot) X(norm_t) X(norm_r) X(sum_sq_masked) X(sum_rel) X(ulp_sum)
#define PARITY_ACCUMULATOR_MAXIMA(X) \
  X(max_abs_tested) X(max_abs_ref) X(max_abs_error) X(max_rel) X(ulp_max)
#define PARITY_ACCUMULATOR_COUNTS(X)                                                      \
  X(hundredth) X(thousandth) X(ten_thousandth) X(mismatches) X(above) X(below) X(n_small) \
  X(small_bench_fail) X(small_abs_fail) X(n_normal) X(rel_fail) X(n_inf_nan)              \
  X(inf_nan_fail) X(ulp_over)
#define PARITY_ACCUMULATOR_FLAGS(X) X(nan_error) X(ulp_nan)
// Every field but n_masked: SUM for sums and counts, MAX for maxima, FLAG for flags.
#define PARITY_ACCUMULATOR_FIELDS(SUM, MAX, FLAG)                                              \
  PARITY_ACCUMULATOR_SUMS(SUM) PARITY_ACCUMULATOR_COUNTS(SUM) PARITY_ACCUMULATOR_MAXIMA(MAX) \
  PARITY_ACCUMULATOR_FLAGS(FLAG)
// clang-format on

// Running sums of one pass. Counts are int64 so shares are exact for any N.
//   hundredth..ten_thousandth  elements with rel_err below 1e-2, 1e-3, 1e-4
//   above / below              tested > / < reference cast to the tested dtype
//   n_small, n_normal, n_inf_nan  finite |ref| <= small_value, other finite, inf/nan
//   n_masked                   small or inf/nan: excluded from RMSE
struct Accumulator {
#define PARITY_DOUBLE_FIELD(f) double f = 0;
#define PARITY_COUNT_FIELD(f) int64_t f = 0;
#define PARITY_FLAG_FIELD(f) bool f = false;
  PARITY_ACCUMULATOR_SUMS(PARITY_DOUBLE_FIELD)
  PARITY_ACCUMULATOR_MAXIMA(PARITY_DOUBLE_FIELD)
  PARITY_ACCUMULATOR_COUNTS(PARITY_COUNT_FIELD)
  PARITY_ACCUMULATOR_FLAGS(PARITY_FLAG_FIELD)
#undef PARITY_DOUBLE_FIELD
#undef PARITY_COUNT_FIELD
#undef PARITY_FLAG_FIELD
  int64_t n_masked = 0;
};

// max(a, x) that keeps `a` when x is NaN, and a NaN `a` (std::max's rule, on the GPU too).
PARITY_HD inline double MaxKeep(double a, double x) { return a < x ? x : a; }

// Adds `b`'s sums into `a` (maxima ignore NaN, as the kernels do).
PARITY_HD inline void Merge(Accumulator& a, const Accumulator& b) {
#define PARITY_ADD(f) a.f += b.f;
#define PARITY_MAX(f) a.f = MaxKeep(a.f, b.f);
#define PARITY_OR(f) a.f = a.f || b.f;
  PARITY_ACCUMULATOR_FIELDS(PARITY_ADD, PARITY_MAX, PARITY_OR)
#undef PARITY_ADD
#undef PARITY_MAX
#undef PARITY_OR
  a.n_masked += b.n_masked;
}

}  // namespace internal
}  // namespace parity::server
