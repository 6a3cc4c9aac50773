// libtorch's enums <-> the wire's numbers (common/wire/fields.h), one table each, read both ways.
// No protobuf or abseil header: the agent's torch half uses it; common/torch/dtype_map.h gives
// the same tables as parity.v1's generated enums.
#pragma once

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>

#include "common/wire/fields.h"

namespace parity::common {

// nullopt for ScalarTypes the wire format does not carry (quantized, complex32, ...).
std::optional<wire::DType> WireDTypeOf(c10::ScalarType type);
// nullopt for DTYPE_UNSPECIFIED or unknown numbers.
std::optional<c10::ScalarType> ScalarTypeOfWire(int32_t dtype);
std::optional<wire::Layout> WireLayoutOf(c10::Layout layout);
std::optional<c10::Layout> LayoutOfWire(int32_t layout);
std::optional<wire::MemoryFormat> WireMemoryFormatOf(c10::MemoryFormat format);
std::optional<c10::MemoryFormat> MemoryFormatOfWire(int32_t format);

}  // namespace parity::common
