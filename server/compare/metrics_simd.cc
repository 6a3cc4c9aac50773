// The comparison pass several elements at a time: eight (AVX-512) or four (AVX2) doubles per
// vector on x86-64, F16C for float16, the instruction set chosen at run time; two doubles per
// vector on any CPU (vec128: 128-bit vector extensions only, which are SSE2 on x86-64 and NEON on
// AArch64, float16 converted in integer arithmetic).
//
// Where every value of a vector is finite (nearly always), one fused loop computes every metric:
// on float64 lanes for float32 devices (FusedPass), on float32 lanes, twice as many elements per
// vector, for float16/bfloat16 devices (NarrowPass). Other vectors, float64 devices and the
// tails run as two loops over L1-sized blocks (ValuePass, ComparePass), each keeping half the
// running sums in registers, with every inf/NaN rule.
//
// Same arithmetic as the scalar kernel in metrics.cc, element for element: every count and
// maximum is identical, and only the order of the floating sums differs (one partial sum per
// lane, merged at the end). Branches become masks: each element's contribution is selected, never
// skipped.
//
// Only the functions between the target pragmas are compiled for AVX2 or AVX-512, so nothing from
// a header (an inline function the linker might share with the portable code) ever carries those
// instructions onto a CPU without them. vec128 is compiled for the build's baseline.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "server/compare/accumulate.h"

#if defined(__GNUC__) || defined(__clang__)
#define PARITY_COMPARE_VECTOR 1  // GCC/Clang vector extensions
#endif
#if defined(PARITY_COMPARE_VECTOR) && defined(__x86_64__)
#define PARITY_COMPARE_X86 1
#include <immintrin.h>
#endif

namespace parity::server::internal {

#ifdef PARITY_COMPARE_X86

// One copy of the kernel body per instruction set, each with its vector width and the few
// operations vector extensions do not express. AVX2: 4 doubles per vector. AVX-512 (F, VL, DQ,
// BW): 8 doubles per vector, 32 vector registers and mask registers.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
// Eight float16 <-> float32 at a time (F16C, 256 bits): the AVX2 kernel's wide lanes and the
// AVX-512 kernel's narrow ones (AVX-512 code may inline these: its target includes F16C).
namespace f16c8 {
namespace {
inline __m256 Load(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 RoundThroughHalf(__m256 f) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
}
}  // namespace
}  // namespace f16c8

namespace avx2 {
namespace {
constexpr int kLanes = 4;
#include "server/compare/metrics_simd_types.inc"
// After the types it is written in:
#include "server/compare/metrics_simd_generic.inc"
inline VF LoadHalf(const uint16_t* p) {
  return reinterpret_cast<VF>(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline VF RoundThroughHalf(VF f) {
  return reinterpret_cast<VF>(
      _mm_cvtph_ps(_mm_cvtps_ph(reinterpret_cast<__m128>(f), _MM_FROUND_TO_NEAREST_INT)));
}
inline bool AnyLane(VI mask) { return _mm256_movemask_pd(reinterpret_cast<__m256d>(mask)) != 0; }
inline WF LoadHalfWide(const uint16_t* p) { return reinterpret_cast<WF>(f16c8::Load(p)); }
inline WF RoundThroughHalf(WF f) {
  return reinterpret_cast<WF>(f16c8::RoundThroughHalf(reinterpret_cast<__m256>(f)));
}
inline bool AnyLane(WI mask) { return _mm256_movemask_ps(reinterpret_cast<__m256>(mask)) != 0; }
// The larger of a and x where neither is NaN, in one instruction (the fast passes' groups).
inline WF MaxOfNumbers(WF a, WF x) {
  return reinterpret_cast<WF>(
      _mm256_max_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(x)));
}
inline VD MaxOfNumbers(VD a, VD x) {
  return reinterpret_cast<VD>(
      _mm256_max_pd(reinterpret_cast<__m256d>(a), reinterpret_cast<__m256d>(x)));
}
using UlpScaler = GenericUlpScaler;
inline VF LowHalf(WF w) { return __builtin_shufflevector(w, w, 0, 1, 2, 3); }
inline VF HighHalf(WF w) { return __builtin_shufflevector(w, w, 4, 5, 6, 7); }
inline VD ToDouble(VF f) {
  return reinterpret_cast<VD>(_mm256_cvtps_pd(reinterpret_cast<__m128>(f)));
}
inline VF ToFloat(VD d) {
  return reinterpret_cast<VF>(_mm256_cvtpd_ps(reinterpret_cast<__m256d>(d)));
}
#include "server/compare/metrics_simd_kernel.inc"
}  // namespace
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,f16c,avx512f,avx512vl,avx512dq,avx512bw")
namespace avx512 {
namespace {
constexpr int kLanes = 8;
#include "server/compare/metrics_simd_types.inc"
inline VF LoadHalf(const uint16_t* p) { return reinterpret_cast<VF>(f16c8::Load(p)); }
inline VF RoundThroughHalf(VF f) {
  return reinterpret_cast<VF>(f16c8::RoundThroughHalf(reinterpret_cast<__m256>(f)));
}
inline bool AnyLane(VI mask) {
  const __m512i m = reinterpret_cast<__m512i>(mask);
  return _mm512_test_epi64_mask(m, m) != 0;
}
inline WF LoadHalfWide(const uint16_t* p) {
  return reinterpret_cast<WF>(
      _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}
inline WF RoundThroughHalf(WF f) {
  const __m256i h =
      _mm512_maskz_cvtps_ph(0xFFFF, reinterpret_cast<__m512>(f), _MM_FROUND_TO_NEAREST_INT);
  return reinterpret_cast<WF>(_mm512_maskz_cvtph_ps(0xFFFF, h));
}
inline bool AnyLane(WI mask) {
  const __m512i m = reinterpret_cast<__m512i>(mask);
  return _mm512_test_epi32_mask(m, m) != 0;
}
inline WF MaxOfNumbers(WF a, WF x) {
  return reinterpret_cast<WF>(
      _mm512_maskz_max_ps(0xFFFF, reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(x)));
}
inline VD MaxOfNumbers(VD a, VD x) {
  return reinterpret_cast<VD>(
      _mm512_maskz_max_pd(0xFF, reinterpret_cast<__m512d>(a), reinterpret_cast<__m512d>(x)));
}
// As the AVX2 one, with AVX-512's exponent instructions: getexp is floor(log2|r|) for every
// nonzero finite r (subnormals too; below min_exponent either way), scalef multiplies by 2^k in
// one rounding, so the results are the same. (The zero-masked forms, as for ToDouble below.)
class UlpScaler {
 public:
  UlpScaler(int mantissa_bits, int min_exponent)
      : mantissa_bits_(_mm512_set1_ps(static_cast<float>(mantissa_bits))),
        min_exponent_(_mm512_set1_ps(static_cast<float>(min_exponent))),
        zero_exponent_(_mm512_set1_ps(static_cast<float>(std::max(min_exponent, 0)))) {}
  WF operator()(WF err, WF r) const {
    const __m512 rv = reinterpret_cast<__m512>(r);
    __m512 e = _mm512_maskz_max_ps(0xFFFF, _mm512_maskz_getexp_ps(0xFFFF, rv), min_exponent_);
    const __mmask16 zero = _mm512_cmp_ps_mask(rv, _mm512_setzero_ps(), _CMP_EQ_OQ);
    e = _mm512_mask_mov_ps(e, zero, zero_exponent_);
    const __m512 k = _mm512_sub_ps(mantissa_bits_, e);
    return reinterpret_cast<WF>(_mm512_maskz_scalef_ps(0xFFFF, reinterpret_cast<__m512>(err), k));
  }

 private:
  __m512 mantissa_bits_, min_exponent_, zero_exponent_;
};
inline VF LowHalf(WF w) { return __builtin_shufflevector(w, w, 0, 1, 2, 3, 4, 5, 6, 7); }
inline VF HighHalf(WF w) { return __builtin_shufflevector(w, w, 8, 9, 10, 11, 12, 13, 14, 15); }
// The zero-masked forms: the plain ones start from _mm512_undefined_*, which GCC 12 flags.
inline VD ToDouble(VF f) {
  return reinterpret_cast<VD>(_mm512_maskz_cvtps_pd(0xFF, reinterpret_cast<__m256>(f)));
}
inline VF ToFloat(VD d) {
  return reinterpret_cast<VF>(_mm512_maskz_cvtpd_ps(0xFF, reinterpret_cast<__m512d>(d)));
}
#include "server/compare/metrics_simd_kernel.inc"
}  // namespace
}  // namespace avx512
#pragma GCC pop_options

#endif  // PARITY_COMPARE_X86

#ifdef PARITY_COMPARE_VECTOR
// 128-bit vectors in vector extensions alone, for the build's baseline instruction set: SSE2 on
// x86-64 (where it is the fallback for CPUs without AVX2 and F16C, and a kernel the tests check on
// every x86 machine), NEON on AArch64 (Kunpeng, Graviton, Grace hosts).
namespace vec128 {
namespace {
constexpr int kLanes = 2;
#include "server/compare/metrics_simd_types.inc"
// After the types it is written in:
#include "server/compare/metrics_simd_generic.inc"
inline VF LoadHalf(const uint16_t* p) {
  VU16 h;
  std::memcpy(&h, p, sizeof(h));
  return HalfBitsToFloat<VF>(__builtin_convertvector(h, VU32));
}
inline WF LoadHalfWide(const uint16_t* p) {
  WU16 h;
  std::memcpy(&h, p, sizeof(h));
  return HalfBitsToFloat<WF>(__builtin_convertvector(h, WU));
}
inline VF RoundThroughHalf(VF f) { return RoundThroughHalfBits<VF, VU32, VI32>(f); }
inline WF RoundThroughHalf(WF f) { return RoundThroughHalfBits<WF, WU, WI>(f); }
inline bool AnyLane(VI mask) { return AnyLaneOf(mask); }
inline bool AnyLane(WI mask) { return AnyLaneOf(mask); }
// Neither is NaN here, so the select needs no NaN rule (maxps on SSE2).
inline WF MaxOfNumbers(WF a, WF x) { return a < x ? x : a; }
inline VD MaxOfNumbers(VD a, VD x) { return a < x ? x : a; }
using UlpScaler = GenericUlpScaler;
inline VF LowHalf(WF w) { return __builtin_shufflevector(w, w, 0, 1); }
inline VF HighHalf(WF w) { return __builtin_shufflevector(w, w, 2, 3); }
inline VD ToDouble(VF f) { return __builtin_convertvector(f, VD); }
inline VF ToFloat(VD d) { return __builtin_convertvector(d, VF); }
#include "server/compare/metrics_simd_kernel.inc"
}  // namespace
}  // namespace vec128
#endif  // PARITY_COMPARE_VECTOR

std::vector<NamedKernel> SimdKernels() {
  std::vector<NamedKernel> out;
#ifdef PARITY_COMPARE_X86
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")) {
    out.push_back({"avx512", &avx512::Kernel});
  }
  if (avx2) out.push_back({"avx2", &avx2::Kernel});
#endif
#ifdef PARITY_COMPARE_VECTOR
  out.push_back({"vec128", &vec128::Kernel});
#endif
  return out;
}

}  // namespace parity::server::internal
