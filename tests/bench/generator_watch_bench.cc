// What parity.detect_random costs the training per checked call: the agent copies the call's
// generator at its entry (common::GeneratorEntry::Take: the CPU generator's engine, no tensor)
// and compares it at exit (Moved); only a call that drew has its state serialised
// (StateBytes). Timed side by side with a small aten::add (4 KB) on the same thread, so the
// ratio says how the watch compares to a cheap operator, and with libtorch's own state read
// (GeneratorStateBytes: a tensor a call, what the agent read at every entry before). CPU
// generator only: no device here (CUDA's and torch_npu's Philox state is 16 bytes, read as
// GeneratorStateBytes reads it).
//   generator_watch_bench [--quick]
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "common/torch/generator_read.h"
#include "common/torch/torch_pch.h"

namespace {

double NanosPerCall(int n, const std::function<void()>& f) {
  for (int i = 0; i < n / 10; ++i) f();  // warm up
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(end - start).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int n = quick ? 2000 : 200000;
  at::set_num_threads(1);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  const at::Tensor a = at::rand({1024});
  const at::Tensor b = at::rand({1024});
  std::size_t sink = 0;
  double best_watch = 1e30, best_state = 1e30, best_add = 1e30;
  parity::common::GeneratorEntry entry;
  for (int round = 0; round < (quick ? 1 : 5); ++round) {  // interleaved, best of the rounds
    best_add = std::min(best_add, NanosPerCall(n, [&] { sink += at::add(a, b).numel(); }));
    best_watch = std::min(best_watch, NanosPerCall(n, [&] {
                            entry.Take(gen);
                            sink += entry.Moved(gen) ? 0 : 1;
                          }));
    best_state =
        std::min(best_state,
                 NanosPerCall(n, [&] { sink += parity::common::GeneratorStateBytes(gen).size(); }));
  }
  std::printf("generator_watch_bench: CPU generator, one thread, best of %d rounds of %d calls\n",
              quick ? 1 : 5, n);
  std::printf("  %-44s %9.0f ns\n", "aten::add, 1024 floats (a cheap op)", best_add);
  std::printf("  %-44s %9.0f ns  %.2fx the add\n", "the watch: Take at entry + Moved at exit",
              best_watch, best_watch / best_add);
  std::printf("  %-44s %9.0f ns  %.2fx the add\n", "GeneratorStateBytes (libtorch's state read)",
              best_state, best_state / best_add);
  if (entry.StateBytes() != parity::common::GeneratorStateBytes(gen)) {
    std::printf("the entry's state differs from libtorch's own read\n");
    return 1;
  }
  return sink == 0 ? 1 : 0;
}
