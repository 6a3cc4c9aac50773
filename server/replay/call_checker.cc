#include "server/replay/call_checker.h"

#include <ATen/Parallel.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/cpu_clock.h"
#include "common/base/text.h"
#include "common/torch/dtype_map.h"
#include "common/torch/generator_read.h"
#include "common/torch/ivalue_walk.h"
#include "common/torch/torch_pch.h"
#include "common/torch/wire_enums.h"
#include "server/replay/aten_compat.h"
#include "server/replay/call_values.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

CallOutcome Decided(CheckStatus status, std::string message,
                    absl::StatusCode code = absl::StatusCode::kOk) {
  CallOutcome c;
  c.status = status;
  c.message = std::move(message);
  c.error_code = code;
  return c;
}

// An operator or overload the bench's libtorch lacks, from a training on another torch: the
// message names both versions, since the usual cause is a training on a newer torch than the
// server's (docs/operators.md#a-training-on-another-torch).
std::string WithBothVersions(absl::string_view message, absl::string_view framework) {
  const std::string bench = "torch " + common::TorchVersion();
  if (framework.empty() || framework == bench) return std::string(message);
  return absl::StrCat(message, " (the training runs ", common::Printable(framework), ", the bench ",
                      bench,
                      ": a server on the training's torch version or a newer one replays it)");
}

CallOutcome Rejected(const absl::Status& s) {
  return Decided(CheckStatus::kRejected, std::string(s.message()), s.code());
}

// The standard of the call's op; aten::convolution's depends on its input's rank.
Standard StandardOf(const ServerCall& call, const Stack& inputs, const StandardsTable& table) {
  const int input_rank = !inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().defined()
                             ? static_cast<int>(inputs[0].toTensor().dim())
                             : -1;
  return table.Lookup(call.id.op_name, input_rank);
}

// Whether the bench replay alone decides this call, with no float64 golden: the binary standard
// compares the device with the golden rounded to the device's dtype, which is the bench's own
// result when the op computes nothing that rounds. That holds for
//   - ops the table judges by the binary standard (relu, masked_fill, sort, ...);
//   - ops listed as exact by construction (views, copies, cat, gather, fills, max), when every
//     floating tensor of the call has one dtype (a copy that casts rounds: it keeps its standard);
//   - calls whose every output is an integer or bool tensor (comparisons, argmax, nonzero):
//     those are judged by the binary standard whatever the op's.
bool BenchDecides(const ServerCall& call, const DecodedCall& decoded, Standard standard,
                  const StandardsTable& table) {
  if (standard == Standard::kBinary) return true;
  bool outputs_floating = false, any_output = false;
  for (const c10::IValue& out : decoded.outputs) {
    common::ForEachLeaf(out, [&](const c10::IValue& leaf) {
      if (!leaf.isTensor() || !leaf.toTensor().defined()) return;
      any_output = true;
      outputs_floating |= at::isFloatingType(leaf.toTensor().scalar_type()) ||
                          at::isComplexType(leaf.toTensor().scalar_type());
    });
  }
  if (any_output && !outputs_floating) return true;
  if (!table.ExactByConstruction(call.id.op_name)) return false;
  std::optional<at::ScalarType> dtype;
  bool one_dtype = true;
  auto visit = [&](const c10::IValue& leaf) {
    if (!leaf.isTensor() || !leaf.toTensor().defined()) return;
    const at::ScalarType t = leaf.toTensor().scalar_type();
    if (!at::isFloatingType(t) && !at::isComplexType(t)) return;
    if (dtype && *dtype != t) one_dtype = false;
    dtype = t;
  };
  for (const c10::IValue& v : decoded.inputs) common::ForEachLeaf(v, visit);
  for (const c10::IValue& v : decoded.outputs) common::ForEachLeaf(v, visit);
  return one_dtype;
}

// Keeps the call's values in `check` when it is an error and the options ask for them.
void KeepValues(const CheckerOptions& o, const c10::OperatorHandle& op, DecodedCall& decoded,
                const Replay* bench, const Replay* golden, CallOutcome* check) {
  if (check->status != CheckStatus::kError || !o.save_error_data) return;
  auto values = std::make_shared<CallValues>();
  values->schema = toString(op.schema());
  values->inputs = std::move(decoded.inputs);
  values->device = Flatten(decoded.outputs);
  if (bench != nullptr && bench->ran()) values->bench = Flatten(bench->results);
  if (golden != nullptr && golden->ran()) values->golden = Flatten(golden->results);
  check->values = std::move(values);
}

// A random call that was not replayed and has no property check: SKIP saying why.
std::optional<CallOutcome> UnjudgedRandom(const ServerCall& call, const std::string& why_not) {
  if (call.op->random_family == common::RandomFamily::kUnchecked) {
    return Decided(CheckStatus::kSkip,
                   absl::StrCat(call.id.op_name,
                                " draws random numbers, has no property check, and was not "
                                "replayed: ",
                                why_not));
  }
  if (call.op->random_family == common::RandomFamily::kNone) {  // ApiCall.drew_random
    return Decided(CheckStatus::kSkip,
                   absl::StrCat(call.id.op_name,
                                " drew random numbers in the training (the agent saw its generator "
                                "move; no operator catalogue lists it as random), so its verdict "
                                "would be by chance unless replayed from the same draws, and it "
                                "was not: ",
                                why_not));
  }
  return std::nullopt;
}

// A random op (common/naming/operator_catalogue.h): replayed from its generator state, or judged by
// the properties of its draws.
CallOutcome CheckRandom(const ServerCall& call, const c10::OperatorHandle& op, DecodedCall& decoded,
                        const CheckerOptions& o, const c10::Device& bench_device,
                        const StandardsTable& standards) {
  if (o.random_checks == RandomChecks::kSkip) {
    return Decided(
        CheckStatus::kSkip,
        absl::StrCat(call.id.op_name,
                     " draws random numbers; not checked (parity.random_checks is skip)"));
  }
  std::string why_not = "parity.random_checks is statistical";
  if (o.random_checks == RandomChecks::kAuto) {
    std::optional<Replay> bench =
        ReplayRandom(call, op, decoded, bench_device,
                     common::ScalarTypeOfWire(call.id.autocast_dtype), &why_not);
    if (bench && bench->ran()) {
      const auto replayed = Clock::now();
      CallOutcome check;
      // The same draws: the bench's results are the reference, bit for bit.
      JudgeOutputs(call, decoded, *bench, *bench, Standard::kBinary, standards, &check);
      const std::string how =
          absl::StrCat("replayed from the training's ", call.id.generator->device_type,
                       " generator state: the same draws, so the same bits");
      for (OutputOutcome& out : check.outputs) {
        std::string& m = out.judgement.message;
        m = m.empty() ? how : absl::StrCat(how, "\n", m);
      }
      check.compare_seconds = Seconds(Clock::now() - replayed);
      KeepValues(o, op, decoded, &*bench, nullptr, &check);
      return check;
    }
    if (bench) why_not = absl::StrCat("the replay failed: ", bench->error);
  }
  if (std::optional<CallOutcome> skip = UnjudgedRandom(call, why_not)) return *std::move(skip);
  const auto judging = Clock::now();
  CallOutcome check;
  JudgeRandomProperties(call, op.schema(), decoded, o.random_false_alarm, &check);
  const std::string how =
      absl::StrCat("judged by the properties of its draws (not replayed: ", why_not, ")");
  for (OutputOutcome& out : check.outputs) {
    std::string& m = out.judgement.message;
    m = m.empty() ? how : absl::StrCat(how, "\n", m);
  }
  check.compare_seconds = Seconds(Clock::now() - judging);
  KeepValues(o, op, decoded, nullptr, nullptr, &check);
  return check;
}

// The checking thread's CPU time, lap by lap (CallOutcome::StageCpu).
class StageClock {
 public:
  StageClock() : mark_(common::ThreadCpuSeconds()) {}
  void Lap(double* stage) {
    const double now = common::ThreadCpuSeconds();
    *stage += now - mark_;
    mark_ = now;
  }

 private:
  double mark_;
};

CallOutcome WithCpu(CallOutcome c, const CallOutcome::StageCpu& cpu) {
  c.cpu = cpu;
  return c;
}

// A call answered before its operator is resolved: malformed strings, or skipped by the agent
// or by the skip list.
std::optional<CallOutcome> Admit(const ServerCall& call) {
  if (absl::Status s = ValidateCallStrings(call.id); !s.ok()) return Rejected(s);
  if (!call.id.skip_reason.empty()) {
    return Decided(CheckStatus::kSkip, common::EscapeControl(call.id.skip_reason));
  }
  if (!call.op->skip_reason.empty()) return Decided(CheckStatus::kSkip, call.op->skip_reason);
  return std::nullopt;
}

// A call that did not decode: SKIP when it cannot be replayed (statistics only) or when the
// server's memory or libtorch failed (not the call's fault: not checked), else REJECTED.
CallOutcome DecodeFailed(const absl::Status& failed) {
  if (failed.code() == absl::StatusCode::kFailedPrecondition) {
    return Decided(CheckStatus::kSkip, std::string(failed.message()));
  }
  const bool server_failed = failed.code() == absl::StatusCode::kInternal ||
                             (failed.code() == absl::StatusCode::kResourceExhausted &&
                              absl::StrContains(failed.message(), common::kOutOfMemoryDecoding));
  if (server_failed) {
    return Decided(CheckStatus::kSkip, absl::StrCat("not checked: ", failed.message()),
                   failed.code());
  }
  return Rejected(failed);
}

// Neither the bench nor the golden ran: SKIP, RESOURCE_EXHAUSTED when memory was the reason.
CallOutcome NeitherRan(const ServerCall& call, const Replay& bench, const Replay& golden) {
  CallOutcome c =
      Decided(CheckStatus::kSkip,
              absl::StrCat("the bench could not run ", call.id.op_name, ": ", bench.error,
                           golden.failed() ? absl::StrCat("; golden: ", golden.error) : ""));
  if (bench.out_of_memory || golden.out_of_memory) {
    c.error_code = absl::StatusCode::kResourceExhausted;
  }
  return c;
}

// A reference the server had no memory for: what the other one found wrong stays an error, but
// nothing is passed on half the evidence (a wrong output judged against the bench alone, where
// its standard reads the golden, can pass).
void SkipOnHalfTheEvidence(const Replay& bench, const Replay& golden, CallOutcome* check) {
  const Replay* starved = !bench.ran() && bench.out_of_memory     ? &bench
                          : !golden.ran() && golden.out_of_memory ? &golden
                                                                  : nullptr;
  if (starved == nullptr || check->status == CheckStatus::kError) return;
  const std::string why =
      absl::StrCat("not checked: the server ran out of memory replaying the ",
                   starved == &bench ? "bench" : "golden", " (", starved->error, ")");
  for (OutputOutcome& out : check->outputs) {
    if (out.judgement.status == CheckStatus::kPass ||
        out.judgement.status == CheckStatus::kWarning) {
      out.judgement.status = CheckStatus::kSkip;
      out.judgement.message = why;
    }
  }
  check->status = CheckStatus::kSkip;
  check->error_code = absl::StatusCode::kResourceExhausted;
  check->message = why;
}

}  // namespace

struct CallChecker::Impl {
  CheckerOptions options;
  const StandardsTable* standards = nullptr;
  std::vector<c10::Device> devices{c10::Device(c10::kCPU)};
  std::string device_name = "cpu";
  std::vector<std::string> low_precision_gemm;  // LowPrecisionGemmDtypes of the bench
  uint64_t id = 0;  // tells this checker's lanes from those of one destroyed at the same address
  mutable std::atomic<uint32_t> next_lane{0};
  mutable GoldenReplayer golden;

  // Stages 4 and 5 of a decoded call that is not a random op, on `device` (the thread's lane).
  CallOutcome Replayed(const ServerCall& call, const c10::OperatorHandle& op,
                       const c10::Device& device, DecodedCall& decoded, StageClock& clock,
                       CallOutcome::StageCpu cpu, Clock::time_point start) const;
};

namespace {

// Where one thread checks its calls: the bench device it was given (threads take the bench's
// devices in turn, so the server's workers spread over the GPUs) and, on a GPU, a stream of its
// own from libtorch's pool: one worker's copies then overlap another's kernels.
struct Lane {
  c10::Device device{c10::kCPU};
  std::optional<c10::Stream> stream;
};

// This thread's lane for the checker `checker_id`, which spreads its threads over `devices`
// (`next_lane` counts the threads it has seen).
const Lane& LaneOf(uint64_t checker_id, const std::vector<c10::Device>& devices,
                   std::atomic<uint32_t>& next_lane) {
  thread_local absl::flat_hash_map<uint64_t, Lane> lanes;
  auto [it, added] = lanes.try_emplace(checker_id);
  if (added) {
    const uint32_t lane = next_lane.fetch_add(1, std::memory_order_relaxed);
    it->second.device = devices[lane % devices.size()];
    if (it->second.device.is_cuda()) {
      const c10::impl::VirtualGuardImpl guard(it->second.device.type());
      it->second.stream = guard.getStreamFromGlobalPool(it->second.device);
    }
  }
  return it->second;
}

std::atomic<uint64_t> g_next_checker_id{1};

}  // namespace

namespace {

// The float64 golden, unless the options disable it or the bench alone decides the call
// (`exact`): on the lane's device or, with golden_device cpu, on the CPU.
Replay ReplayGolden(const CheckerOptions& o, GoldenReplayer& golden, const c10::OperatorHandle& op,
                    const Stack& inputs, const c10::Device& lane_device,
                    std::optional<at::ScalarType> autocast, bool exact) {
  if (!o.golden) return Replay::NotRun(Replay::Outcome::kDisabled);
  if (exact) return Replay::NotRun(Replay::Outcome::kNotNeeded);
  const c10::Device device =
      o.golden_device == GoldenDevice::kCpu ? c10::Device(c10::kCPU) : lane_device;
  return Guarded([&] { return golden.ReplayOn(op, inputs, device, autocast); });
}

}  // namespace

CallChecker::CallChecker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CallChecker::~CallChecker() = default;

const std::string& CallChecker::bench_device() const { return impl_->device_name; }

int CallChecker::bench_gpus() const {
  return impl_->devices.front().is_cuda() ? static_cast<int>(impl_->devices.size()) : 0;
}

std::vector<std::string> CallChecker::GoldenOpsOnCpu() const { return impl_->golden.OpsOnCpu(); }

const std::vector<std::string>& CallChecker::low_precision_gemm_dtypes() const {
  return impl_->low_precision_gemm;
}

absl::StatusOr<std::unique_ptr<CallChecker>> CallChecker::Create(const CheckerOptions& options,
                                                                 const StandardsTable& standards) {
  RegisterMissingAtenOps();  // newer torch's operators, for trainings on a newer torch
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->standards = &standards;
  absl::StatusOr<std::vector<c10::Device>> devices = ResolveBenchDevices(options.bench_device);
  if (!devices.ok()) return devices.status();
  impl->devices = *std::move(devices);
  std::vector<std::string> names;
  for (const c10::Device& d : impl->devices) names.push_back(d.str());
  impl->device_name = absl::StrJoin(names, ",");
  impl->low_precision_gemm = LowPrecisionGemmDtypes(impl->devices.front());
  impl->id = g_next_checker_id.fetch_add(1);
  return std::unique_ptr<CallChecker>(new CallChecker(std::move(impl)));
}

CallOutcome CallChecker::Judge(const v1::ApiCall& call, const common::BlobSource* blobs) const {
  return Judge(ServerCall(call), blobs);
}

CallOutcome CallChecker::Judge(const ServerCall& call, const common::BlobSource* blobs) const {
  CallOutcome c = Run(call, blobs, nullptr);
  ApplyInputsWritten(call, &c);
  return c;
}

CallOutcome CallChecker::Judge(const ServerCall& call, DecodedCall decoded) const {
  CallOutcome c = Run(call, nullptr, &decoded);
  ApplyInputsWritten(call, &c);
  return c;
}

CallOutcome CallChecker::Run(const ServerCall& call, const common::BlobSource* blobs,
                             DecodedCall* given) const {
  const auto start = Clock::now();
  // 1. Admit: calls that cannot or must not be replayed are answered here.
  if (std::optional<CallOutcome> answered = Admit(call)) return *std::move(answered);
  // 2. Resolve the operator.
  absl::StatusOr<c10::OperatorHandle> op = ResolveOp(call.id.op_name, call.id.overload);
  if (!op.ok()) {
    return Decided(CheckStatus::kSkip, WithBothVersions(op.status().message(), call.framework),
                   op.status().code());
  }
  // 3. Decode, validating every size first, on this thread's device and stream (unless the
  // caller decoded the values).
  StageClock clock;
  CallOutcome::StageCpu cpu;
  const Lane& lane = LaneOf(impl_->id, impl_->devices, impl_->next_lane);
  std::optional<c10::StreamGuard> on_stream;
  if (lane.stream) on_stream.emplace(*lane.stream);
  absl::StatusOr<DecodedCall> decoded =
      given != nullptr
          ? absl::StatusOr<DecodedCall>(std::move(*given))
          : DecodeCall(call, op->schema(), impl_->options.limits, blobs, lane.device.is_cuda());
  clock.Lap(&cpu.decode);
  if (!decoded.ok()) return WithCpu(DecodeFailed(decoded.status()), cpu);
  // An older release's form of the operator, when the call's arguments fit that one.
  const c10::OperatorHandle& replay_op = decoded->replay_as ? *decoded->replay_as : *op;
  if (call.op->random_family != common::RandomFamily::kNone || call.id.drew_random) {
    CallOutcome c =
        CheckRandom(call, replay_op, *decoded, impl_->options, lane.device, *impl_->standards);
    c.replay_seconds = Seconds(Clock::now() - start) - c.compare_seconds;
    clock.Lap(&cpu.random);
    return WithCpu(std::move(c), cpu);
  }
  return impl_->Replayed(call, replay_op, lane.device, *decoded, clock, cpu, start);
}

CallOutcome CallChecker::Impl::Replayed(const ServerCall& call, const c10::OperatorHandle& op,
                                        const c10::Device& device, DecodedCall& decoded,
                                        StageClock& clock, CallOutcome::StageCpu cpu,
                                        Clock::time_point start) const {
  // 4. Replay on the bench device, and as the float64 golden where the standard reads it.
  const Standard standard = StandardOf(call, decoded.inputs, *standards);
  const std::optional<at::ScalarType> autocast = common::ScalarTypeOfWire(call.id.autocast_dtype);
  const bool bench_decides = BenchDecides(call, decoded, standard, *standards);
  const Replay bench = Guarded([&] { return ReplayBench(op, decoded.inputs, device, autocast); });
  clock.Lap(&cpu.bench);
  const bool exact = bench_decides && bench.ran();
  const Replay golden_run =
      ReplayGolden(options, golden, op, decoded.inputs, device, autocast, exact);
  clock.Lap(&cpu.golden);
  cpu.bench_ran = bench.ran();
  cpu.golden_ran = golden_run.ran();
  const auto replayed = Clock::now();
  if (!bench.ran() && !golden_run.ran()) {
    CallOutcome c = NeitherRan(call, bench, golden_run);
    c.replay_seconds = Seconds(replayed - start);
    return WithCpu(std::move(c), cpu);
  }
  // 5. Judge every output; aggregate. An exact call's reference is the bench itself (in the
  // golden's place, as for a replayed random op): the same rows as against the golden.
  CallOutcome check;
  JudgeOutputs(call, decoded, bench, exact ? bench : golden_run,
               exact ? Standard::kBinary : standard, *standards, &check);
  SkipOnHalfTheEvidence(bench, golden_run, &check);
  check.replay_seconds = Seconds(replayed - start);
  check.compare_seconds = Seconds(Clock::now() - replayed);
  KeepValues(options, op, decoded, &bench, exact ? nullptr : &golden_run, &check);
  clock.Lap(&cpu.compare);
  cpu.to_host = check.cpu.to_host;  // JudgeOutputs' share of compare
  return WithCpu(std::move(check), cpu);
}

int LibtorchDefaultIntraOpThreads() {
  static const int threads = at::get_num_threads();  // before any server of this process set it
  return threads;
}
void SetIntraOpThreads(int threads) {
  LibtorchDefaultIntraOpThreads();
  at::set_num_threads(std::max(1, threads));
}
int IntraOpThreads() { return at::get_num_threads(); }

}  // namespace parity::server
