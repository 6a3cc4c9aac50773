// The comparison's one pass, as kernels: running sums over a range of elements, merged across
// ranges. Internal to parity_compare (and its tests and benchmark).
//
// The scalar kernel (metrics.cc) is the definition: readable, one element at a time. The SIMD
// kernels (metrics_simd.cc: AVX2 with F16C, and AVX-512, chosen at run time by what the CPU
// has) compute the same sums 4 to 16 elements at a time; counts and maxima agree exactly, sums
// up to rounding order (tests/server/compare/metrics_kernel_test.cc checks both).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "parity/v1/parity.pb.h"
#include "server/compare/float_types.h"
#include "server/compare/metrics.h"

namespace parity::server::internal {

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

// Calls f(T{}) with the element type of a float dtype (fp::Half, fp::BFloat16, fp::Float,
// fp::Double; any other dtype as fp::Double).
template <typename F>
void VisitFloatType(v1::DType d, F&& f) {
  switch (d) {
    case v1::DTYPE_FLOAT16:
      return f(fp::Half{});
    case v1::DTYPE_BFLOAT16:
      return f(fp::BFloat16{});
    case v1::DTYPE_FLOAT32:
      return f(fp::Float{});
    default:
      return f(fp::Double{});
  }
}

// Whether a kernel computes abs_err and rel_err as float32 values: a float16/bfloat16 device
// against a reference of at most float32. Both sides are float32 values there, and msprobe's
// numpy computes these errors in float32, so Parity's match its CSVs bit for bit; everything else
// is float64, and so is every sum of them in the scalar kernel (the SIMD kernel's float32-lane pass
// adds them in short float32 runs first: NarrowPass in metrics_simd_kernel.inc).
template <typename T, typename R>
inline constexpr bool kErrorsInFloat =
    (std::is_same_v<T, fp::Half> ||
     std::is_same_v<T, fp::BFloat16>)&&!std::is_same_v<R, fp::Double>;

// Adds `b`'s sums into `a` (maxima ignore NaN, as the kernels do).
void Merge(Accumulator& a, const Accumulator& b);

// Accumulates elements [begin, end) of `tested` against `reference` (float dtypes only; the
// reference at least as wide). `eps` is the reference epsilon of the relative error.
using Kernel = void (*)(v1::DType tested, v1::DType reference, const void* t, const void* r,
                        int64_t begin, int64_t end, const DTypeConstants& c, double eps,
                        Accumulator& a);

void ScalarKernel(v1::DType tested, v1::DType reference, const void* t, const void* r,
                  int64_t begin, int64_t end, const DTypeConstants& c, double eps, Accumulator& a);

// The SIMD kernels this CPU and this build can run, best first ("avx512", "avx2" on x86-64 with
// them; "vec128", 128-bit vectors for the build's baseline: SSE2, NEON); empty only for a
// compiler without GCC/Clang vector extensions.
struct NamedKernel {
  const char* name;
  Kernel kernel;
};
std::vector<NamedKernel> SimdKernels();

// The kernel ComputeMetrics uses: the best SIMD kernel, or the one PARITY_COMPARE_KERNEL names
// ("scalar", "vec128", "avx2", "avx512") when this CPU has it.
Kernel ActiveKernel();
// The choice behind ActiveKernel: `wanted` ("" = the best) among `simd`; an unknown or
// unavailable name falls back to the best with `warning` saying so.
Kernel ChooseKernel(const std::string& wanted, const std::vector<NamedKernel>& simd,
                    std::string* warning);

// Threads one large comparison may use (default: the machine's cores). The server lowers it so
// that its replay workers together do not oversubscribe the cores.
void SetCompareThreads(int threads);
int CompareThreads();

}  // namespace parity::server::internal
