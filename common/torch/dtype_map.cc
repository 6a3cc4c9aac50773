#include "common/torch/dtype_map.h"

#include "common/torch/wire_enums.h"

namespace parity::common {
namespace {

template <typename V1, typename Wire>
std::optional<V1> AsV1(std::optional<Wire> w) {
  if (!w) return std::nullopt;
  return static_cast<V1>(*w);
}

}  // namespace

// One table each, in common/torch/wire_enums.cc; the wire numbers are parity.v1's
// (common/wire/fields_check.cc).
std::optional<wire::DType> ToWireDType(c10::ScalarType type) {
  return AsV1<wire::DType>(WireDTypeOf(type));
}
std::optional<c10::ScalarType> ToScalarType(wire::DType dtype) { return ScalarTypeOfWire(dtype); }

std::optional<c10::Layout> FromWireLayout(wire::Layout layout) { return LayoutOfWire(layout); }

std::optional<c10::MemoryFormat> FromWireMemoryFormat(wire::MemoryFormat format) {
  return MemoryFormatOfWire(format);
}

}  // namespace parity::common
