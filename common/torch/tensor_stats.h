// The summary of a tensor that travels in place of its contents when it is too large to send
// (DATA_FORM_STATS_ONLY): the agent computes it of the device's tensor, the server of its bench
// and golden outputs, the same way. No protobuf or abseil header (the agent's torch half uses it).
#pragma once

#include <cstdint>

#include "common/wire/tensor_stats.h"

namespace at {
class Tensor;
}  // namespace at

namespace parity::common {

// Min, max, mean and L2 norm of the finite elements (as float64; complex tensors as their real
// and imaginary parts), and the NaN and inf counts. Works in slices, so a huge tensor never needs
// a float64 copy of itself. Any device; may throw c10::Error.
TensorStatsValues TensorStatistics(const at::Tensor& tensor);

}  // namespace parity::common
