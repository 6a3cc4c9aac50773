// The stages of checking one call, in the order server/replay/call_checker.cc runs them. Each is
// a function of its own, testable alone. Uses libtorch types: only the server's replay code
// includes this header.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/blob_source.h"
#include "common/wire/limits.h"
#include "server/call/call_outcome.h"
#include "server/call/decode_values.h"
#include "server/call/server_call.h"
#include "server/replay/replay_errors.h"

namespace parity::server {

using Stack = std::vector<c10::IValue>;

// 1. Admit: every string under its cap (RESOURCE_EXHAUSTED), and names of ops, overloads and
// nodes without control characters (INVALID_ARGUMENT); both name the field.
absl::Status ValidateCallStrings(const common::CallIdentity& call);

// 2. Resolve: the operator this name and overload name in the bench's dispatcher (its libtorch
// and the reference libraries it loaded). UNIMPLEMENTED, saying whether the op or only the
// overload is unknown.
absl::StatusOr<c10::OperatorHandle> ResolveOp(absl::string_view name, absl::string_view overload);

// 3. Decode: the call's values (server/call/decode_values.h: the one reader of the message's
// values), every size validated before allocating, and fitted to the operator's schema. What the
// later stages read of a call's values is here.
struct DecodedCall {
  Stack inputs;                         // the schema's full argument stack: defaults filled in
  Stack outputs;                        // the device's outputs; None where not decoded
  std::vector<OutputForm> output_form;  // per output of the call
  // Whether every tensor argument was contiguous in the training (a random op's kernel may draw
  // for a strided tensor in another order than for the contiguous copy the bench replays).
  bool inputs_contiguous = true;
  // Set when the arguments fit not the operator's schema but one of its release forms (an
  // overload a reference library registers as `release_*`: an older torch_npu's form of the same
  // operator): the replay calls that overload, the rows keep the call's name.
  std::optional<c10::OperatorHandle> replay_as;
};
// A call made of values already decoded (parity-repro's, loaded from error data): every output
// decoded, a None where `schema` wants a plain Tensor taken as the undefined tensor it was saved
// from, and the arguments normalised (NormalizeArguments). INVALID_ARGUMENT naming the argument.
absl::StatusOr<DecodedCall> DecodedFromValues(const c10::FunctionSchema& schema, Stack inputs,
                                              Stack outputs);
// INVALID_ARGUMENT or RESOURCE_EXHAUSTED: the call is rejected; FAILED_PRECONDITION: an input was
// sent as statistics only, so the call cannot be replayed (SKIP). `pinned_inputs`: the inputs
// go to page-locked host memory (a CUDA bench copies them asynchronously).
absl::StatusOr<DecodedCall> DecodeCall(const ServerCall& call, const c10::FunctionSchema& schema,
                                       const common::DecodeLimits& limits,
                                       const common::BlobSource* blobs, bool pinned_inputs = false);
// Makes `inputs` a full stack for `schema`: types checked, defaults of omitted trailing
// arguments appended. INVALID_ARGUMENT naming the argument otherwise.
absl::Status NormalizeArguments(const c10::FunctionSchema& schema, Stack& inputs);
// As NormalizeArguments, and when `schema` refuses the arguments, each release form of the
// operator in turn (`release_*` overloads of the same name; for an overload X, `X_release_*`):
// the first that takes them is returned, with `inputs` normalised for it. `schema`'s refusal
// when none does.
absl::StatusOr<std::optional<c10::OperatorHandle>> NormalizeForSomeRelease(
    const c10::FunctionSchema& schema, Stack& inputs);

// 4. Replay: the results of the op on copies of the inputs (an op that returns nothing: the
// arguments it writes): it ran (its results), it failed (why; for want of memory or not), or it
// was not run (the golden when the checker has it off, or when the bench alone decides the call).
struct Replay {
  enum class Outcome { kRan, kFailed, kDisabled, kNotNeeded };
  Stack results;
  Outcome outcome = Outcome::kRan;
  std::string error;           // kFailed: why
  bool out_of_memory = false;  // kFailed for want of memory (IsOutOfMemory)
  bool ran() const { return outcome == Outcome::kRan; }
  bool failed() const { return outcome == Outcome::kFailed; }
  static Replay Failed(std::string why, bool out_of_memory = false) {
    Replay r;
    r.outcome = Outcome::kFailed;
    r.error = std::move(why);
    r.out_of_memory = out_of_memory;
    return r;
  }
  static Replay NotRun(Outcome why) {
    Replay r;
    r.outcome = why;
    return r;
  }
};
// At the inputs' dtypes on `device`, under autocast to `autocast` on that device when the call
// ran under autocast (the device's autocast becomes the bench device's). A float16/bfloat16 GEMM
// on a CPU is computed as an accelerator computes it: its operands at that dtype's values (under
// autocast, for the ops autocast lowers, rounded to it first), multiplied in float32, the result
// rounded once (libtorch's CPU kernels may round every partial sum: LowPrecisionGemmDtypes).
Replay ReplayBench(const c10::OperatorHandle& op, const Stack& inputs, const c10::Device& device,
                   std::optional<at::ScalarType> autocast = std::nullopt);
// Without autocast, on `device`, with floating inputs raised to float64 and dtype arguments naming
// a lower float raised with them; the results kept in msprobe's golden dtype (float64 for float32
// inputs, float32 for float16/bfloat16 or mixed ones: rounded once from the float64 result, where
// msprobe computed in float32, not exact where a sum cancels). The golden starts from the inputs
// the kernel received: for a call that ran under autocast to float16/bfloat16 (`autocast`) of an op
// autocast lowers, its floating inputs rounded to that dtype first, as the autocast layer rounded
// them on the device; the golden then measures the kernel, not the rounding before it.
Replay ReplayGolden(const c10::OperatorHandle& op, const Stack& inputs, const c10::Device& device,
                    std::optional<at::ScalarType> autocast = std::nullopt);

// The dtype an op's kernel received its floating inputs in when the call ran under `autocast`:
// the autocast dtype for the ops autocast lowers to float16/bfloat16 (mm, bmm, addmm, baddbmm,
// addbmm, linear, matmul, conv1d/2d/3d: lowered on the CPU and on CUDA, in libtorch 1.13 and
// 2.x), else none (the inputs as captured).
std::optional<at::ScalarType> AutocastKernelDtype(const c10::FunctionSchema& schema,
                                                  std::optional<at::ScalarType> autocast);

// The low-precision float dtypes ("bfloat16", "float16") whose matrix products on `device` round
// their partial sums to that dtype in some memory layout, where an accelerator (and a CUDA bench,
// which the server sets so) accumulates in float32 and rounds once. libtorch 1.13 on a CPU
// without AVX-512 does so for bfloat16 `mm`/`bmm` unless the second operand is transposed.
// ReplayBench does not use those kernels for GEMMs (it computes them in float32 on a CPU); this
// says what it corrects. Probed with sums that are exact in float32 and not in the low dtype; a
// dtype without a kernel there is not listed. Empty for a CUDA device.
std::vector<std::string> LowPrecisionGemmDtypes(const c10::Device& device);

// The golden on a GPU bench's device where the op runs there in high precision, else on the CPU:
// a golden that fails on the GPU (no float64 kernel, no memory) is run again on the CPU, and an
// op whose golden then ran on the CPU goes straight there from then on (not after running out
// of memory, which may pass). Thread-safe.
class GoldenReplayer {
 public:
  Replay ReplayOn(const c10::OperatorHandle& op, const Stack& inputs, const c10::Device& device,
                  std::optional<at::ScalarType> autocast = std::nullopt);
  // The ops whose golden moved to the CPU ("aten::foo.overload"), sorted.
  std::vector<std::string> OpsOnCpu() const;

 private:
  mutable absl::Mutex mu_;
  // By the op's schema (one per operator for the process's life), with its name for OpsOnCpu.
  absl::flat_hash_map<const c10::FunctionSchema*, std::string> on_cpu_ ABSL_GUARDED_BY(mu_);
};

// A call's judged outputs as they are added, in order: their statuses for the call's aggregate,
// and the call's message naming the first output judged error by its metric and standard (the
// one place a call's summary turns those enums into text).
class OutputTally {
 public:
  void Add(OutputOutcome out, CallOutcome* check);
  const std::vector<CheckStatus>& statuses() const { return statuses_; }
  std::string& summary() { return summary_; }

 private:
  std::vector<CheckStatus> statuses_;
  std::string summary_;
};

// 5. Judge: every output of the device against the bench and golden replays, by `standard`;
// sets `check`'s outputs, status and message (a call-level error when the outputs' structure
// differs, SKIP when there is nothing to compare).
void JudgeOutputs(const ServerCall& call, const DecodedCall& decoded, const Replay& bench,
                  const Replay& golden, Standard standard, const StandardsTable& table,
                  CallOutcome* check);

// ApiCall.inputs_written: the device changed arguments it must only read. The call becomes an
// error naming each (before the rest of its message), whatever its outputs' comparison said or
// why it could not run; a malformed entry (no elements, more changed than there are, an index
// past the inputs) rejects the call, INVALID_ARGUMENT. A rejected call stays rejected.
void ApplyInputsWritten(const ServerCall& call, CallOutcome* check);

// 4r. A random op replayed from the training's generator state (ServerCall::generator) on a
// bench generator of the same kind: the CPU's for a CPU state, the bench's for a CUDA state on a
// CUDA bench, when the call was drawn by the same libtorch version and its inputs were
// contiguous. nullopt, with the reason in `why_not`, when it cannot be replayed so. Replays of
// random ops are serialised (they set the process's default generator, and put its state back
// after).
std::optional<Replay> ReplayRandom(const ServerCall& call, const c10::OperatorHandle& op,
                                   const DecodedCall& decoded, const c10::Device& bench_device,
                                   std::optional<at::ScalarType> autocast, std::string* why_not);

// 5r. A random op's outputs judged by the random_property standard (server/compare/
// random_property.h) from its arguments and outputs: no replay.
void JudgeRandomProperties(const ServerCall& call, const c10::FunctionSchema& schema,
                           const DecodedCall& decoded, double false_alarm, CallOutcome* check);

// The leaves of `values` in order (nested lists and tuples flattened): how outputs are counted.
Stack Flatten(const Stack& values);

// The bench devices parity.bench_device names, on a host where libtorch sees `gpus`
// CUDA devices: "auto" every GPU (the CPU when there is none), "cpu", "cuda" every GPU, "cuda:N",
// or a comma-separated list of GPUs ("cuda:0,cuda:2"). INVALID_ARGUMENT for a device that is
// absent, named twice, not a device, or the CPU listed with GPUs.
absl::StatusOr<std::vector<c10::Device>> ResolveBenchDevices(const std::string& name, int gpus);
// The same for this host's GPUs; with a CUDA bench, also sets float32-in-float32 for CUDA
// (no TF32, no reduced-precision reductions, deterministic cuDNN).
absl::StatusOr<std::vector<c10::Device>> ResolveBenchDevices(const std::string& name);

// `replay()`, with any exception it throws (converting the inputs, say) as its error.
template <typename F>
Replay Guarded(F replay) {
  try {
    return replay();
  } catch (const std::exception& e) {
    return Replay::Failed(ErrorText(e), IsOutOfMemory(e));
  }
}

}  // namespace parity::server
