// The comparison pass four elements at a time (AVX2 or AVX-512; F16C for float16), chosen at
// run time.
//
// Same arithmetic as the scalar kernel in metrics.cc, element for element: every count and
// maximum is identical, and only the order of the floating sums differs (four lanes, merged at
// the end). Branches become masks: each element's contribution is selected, never skipped.
//
// Only the functions between the target pragmas are compiled for AVX2 or AVX-512, so nothing from
// a header (an inline function the linker might share with the portable code) ever carries those
// instructions onto a CPU without them.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "server/compare/accumulate.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PARITY_COMPARE_SIMD 1
#include <immintrin.h>
#endif

namespace parity::server::internal {

#ifdef PARITY_COMPARE_SIMD

// One copy of the kernel per instruction set. AVX-512 (F, VL, DQ, BW) runs the same 4-wide code
// with 32 vector registers and mask registers, so the many accumulators are not spilled.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace avx2 {
namespace {
#include "server/compare/metrics_simd_kernel.inc"
}  // namespace
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,f16c,avx512f,avx512vl,avx512dq,avx512bw")
namespace avx512 {
namespace {
#include "server/compare/metrics_simd_kernel.inc"
}  // namespace
}  // namespace avx512
#pragma GCC pop_options

std::vector<NamedKernel> SimdKernels() {
  std::vector<NamedKernel> out;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")) {
    out.push_back({"avx512", &avx512::Kernel});
  }
  if (avx2) out.push_back({"avx2", &avx2::Kernel});
  return out;
}

#else

std::vector<NamedKernel> SimdKernels() { return {}; }

#endif

}  // namespace parity::server::internal
