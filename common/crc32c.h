// CRC-32C (Castagnoli), as carried in parity.v1.Tensor.crc32c.
#pragma once

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace parity::common {

// CRC-32C of `data`, continuing from `crc` (0 to start). Thread-safe.
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

}  // namespace parity::common
