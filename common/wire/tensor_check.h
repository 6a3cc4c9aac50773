// Torch-free validation of a wire tensor's header against DecodeLimits.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/wire/limits.h"
#include "common/wire/proto_fwd.h"

namespace parity::common {

// What a validated tensor will need once allocated.
struct TensorExtent {
  uint64_t numel = 0;
  uint64_t bytes = 0;  // numel x element size
  std::size_t element_size = 0;
};

// Checks dtype, dims, numel and byte count of `t` (and, for DATA_FORM_INLINE, that `data` holds
// exactly `bytes`; with a crc32c present, that it matches). Allocates nothing. Errors name `path`
// and the numbers: INVALID_ARGUMENT for malformed headers, RESOURCE_EXHAUSTED for cap violations.
// Not valid for DATA_FORM_UNDEFINED tensors (callers handle those first). Thread-safe.
absl::StatusOr<TensorExtent> CheckTensor(const v1::Tensor& t, const DecodeLimits& limits,
                                         absl::string_view path);

// "[2, 3, 4]" for error messages; shortened after `max_items` entries.
std::string ShapeString(absl::Span<const int64_t> shape, int max_items = 8);

}  // namespace parity::common
