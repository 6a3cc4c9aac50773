// libtorch's enums <-> the wire's (parity.v1): dtypes, layouts, memory formats, each one table
// read both ways. Include only from torch translation units.
#pragma once

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <optional>

#include "common/wire/fields.h"

namespace parity::common {

// nullopt for ScalarTypes the wire format does not carry (quantized, complex32, ...).
std::optional<wire::DType> ToWireDType(c10::ScalarType type);
// nullopt for DTYPE_UNSPECIFIED or unknown values.
std::optional<c10::ScalarType> ToScalarType(wire::DType dtype);

std::optional<c10::Layout> FromWireLayout(wire::Layout layout);

std::optional<c10::MemoryFormat> FromWireMemoryFormat(wire::MemoryFormat format);

}  // namespace parity::common
