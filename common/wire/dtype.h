// Torch-free facts about Parity's wire dtypes (parity.v1.DType).
#pragma once

#include <cstddef>
#include <optional>
#include "absl/strings/string_view.h"

#include "common/wire/fields.h"

namespace parity::common {

// Element size in bytes, or 0 for DTYPE_UNSPECIFIED / values outside the enum.
std::size_t ElementSize(wire::DType dtype);

// True for the enum's defined, non-UNSPECIFIED values.
bool IsKnownDType(int dtype);

// msprobe's spelling, as in its CSV "Dtype" columns: "torch.float32", "torch.bfloat16", ...
absl::string_view TorchName(wire::DType dtype);

// Parses "torch.float32", "float32" or "fp32"-style names; nullopt when unknown.
std::optional<wire::DType> ParseDType(absl::string_view name);

bool IsFloating(wire::DType dtype);  // float16, bfloat16, float32, float64

}  // namespace parity::common
