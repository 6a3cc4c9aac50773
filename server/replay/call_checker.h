// Checks one ApiCall: resolve the operator, decode the call, replay it on the bench device and as
// a float64 golden through the libtorch dispatcher, judge every output by its API's standard,
// aggregate. The stages are in server/replay/stages.h; this header is torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/limits.h"
#include "common/torch/value_codec.h"
#include "parity/v1/parity.pb.h"
#include "server/compare/judge.h"
#include "server/compare/standards.h"

namespace parity::server {

struct CheckerOptions {
  // "auto" (every GPU when there are any, else the CPU), "cpu", "cuda" (every GPU), "cuda:N",
  // or a list of GPUs "cuda:0,cuda:2": the checking threads take the GPUs in turn.
  std::string bench_device = "auto";
  bool golden = true;
  // Where the float64 golden runs: "auto" on the thread's bench device (a GPU's golden falls
  // back to the CPU for an op it cannot run), "cpu" always on the CPU.
  std::string golden_device = "auto";
  bool keep_error_values = false;  // CallCheck::values for calls judged error (error data)
  common::DecodeLimits limits;
  // Random ops (docs/results.md#random-operators): "auto" replays them from the training's
  // generator state when the bench has a generator of that kind and the same libtorch, else
  // judges them by the random_property standard; "statistical" always does that; "skip" answers
  // SKIP.
  std::string random_checks = "auto";
  double random_false_alarm = 1e-6;  // per call, for the random_property standard
};

// One output of a call, typed to the end: the writers and the verdict read the judgement's enum
// standard and metric structs; names are made only where text is written
// (server/results/verdict_text.h, server/results/).
struct OutputCheck {
  uint32_t index = 0;  // position among the call's outputs, nested lists flattened
  OutputJudgement judgement;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;        // the device output's
  v1::DType bench_dtype = v1::DTYPE_UNSPECIFIED;  // the bench output's, when it ran
  // What the device output was compared against (the judgement's `device` metrics): the
  // golden's dtype when it ran, else the bench's. The details CSV's "Bench Dtype", as msprobe
  // fills it (its bench is the upcast golden).
  v1::DType reference_dtype = v1::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;  // the device output's
  bool judged = false;         // compared as tensors (the two-way Status column applies)
};

// The values of a checked call (server/replay/call_values.h).
struct CallValues;

// Everything decided about one call.
struct CallCheck {
  v1::VerdictStatus status = v1::VERDICT_STATUS_UNSPECIFIED;
  std::string message;
  // REJECTED: why (INVALID_ARGUMENT, RESOURCE_EXHAUSTED); SKIP of an op the bench cannot
  // replay: UNIMPLEMENTED; else OK.
  absl::StatusCode error_code = absl::StatusCode::kOk;
  double replay_seconds = 0;
  double compare_seconds = 0;
  // CPU seconds of the checking thread in each stage (libtorch's intra-op threads, when a replay
  // uses them, are not included), and which replays ran: the cost profile's counters.
  struct StageCpu {
    double decode = 0, bench = 0, golden = 0, compare = 0, random = 0;  // random: a random op
    bool bench_ran = false, golden_ran = false;
  } cpu;
  std::vector<OutputCheck> outputs;
  // Its inputs and the three sets of outputs: for a call judged error when the checker keeps
  // them (CheckerOptions::keep_error_values), else null.
  std::shared_ptr<const CallValues> values;
};

class CallChecker {
 public:
  // Resolves the bench device; INVALID_ARGUMENT for an unknown or absent device.
  static absl::StatusOr<std::unique_ptr<CallChecker>> Create(const CheckerOptions& options,
                                                             const StandardsTable& standards);
  ~CallChecker();

  // Checks one call. Never throws: malformed calls are REJECTED with a code, calls that cannot
  // be replayed are SKIP with the reason. `blobs` resolves chunked tensors (may be null).
  // Thread-safe: many workers share one checker.
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
