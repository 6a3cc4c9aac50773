#include "server/replay/call_checker.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <unordered_set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/naming.h"
#include "common/text.h"
#include "common/torch/dtype_map.h"
#include "common/torch/tensor_stats.h"
#include "common/torch/torch_pch.h"
#include "common/torch/written_arguments.h"
#include "server/compare/judge.h"
#include "server/compare/statistics.h"

namespace parity::server {
namespace {

using Clock = std::chrono::steady_clock;
using Stack = std::vector<c10::IValue>;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---- op registries
// -------------------------------------------------------------------------------

// Ops whose replay cannot reproduce the device's result: random draws (unless the agent ships the
// generator state) and uninitialised memory.

// Reference implementations for ops the bench's libtorch lacks (fused accelerator ops), by full
// name. Each computes the op from aten ops on whatever device/dtype its inputs have.
using ReferenceFn = std::function<Stack(const Stack&)>;
const std::map<std::string, ReferenceFn, std::less<>>& ReferenceRegistry() {
  static const auto* reg = new std::map<std::string, ReferenceFn, std::less<>>{
      // torch_npu's npu_rms_norm(x, gamma, epsilon=1e-6) -> (y, rstd)
      {"npu::npu_rms_norm",
       [](const Stack& in) {
         const at::Tensor& x = in.at(0).toTensor();
         const at::Tensor& gamma = in.at(1).toTensor();
         const double eps = in.size() > 2 && in[2].isDouble() ? in[2].toDouble() : 1e-6;
         at::Tensor rstd = at::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + eps);
         return Stack{c10::IValue(c10::ivalue::Tuple::create({x * rstd * gamma, rstd}))};
       }},
  };
  return *reg;
}

// Every operator name the dispatcher knows, to tell "unknown op" from "unknown overload".
bool OpNameKnown(absl::string_view name) {
  static const auto* names = [] {
    auto* set = new std::unordered_set<std::string>();
    for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
      set->insert(op.name);
    }
    return set;
  }();
  return names->count(std::string(name)) > 0;
}

// ---- value transforms ------------------------------------------------------------------------

// Applies `fn` to every tensor in `v` (lists and tuples included) and replaces every Device
// value with `device`.
c10::IValue MapValue(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& fn,
                     const c10::Device& device) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? c10::IValue(fn(t)) : v;
  }
  if (v.isDevice()) return c10::IValue(device);
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const c10::IValue& item : v.toListRef()) {
      const at::Tensor& t = item.toTensor();
      out.push_back(t.defined() ? fn(t) : t);
    }
    return c10::IValue(out);
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& e : v.toTupleRef().elements()) items.push_back(MapValue(e, fn, device));
    return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
  }
  if (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) out.push_back(MapValue(e, fn, device));
    return c10::IValue(out);
  }
  return v;
}

void CollectFloatDtypes(const c10::IValue& v, std::set<at::ScalarType>* out) {
  if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point()) {
    out->insert(v.toTensor().scalar_type());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) CollectFloatDtypes(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) CollectFloatDtypes(e, out);
  }
}

// msprobe's upcast for the golden: one raisable float dtype -> its wider type (fp16/bf16 ->
// fp32, fp32 -> fp64); several -> fp32.
std::optional<at::ScalarType> GoldenTarget(const Stack& inputs) {
  std::set<at::ScalarType> dtypes;
  for (const auto& v : inputs) CollectFloatDtypes(v, &dtypes);
  dtypes.erase(at::kDouble);
  if (dtypes.empty()) return std::nullopt;
  if (dtypes.size() > 1) return at::kFloat;
  return *dtypes.begin() == at::kFloat ? at::kDouble : at::kFloat;
}

void Flatten(const c10::IValue& v, std::vector<c10::IValue>* out) {
  if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) Flatten(e, out);
  } else if (v.isTensorList() ||
             (v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList())) {
    for (const auto& e : v.toListRef()) Flatten(e, out);
  } else {
    out->push_back(v);
  }
}

// A contiguous CPU copy and a view of it for the compare engine.
struct HostCopy {
  at::Tensor tensor;
  HostTensor view;
};
std::optional<HostCopy> ToHost(const at::Tensor& t) {
  std::optional<v1::DType> d = common::ToWireDType(t.scalar_type());
  if (!d) return std::nullopt;
  HostCopy h;
  h.tensor = t.detach().resolve_conj().resolve_neg().to(at::kCPU).contiguous();
  h.view.dtype = *d;
  h.view.shape.assign(h.tensor.sizes().begin(), h.tensor.sizes().end());
  h.view.data = h.tensor.data_ptr();
  h.view.numel = h.tensor.numel();
  return h;
}

std::string ErrorText(const std::exception& e);

// Every string of the call under its cap (common/limits.h): RESOURCE_EXHAUSTED naming the field.
absl::Status CheckCallStrings(const v1::ApiCall& call) {
  const std::tuple<const char*, const std::string*, std::size_t> fields[] = {
      {"op_name", &call.op_name(), common::kMaxNameBytes},
      {"overload", &call.overload(), common::kMaxNameBytes},
      {"forward_op_name", &call.forward_op_name(), common::kMaxNameBytes},
      {"forward_overload", &call.forward_overload(), common::kMaxNameBytes},
      {"autograd_node", &call.autograd_node(), common::kMaxNameBytes},
      {"module_path", &call.module_path(), common::kMaxModulePathBytes},
      {"skip_reason", &call.skip_reason(), common::kMaxSkipReasonBytes},
  };
  for (const auto& [name, value, cap] : fields) {
    if (value->size() > cap) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ApiCall.", name, ": ", value->size(), " bytes, at most ", cap));
    }
  }
  // Names end up in file names' rows, logs and metric labels: no operator is named with control
  // characters, so a name holding one is malformed.
  for (const auto& [name, value, cap] : fields) {
    if (cap == common::kMaxNameBytes && common::EscapeControl(*value) != *value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ApiCall.", name, ": \"", common::EscapeControl(*value), "\" holds control characters"));
    }
  }
  return absl::OkStatus();
}

// Makes `inputs` a full argument stack for `schema`: checks each value's type against its
// argument and appends the defaults of trailing arguments the call omitted. INVALID_ARGUMENT
// naming the argument when one is missing without a default, when there are more values than
// arguments, or when a type does not fit.
absl::Status NormalizeArguments(const c10::FunctionSchema& schema, Stack& inputs) {
  const auto& args = schema.arguments();
  if (inputs.size() > args.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the call has ", inputs.size(), " arguments, ",
                                                   toString(schema), " takes ", args.size()));
  }
  for (std::size_t i = inputs.size(); i < args.size(); ++i) {
    if (!args[i].default_value()) {
      return absl::InvalidArgumentError(absl::StrCat("argument ", i, " (", args[i].name(), ") of ",
                                                     toString(schema),
                                                     " is missing and has no default"));
    }
  }
  try {
    schema.checkAndNormalizeInputs(inputs, {});  // also appends the defaults
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("arguments do not match ", toString(schema), ": ", ErrorText(e)));
  }
  return absl::OkStatus();
}

std::string ErrorText(const std::exception& e) {
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) {
    return c10e->what_without_backtrace();
  }
  return e.what();
}

void FillMetrics(const PairMetrics& m, const std::string& prefix, v1::OutputVerdict* out) {
  auto& map = *out->mutable_metrics();
  map[prefix + "max_abs_error"] = m.max_abs_error;
  map[prefix + "mismatch_rate"] = m.mismatch_rate;
  if (!m.has_float_metrics) return;
  if (!m.cosine_blank && !m.cosine_one_side_zero) map[prefix + "cosine"] = m.cosine;
  map[prefix + "hundredth_ratio"] = m.hundredth_ratio;
  map[prefix + "thousandth_ratio"] = m.thousandth_ratio;
  map[prefix + "ten_thousandth_ratio"] = m.ten_thousandth_ratio;
  map[prefix + "error_balance"] = m.error_balance;
  map[prefix + "rmse"] = m.rmse;
  map[prefix + "small_value_error_ratio"] = m.small_value_error_ratio;
  map[prefix + "max_rel_error"] = m.max_rel_error;
  map[prefix + "mean_rel_error"] = m.mean_rel_error;
  map[prefix + "inf_nan_error_rate"] = m.inf_nan_error_rate;
  map[prefix + "rel_error_rate"] = m.rel_error_rate;
  map[prefix + "abs_error_rate"] = m.abs_error_rate;
  map[prefix + "ulp_max"] = m.ulp_max;
  map[prefix + "ulp_mean"] = m.ulp_mean;
  map[prefix + "ulp_over_threshold_ratio"] = m.ulp_over_threshold_ratio;
}

// The BF16 switch is newer than libtorch 1.13: set where the linked libtorch has it.
template <typename Context>
auto DisallowBF16Reduction(Context& ctx, int) -> decltype(ctx.setAllowBF16ReductionCuBLAS(false)) {
  return ctx.setAllowBF16ReductionCuBLAS(false);
}
template <typename Context>
void DisallowBF16Reduction(Context&, long) {}

// The bench stands in for the reference accelerator, so on CUDA it computes float32 in float32:
// no TF32 in cuBLAS or cuDNN (PyTorch's default lets cuDNN convolutions round float32 inputs to
// TF32's 10-bit mantissa), no reduced-precision reductions in half and bfloat16 GEMMs, and
// deterministic cuDNN algorithms. A verdict then does not depend on whether the bench is a GPU
// or a CPU, nor on the bench host's library defaults. Process-wide: the server replays only.
void UseFullPrecisionOnCuda() {
  at::Context& ctx = at::globalContext();
  ctx.setAllowTF32CuBLAS(false);
  ctx.setAllowTF32CuDNN(false);
  ctx.setAllowFP16ReductionCuBLAS(false);
  DisallowBF16Reduction(ctx, 0);
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
}

// A device output sent as statistics only, judged by the same statistics of the bench and golden
// outputs (`bench`, `golden` may be null or not tensors when that replay failed).
void JudgeStatsOnly(const v1::Tensor& device, const c10::IValue* bench, const c10::IValue* golden,
                    const StandardsTable& table, CheckedOutput* out) {
  auto stats = [](const c10::IValue* v) -> std::optional<v1::TensorStats> {
    if (v == nullptr || !v->isTensor() || !v->toTensor().defined()) return std::nullopt;
    return common::TensorStatistics(v->toTensor());
  };
  const std::optional<v1::TensorStats> b = stats(bench), g = stats(golden);
  uint64_t numel = 1;
  for (int64_t d : device.shape()) numel *= static_cast<uint64_t>(d);
  OutputJudgement j = JudgeStatistics(device.stats(), b ? &*b : nullptr, g ? &*g : nullptr,
                                      device.dtype(), numel, table);
  v1::OutputVerdict& ov = out->verdict;
  ov.set_status(j.status);
  ov.set_standard(std::string(StandardName(j.standard)));
  ov.set_dtype(device.dtype());
  for (int64_t d : device.shape()) ov.add_shape(d);
  ov.set_failed_metric(j.failed_metric);
  ov.set_message(j.message);
  for (const auto& [name, value] : j.statistics) (*ov.mutable_metrics())[name] = value;
  for (const auto& [name, r] : j.ratios) (*ov.mutable_metrics())["ratio_" + name] = r.value;
  out->two_way_status = j.two_way_status;
  out->ratios = j.ratios;
  if (bench != nullptr && bench->isTensor() && bench->toTensor().defined()) {
    out->bench_dtype =
        common::ToWireDType(bench->toTensor().scalar_type()).value_or(v1::DTYPE_UNSPECIFIED);
  }
}

}  // namespace

struct CallChecker::Impl {
  CheckerOptions options;
  const StandardsTable* standards = nullptr;
  c10::Device device{c10::kCPU};
  std::string device_name = "cpu";

  // Runs `op` (or its reference implementation) on `stack`; an error text on failure.
  std::string Run(const c10::OperatorHandle* op, const ReferenceFn* ref, Stack& stack) const {
    try {
      at::NoGradGuard no_grad;
      if (ref != nullptr) {
        stack = (*ref)(stack);
      } else {
        // Never a short stack: NormalizeArguments filled it to the schema's length.
        if (stack.size() != op->schema().arguments().size()) {
          return absl::StrCat("internal: ", stack.size(), " values for ",
                              op->schema().arguments().size(), " arguments; not called");
        }
        common::CallBoxedForResults(*op, stack);  // void ops: the arguments they write
      }
      return "";
    } catch (const std::exception& e) {
      return ErrorText(e);
    }
  }
};

CallChecker::CallChecker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CallChecker::~CallChecker() = default;

const std::string& CallChecker::bench_device() const { return impl_->device_name; }

absl::StatusOr<std::unique_ptr<CallChecker>> CallChecker::Create(const CheckerOptions& options,
                                                                 const StandardsTable& standards) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->standards = &standards;
  const int gpus = at::detail::getCUDAHooks().hasCUDA()
                       ? static_cast<int>(at::detail::getCUDAHooks().getNumGPUs())
                       : 0;
  const std::string& want = options.bench_device;
  if (want == "auto") {
    impl->device = gpus > 0 ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  } else {
    try {
      impl->device = c10::Device(want);
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrCat("bench_device: not a device: \"", want, "\""));
    }
    if (impl->device.is_cuda()) {
      const int index = impl->device.has_index() ? impl->device.index() : 0;
      if (index >= gpus) {
        return absl::InvalidArgumentError(absl::StrCat("bench_device: ", want,
                                                       " asked for, but this libtorch sees ", gpus,
                                                       " CUDA device(s)"));
      }
      impl->device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
    } else if (!impl->device.is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench_device: only cpu and cuda are supported, got \"", want, "\""));
    }
  }
  if (impl->device.is_cuda()) UseFullPrecisionOnCuda();
  impl->device_name = impl->device.str();
  return std::unique_ptr<CallChecker>(new CallChecker(std::move(impl)));
}

CheckResult CallChecker::Check(const v1::ApiCall& call, const common::BlobSource* blobs) const {
  const auto start = Clock::now();
  CheckResult result;
  v1::Verdict& v = result.verdict;
  v.set_sequence(call.sequence());
  v.set_phase(call.phase());
  v.set_step(call.step());
  v.set_module_path(call.module_path());
  v.set_api_name(common::ApiName(call));
  auto finish = [&](v1::VerdictStatus status, std::string message, int code = 0) {
    v.set_status(status);
    v.set_message(std::move(message));
    v.set_error_code(code);
    return result;
  };

  if (absl::Status s = CheckCallStrings(call); !s.ok()) {
    return finish(v1::VERDICT_STATUS_REJECTED, std::string(s.message()),
                  static_cast<int>(s.code()));
  }
  if (!call.skip_reason().empty()) {
    return finish(v1::VERDICT_STATUS_SKIP, common::EscapeControl(call.skip_reason()));
  }
  if (std::string why = SkipReasonForOp(call.op_name()); !why.empty()) {
    return finish(v1::VERDICT_STATUS_SKIP, why);
  }

  // Resolve the operator: a reference implementation, or the dispatcher's schema.
  const ReferenceFn* ref = nullptr;
  c10::optional<c10::OperatorHandle> op;
  if (auto it = ReferenceRegistry().find(call.op_name()); it != ReferenceRegistry().end()) {
    ref = &it->second;
  } else {
    op = c10::Dispatcher::singleton().findSchema({call.op_name(), call.overload()});
    if (!op) {
      const std::string why =
          OpNameKnown(call.op_name())
              ? absl::StrCat("operator ", call.op_name(), " has no overload \"", call.overload(),
                             "\" in the bench's libtorch")
              : absl::StrCat("unknown operator \"", call.op_name(),
                             "\": the bench's libtorch does not have it and no reference "
                             "implementation is registered");
      return finish(v1::VERDICT_STATUS_SKIP, why,
                    static_cast<int>(absl::StatusCode::kUnimplemented));
    }
  }

  // Decode, validating every size first.
  common::ValueDecoder decoder(impl_->options.limits, blobs);
  Stack inputs(call.inputs_size());
  for (int i = 0; i < call.inputs_size(); ++i) {
    absl::Status s = decoder.Decode(call.inputs(i), absl::StrCat("inputs[", i, "]"), &inputs[i]);
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      return finish(v1::VERDICT_STATUS_SKIP,
                    absl::StrCat(s.message(), ": the call cannot be replayed without it"));
    }
    if (!s.ok()) {
      return finish(v1::VERDICT_STATUS_REJECTED, std::string(s.message()),
                    static_cast<int>(s.code()));
    }
  }
  Stack device_raw(call.outputs_size());
  std::vector<std::string> output_skip(call.outputs_size());
  for (int i = 0; i < call.outputs_size(); ++i) {
    absl::Status s =
        decoder.Decode(call.outputs(i), absl::StrCat("outputs[", i, "]"), &device_raw[i]);
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      output_skip[i] = std::string(s.message());
    } else if (!s.ok()) {
      return finish(v1::VERDICT_STATUS_REJECTED, std::string(s.message()),
                    static_cast<int>(s.code()));
    }
  }
  if (op) {
    // Argument types must fit the schema before anything is dispatched, and the stack must hold
    // every argument: trailing arguments the call omits take the schema's defaults (a kernel
    // reads its arguments from fixed stack positions, so a short stack would read memory in
    // front of it).
    if (absl::Status s = NormalizeArguments(op->schema(), inputs); !s.ok()) {
      return finish(v1::VERDICT_STATUS_REJECTED, std::string(s.message()),
                    static_cast<int>(s.code()));
    }
  }

  // Bench: same dtypes on the bench device (copies: in-place ops mutate them).
  const c10::Device bench_dev = impl_->device;
  Stack bench;
  for (const auto& in : inputs) {
    bench.push_back(MapValue(
        in,
        [&](const at::Tensor& t) {
          return t.to(bench_dev, /*non_blocking=*/false,
                      /*copy=*/true);
        },
        bench_dev));
  }
  const std::string bench_error = impl_->Run(op ? &*op : nullptr, ref, bench);

  // Golden: floating inputs upcast, on CPU.
  Stack golden;
  std::string golden_error = "disabled";
  if (impl_->options.golden) {
    const std::optional<at::ScalarType> target = GoldenTarget(inputs);
    for (const auto& in : inputs) {
      golden.push_back(MapValue(
          in,
          [&](const at::Tensor& t) {
            if (target && t.is_floating_point() && t.scalar_type() != at::kDouble) {
              return t.to(*target);
            }
            return t.clone();
          },
          c10::Device(c10::kCPU)));
    }
    // A dtype argument naming a low-precision float is raised with the tensors.
    if (op && target) {
      const auto& args = op->schema().arguments();
      for (std::size_t i = 0; i < golden.size() && i < args.size(); ++i) {
        const c10::TypePtr& t = args[i].real_type();
        const bool is_dtype = t->kind() == c10::TypeKind::ScalarTypeType ||
                              (t->kind() == c10::TypeKind::OptionalType &&
                               t->castRaw<c10::OptionalType>()->getElementType()->kind() ==
                                   c10::TypeKind::ScalarTypeType);
        if (is_dtype && golden[i].isInt()) {
          const auto st = static_cast<at::ScalarType>(golden[i].toInt());
          if (st == at::kHalf || st == at::kBFloat16 || st == at::kFloat) {
            golden[i] = c10::IValue(*target);
          }
        }
      }
    }
    golden_error = impl_->Run(op ? &*op : nullptr, ref, golden);
  }
  const auto replayed = Clock::now();
  v.set_replay_seconds(Seconds(replayed - start));

  if (!bench_error.empty() && !golden_error.empty()) {
    return finish(
        v1::VERDICT_STATUS_SKIP,
        absl::StrCat("the bench could not run ", call.op_name(), ": ", bench_error,
                     golden_error == "disabled" ? "" : absl::StrCat("; golden: ", golden_error)));
  }

  std::vector<c10::IValue> dev_outs, bench_outs, gold_outs;
  std::vector<int> raw_index;  // flat output -> the call's output it came from
  for (std::size_t k = 0; k < device_raw.size(); ++k) {
    Flatten(device_raw[k], &dev_outs);
    raw_index.resize(dev_outs.size(), static_cast<int>(k));
  }
  if (bench_error.empty())
    for (const auto& o : bench) Flatten(o, &bench_outs);
  if (golden_error.empty())
    for (const auto& o : golden) Flatten(o, &gold_outs);
  if (dev_outs.empty()) {
    return finish(v1::VERDICT_STATUS_SKIP, absl::StrCat(call.op_name(),
                                                        " returned nothing and the call carries no "
                                                        "written arguments: nothing to compare"));
  }
  const std::vector<c10::IValue>& shape_ref = bench_error.empty() ? bench_outs : gold_outs;
  if (shape_ref.size() != dev_outs.size()) {
    return finish(v1::VERDICT_STATUS_ERROR,
                  absl::StrCat("bench and npu output structure is different: the device returned ",
                               dev_outs.size(), " value(s), the bench ", shape_ref.size()));
  }

  const int input_rank = !inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().defined()
                             ? static_cast<int>(inputs[0].toTensor().dim())
                             : -1;
  const Standard standard = impl_->standards->Lookup(call.op_name(), input_rank);
  std::vector<v1::VerdictStatus> statuses;
  std::string summary;
  for (std::size_t i = 0; i < dev_outs.size(); ++i) {
    CheckedOutput out;
    v1::OutputVerdict& ov = out.verdict;
    ov.set_index(static_cast<uint32_t>(i));
    const c10::IValue& d = dev_outs[i];
    const c10::IValue* b = bench_outs.empty() ? nullptr : &bench_outs[i];
    const c10::IValue* g = gold_outs.empty() ? nullptr : &gold_outs[i];
    const int k = raw_index[i];
    const v1::Value& wire = call.outputs(k);
    if (!output_skip[k].empty() && wire.has_tensor() &&
        wire.tensor().form() == v1::DATA_FORM_STATS_ONLY) {
      JudgeStatsOnly(wire.tensor(), b, g, *impl_->standards, &out);
    } else if (!output_skip[k].empty()) {
      ov.set_status(v1::VERDICT_STATUS_SKIP);
      ov.set_message(output_skip[k]);
    } else if (d.isTensor()) {
      const at::Tensor& dt = d.toTensor();
      if (!dt.defined()) {
        ov.set_status(v1::VERDICT_STATUS_SKIP);
        ov.set_message("undefined device tensor");
      } else {
        std::optional<HostCopy> dh = ToHost(dt), bh, gh;
        if (b && b->isTensor() && b->toTensor().defined()) bh = ToHost(b->toTensor());
        if (g && g->isTensor() && g->toTensor().defined()) gh = ToHost(g->toTensor());
        if (!dh || (!bh && !gh)) {
          ov.set_status(v1::VERDICT_STATUS_SKIP);
          ov.set_message("Bench output is None, skip this test.");
        } else {
          OutputJudgement j = JudgeOutput(dh->view, bh ? &bh->view : nullptr,
                                          gh ? &gh->view : nullptr, standard, *impl_->standards);
          ov.set_status(j.status);
          ov.set_standard(std::string(StandardName(j.standard)));
          ov.set_dtype(dh->view.dtype);
          for (int64_t s : dh->view.shape) ov.add_shape(s);
          ov.set_failed_metric(j.failed_metric);
          ov.set_message(j.message);
          if (j.device) FillMetrics(*j.device, "", &ov);
          if (j.bench) FillMetrics(*j.bench, "bench_", &ov);
          for (const auto& [name, r] : j.ratios) {
            (*ov.mutable_metrics())["ratio_" + name] = r.value;
          }
          out.two_way_status = j.two_way_status;
          out.ratios = j.ratios;
          out.has_device_metrics = j.device.has_value();
          if (bh) out.bench_dtype = bh->view.dtype;
        }
      }
    } else if (d.isNone()) {
      ov.set_status(v1::VERDICT_STATUS_SKIP);
      ov.set_message("Bench output is None, skip this test.");
    } else {
      // Python scalars and other plain values: equal or not (the bench, at the same dtype,
      // decides when it ran).
      const c10::IValue& r = b ? *b : *g;
      const bool equal = d.isDouble() && r.isDouble() ? d.toDouble() == r.toDouble() : d == r;
      ov.set_status(equal ? v1::VERDICT_STATUS_PASS : v1::VERDICT_STATUS_ERROR);
      ov.set_standard("exact");
      if (!equal) {
        ov.set_failed_metric("value");
        ov.set_message(absl::StrCat("device value differs from the bench"));
      }
    }
    out.two_way_message = ov.message();
    if (ov.status() == v1::VERDICT_STATUS_ERROR && summary.empty()) {
      summary = absl::StrCat("output ", i, ": ", ov.failed_metric(), " (",
                             ov.standard().empty() ? "exact" : ov.standard(), ")");
    }
    statuses.push_back(ov.status());
    *v.add_outputs() = ov;
    result.outputs.push_back(std::move(out));
  }
  if (!bench_error.empty()) {
    summary += absl::StrCat(summary.empty() ? "" : "; ", "bench failed: ", bench_error);
  }
  if (!golden_error.empty() && golden_error != "disabled") {
    summary += absl::StrCat(summary.empty() ? "" : "; ", "golden failed: ", golden_error);
  }
  v.set_compare_seconds(Seconds(Clock::now() - replayed));
  return finish(Aggregate(statuses), summary);
}

}  // namespace parity::server
