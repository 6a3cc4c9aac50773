#include "common/torch/dtype_map.h"

#include <utility>

namespace parity::common {
namespace {

template <typename Torch, typename Wire, std::size_t N>
std::optional<Wire> ToWire(const std::pair<Torch, Wire> (&table)[N], Torch value) {
  for (const auto& [torch, wire] : table) {
    if (torch == value) return wire;
  }
  return std::nullopt;
}

template <typename Torch, typename Wire, std::size_t N>
std::optional<Torch> FromWire(const std::pair<Torch, Wire> (&table)[N], Wire value) {
  for (const auto& [torch, wire] : table) {
    if (wire == value) return torch;
  }
  return std::nullopt;
}

constexpr std::pair<c10::ScalarType, v1::DType> kDTypes[] = {
    {c10::ScalarType::Bool, v1::DTYPE_BOOL},
    {c10::ScalarType::Byte, v1::DTYPE_UINT8},
    {c10::ScalarType::Char, v1::DTYPE_INT8},
    {c10::ScalarType::Short, v1::DTYPE_INT16},
    {c10::ScalarType::Int, v1::DTYPE_INT32},
    {c10::ScalarType::Long, v1::DTYPE_INT64},
    {c10::ScalarType::Half, v1::DTYPE_FLOAT16},
    {c10::ScalarType::BFloat16, v1::DTYPE_BFLOAT16},
    {c10::ScalarType::Float, v1::DTYPE_FLOAT32},
    {c10::ScalarType::Double, v1::DTYPE_FLOAT64},
    {c10::ScalarType::ComplexFloat, v1::DTYPE_COMPLEX64},
    {c10::ScalarType::ComplexDouble, v1::DTYPE_COMPLEX128},
};

constexpr std::pair<c10::Layout, v1::Layout> kLayouts[] = {
    {c10::kStrided, v1::LAYOUT_STRIDED},
    {c10::kSparse, v1::LAYOUT_SPARSE_COO},
    {c10::kSparseCsr, v1::LAYOUT_SPARSE_CSR},
    {c10::kMkldnn, v1::LAYOUT_MKLDNN},
};

constexpr std::pair<c10::MemoryFormat, v1::MemoryFormat> kMemoryFormats[] = {
    {c10::MemoryFormat::Contiguous, v1::MEMORY_FORMAT_CONTIGUOUS},
    {c10::MemoryFormat::Preserve, v1::MEMORY_FORMAT_PRESERVE},
    {c10::MemoryFormat::ChannelsLast, v1::MEMORY_FORMAT_CHANNELS_LAST},
    {c10::MemoryFormat::ChannelsLast3d, v1::MEMORY_FORMAT_CHANNELS_LAST_3D},
};

}  // namespace

std::optional<v1::DType> ToWireDType(c10::ScalarType type) { return ToWire(kDTypes, type); }
std::optional<c10::ScalarType> ToScalarType(v1::DType dtype) { return FromWire(kDTypes, dtype); }

std::optional<v1::Layout> ToWireLayout(c10::Layout layout) { return ToWire(kLayouts, layout); }
std::optional<c10::Layout> FromWireLayout(v1::Layout layout) { return FromWire(kLayouts, layout); }

std::optional<v1::MemoryFormat> ToWireMemoryFormat(c10::MemoryFormat format) {
  return ToWire(kMemoryFormats, format);
}
std::optional<c10::MemoryFormat> FromWireMemoryFormat(v1::MemoryFormat format) {
  return FromWire(kMemoryFormats, format);
}

}  // namespace parity::common
