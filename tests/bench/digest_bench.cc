// What a replica digest costs per byte (docs/replicas.md, issue 69: "CRC32C or a faster hash;
// measure"), on float32 tensors of 64 KiB to 64 MiB, side by side in one run, with a memcpy of
// the same bytes as the floor:
//   crc32c          the CPU's CRC-32C instruction over the bytes (what a host tensor gets);
//   poly64 (torch)  Poly64(): the sum of w_i * (2i + 1) mod 2^64 computed with torch's own
//                   kernels in slices, as a device tensor gets it on its device (here on the CPU,
//                   where it runs through int64 temporaries);
//   poly64 (loop)   the same sum as one C++ loop over the words: what poly64 would cost a host
//                   tensor computed natively, the candidate "faster hash".
// Each row checks its digest changes when one bit of the tensor flips.
//   digest_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/Parallel.h>

#include "agent/torch/replica_digest.h"
#include "common/wire/crc32c.h"
#include "tests/bench/best_seconds.h"

namespace {

using parity::bench::BestSeconds;

uint64_t Poly64Loop(const at::Tensor& t) {
  const auto* w = static_cast<const int32_t*>(t.data_ptr());
  const int64_t n = t.nbytes() / 4;
  uint64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += static_cast<uint64_t>(static_cast<int64_t>(w[i])) * static_cast<uint64_t>(2 * i + 1);
  }
  return sum;
}

uint64_t Crc(const at::Tensor& t) {
  return parity::common::Crc32c(
      std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes()));
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  at::set_num_threads(1);
  const std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{1 << 20}
            : std::vector<int64_t>{64 << 10, 1 << 20, 16 << 20, 64 << 20};
  const int reps = quick ? 2 : 7;
  std::printf("digest_bench: one thread, best of %d, GB/s (and x memcpy of the same bytes)\n",
              reps);
  std::printf("%10s %16s %22s %22s %22s  %s\n", "bytes", "memcpy", "crc32c", "poly64 (torch)",
              "poly64 (loop)", "a flipped bit changes");
  bool all_caught = true;
  for (int64_t bytes : sizes) {
    at::Tensor t = at::randn({bytes / 4});
    at::Tensor copy = at::empty_like(t);
    volatile uint64_t sink = 0;
    const double gb = static_cast<double>(bytes) / 1e9;
    const double copy_s = BestSeconds(reps, [&] {
      std::memcpy(copy.data_ptr(), t.data_ptr(), bytes);
      sink = sink + 1;
    });
    const double crc_s = BestSeconds(reps, [&] { sink = sink + Crc(t); });
    const double torch_s = BestSeconds(reps, [&] {
      sink = sink + static_cast<uint64_t>(parity::agent::Poly64(t).item<int64_t>());
    });
    const double loop_s = BestSeconds(reps, [&] { sink = sink + Poly64Loop(t); });
    // The three digests of the tensor, and of the tensor with one bit flipped mid-way.
    const uint64_t before[] = {
        Crc(t), static_cast<uint64_t>(parity::agent::Poly64(t).item<int64_t>()), Poly64Loop(t)};
    static_cast<int32_t*>(t.data_ptr())[bytes / 8] ^= 1 << 7;
    const uint64_t after[] = {
        Crc(t), static_cast<uint64_t>(parity::agent::Poly64(t).item<int64_t>()), Poly64Loop(t)};
    const bool same_sum = before[1] == before[2];  // the loop and the torch kernels agree
    std::string caught;
    for (int k = 0; k < 3; ++k) {
      caught += before[k] != after[k] ? "yes " : "NO ";
      all_caught = all_caught && before[k] != after[k];
    }
    all_caught = all_caught && same_sum;
    auto cell = [&](double s) {
      char b[64];
      std::snprintf(b, sizeof(b), "%.1f (%.2fx)", gb / s, copy_s / s);
      return std::string(b);
    };
    std::printf("%10lld %16.1f %22s %22s %22s  %s%s\n", static_cast<long long>(bytes), gb / copy_s,
                cell(crc_s).c_str(), cell(torch_s).c_str(), cell(loop_s).c_str(), caught.c_str(),
                same_sum ? "" : "(poly64 loop != torch!)");
  }
  return all_caught ? 0 : 1;
}
