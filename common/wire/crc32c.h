// CRC-32C (Castagnoli), as carried in parity.v1.Tensor.crc32c. No abseil or protobuf header:
// the agent's torch half uses it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace parity::common {

// CRC-32C of `data`, continuing from `crc` (0 to start). Thread-safe.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

}  // namespace parity::common
