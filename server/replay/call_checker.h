// Checks one call: resolve the operator, decode the call, replay it on the bench device and as
// a float64 golden through the libtorch dispatcher, judge every output by its API's standard,
// aggregate. The stages are in server/replay/stages.h; this header is torch-free.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/wire/blob_source.h"
#include "common/wire/limits.h"
#include "common/wire/proto_fwd.h"
#include "server/call/call_outcome.h"
#include "server/call/server_call.h"
#include "server/compare/standards.h"
#include "server/replay/checker_options.h"

namespace parity::server {

struct DecodedCall;  // server/replay/stages.h (libtorch types)

class CallChecker {
 public:
  // Resolves the bench device; INVALID_ARGUMENT for an unknown or absent device.
  static absl::StatusOr<std::unique_ptr<CallChecker>> Create(const CheckerOptions& options,
                                                             const StandardsTable& standards);
  ~CallChecker();

  // Checks one call. Never throws: malformed calls are REJECTED with a code, calls that cannot
  // be replayed are SKIP with the reason. `blobs` resolves chunked tensors (may be null).
  // Thread-safe: many workers share one checker.
  CallOutcome Judge(const ServerCall& call, const common::BlobSource* blobs = nullptr) const;
  // The same for a message as it arrived (tests, benchmarks): its ServerCall made here.
  CallOutcome Judge(const v1::ApiCall& call, const common::BlobSource* blobs = nullptr) const;
  // The same for a call whose values are already decoded (server/replay/stages.h:
  // DecodedFromValues): `call` gives its identity and `decoded` its values; the message's own
  // values are not read. parity-repro checks the tensors it loads from error data so.
  CallOutcome Judge(const ServerCall& call, DecodedCall decoded) const;

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
  // Stages 1 to 5; `given`, when not null, in place of decoding the message's values.
  CallOutcome Run(const ServerCall& call, const common::BlobSource* blobs,
                  DecodedCall* given) const;
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
