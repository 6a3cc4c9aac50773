// The comparison's pass on a CUDA device (device_compare.cu): the same per-element rules as the
// host kernels (element.h), summed on the GPU in float64, only the sums coming back. Built when
// the server's libtorch has CUDA and nvcc is found (PARITY_CUDA_COMPARE); otherwise every function
// here reports that (device_compare_none.cc). No CUDA types in this header: torch-free and
// CUDA-free callers include it.
//
// The caller makes the data ready first (synchronizes the stream that wrote it): the kernels run
// on the calling thread's per-thread default stream, and each function returns once its results
// are on the host.
#pragma once

#include <cstdint>
#include <string>

#include "server/compare/accumulator.h"

namespace parity::server::internal {

enum class FloatKind : int { kHalf, kBFloat16, kFloat, kDouble };

// A floating buffer in a CUDA device's memory.
struct DeviceSpan {
  FloatKind kind = FloatKind::kFloat;
  const void* data = nullptr;
};

// How every error of a CUDA compare begins (the server then compares on the host).
inline constexpr char kDeviceCompareError[] = "CUDA compare: ";

// Whether this build has the CUDA compare.
bool DeviceCompareBuilt();

// Each returns "" on success, else what failed (CUDA's error text, or that this build has no
// CUDA compare). `device` is the CUDA device holding both buffers.

// The pass over n elements (n >= 1): `out` gets the sums ComputeMetrics' host pass would.
std::string DeviceAccumulate(int device, DeviceSpan tested, DeviceSpan reference, int64_t n,
                             const DTypeConstants& c, double eps, Accumulator* out);

// The cosine with each side divided by its max-abs first (mt, mr): for sums that overflowed.
std::string DeviceScaledCosine(int device, DeviceSpan tested, DeviceSpan reference, int64_t n,
                               double mt, double mr, double* cosine);

// Elements inf/NaN on the device alone (element.h's DeviceAloneNonFinite): how many, the first,
// and its two values.
struct NonFiniteScan {
  int64_t count = 0;
  int64_t first_index = 0;
  double device = 0;
  double reference = 0;
};
std::string DeviceFindNonFinite(int device, DeviceSpan tested, DeviceSpan reference, int64_t n,
                                NonFiniteScan* out);

}  // namespace parity::server::internal
