// CRC-32C of a tensor payload (every chunked tensor carries one: the agent computes it when it
// sends, the server when it decodes): the CPU's instruction against the portable slicing-by-8, on
// the same buffer in one run, with their ratio.
//   crc_bench [--quick]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/wire/crc32c.h"
#include "tests/bench/best_seconds.h"

namespace {

using parity::bench::BestSeconds;

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::size_t bytes = quick ? (1u << 20) : (64u << 20);
  std::string data(bytes, '\0');
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  volatile uint32_t sink = 0;
  const int reps = quick ? 2 : 7;
  const double portable =
      BestSeconds(reps, [&] { sink = sink + parity::common::Crc32cPortable(data); });
  const double chosen = BestSeconds(reps, [&] { sink = sink + parity::common::Crc32c(data); });
  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf("crc_bench: %.0f MB, best of %d; Crc32c uses the CPU's instruction: %s\n", mb, reps,
              parity::common::Crc32cUsesCpuInstruction() ? "yes" : "no");
  std::printf("%-28s %10s\n", "crc32c", "GB/s");
  std::printf("%-28s %10.2f\n", "portable (slicing-by-8)", mb / portable / 1e3);
  std::printf("%-28s %10.2f   %.1fx\n", "Crc32c (as the codec runs)", mb / chosen / 1e3,
              portable / chosen);
  return parity::common::Crc32c(data) == parity::common::Crc32cPortable(data) ? 0 : 1;
}
