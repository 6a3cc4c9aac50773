#include "common/torch/dtype_map.h"

namespace parity::common {

std::optional<v1::DType> ToWireDType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool:
      return v1::DTYPE_BOOL;
    case c10::ScalarType::Byte:
      return v1::DTYPE_UINT8;
    case c10::ScalarType::Char:
      return v1::DTYPE_INT8;
    case c10::ScalarType::Short:
      return v1::DTYPE_INT16;
    case c10::ScalarType::Int:
      return v1::DTYPE_INT32;
    case c10::ScalarType::Long:
      return v1::DTYPE_INT64;
    case c10::ScalarType::Half:
      return v1::DTYPE_FLOAT16;
    case c10::ScalarType::BFloat16:
      return v1::DTYPE_BFLOAT16;
    case c10::ScalarType::Float:
      return v1::DTYPE_FLOAT32;
    case c10::ScalarType::Double:
      return v1::DTYPE_FLOAT64;
    case c10::ScalarType::ComplexFloat:
      return v1::DTYPE_COMPLEX64;
    case c10::ScalarType::ComplexDouble:
      return v1::DTYPE_COMPLEX128;
    default:
      return std::nullopt;
  }
}

std::optional<c10::ScalarType> ToScalarType(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_BOOL:
      return c10::ScalarType::Bool;
    case v1::DTYPE_UINT8:
      return c10::ScalarType::Byte;
    case v1::DTYPE_INT8:
      return c10::ScalarType::Char;
    case v1::DTYPE_INT16:
      return c10::ScalarType::Short;
    case v1::DTYPE_INT32:
      return c10::ScalarType::Int;
    case v1::DTYPE_INT64:
      return c10::ScalarType::Long;
    case v1::DTYPE_FLOAT16:
      return c10::ScalarType::Half;
    case v1::DTYPE_BFLOAT16:
      return c10::ScalarType::BFloat16;
    case v1::DTYPE_FLOAT32:
      return c10::ScalarType::Float;
    case v1::DTYPE_FLOAT64:
      return c10::ScalarType::Double;
    case v1::DTYPE_COMPLEX64:
      return c10::ScalarType::ComplexFloat;
    case v1::DTYPE_COMPLEX128:
      return c10::ScalarType::ComplexDouble;
    default:
      return std::nullopt;
  }
}

}  // namespace parity::common
