// Where a device output is inf or NaN and its reference is finite within the device dtype's range:
// the words a verdict starts with when an output overflowed ("mean ULP NaN" says nothing of why).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "server/compare/metrics.h"

namespace parity::server {

struct NonFinite {
  int64_t count = 0;        // elements inf/NaN on the device and finite in the reference
  int64_t first_index = 0;  // the first of them (flat, row-major)
  double device = 0;        // its value on the device (inf, -inf or NaN)
  double reference = 0;     // and in the reference
};

// Scans a floating pair of equal element counts (float16/bfloat16/float32/float64 each side);
// nullopt when no element is inf/NaN on the device alone, or for other dtypes.
std::optional<NonFinite> FindDeviceNonFinite(const TensorView& device, const TensorView& reference);

// "device output has 3 inf/NaN where the reference is finite (first at element 17: inf,
// reference 70016)"
std::string NonFiniteMessage(const NonFinite& n);

}  // namespace parity::server
