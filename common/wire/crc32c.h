// CRC-32C (Castagnoli), as carried in parity.v1.Tensor.crc32c. No abseil or protobuf header:
// the agent's torch half uses it too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace parity::common {

// CRC-32C of `data`, continuing from `crc` (0 to start). Thread-safe. With the CPU's CRC-32C
// instruction where it has one (x86-64 SSE4.2, AArch64 CRC), else Crc32cPortable.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// The same in portable C++ (slicing-by-8), and whether Crc32c uses the CPU's instruction: for
// the tests, which hold the two to the same results.
uint32_t Crc32cPortable(std::string_view data, uint32_t crc = 0);
bool Crc32cUsesCpuInstruction();

}  // namespace parity::common
