#include "common/wire/dtype.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace parity::common {
namespace {

struct DTypeInfo {
  wire::DType dtype;
  std::size_t size;
  absl::string_view torch_name;
  absl::string_view short_alias;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {wire::kBool, 1, "torch.bool", "bool"},
    {wire::kUInt8, 1, "torch.uint8", "u8"},
    {wire::kInt8, 1, "torch.int8", "i8"},
    {wire::kInt16, 2, "torch.int16", "i16"},
    {wire::kInt32, 4, "torch.int32", "i32"},
    {wire::kInt64, 8, "torch.int64", "i64"},
    {wire::kFloat16, 2, "torch.float16", "fp16"},
    {wire::kBFloat16, 2, "torch.bfloat16", "bf16"},
    {wire::kFloat32, 4, "torch.float32", "fp32"},
    {wire::kFloat64, 8, "torch.float64", "fp64"},
    {wire::kComplex64, 8, "torch.complex64", "c64"},
    {wire::kComplex128, 16, "torch.complex128", "c128"},
}};

const DTypeInfo* Find(wire::DType dtype) {
  for (const auto& info : kDTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

std::size_t ElementSize(wire::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? 0 : info->size;
}

bool IsKnownDType(int dtype) { return Find(static_cast<wire::DType>(dtype)) != nullptr; }

absl::string_view TorchName(wire::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? absl::string_view("unknown") : info->torch_name;
}

std::optional<wire::DType> ParseDType(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  absl::string_view n = lower;
  if (absl::StartsWith(n, "torch.")) n.remove_prefix(6);
  if (n == "half") return wire::kFloat16;
  if (n == "float") return wire::kFloat32;
  if (n == "double") return wire::kFloat64;
  if (n == "long") return wire::kInt64;
  if (n == "int") return wire::kInt32;
  for (const auto& info : kDTypes) {
    if (n == info.torch_name.substr(6) || n == info.short_alias) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloating(wire::DType dtype) {
  return dtype == wire::kFloat16 || dtype == wire::kBFloat16 || dtype == wire::kFloat32 ||
         dtype == wire::kFloat64;
}

}  // namespace parity::common
