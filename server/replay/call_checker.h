// Checks one ApiCall: resolve the operator, decode the call, replay it on the bench device and as
// a float64 golden through the libtorch dispatcher, judge every output by its API's standard,
// aggregate. The stages are in server/replay/stages.h; this header is torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/config.h"
#include "common/torch/value_codec.h"
#include "common/wire/limits.h"
#include "parity/v1/parity.pb.h"
#include "server/compare/standards.h"
#include "server/replay/call_check.h"
#include "server/replay/server_call.h"

namespace parity::server {

// Where the float64 golden runs: kAuto on the thread's bench device (a GPU's golden falls back
// to the CPU for an op it cannot run), kCpu always on the CPU. parity.golden_device "auto"/"cpu".
enum class GoldenDevice { kAuto, kCpu };
// Random ops (docs/results.md#random-operators): kAuto replays them from the training's generator
// state when the bench has a generator of that kind and the same libtorch, else judges them by
// the random_property standard; kStatistical always does that; kSkip answers SKIP.
// parity.random_checks "auto"/"statistical"/"skip".
enum class RandomChecks { kAuto, kStatistical, kSkip };
// The config's words for them; INVALID_ARGUMENT naming the key for any other.
absl::StatusOr<GoldenDevice> ParseGoldenDevice(absl::string_view text);
absl::StatusOr<RandomChecks> ParseRandomChecks(absl::string_view text);

struct CheckerOptions {
  // "auto" (every GPU when there are any, else the CPU), "cpu", "cuda" (every GPU), "cuda:N",
  // or a list of GPUs "cuda:0,cuda:2": the checking threads take the GPUs in turn.
  std::string bench_device = "auto";
  bool golden = true;
  GoldenDevice golden_device = GoldenDevice::kAuto;
  bool keep_error_values = false;  // CallCheck::values for calls judged error (error data)
  common::DecodeLimits limits;
  RandomChecks random_checks = RandomChecks::kAuto;
  double random_false_alarm = 1e-6;  // per call, for the random_property standard
};

// The checker's options from the server's configuration (parity.bench_device, golden,
// golden_device, random_checks, random_false_alarm, the decode limits; save_error_data keeps
// an error's values): the one mapping parity-server and parity-repro share. INVALID_ARGUMENT
// naming the key for a golden_device or random_checks word it does not know.
absl::StatusOr<CheckerOptions> CheckerOptionsFor(const common::ServerOptions& o);

class CallChecker {
 public:
  // Resolves the bench device; INVALID_ARGUMENT for an unknown or absent device.
  static absl::StatusOr<std::unique_ptr<CallChecker>> Create(const CheckerOptions& options,
                                                             const StandardsTable& standards);
  ~CallChecker();

  // Checks one call. Never throws: malformed calls are REJECTED with a code, calls that cannot
  // be replayed are SKIP with the reason. `blobs` resolves chunked tensors (may be null).
  // Thread-safe: many workers share one checker.
  CallCheck Check(const ServerCall& call, const common::BlobSource* blobs = nullptr) const;
  // The same for a message as it arrived (tests, benchmarks): its ServerCall made here.
  CallCheck Check(const v1::ApiCall& call, const common::BlobSource* blobs = nullptr) const;

  // "cpu", "cuda:0", or the GPUs it spreads over: "cuda:0,cuda:1".
  const std::string& bench_device() const;
  // How many GPUs the bench spreads over; 0 for a CPU bench.
  int bench_gpus() const;
  // The ops whose golden fell back from the GPU to the CPU ("aten::foo.overload"), sorted.
  std::vector<std::string> GoldenOpsOnCpu() const;
  // The low-precision float dtypes whose GEMMs libtorch's kernels on this bench accumulate in
  // that dtype (a CPU without AVX-512 under libtorch 1.13: "bfloat16"), probed once at Create.
  // The bench does not use them for GEMMs (ReplayBench); the server logs what it corrects.
  const std::vector<std::string>& low_precision_gemm_dtypes() const;

 private:
  struct Impl;
  explicit CallChecker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Every operator the dispatcher knows ("aten::add", "npu::npu_rms_norm"): for the warnings about
// names in the server's white and black lists that select nothing.
std::vector<std::string> KnownOperatorNames();

// Sets libtorch's intra-op threads (process-wide: every worker's replays use this many).
void SetIntraOpThreads(int threads);
int IntraOpThreads();
// libtorch's own choice, as it was before the first SetIntraOpThreads of this process.
int LibtorchDefaultIntraOpThreads();

}  // namespace parity::server
