// Decoding one tensor of a call as the server does (ValueDecoder: validation, CRC-32C when the
// message carries one, the copy into a fresh tensor) against a plain memcpy of the same bytes
// into a buffer of the same size, interleaved in one run, with the ratio: how far decoding is
// from the memory's speed, with the copy split over 1, 2, 4 and 8 threads (as many as the host
// has cores), into page-locked memory where a GPU is seen (as a CUDA bench decodes). On a GPU
// bench decoding was most of a check's time (docs/deploy.md#gpu-hosts); scripts/gpu-check.sh
// runs this there.
//   decode_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "common/base/parallel.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "common/torch/wire_encoder.h"
#include "common/transport/grpc_tuning.h"
#include "parity/v1/parity.pb.h"

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double Ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  // As parity-server runs: large tensors stay in the heap (no page faults on each new tensor).
  parity::common::KeepLargeAllocations(std::size_t{256} << 20);
  const int reps = quick ? 3 : 9;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Into page-locked memory as a CUDA bench decodes, where this libtorch has CUDA and a GPU.
  const bool pinned = at::hasCUDA() && at::getNumGPUs() > 0;
  std::printf("decode_bench: median of %d; %d cores; default decode threads %d; into %s memory\n",
              reps, cores, parity::common::DecodeThreads(), pinned ? "page-locked" : "pageable");
  std::printf("%-32s %8s %10s %10s %8s %10s\n", "tensor", "MB", "memcpy ms", "decode ms", "ratio",
              "GB/s");
  const int default_threads = parity::common::DecodeThreads();
  std::vector<int> sweep{1};
  for (int t : {2, 4, 8}) {
    if (t <= cores && !quick) sweep.push_back(t);
  }
  for (int64_t mib : quick ? std::vector<int64_t>{8} : std::vector<int64_t>{4, 16, 64}) {
    const at::Tensor t = at::randn({mib * (1 << 18)});  // float32: mib MiB
    for (int threads : sweep) {
      for (bool crc : {false, true}) {
        if (crc && threads != 1) continue;  // CRC-32C is one pass on the caller's core
        parity::common::EncodeOptions options;
        options.max_inline_tensor_bytes = uint64_t{1} << 30;
        options.compute_crc32c = crc;
        parity::v1::Value value;
        if (!parity::common::EncodeValue(t, nullptr, options, "x", &value).ok()) return 1;
        const std::string& bytes = value.tensor().data();
        parity::common::SetDecodeThreads(threads);
        std::vector<double> copy, decode;
        for (int r = 0; r < reps; ++r) {
          copy.push_back(Ms([&] {
            std::unique_ptr<char[]> out(new char[bytes.size()]);  // not zeroed, as at::empty
            std::memcpy(out.get(), bytes.data(), bytes.size());
            if (out[bytes.size() / 2] != bytes[bytes.size() / 2]) std::abort();
          }));
          parity::common::ValueDecoder decoder{parity::common::DecodeLimits{}};
          decoder.set_pinned(pinned);
          c10::IValue out;
          decode.push_back(Ms([&] {
            if (!decoder.Decode(value, "x", &out).ok()) std::abort();
          }));
        }
        char label[64];
        std::snprintf(label, sizeof(label), "float32 %ld MiB, %d thread%s%s",
                      static_cast<long>(mib), threads, threads == 1 ? "" : "s",
                      crc ? ", crc32c" : "");
        const double mb = static_cast<double>(bytes.size()) / 1e6;
        std::printf("%-32s %8.1f %10.2f %10.2f %7.2fx %10.2f\n", label, mb, Median(copy),
                    Median(decode), Median(decode) / Median(copy), mb / Median(decode));
      }
    }
  }
  parity::common::SetDecodeThreads(default_threads);
  return 0;
}
