// parity.v1.DType <-> at::ScalarType. Include only from torch translation units.
#pragma once

#include <optional>

#include <c10/core/ScalarType.h>

#include "parity/v1/parity.pb.h"

namespace parity::common {

// nullopt for ScalarTypes the wire format does not carry (quantized, complex32, ...).
std::optional<v1::DType> ToWireDType(c10::ScalarType type);

// nullopt for DTYPE_UNSPECIFIED or unknown values.
std::optional<c10::ScalarType> ToScalarType(v1::DType dtype);

}  // namespace parity::common
