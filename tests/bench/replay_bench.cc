// Replay throughput: how long the server takes to check one call (decode, replay on the bench
// device, float64 golden, compare), with the bench on the CPU and, where this libtorch sees a
// GPU, on CUDA, measured side by side in one run.
//   replay_bench [--quick] [--only=TEXT] [--list]
// (--list prints the rows' labels, one a line: scripts/gpu-check.sh runs them one by one when the
// whole run dies, so one row's crash costs only that row.)
// For each call: repetitions alternate the checkers (CPU bench; CUDA bench with the golden on the
// GPU, as the server runs it; CUDA bench with the golden on the CPU, as before; CUDA bench
// without the golden), so all see the same machine; each column is the median time per call,
// "speedup" the CPU bench's time over the CUDA bench's. The replay and compare columns split a
// bench's time into replay (decode, bench and golden) and compare (judging every output), as the
// verdict reports them. The device side of each call is this process on the
// CPU, as in the tests.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/crash_report.h"
#include "common/torch/torch_pch.h"
#include "common/transport/grpc_tuning.h"
#include "parity/v1/parity.pb.h"
#include "server/compare/standards.h"
#include "server/replay/call_checker.h"
#include "tests/testing/op_cases.h"

namespace {

using parity::server::CallChecker;
using parity::server::CallOutcome;
using parity::server::StandardsTable;
using parity::testing::R;
using parity::testing::Stack;
namespace v1 = parity::v1;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  std::string label, op, overload;
  Stack args;
};

std::vector<Row> Rows(bool quick) {
  const int64_t s = quick ? 4 : 1;  // --quick: smaller tensors, same ops
  const c10::List<int64_t> ones({1, 1}), zeros({0, 0});
  return {
      {"mm 1024x1024x1024", "aten::mm", "", {R({1024 / s, 1024}, 1), R({1024, 1024 / s}, 2)}},
      {"conv 8x64x56x56 k3",
       "aten::convolution",
       "",
       {R({8 / s, 64, 56, 56}, 3), R({64, 64, 3, 3}, 4), c10::IValue(), ones, ones, ones, false,
        zeros, 1}},
      {"softmax 64x32768", "aten::_softmax", "", {R({64 / s, 32768}, 5), 1, false}},
      {"layer_norm 4096x1024",
       "aten::native_layer_norm",
       "",
       {R({4096 / s, 1024}, 6), c10::List<int64_t>({1024}), R({1024}, 7), R({1024}, 8), 1e-5}},
      {"gelu 4M", "aten::gelu", "", {R({4096 / s, 1024}, 9), std::string("none")}},
      {"add 4M", "aten::add", "Tensor", {R({4096 / s, 1024}, 10), R({4096 / s, 1024}, 11), 1}},
      // Attention over 1,024 tokens, 4 heads of 128 (a call's tensors inline, as in the tests:
      // 16 MiB at most): the scores, their softmax, and the weighted values.
      {"attn QK^T 4x1024x128",
       "aten::bmm",
       "",
       {R({4 / s, 1024, 128}, 12), R({4 / s, 128, 1024}, 13)}},
      {"attn softmax 4x1024^2", "aten::_softmax", "", {R({4 / s, 1024, 1024}, 14), -1, false}},
      {"attn PV 4x1024x1024",
       "aten::bmm",
       "",
       {R({4 / s, 1024, 1024}, 15), R({4 / s, 1024, 128}, 16)}},
      // An LLM layer in bfloat16, as a mixed-precision training calls it (each tensor at most
      // the agent's 16 MiB inline limit): 2,048 tokens of a 2,048-wide model projected to 4,096,
      // its attention's scores and their softmax (8 heads of 128 over 1,024 tokens), and its
      // RMSNorm's reduction.
      {"llm linear bf16 2048x2048x4096",
       "aten::linear",
       "",
       {R({2048 / s, 2048}, 17, at::kBFloat16), R({4096 / s, 2048}, 18, at::kBFloat16),
        c10::IValue()}},
      {"llm QK^T bf16 8x1024x128",
       "aten::bmm",
       "",
       {R({8 / s, 1024, 128}, 19, at::kBFloat16), R({8 / s, 128, 1024}, 20, at::kBFloat16)}},
      {"llm softmax bf16 8x1024^2",
       "aten::_softmax",
       "",
       {R({8 / s, 1024, 1024}, 21, at::kBFloat16), -1, false}},
      {"llm mean bf16 2048x2048",
       "aten::mean",
       "dim",
       {R({2048 / s, 2048}, 22, at::kBFloat16), c10::List<int64_t>({-1}), true, c10::IValue()}},
  };
}

}  // namespace

int main(int argc, char** argv) {
  parity::common::InstallCrashReport(argv[0]);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured, even into a pipe
  bool quick = false, list = false;
  std::string only;  // --only=TEXT: the rows whose label holds TEXT (to profile one)
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--list") == 0) {
      list = true;
    } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
      only = argv[i] + 7;
    } else {
      std::fprintf(stderr, "usage: replay_bench [--quick] [--only=TEXT] [--list]\n");
      return 2;
    }
  }
  if (list) {
    for (const Row& row : Rows(quick)) std::printf("%s\n", row.label.c_str());
    return 0;
  }
  // As parity-server runs: large tensors stay in the heap instead of being mapped and unmapped
  // (page faults were a third of a gelu check's time without it).
  parity::common::KeepLargeAllocations(std::size_t{256} << 20);
  const bool cuda = at::hasCUDA() && at::getNumGPUs() > 0;
  struct Bench {
    std::string name;
    std::unique_ptr<CallChecker> checker;
  };
  std::vector<Bench> benches;
  auto add = [&](const std::string& name, const std::string& device, bool golden,
                 parity::server::GoldenDevice golden_device) {
    parity::server::CheckerOptions options;
    options.bench_device = device;
    options.golden = golden;
    options.golden_device = golden_device;
    auto c = CallChecker::Create(options, StandardsTable::Default());
    if (!c.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(c.status().message()).c_str());
      std::exit(1);
    }
    benches.push_back({name, *std::move(c)});
  };
  using parity::server::GoldenDevice;
  add("cpu", "cpu", true, GoldenDevice::kAuto);
  if (cuda) {
    add("cuda", "cuda:0", true, GoldenDevice::kAuto);
    add("cuda, golden on cpu", "cuda:0", true, GoldenDevice::kCpu);
    add("cuda, no golden", "cuda:0", false, GoldenDevice::kAuto);
  }
  const int reps = quick ? 2 : 7;
  std::printf("replay_bench: %d repetitions; bench devices: cpu%s; %d CPU threads\n", reps,
              cuda ? ", cuda:0" : "", at::get_num_threads());
  std::printf("%-30s %9s %10s %10s %10s", "call", "MB", "cpu ms", "replay", "compare");
  if (cuda)
    std::printf(" %10s %8s %10s %8s %10s %10s %10s", "cuda ms", "speedup", "gold cpu", "speedup",
                "no golden", "replay", "compare");
  std::printf("  verdicts\n");
  int failures = 0;
  std::vector<std::string> stages;
  for (const Row& row : Rows(quick)) {
    if (row.label.find(only) == std::string::npos) continue;
    const v1::ApiCall call = parity::testing::BuildCall(row.op, row.overload, row.args);
    const double mb = static_cast<double>(call.ByteSizeLong()) / 1e6;
    std::vector<std::vector<double>> times(benches.size());
    std::vector<double> replay, compare, cpu_replay, cpu_compare;
    // Where the CUDA bench's time goes: the checking thread's CPU time in each stage (a wait for
    // the GPU spins, so it counts too).
    std::vector<double> st_decode, st_bench, st_golden, st_compare, st_to_host;
    std::string verdicts;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up (kernels, cuBLAS handles)
      for (std::size_t b = 0; b < benches.size(); ++b) {
        const auto start = std::chrono::steady_clock::now();
        const CallOutcome r = benches[b].checker->Judge(call);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        if (rep < 0) {
          absl::StrAppend(&verdicts, verdicts.empty() ? "" : "/",
                          parity::server::StatusText(r.status));
          if (r.status == parity::server::CheckStatus::kRejected ||
              r.status == parity::server::CheckStatus::kSkip) {
            std::fprintf(stderr, "%s on %s: %s\n", row.label.c_str(), benches[b].name.c_str(),
                         r.message.c_str());
            ++failures;
          }
          continue;
        }
        times[b].push_back(ms);
        if (b == 0) {
          cpu_replay.push_back(r.replay_seconds * 1e3);
          cpu_compare.push_back(r.compare_seconds * 1e3);
        }
        if (benches[b].name == "cuda") {
          replay.push_back(r.replay_seconds * 1e3);
          compare.push_back(r.compare_seconds * 1e3);
          st_decode.push_back(r.cpu.decode * 1e3);
          st_bench.push_back(r.cpu.bench * 1e3);
          st_golden.push_back(r.cpu.golden * 1e3);
          st_compare.push_back(r.cpu.compare * 1e3);
          st_to_host.push_back(r.cpu.to_host * 1e3);
        }
      }
    }
    std::printf("%-30s %9.1f %10.2f %10.2f %10.2f", row.label.c_str(), mb, Median(times[0]),
                Median(cpu_replay), Median(cpu_compare));
    if (cuda) {
      std::printf(" %10.2f %7.1fx %10.2f %7.1fx %10.2f %10.2f %10.2f", Median(times[1]),
                  Median(times[0]) / Median(times[1]), Median(times[2]),
                  Median(times[0]) / Median(times[2]), Median(times[3]), Median(replay),
                  Median(compare));
    }
    std::printf("  %s\n", verdicts.c_str());
    if (cuda) {
      stages.push_back(absl::StrFormat("%-30s %9.2f %9.2f %9.2f %9.2f %9.2f", row.label,
                                       Median(st_decode), Median(st_bench), Median(st_golden),
                                       Median(st_compare), Median(st_to_host)));
    }
  }
  if (!stages.empty()) {
    std::printf(
        "\nwhere the CUDA bench's time goes (checking thread's CPU ms, median; to host: the part "
        "of compare copying the bench's and golden's outputs from the GPU):\n");
    std::printf("%-30s %9s %9s %9s %9s %9s\n", "call", "decode", "bench", "golden", "compare",
                "(to host)");
    for (const std::string& line : stages) std::printf("%s\n", line.c_str());
  }
  return failures == 0 ? 0 : 1;
}
