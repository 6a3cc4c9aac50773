// The comparison pass four elements at a time (AVX2; F16C for float16), chosen at run time.
//
// Same arithmetic as the scalar kernel in metrics.cc, element for element: every count and
// maximum is identical, and only the order of the floating sums differs (four lanes, merged at
// the end). Branches become masks: each element's contribution is selected, never skipped.
//
// Only the functions between the target pragmas are compiled for AVX2, so nothing from a header
// (an inline function the linker might share with the portable code) ever carries AVX2
// instructions onto a CPU without them.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "server/compare/accumulate.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PARITY_COMPARE_SIMD 1
#include <immintrin.h>
#endif

namespace parity::server::internal {

#ifdef PARITY_COMPARE_SIMD

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

namespace {

using v4d = double __attribute__((vector_size(32)));
using v4i = int64_t __attribute__((vector_size(32)));
using v4u = uint64_t __attribute__((vector_size(32)));
using v4f = float __attribute__((vector_size(16)));

inline v4d Abs(v4d x) { return reinterpret_cast<v4d>(reinterpret_cast<v4i>(x) & INT64_MAX); }
// max(a, x) that keeps `a` when x is NaN (as std::max(a, x) does).
inline v4d Max(v4d a, v4d x) { return a < x ? x : a; }
inline v4d Select(v4i mask, v4d a, v4d b) { return mask ? a : b; }
inline v4i IsNaN(v4d x) { return x != x; }
inline v4i IsFinite(v4d x) { return Abs(x) <= std::numeric_limits<double>::max(); }

inline v4d FromFloats(__m128 f) { return reinterpret_cast<v4d>(_mm256_cvtps_pd(f)); }
inline __m128 ToFloats(v4d d) { return _mm256_cvtpd_ps(reinterpret_cast<__m256d>(d)); }

template <typename K>
inline v4d Load(const void* p, int64_t i) {
  if constexpr (std::is_same_v<K, fp::Double>) {
    return reinterpret_cast<v4d>(_mm256_loadu_pd(static_cast<const double*>(p) + i));
  } else if constexpr (std::is_same_v<K, fp::Float>) {
    return FromFloats(_mm_loadu_ps(static_cast<const float*>(p) + i));
  } else {
    const __m128i bits =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (std::is_same_v<K, fp::Half>) {
      return FromFloats(_mm_cvtph_ps(bits));
    } else {
      return FromFloats(_mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(bits), 16)));
    }
  }
}

// A float64 value rounded to type K (round to nearest even through float32, as the scalar
// kernel's T::Round does), back as float64.
template <typename K>
inline v4d Round(v4d r) {
  if constexpr (std::is_same_v<K, fp::Double>) {
    return r;
  } else if constexpr (std::is_same_v<K, fp::Float>) {
    return FromFloats(ToFloats(r));
  } else if constexpr (std::is_same_v<K, fp::Half>) {
    return FromFloats(_mm_cvtph_ps(_mm_cvtps_ph(ToFloats(r), _MM_FROUND_TO_NEAREST_INT)));
  } else {
    const __m128i x = _mm_castps_si128(ToFloats(r));
    // Round to nearest even on the upper 16 bits; NaN stays NaN (quiet bit set).
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(1));
    const __m128i rounded = _mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7FFF)), lsb);
    const __m128i abs = _mm_and_si128(x, _mm_set1_epi32(0x7FFFFFFF));
    const __m128i nan = _mm_cmpgt_epi32(abs, _mm_set1_epi32(0x7F800000));
    const __m128i quiet = _mm_or_si128(x, _mm_set1_epi32(0x00400000));
    const __m128i chosen = _mm_blendv_epi8(rounded, quiet, nan);
    return FromFloats(_mm_castsi128_ps(_mm_and_si128(chosen, _mm_set1_epi32(-65536))));
  }
}

inline v4d PowerOfTwo(v4i k) {  // 2^k for k in [-1022, 1023]
  return reinterpret_cast<v4d>((k + 1023) << 52);
}

struct Lanes {
#define PARITY_DOUBLE_LANES(f) v4d f{};
#define PARITY_COUNT_LANES(f) v4i f{};
  PARITY_ACCUMULATOR_SUMS(PARITY_DOUBLE_LANES)
  PARITY_ACCUMULATOR_MAXIMA(PARITY_DOUBLE_LANES)
  PARITY_ACCUMULATOR_COUNTS(PARITY_COUNT_LANES)
  PARITY_ACCUMULATOR_FLAGS(PARITY_COUNT_LANES)
#undef PARITY_DOUBLE_LANES
#undef PARITY_COUNT_LANES
};

template <typename T, typename R>
void Run(const void* tp, const void* rp, int64_t begin, int64_t end, const DTypeConstants& c,
         double eps, Accumulator& out) {
  constexpr bool kUlpInDouble = std::is_same_v<T, fp::Float> || std::is_same_v<T, fp::Double>;
  constexpr double kMax = T::kMax;
  const v4d vmax = v4d{} + kMax;
  const v4i min_exponent = v4i{} + c.ulp_min_exponent;
  const v4i zero_exponent = v4i{} + (c.ulp_min_exponent > 0 ? c.ulp_min_exponent : 0);
  Lanes a;
  for (int64_t i = begin; i < end; i += 4) {
    const v4d t = Load<T>(tp, i);
    const v4d r = Load<R>(rp, i);
    const v4d rt = Round<T>(r);
    const v4d abs_t = Abs(t), abs_r = Abs(r);
    a.max_abs_tested = Max(a.max_abs_tested, abs_t);
    a.max_abs_ref = Max(a.max_abs_ref, abs_r);
    a.dot += t * r;
    a.norm_t += t * t;
    a.norm_r += r * r;

    const v4d err = Abs(t - r);
    a.nan_error |= IsNaN(err);
    a.max_abs_error = Max(a.max_abs_error, err);
    const v4d rel = err / (abs_r + eps);
    a.hundredth -= rel < 1e-2;  // masks are -1: subtracting counts
    a.thousandth -= rel < 1e-3;
    a.ten_thousandth -= rel < 1e-4;
    const v4i nan_both = IsNaN(t) & IsNaN(rt);
    a.mismatches -= ~((t == rt) | nan_both);
    a.above -= t > rt;
    a.below -= t < rt;

    const v4i finite = IsFinite(t) & IsFinite(rt);
    const v4i small = finite & (abs_r <= c.small_value);
    const v4i normal = finite & ~small;
    a.n_small -= small;
    a.small_bench_fail -= small & (err > c.small_value_atol_benchmark);
    a.small_abs_fail -= small & (err > c.small_value_atol_absolute);
    a.n_normal -= normal;
    a.rel_fail -= normal & (rel > c.rtol);
    a.max_rel = Max(a.max_rel, Select(normal, rel, v4d{}));
    a.sum_rel += Select(normal, rel, v4d{});
    a.sum_sq_masked += Select(normal, err * err, v4d{});
    const v4i inf_nan = ~finite;
    if (_mm256_movemask_pd(reinterpret_cast<__m256d>(inf_nan)) != 0) {  // rare: skip the division
      a.n_inf_nan -= inf_nan;
      const v4d tc = Select(t < -kMax, -vmax, Select(kMax < t, vmax, t));  // NaN stays NaN
      const v4d rc = Select(rt < -kMax, -vmax, Select(kMax < rt, vmax, rt));
      const v4d re = Abs(tc - rc) / (abs_r + eps);
      a.inf_nan_fail -= inf_nan & ~((re <= c.rtol) | nan_both);
    }

    // ULP: |t - r| * 2^(mantissa_bits - e), e = max(floor(log2|r|), min_e), e = 0 at r = 0.
    v4d diff;
    if constexpr (kUlpInDouble) {
      diff = err;
    } else {
      diff = Abs(FromFloats(_mm_sub_ps(ToFloats(t), ToFloats(r))));
    }
    const v4i biased = reinterpret_cast<v4i>((reinterpret_cast<v4u>(r) >> 52) & 0x7FF);
    v4i e = biased - 1023;
    e = e < min_exponent ? min_exponent : e;
    e = r == 0 ? zero_exponent : e;
    const v4i k = c.ulp_mantissa_bits - e;
    v4d scaled;
    if constexpr (std::is_same_v<T, fp::Double>) {
      // k reaches 52 + 1022: scale in two steps where 2^k is not a double.
      const v4i k1 = reinterpret_cast<v4i>(reinterpret_cast<v4u>(k + 2048) >> 1) - 1024;
      const v4i in_range = (k >= -1022) & (k <= 1023);
      scaled = Select(in_range, diff * PowerOfTwo(in_range & k),
                      diff * PowerOfTwo(k1) * PowerOfTwo(k - k1));
    } else {
      scaled = diff * PowerOfTwo(k);  // k = mantissa_bits - e is within [-1000, 149]
    }
    const v4d special = Select(t == r, v4d{}, v4d{} + std::numeric_limits<double>::quiet_NaN());
    const v4d ulp = Select(IsFinite(r) & IsFinite(t), scaled, special);
    const v4i ulp_nan = IsNaN(ulp);
    a.ulp_nan |= ulp_nan;
    a.ulp_max = Max(a.ulp_max, ulp);
    a.ulp_sum += Select(ulp_nan, v4d{}, ulp);
    a.ulp_over -= ulp > c.ulp_threshold;
  }

  Accumulator s;
  for (int j = 0; j < 4; ++j) {  // the lanes, combined as Merge combines accumulators
    Accumulator lane;
#define PARITY_LANE(f) lane.f = a.f[j];
#define PARITY_LANE_FLAG(f) lane.f = a.f[j] != 0;
    PARITY_ACCUMULATOR_FIELDS(PARITY_LANE, PARITY_LANE, PARITY_LANE_FLAG)
#undef PARITY_LANE
#undef PARITY_LANE_FLAG
    Merge(s, lane);
  }
  s.n_masked = s.n_small + s.n_inf_nan;
  Merge(out, s);
}

void Avx2Kernel(v1::DType td, v1::DType rd, const void* t, const void* r, int64_t begin,
                int64_t end, const DTypeConstants& c, double eps, Accumulator& a) {
  const int64_t vector_end = begin + (end - begin) / 4 * 4;
  VisitFloatType(td, [&](auto tested) {
    VisitFloatType(rd, [&](auto reference) {
      Run<decltype(tested), decltype(reference)>(t, r, begin, vector_end, c, eps, a);
    });
  });
  // The last 0-3 elements one at a time.
  if (vector_end < end) ScalarKernel(td, rd, t, r, vector_end, end, c, eps, a);
}

}  // namespace

#pragma GCC pop_options

Kernel SimdKernel() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return supported ? &Avx2Kernel : nullptr;
}

#else

Kernel SimdKernel() { return nullptr; }

#endif

}  // namespace parity::server::internal
