// The exact compare the read-only check and the snapshot cache rest on (SameBits,
// agent/torch/tensor_bits.h), per MiB, side by side with memcmp of the same bytes (its floor):
// a contiguous tensor; a transposed view, as addmm reads a linear layer's weight (weight.t()),
// compared in tiles (this build) and one loop a row (SameBitsByRows: before the tiles); the same
// for a batched transpose (attention's k.transpose(-2, -1)). Each tensor equal to its copy, so
// every compare reads it all.
//   tensor_bits_bench [--quick]
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "agent/torch/tensor_bits.h"
#include "common/torch/torch_pch.h"
#include "tests/bench/best_seconds.h"

namespace {

using parity::agent::SameBits;
using parity::agent::SameBitsByRows;
using parity::bench::BestSeconds;

struct Case {
  std::string name;
  std::vector<int64_t> shape;  // of the memory; the view swaps its two last dimensions
  at::ScalarType dtype;
};

void Row(const char* what, double seconds, double mib, double floor) {
  std::printf("  %-34s %9.1f us/MiB %7.2fx memcmp\n", what, seconds * 1e6 / mib, seconds / floor);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 2 : 15;
  at::set_num_threads(1);
  std::vector<Case> cases = {
      {"fp32 256x512 (an MLP's first weight)", {256, 512}, at::kFloat},
      {"fp32 512x512 (an MLP's weight)", {512, 512}, at::kFloat},
      {"bf16 4096x4096 (an LLM's projection)", {4096, 4096}, at::kBFloat16},
      {"fp32 32x64x128 (k.transpose(-2, -1))", {32, 64, 128}, at::kFloat},
  };
  if (quick) cases = {{"fp32 256x512", {256, 512}, at::kFloat}};
  std::printf("tensor_bits_bench: proving a tensor unchanged (SameBits), best of %d, one thread\n",
              reps);
  int wrong = 0;
  for (const Case& c : cases) {
    const at::Tensor memory = at::randn(c.shape).to(c.dtype);
    const int64_t n = memory.dim();
    const at::Tensor view = memory.transpose(n - 2, n - 1);
    const at::Tensor copy = view.contiguous();
    const at::Tensor flat_copy = memory.clone();
    const auto bytes = static_cast<std::size_t>(memory.numel() * memory.element_size());
    const double mib = static_cast<double>(bytes) / (1 << 20);
    volatile int sink = 0;
    const double floor = BestSeconds(
        reps, [&] { sink = sink + std::memcmp(memory.data_ptr(), flat_copy.data_ptr(), bytes); });
    std::printf("%s, %.2f MiB:\n", c.name.c_str(), mib);
    Row("memcmp (the floor)", floor, mib, floor);
    Row("SameBits, contiguous",
        BestSeconds(reps, [&] { sink = sink + SameBits(flat_copy, memory); }), mib, floor);
    Row("SameBits, transposed (tiles)",
        BestSeconds(reps, [&] { sink = sink + SameBits(copy, view); }), mib, floor);
    Row("SameBitsByRows, transposed (before)",
        BestSeconds(reps, [&] { sink = sink + SameBitsByRows(copy, view); }), mib, floor);
    wrong += !SameBits(copy, view) || !SameBitsByRows(copy, view) || !SameBits(flat_copy, memory);
  }
  if (wrong != 0) std::printf("%d compares said equal tensors differ\n", wrong);
  return wrong == 0 ? 0 : 1;
}
