// Compare throughput against memcpy of the same bytes, measured side by side in one run.
//   compare_bench [--quick] [--only=TEXT]   (--only: the rows whose dtype column contains TEXT)
// For each dtype and size: the device tensor and its golden (fp16/bf16 -> fp32, fp32 -> fp64) are
// read once by ComputeMetrics; memcpy copies the same number of bytes. Both run with the same
// number of threads: one, then every core (the compare splits a large tensor into chunks across
// threads; the memcpy splits its bytes the same way). Repetitions alternate compare and memcpy,
// so both see the same machine; the ratio is the median over repetitions of memcpy time /
// compare time (1.0 = compare runs at memcpy bandwidth). Then 16 MiB rows with NaN in the device
// tensor (every 8th element, the worst case, and every 301st, scattered) and rows against the
// bench's output (the device's own dtype) instead of the golden.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/wire/dtype.h"
#include "server/compare/accumulate.h"
#include "server/compare/float_types.h"
#include "server/compare/metrics.h"
#include "server/compare/standards.h"

namespace {

using Clock = std::chrono::steady_clock;
using parity::server::TensorView;
namespace wire = parity::wire;

std::string only;  // --only=TEXT: the rows whose name contains TEXT

template <typename F>
double Seconds(F&& f) {
  const auto start = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// memcpy of `bytes` split into `threads` contiguous parts, one per thread.
void ParallelCopy(char* dst, const char* src, size_t bytes, int threads) {
  const size_t part = (bytes + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) {
    const size_t begin = std::min(bytes, i * part), end = std::min(bytes, begin + part);
    pool.emplace_back([=] { std::memcpy(dst + begin, src + begin, end - begin); });
  }
  std::memcpy(dst, src, std::min(bytes, part));
  for (std::thread& t : pool) t.join();
}

struct Buffers {
  std::vector<char> device, golden;
  TensorView d, g;
};

// `nan_every` > 0: the device value of every nan_every-th element is NaN (real outputs have few;
// one in each vector is the kernel's worst case: every vector takes its slow path).
// `bench`: the reference is the bench's output, of the device's own dtype, instead of the golden.
Buffers Make(wire::DType dtype, size_t device_bytes, int64_t nan_every, bool bench) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  Buffers b;
  const size_t esize = dtype == wire::kFloat32 ? 4 : 2;
  const int64_t n = static_cast<int64_t>(device_bytes / esize);
  const bool fp32 = dtype == wire::kFloat32;
  const wire::DType ref = bench ? dtype : fp32 ? wire::kFloat64 : wire::kFloat32;
  const size_t ref_size = ref == wire::kFloat64 ? 8 : ref == wire::kFloat32 ? 4 : 2;
  b.device.resize(n * esize);
  b.golden.resize(n * ref_size);
  const auto to16 = [dtype](float f) {
    return dtype == wire::kFloat16 ? parity::server::fp::FloatToHalf(f)
                                   : parity::server::fp::FloatToBFloat16(f);
  };
  for (int64_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    const bool nan = nan_every > 0 && i % nan_every == 0;
    if (fp32) {
      const float dv = nan ? std::numeric_limits<float>::quiet_NaN() : v * (1 + 1e-7f);
      std::memcpy(&b.device[i * 4], &dv, 4);
      if (bench) {
        std::memcpy(&b.golden[i * 4], &v, 4);
      } else {
        const double gv = v;
        std::memcpy(&b.golden[i * 8], &gv, 8);
      }
    } else {
      const uint16_t bits = to16(nan ? std::numeric_limits<float>::quiet_NaN() : v);
      std::memcpy(&b.device[i * 2], &bits, 2);
      if (bench) {
        const uint16_t bench_bits = to16(v * (1 + 1e-3f * normal(rng)));
        std::memcpy(&b.golden[i * 2], &bench_bits, 2);
      } else {
        std::memcpy(&b.golden[i * 4], &v, 4);
      }
    }
  }
  b.d = TensorView{dtype, {n}, b.device.data(), n};
  b.g = TensorView{ref, {n}, b.golden.data(), n};
  return b;
}

// One row per thread count: compare and memcpy of the same bytes, alternating.
void Rows(wire::DType dtype, size_t mib, int64_t nan_every, int reps, const char* suffix,
          bool bench = false) {
  const std::string name = std::string(parity::common::TorchName(dtype)).substr(6) + suffix;
  if (name.find(only) == std::string::npos) return;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto& table = parity::server::StandardsTable::Default();
  Buffers b = Make(dtype, mib << 20, nan_every, bench);
  const size_t bytes = b.device.size() + b.golden.size();  // what the compare reads
  std::vector<char> src(bytes, 1), dst(bytes);
  for (int threads : {1, cores}) {
    parity::server::internal::SetCompareThreads(threads);
    std::vector<double> cmp, cpy, ratio;
    double sink = 0;
    for (int r = 0; r < reps; ++r) {
      cmp.push_back(Seconds([&] {
        auto m = parity::server::ComputeMetrics(b.d, b.g, *table.Constants(dtype));
        sink += m->rmse;
      }));
      cpy.push_back(Seconds([&] {
        ParallelCopy(dst.data(), src.data(), bytes, threads);
        sink += dst[bytes / 2];
      }));
      ratio.push_back(cpy.back() / cmp.back());
    }
    std::printf("%-13s %5zu %8d %13.2f %12.2f %7.3f%s\n", name.c_str(), mib, threads,
                bytes / Median(cmp) / 1e9, bytes / Median(cpy) / 1e9, Median(ratio),
                sink == -1 ? "!" : "");
    if (cores == 1) break;
  }
}

// Independent floating multiply-adds on `threads` threads at once, in operations per second:
// bound by the vector units alone (no memory), so its scaling from one thread to every core says
// whether the cores have vector units of their own. On a VM whose vCPUs are one physical core's
// two hyperthreads it is near 1x, and an arithmetic-bound compare cannot gain from the second
// thread while memcpy, bound by memory, still can.
double VectorOpsPerSecond(int threads) {
  using V = double __attribute__((vector_size(32)));
  constexpr int kChains = 12;
  constexpr long kSteps = 20'000'000;
  std::vector<double> sink(static_cast<size_t>(threads));
  const double s = Seconds([&] {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&sink, t] {
        V acc[kChains], mul = V{} + 0.9999999, add = V{} + 1e-9;
        for (int j = 0; j < kChains; ++j) acc[j] = V{} + j;
        for (long i = 0; i < kSteps; ++i) {
          for (V& a : acc) a = a * mul + add;
        }
        double total = 0;
        for (const V& a : acc) total += a[0] + a[3];
        sink[static_cast<size_t>(t)] = total;
      });
    }
    for (std::thread& t : pool) t.join();
  });
  return threads * kSteps * kChains * 4 / s * (sink[0] == -1 ? 0 : 1);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg.rfind("--only=", 0) == 0) {
      only = arg.substr(7);
    } else {
      std::fprintf(stderr, "usage: compare_bench [--quick] [--only=TEXT]\n");
      return 2;
    }
  }
  const std::vector<size_t> sizes_mib =
      quick ? std::vector<size_t>{1} : std::vector<size_t>{1, 4, 16, 64};
  const int reps = quick ? 3 : 9;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (cores > 1) {
    const double one = VectorOpsPerSecond(1), all = VectorOpsPerSecond(cores);
    std::printf("vector arithmetic on %d threads: %.2fx one thread (%s)\n", cores, all / one,
                all / one < 0.75 * cores ? "the cores share vector units: compare cannot scale"
                                         : "independent cores");
  }
  std::printf("%-13s %5s %8s %13s %12s %7s\n", "dtype", "MiB", "threads", "compare GB/s",
              "memcpy GB/s", "ratio");
  const wire::DType dtypes[] = {wire::kFloat32, wire::kFloat16, wire::kBFloat16};
  for (wire::DType dtype : dtypes) {
    for (size_t mib : sizes_mib) Rows(dtype, mib, 0, reps, "");
  }
  // The worst case: a NaN in every vector of 8 (every one takes the kernel's slow path).
  for (wire::DType dtype : dtypes) Rows(dtype, quick ? 1 : 16, 8, reps, " nan/8");
  // Scattered NaN, one in 301 elements: most runs of 32 vectors hold one, and the kernel checks
  // vector by vector until the NaNs stop.
  for (wire::DType dtype : dtypes) Rows(dtype, quick ? 1 : 16, 301, reps, " nan/301");
  // Device against bench, both of the device's dtype (the server's third comparison).
  for (wire::DType dtype : dtypes) Rows(dtype, quick ? 1 : 16, 0, reps, " vs bench", true);
  return 0;
}
