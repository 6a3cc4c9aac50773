#include "common/torch/wire_enums.h"

#include <utility>

namespace parity::common {
namespace {

template <typename Torch, typename Wire, std::size_t N>
std::optional<Wire> ToWire(const std::pair<Torch, Wire> (&table)[N], Torch value) {
  for (const auto& [torch, w] : table) {
    if (torch == value) return w;
  }
  return std::nullopt;
}

template <typename Torch, typename Wire, std::size_t N>
std::optional<Torch> FromWire(const std::pair<Torch, Wire> (&table)[N], int32_t value) {
  for (const auto& [torch, w] : table) {
    if (static_cast<int32_t>(w) == value) return torch;
  }
  return std::nullopt;
}

constexpr std::pair<c10::ScalarType, wire::DType> kDTypes[] = {
    {c10::ScalarType::Bool, wire::kBool},
    {c10::ScalarType::Byte, wire::kUInt8},
    {c10::ScalarType::Char, wire::kInt8},
    {c10::ScalarType::Short, wire::kInt16},
    {c10::ScalarType::Int, wire::kInt32},
    {c10::ScalarType::Long, wire::kInt64},
    {c10::ScalarType::Half, wire::kFloat16},
    {c10::ScalarType::BFloat16, wire::kBFloat16},
    {c10::ScalarType::Float, wire::kFloat32},
    {c10::ScalarType::Double, wire::kFloat64},
    {c10::ScalarType::ComplexFloat, wire::kComplex64},
    {c10::ScalarType::ComplexDouble, wire::kComplex128},
};

constexpr std::pair<c10::Layout, wire::Layout> kLayouts[] = {
    {c10::kStrided, wire::kLayoutStrided},
    {c10::kSparse, wire::kLayoutSparseCoo},
    {c10::kSparseCsr, wire::kLayoutSparseCsr},
    {c10::kMkldnn, wire::kLayoutMkldnn},
};

constexpr std::pair<c10::MemoryFormat, wire::MemoryFormat> kMemoryFormats[] = {
    {c10::MemoryFormat::Contiguous, wire::kFormatContiguous},
    {c10::MemoryFormat::Preserve, wire::kFormatPreserve},
    {c10::MemoryFormat::ChannelsLast, wire::kFormatChannelsLast},
    {c10::MemoryFormat::ChannelsLast3d, wire::kFormatChannelsLast3d},
};

}  // namespace

std::optional<wire::DType> WireDTypeOf(c10::ScalarType type) { return ToWire(kDTypes, type); }
std::optional<c10::ScalarType> ScalarTypeOfWire(int32_t d) { return FromWire(kDTypes, d); }
std::optional<wire::Layout> WireLayoutOf(c10::Layout l) { return ToWire(kLayouts, l); }
std::optional<c10::Layout> LayoutOfWire(int32_t l) { return FromWire(kLayouts, l); }
std::optional<wire::MemoryFormat> WireMemoryFormatOf(c10::MemoryFormat f) {
  return ToWire(kMemoryFormats, f);
}
std::optional<c10::MemoryFormat> MemoryFormatOfWire(int32_t f) {
  return FromWire(kMemoryFormats, f);
}

}  // namespace parity::common
