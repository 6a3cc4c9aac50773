// Stage 5 of a check: every output of the device against the bench and golden replays.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/cpu_clock.h"
#include "common/base/log.h"
#include "common/torch/dtype_map.h"
#include "common/torch/ivalue_walk.h"
#include "common/torch/tensor_stats.h"
#include "common/torch/torch_pch.h"
#include "server/compare/device_compare.h"
#include "server/compare/statistics.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

// Whether outputs may be compared on the bench's GPU: this build has the CUDA compare and
// PARITY_COMPARE_DEVICE is not "cpu" (which compares on the host, as a build without it does).
bool GpuCompareAllowed() {
  static const bool allowed = [] {
    const char* env = std::getenv("PARITY_COMPARE_DEVICE");
    return internal::DeviceCompareBuilt() && (env == nullptr || std::string(env) != "cpu");
  }();
  return allowed;
}

const at::Tensor* TensorOf(const c10::IValue* v) {
  return v != nullptr && v->isTensor() && v->toTensor().defined() ? &v->toTensor() : nullptr;
}

// The GPU an output is compared on: the bench's (else the golden's) when that output is there and
// every side is floating; none (the host) otherwise.
std::optional<c10::Device> CompareGpu(const at::Tensor& device, const c10::IValue* bench,
                                      const c10::IValue* golden) {
  if (!GpuCompareAllowed() || !at::isFloatingType(device.scalar_type())) return std::nullopt;
  std::optional<c10::Device> gpu;
  for (const c10::IValue* v : {golden, bench}) {
    const at::Tensor* t = TensorOf(v);
    if (t == nullptr) continue;
    if (!at::isFloatingType(t->scalar_type())) return std::nullopt;
    if (t->device().is_cuda()) gpu = t->device();
  }
  return gpu;
}

// A contiguous copy of an output where it is compared (the host, or `gpu`: a pinned host tensor
// goes up asynchronously on the lane's stream), and the compare engine's view of it.
struct PlacedCopy {
  at::Tensor tensor;
  TensorView view;
};

std::optional<PlacedCopy> Place(const c10::IValue* v, std::optional<c10::Device> gpu) {
  const at::Tensor* t = TensorOf(v);
  if (t == nullptr) return std::nullopt;
  std::optional<wire::DType> d = common::ToWireDType(t->scalar_type());
  if (!d) return std::nullopt;
  PlacedCopy h;
  const at::Tensor plain = t->detach().resolve_conj().resolve_neg();
  h.tensor = gpu ? plain.to(*gpu, /*non_blocking=*/plain.is_pinned()).contiguous()
                 : plain.to(at::kCPU).contiguous();
  h.view.dtype = *d;
  h.view.shape.assign(h.tensor.sizes().begin(), h.tensor.sizes().end());
  h.view.data = h.tensor.data_ptr();
  h.view.numel = h.tensor.numel();
  h.view.cuda_device = gpu ? gpu->index() : -1;
  return h;
}

OutputOutcome Skipped(std::string why) {
  OutputOutcome out;
  out.judgement.status = CheckStatus::kSkip;
  out.judgement.message = std::move(why);
  return out;
}

// A tensor output: the compare engine's metrics and the standard's rules, on the bench's GPU
// where it has one (only the metrics come back), else on the host.
// `to_host`: the checking thread's CPU seconds moving outputs between the host and a GPU (the
// bench's and golden's down for a host compare, the device's up for a GPU compare).
// The three sides placed for a compare on `gpu` (or the host), timed into `to_host`; false when
// the GPU had no room for the copies.
struct Placed {
  std::optional<PlacedCopy> device, bench, golden;
};
bool PlaceAll(const c10::IValue& device, const c10::IValue* bench, const c10::IValue* golden,
              std::optional<c10::Device> gpu, double* to_host, Placed* out) {
  const auto on_gpu = [](const c10::IValue* v) {
    const at::Tensor* t = TensorOf(v);
    return t != nullptr && !t->device().is_cpu();
  };
  std::optional<common::ScopedCpuTimer> timer;  // only where there is a copy to time
  if (gpu || on_gpu(bench) || on_gpu(golden)) timer.emplace(to_host);
  try {
    *out = {Place(&device, gpu), Place(bench, gpu), Place(golden, gpu)};
    if (gpu) {
      // The compare's kernels run on their own stream: the lane's copies and kernels end first.
      c10::impl::VirtualGuardImpl guard(gpu->type());
      guard.getStream(*gpu).synchronize();
    }
  } catch (const c10::Error&) {
    if (!gpu) throw;
    *out = {};
    return false;
  }
  return true;
}

// A tensor output: the compare engine's metrics and the standard's rules, on the bench's GPU
// where it has one (only the metrics come back), else on the host: also when the GPU has no room
// for the copies or its compare fails (a CUDA error), so the verdict never depends on it.
// `to_host`: the checking thread's CPU seconds moving outputs between the host and a GPU (the
// bench's and golden's down for a host compare, the device's up for a GPU compare).
OutputOutcome JudgeTensor(const at::Tensor& device, const c10::IValue* bench,
                          const c10::IValue* golden, Standard standard, const StandardsTable& table,
                          double* to_host) {
  const c10::IValue d(device);
  std::optional<c10::Device> gpu = CompareGpu(device, bench, golden);
  Placed p;
  if (!PlaceAll(d, bench, golden, gpu, to_host, &p)) {
    gpu.reset();
    PlaceAll(d, bench, golden, gpu, to_host, &p);
  }
  if (!p.device || (!p.bench && !p.golden)) return Skipped("Bench output is None, skip this test.");
  auto judge = [&] {
    return JudgeOutput(p.device->view, p.bench ? &p.bench->view : nullptr,
                       p.golden ? &p.golden->view : nullptr, standard, table);
  };
  OutputOutcome out;
  out.judgement = judge();
  if (gpu && out.judgement.failed_metric == Metric::kStructure &&
      absl::StartsWith(out.judgement.message, internal::kDeviceCompareError)) {
    static std::once_flag once;
    std::call_once(once, [&] {
      common::LogWarning(absl::StrCat(out.judgement.message, ": comparing on the host instead"));
    });
    gpu.reset();
    PlaceAll(d, bench, golden, gpu, to_host, &p);
    out.judgement = judge();
  }
  const PlacedCopy& dh = *p.device;
  out.dtype = dh.view.dtype;
  out.shape = dh.view.shape;
  out.judged = out.judgement.device.has_value();
  if (p.bench) out.bench_dtype = p.bench->view.dtype;
  out.reference_dtype = p.golden ? p.golden->view.dtype : out.bench_dtype;
  return out;
}

// A device output sent as statistics only: by the same statistics of the bench and golden.
OutputOutcome JudgeStatsOnly(const OutputForm& device, const c10::IValue* bench,
                             const c10::IValue* golden, const StandardsTable& table) {
  auto stats = [](const c10::IValue* v) -> std::optional<common::TensorStatsValues> {
    if (v == nullptr || !v->isTensor() || !v->toTensor().defined()) return std::nullopt;
    return common::TensorStatistics(v->toTensor());
  };
  const std::optional<common::TensorStatsValues> b = stats(bench), g = stats(golden);
  uint64_t numel = 1;
  for (int64_t d : device.shape) numel *= static_cast<uint64_t>(d);
  OutputOutcome out;
  out.judgement = JudgeStatistics(device.stats, b ? &*b : nullptr, g ? &*g : nullptr, device.dtype,
                                  numel, table);
  out.dtype = device.dtype;
  out.shape = device.shape;
  if (b) {
    out.bench_dtype =
        common::ToWireDType(bench->toTensor().scalar_type()).value_or(wire::kDTypeUnspecified);
  }
  out.reference_dtype =
      g ? common::ToWireDType(golden->toTensor().scalar_type()).value_or(wire::kDTypeUnspecified)
        : out.bench_dtype;
  return out;
}

// A Python scalar, string or other plain value: equal or not (the bench, at the same dtype,
// decides when it ran).
OutputOutcome JudgeValue(const c10::IValue& device, const c10::IValue& reference) {
  OutputOutcome out;
  OutputJudgement& j = out.judgement;
  const bool equal = device.isDouble() && reference.isDouble()
                         ? device.toDouble() == reference.toDouble()
                         : device == reference;
  out.value_type = device.isDouble()          ? "<class 'float'>"
                   : device.isBool()          ? "<class 'bool'>"
                   : device.isInt()           ? "<class 'int'>"
                   : device.isString()        ? "<class 'str'>"
                   : device.isComplexDouble() ? "<class 'complex'>"
                                              : "";
  j.standard = Standard::kExact;
  j.status = equal ? CheckStatus::kPass : CheckStatus::kError;
  j.two_way_status = j.status;
  if (!equal) {
    j.failed_metric = Metric::kValue;
    j.message = "device value differs from the bench";
  }
  return out;
}

OutputOutcome JudgeOne(const OutputForm& form, const c10::IValue& device, const c10::IValue* bench,
                       const c10::IValue* golden, Standard standard, const StandardsTable& table,
                       double* to_host) {
  switch (form.kind) {
    case OutputForm::Kind::kStatsOnly:
      return JudgeStatsOnly(form, bench, golden, table);
    case OutputForm::Kind::kUndecoded:
      return Skipped(form.why);
    case OutputForm::Kind::kDecoded:
      break;
  }
  if (device.isTensor()) {
    if (!device.toTensor().defined()) return Skipped("undefined device tensor");
    return JudgeTensor(device.toTensor(), bench, golden, standard, table, to_host);
  }
  if (device.isNone()) return Skipped("Bench output is None, skip this test.");
  return JudgeValue(device, bench != nullptr ? *bench : *golden);
}

}  // namespace

Stack Flatten(const Stack& values) {
  Stack out;
  for (const c10::IValue& v : values) {
    common::ForEachLeaf(v, [&](const c10::IValue& leaf) { out.push_back(leaf); });
  }
  return out;
}

void JudgeOutputs(const ServerCall& call, const DecodedCall& decoded, const Replay& bench,
                  const Replay& golden, Standard standard, const StandardsTable& table,
                  CallOutcome* check) {
  Stack device;
  std::vector<int> raw_index;  // flat output -> the call's output it came from
  for (std::size_t k = 0; k < decoded.outputs.size(); ++k) {
    common::ForEachLeaf(decoded.outputs[k], [&](const c10::IValue& leaf) {
      device.push_back(leaf);
      raw_index.push_back(static_cast<int>(k));
    });
  }
  const Stack bench_out = bench.ran() ? Flatten(bench.results) : Stack{};
  const Stack golden_out = golden.ran() ? Flatten(golden.results) : Stack{};
  if (device.empty()) {
    check->status = CheckStatus::kSkip;
    check->message = absl::StrCat(call.id.op_name,
                                  " returned nothing and the call carries no written arguments: "
                                  "nothing to compare");
    return;
  }
  const Stack& shape_ref = bench.ran() ? bench_out : golden_out;
  if (shape_ref.size() != device.size()) {
    check->status = CheckStatus::kError;
    check->message = absl::StrCat(
        "bench and npu output structure is different: the device "
        "returned ",
        device.size(), " value(s), the bench ", shape_ref.size());
    return;
  }
  OutputTally tally;
  for (std::size_t i = 0; i < device.size(); ++i) {
    const int k = raw_index[i];
    const std::string* uncompared = table.UncomparedReason(call.id.op_name, static_cast<int>(i));
    OutputOutcome out = uncompared != nullptr
                            ? Skipped(absl::StrCat("not compared: ", *uncompared))
                            : JudgeOne(decoded.output_form[k], device[i],
                                       bench_out.empty() ? nullptr : &bench_out[i],
                                       golden_out.empty() ? nullptr : &golden_out[i], standard,
                                       table, &check->cpu.to_host);
    out.index = static_cast<uint32_t>(i);
    tally.Add(std::move(out), check);
  }
  std::string& summary = tally.summary();
  if (!bench.ran())
    absl::StrAppend(&summary, summary.empty() ? "" : "; ", "bench failed: ", bench.error);
  if (golden.failed()) {
    absl::StrAppend(&summary, summary.empty() ? "" : "; ", "golden failed: ", golden.error);
  }
  check->status = Aggregate(tally.statuses());
  check->message = std::move(summary);
}

void ApplyInputsWritten(const ServerCall& call, CallOutcome* check) {
  check->unchecked_writes = call.unchecked_writes;  // capped where the message was read
  const std::vector<InputWritten>& written = call.inputs_written;
  if (written.empty() || check->status == CheckStatus::kRejected) return;
  std::string what;
  for (std::size_t k = 0; k < written.size(); ++k) {
    const InputWritten& w = written[k];
    if (w.elements == 0 || w.changed_elements == 0 || w.changed_elements > w.elements ||
        static_cast<int64_t>(w.index) >= call.input_count) {
      check->status = CheckStatus::kRejected;
      check->error_code = absl::StatusCode::kInvalidArgument;
      check->message =
          absl::StrCat("inputs_written[", k, "]: ", w.changed_elements, " of ", w.elements,
                       " elements changed in inputs[", w.index, "] of a call with ",
                       call.input_count, " inputs: not a possible change");
      check->outputs.clear();
      check->inputs_written.clear();
      return;
    }
    absl::StrAppend(&what, what.empty() ? "" : "; ", "inputs[", w.index, "] (", w.name,
                    ") changed during the call: ", w.changed_elements, " of ", w.elements,
                    " elements (",
                    absl::SixDigits(100.0 * static_cast<double>(w.changed_elements) /
                                    static_cast<double>(w.elements)),
                    "%), an argument ", call.id.op_name, " must only read");
    check->inputs_written.push_back(w);
  }
  check->status = CheckStatus::kError;
  check->error_code = absl::StatusCode::kOk;  // an outcome now, not a SKIP's reason
  check->message = check->message.empty() ? what : absl::StrCat(what, "; ", check->message);
}

void OutputTally::Add(OutputOutcome out, CallOutcome* check) {
  const OutputJudgement& j = out.judgement;
  if (j.status == CheckStatus::kError && summary_.empty()) {
    summary_ = absl::StrCat("output ", out.index, ": ",
                            j.nonfinite ? NonFiniteMessage(*j.nonfinite) + "; " : "",
                            MetricName(j.failed_metric), " (", StandardName(j.standard), ")");
  }
  statuses_.push_back(j.status);
  check->outputs.push_back(std::move(out));
}

}  // namespace parity::server
