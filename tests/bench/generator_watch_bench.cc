// What parity.detect_random costs the training per checked call: the agent reads a mark of the
// call's generator at its entry and at its exit (common::GeneratorMark), and its full state at
// entry (common::GeneratorStateBytes), to replay from should the call draw. Timed side by side
// with a small aten::add (4 KB) on the same thread, so the ratio says how the watch compares to
// a cheap operator. CPU generator only: no device here (CUDA's and torch_npu's Philox state is
// 16 bytes, read the same way as GeneratorStateBytes reads the CPU's).
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
  double best_mark = 1e30, best_state = 1e30, best_add = 1e30;
  for (int round = 0; round < (quick ? 1 : 5); ++round) {  // interleaved, best of the rounds
    best_add = std::min(best_add, NanosPerCall(n, [&] { sink += at::add(a, b).numel(); }));
    best_mark = std::min(
        best_mark, NanosPerCall(n, [&] { sink += parity::common::GeneratorMark(gen).size(); }));
    best_state =
        std::min(best_state,
                 NanosPerCall(n, [&] { sink += parity::common::GeneratorStateBytes(gen).size(); }));
  }
  std::printf("generator_watch_bench: CPU generator, one thread, best of %d rounds of %d calls\n",
              quick ? 1 : 5, n);
  std::printf("  %-44s %9.0f ns\n", "aten::add, 1024 floats (a cheap op)", best_add);
  std::printf("  %-44s %9.0f ns  %.2fx the add\n", "GeneratorMark (watch: at entry and at exit)",
              best_mark, best_mark / best_add);
  std::printf("  %-44s %9.0f ns  %.2fx the add\n", "GeneratorStateBytes (the state at entry)",
              best_state, best_state / best_add);
  const double watch = 2 * best_mark + best_state;
  std::printf("  per watched call: 2 marks + the state = %.0f ns (%.2fx the add)\n", watch,
              watch / best_add);
  return sink == 0 ? 1 : 0;
}
