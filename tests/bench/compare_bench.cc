// Compare throughput against memcpy of the same bytes, measured side by side in one run.
//   compare_bench [--quick]
// For each dtype and size: the device tensor and its golden (fp16/bf16 -> fp32, fp32 -> fp64) are
// read once by ComputeMetrics; memcpy copies the same number of bytes. Ratio = memcpy time /
// compare time (1.0 = compare runs at memcpy bandwidth). Median of several repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "server/compare/float_types.h"
#include "server/compare/metrics.h"
#include "server/compare/standards.h"

namespace {

using Clock = std::chrono::steady_clock;
using parity::server::HostTensor;
namespace v1 = parity::v1;

template <typename F>
double MedianSeconds(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Buffers {
  std::vector<char> device, golden;
  HostTensor d, g;
};

Buffers Make(v1::DType dtype, size_t device_bytes) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  Buffers b;
  const size_t esize = dtype == v1::DTYPE_FLOAT32 ? 4 : 2;
  const int64_t n = static_cast<int64_t>(device_bytes / esize);
  const bool fp32 = dtype == v1::DTYPE_FLOAT32;
  b.device.resize(n * esize);
  b.golden.resize(n * (fp32 ? 8 : 4));
  for (int64_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    if (fp32) {
      const float dv = v * (1 + 1e-7f);
      std::memcpy(&b.device[i * 4], &dv, 4);
      const double gv = v;
      std::memcpy(&b.golden[i * 8], &gv, 8);
    } else {
      const uint16_t bits = dtype == v1::DTYPE_FLOAT16 ? parity::server::fp::FloatToHalf(v)
                                                       : parity::server::fp::FloatToBFloat16(v);
      std::memcpy(&b.device[i * 2], &bits, 2);
      std::memcpy(&b.golden[i * 4], &v, 4);
    }
  }
  b.d = HostTensor{dtype, {n}, b.device.data(), n};
  b.g = HostTensor{fp32 ? v1::DTYPE_FLOAT64 : v1::DTYPE_FLOAT32, {n}, b.golden.data(), n};
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const std::vector<size_t> sizes_mib =
      quick ? std::vector<size_t>{1} : std::vector<size_t>{1, 4, 16, 64};
  const int reps = quick ? 3 : 7;
  const auto& table = parity::server::StandardsTable::Default();
  std::printf("%-9s %8s %14s %14s %14s %8s\n", "dtype", "MiB", "compare GB/s", "memcpy GB/s",
              "read bytes", "ratio");
  for (v1::DType dtype : {v1::DTYPE_FLOAT32, v1::DTYPE_FLOAT16, v1::DTYPE_BFLOAT16}) {
    for (size_t mib : sizes_mib) {
      Buffers b = Make(dtype, mib << 20);
      const size_t bytes = b.device.size() + b.golden.size();  // what the compare reads
      std::vector<char> src(bytes, 1), dst(bytes);
      double sink = 0;
      const double t_cmp = MedianSeconds(reps, [&] {
        auto m = parity::server::ComputeMetrics(b.d, b.g, *table.Constants(dtype));
        sink += m->rmse;
      });
      const double t_cpy = MedianSeconds(reps, [&] {
        std::memcpy(dst.data(), src.data(), bytes);
        sink += dst[bytes / 2];
      });
      std::printf("%-9s %8zu %14.2f %14.2f %14zu %8.3f%s\n",
                  std::string(parity::common::TorchName(dtype)).substr(6).c_str(), mib,
                  bytes / t_cmp / 1e9, bytes / t_cpy / 1e9, bytes, t_cpy / t_cmp,
                  sink == -1 ? "!" : "");
    }
  }
  return 0;
}
