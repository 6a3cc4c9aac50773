// One element of the comparison's pass: the definition of every metric's per-element rule, shared
// by the scalar host kernel (metrics.cc) and the CUDA kernel (device_compare.cu). The SIMD kernels
// (metrics_simd_kernel.inc) compute the same per lane; tests/server/compare/metrics_kernel_test.cc
// and device_compare_test.cc hold them to it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "server/compare/accumulator.h"
#include "server/compare/float_types.h"
#include "server/compare/host_device.h"

namespace parity::server::internal {

// Whether a kernel computes abs_err and rel_err as float32 values: a float16/bfloat16 device
// against a reference of at most float32. Both sides are float32 values there, and msprobe's
// numpy computes these errors in float32, so Parity's match its CSVs bit for bit; everything else
// is float64, and so is every sum of them in the scalar kernel (the SIMD kernel's float32-lane pass
// adds them in short float32 runs first: NarrowPass in metrics_simd_kernel.inc).
template <typename T, typename R>
inline constexpr bool kErrorsInFloat =
    (std::is_same_v<T, fp::Half> ||
     std::is_same_v<T, fp::BFloat16>)&&!std::is_same_v<R, fp::Double>;

// std::clamp's rule (NaN stays NaN), on the GPU too.
PARITY_HD inline double Clamp(double v, double lo, double hi) {
  return v < lo ? lo : (hi < v ? hi : v);
}

// ULP error of one element: |t - r| * 2^(mantissa_bits - e), e = max(floor(log2|r|), min_e),
// e = 0 where r = 0. `UlpInDouble` computes the difference in float64 (float32 devices), else in
// float32, as msprobe does.
template <bool UlpInDouble>
PARITY_HD inline double Ulp(double t, double r, const DTypeConstants& c) {
  double diff;
  if constexpr (UlpInDouble) {
    diff = std::fabs(t - r);
  } else {
    diff = std::fabs(
        static_cast<double>(static_cast<float>(static_cast<float>(t) - static_cast<float>(r))));
  }
  if (!std::isfinite(r) || !std::isfinite(t)) {
    return t == r ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  }
  int e = c.ulp_min_exponent > 0 ? c.ulp_min_exponent : 0;
  if (r != 0) {
    // floor(log2|r|) from the exponent bits; libm only for subnormals.
    uint64_t bits;
    std::memcpy(&bits, &r, 8);
    const int biased = static_cast<int>((bits >> 52) & 0x7FF);
    const int exponent = biased != 0 ? biased - 1023 : std::ilogb(r);
    e = exponent > c.ulp_min_exponent ? exponent : c.ulp_min_exponent;
  }
  const int k = c.ulp_mantissa_bits - e;
  if (k < -1022 || k > 1023) return std::ldexp(diff, k);
  const uint64_t scale_bits = static_cast<uint64_t>(k + 1023) << 52;  // exactly 2^k
  double scale;
  std::memcpy(&scale, &scale_bits, 8);
  return diff * scale;
}

// Adds element (t, r) into `a`: t the tested value (of type T), r the reference (of type R).
template <typename T, typename R>
PARITY_HD inline void AccumulateElement(double t, double r, const DTypeConstants& c, double eps,
                                        Accumulator& a) {
  constexpr bool kUlpInDouble = std::is_same_v<T, fp::Float> || std::is_same_v<T, fp::Double>;
  const double r_t = T::Round(r);  // reference cast to the tested dtype
  const double abs_t = std::fabs(t), abs_r = std::fabs(r);
  a.max_abs_tested = MaxKeep(a.max_abs_tested, abs_t);
  a.max_abs_ref = MaxKeep(a.max_abs_ref, abs_r);
  a.dot += t * r;
  a.norm_t += t * t;
  a.norm_r += r * r;

  double err, rel;
  if constexpr (kErrorsInFloat<T, R>) {
    // float32 arithmetic, as msprobe's numpy does for these dtypes (t and r are float32 values).
    const float err_f = std::fabs(static_cast<float>(t) - static_cast<float>(r));
    err = err_f;
    rel = err_f / (static_cast<float>(abs_r) + static_cast<float>(eps));
  } else {
    err = std::fabs(t - r);
    rel = err / (abs_r + eps);
  }
  if (std::isnan(err)) a.nan_error = true;
  a.max_abs_error = MaxKeep(a.max_abs_error, err);
  a.hundredth += rel < 1e-2;  // NaN compares false: counts as failing
  a.thousandth += rel < 1e-3;
  a.ten_thousandth += rel < 1e-4;
  // Compared with the reference rounded to the tested dtype: an exact op (relu, gather,
  // masked_fill with a float64 fill value) rounds the same way, so only real differences count.
  a.mismatches += !(t == r_t || (std::isnan(t) && std::isnan(r_t)));
  a.above += t > r_t;
  a.below += t < r_t;

  const bool finite = std::isfinite(t) && std::isfinite(r_t);
  if (finite) {
    if (abs_r <= c.small_value) {
      ++a.n_small;
      ++a.n_masked;
      a.small_bench_fail += err > c.small_value_atol_benchmark;
      a.small_abs_fail += err > c.small_value_atol_absolute;
    } else {
      ++a.n_normal;
      a.rel_fail += rel > c.rtol;
      a.max_rel = MaxKeep(a.max_rel, rel);
      a.sum_rel += rel;
      a.sum_sq_masked += err * err;
    }
  } else {
    ++a.n_inf_nan;
    ++a.n_masked;
    const double tc = Clamp(t, -T::kMax, T::kMax);  // NaN stays NaN
    const double rc = Clamp(r_t, -T::kMax, T::kMax);
    const double re = std::fabs(tc - rc) / (abs_r + eps);
    const bool ok = re <= c.rtol || (std::isnan(t) && std::isnan(r_t));
    a.inf_nan_fail += !ok;
  }

  const double ulp = Ulp<kUlpInDouble>(t, r, c);
  if (std::isnan(ulp)) {
    a.ulp_nan = true;
  } else {
    a.ulp_max = MaxKeep(a.ulp_max, ulp);
    a.ulp_sum += ulp;
    a.ulp_over += ulp > c.ulp_threshold;
  }
}

// Whether a device value is inf/NaN where its reference is finite within the device dtype's range
// (a reference beyond that range overflows there too: the device is right). FindDeviceNonFinite's
// rule, per element.
template <typename T>
PARITY_HD inline bool DeviceAloneNonFinite(double d, double ref) {
  return !std::isfinite(d) && std::isfinite(ref) && !(std::fabs(ref) > T::kMax);
}

}  // namespace parity::server::internal
