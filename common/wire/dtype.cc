#include "common/wire/dtype.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace parity::common {
namespace {

struct DTypeInfo {
  v1::DType dtype;
  std::size_t size;
  absl::string_view torch_name;
  absl::string_view short_alias;
};

constexpr std::array<DTypeInfo, 12> kDTypes = {{
    {v1::DTYPE_BOOL, 1, "torch.bool", "bool"},
    {v1::DTYPE_UINT8, 1, "torch.uint8", "u8"},
    {v1::DTYPE_INT8, 1, "torch.int8", "i8"},
    {v1::DTYPE_INT16, 2, "torch.int16", "i16"},
    {v1::DTYPE_INT32, 4, "torch.int32", "i32"},
    {v1::DTYPE_INT64, 8, "torch.int64", "i64"},
    {v1::DTYPE_FLOAT16, 2, "torch.float16", "fp16"},
    {v1::DTYPE_BFLOAT16, 2, "torch.bfloat16", "bf16"},
    {v1::DTYPE_FLOAT32, 4, "torch.float32", "fp32"},
    {v1::DTYPE_FLOAT64, 8, "torch.float64", "fp64"},
    {v1::DTYPE_COMPLEX64, 8, "torch.complex64", "c64"},
    {v1::DTYPE_COMPLEX128, 16, "torch.complex128", "c128"},
}};

const DTypeInfo* Find(v1::DType dtype) {
  for (const auto& info : kDTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

std::size_t ElementSize(v1::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? 0 : info->size;
}

bool IsKnownDType(int dtype) { return v1::DType_IsValid(dtype) && dtype != v1::DTYPE_UNSPECIFIED; }

absl::string_view TorchName(v1::DType dtype) {
  const DTypeInfo* info = Find(dtype);
  return info == nullptr ? absl::string_view("unknown") : info->torch_name;
}

std::optional<v1::DType> ParseDType(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  absl::string_view n = lower;
  if (absl::StartsWith(n, "torch.")) n.remove_prefix(6);
  if (n == "half") return v1::DTYPE_FLOAT16;
  if (n == "float") return v1::DTYPE_FLOAT32;
  if (n == "double") return v1::DTYPE_FLOAT64;
  if (n == "long") return v1::DTYPE_INT64;
  if (n == "int") return v1::DTYPE_INT32;
  for (const auto& info : kDTypes) {
    if (n == info.torch_name.substr(6) || n == info.short_alias) return info.dtype;
  }
  return std::nullopt;
}

bool IsFloating(v1::DType dtype) {
  return dtype == v1::DTYPE_FLOAT16 || dtype == v1::DTYPE_BFLOAT16 || dtype == v1::DTYPE_FLOAT32 ||
         dtype == v1::DTYPE_FLOAT64;
}

}  // namespace parity::common
