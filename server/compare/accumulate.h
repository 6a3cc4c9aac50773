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

#include "common/wire/fields.h"
#include "server/compare/accumulator.h"
#include "server/compare/device_compare.h"
#include "server/compare/element.h"
#include "server/compare/float_types.h"
#include "server/compare/metrics.h"

namespace parity::server::internal {

// Calls f(T{}) with the element type of a float dtype (fp::Half, fp::BFloat16, fp::Float,
// fp::Double; any other dtype as fp::Double).
template <typename F>
void VisitFloatType(wire::DType d, F&& f) {
  switch (d) {
    case wire::kFloat16:
      return f(fp::Half{});
    case wire::kBFloat16:
      return f(fp::BFloat16{});
    case wire::kFloat32:
      return f(fp::Float{});
    default:
      return f(fp::Double{});
  }
}

// The CUDA compare's name for a float dtype (any other dtype as kDouble).
inline FloatKind KindOf(wire::DType d) {
  switch (d) {
    case wire::kFloat16:
      return FloatKind::kHalf;
    case wire::kBFloat16:
      return FloatKind::kBFloat16;
    case wire::kFloat32:
      return FloatKind::kFloat;
    default:
      return FloatKind::kDouble;
  }
}

// Accumulates elements [begin, end) of `tested` against `reference` (float dtypes only; the
// reference at least as wide). `eps` is the reference epsilon of the relative error.
using Kernel = void (*)(wire::DType tested, wire::DType reference, const void* t, const void* r,
                        int64_t begin, int64_t end, const DTypeConstants& c, double eps,
                        Accumulator& a);

void ScalarKernel(wire::DType tested, wire::DType reference, const void* t, const void* r,
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
