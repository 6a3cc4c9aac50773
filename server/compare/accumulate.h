// The comparison's one pass, as kernels: running sums over a range of elements, merged across
// ranges. Internal to parity_compare (and its tests and benchmark).
//
// The scalar kernel (metrics.cc) is the definition: readable, one element at a time. The SIMD
// kernel (metrics_simd.cc, built with AVX2 and F16C and chosen at run time when the CPU has
// them) computes the same sums four elements at a time; counts and maxima agree exactly, sums
// up to rounding order (tests/server/metrics_kernel_test.cc checks both).
#pragma once

#include <cstdint>

#include "parity/v1/parity.pb.h"
#include "server/compare/metrics.h"

namespace parity::server::internal {

// Running sums of one pass. Counts are int64 so shares are exact for any N.
struct Accumulator {
  double max_abs_tested = 0, max_abs_ref = 0;
  double dot = 0, norm_t = 0, norm_r = 0;
  double max_abs_error = 0;
  bool nan_error = false;
  int64_t hundredth = 0, thousandth = 0, ten_thousandth = 0;
  int64_t mismatches = 0;
  int64_t above = 0, below = 0;  // tested > / < reference cast to the tested dtype
  double sum_sq_masked = 0;
  int64_t n_masked = 0;  // small or inf/nan: excluded from RMSE
  int64_t n_small = 0, small_bench_fail = 0, small_abs_fail = 0;
  int64_t n_normal = 0, rel_fail = 0;
  double max_rel = 0, sum_rel = 0;
  int64_t n_inf_nan = 0, inf_nan_fail = 0;
  double ulp_max = 0, ulp_sum = 0;
  bool ulp_nan = false;
  int64_t ulp_over = 0;
};

// Adds `b`'s sums into `a` (maxima ignore NaN, as the kernels do).
void Merge(Accumulator& a, const Accumulator& b);

// Accumulates elements [begin, end) of `tested` against `reference` (float dtypes only; the
// reference at least as wide). `eps` is the reference epsilon of the relative error.
using Kernel = void (*)(v1::DType tested, v1::DType reference, const void* t, const void* r,
                        int64_t begin, int64_t end, const DTypeConstants& c, double eps,
                        Accumulator& a);

void ScalarKernel(v1::DType tested, v1::DType reference, const void* t, const void* r,
                  int64_t begin, int64_t end, const DTypeConstants& c, double eps, Accumulator& a);

// The AVX2 kernel, or nullptr when this CPU (or this build) has no AVX2 and F16C.
Kernel SimdKernel();

// The kernel ComputeMetrics uses: SIMD when available, unless PARITY_COMPARE_KERNEL=scalar.
Kernel ActiveKernel();

// Threads one large comparison may use (default: the machine's cores). The server lowers it so
// that its replay workers together do not oversubscribe the cores.
void SetCompareThreads(int threads);
int CompareThreads();

}  // namespace parity::server::internal
