// Stage 4 of a check: the bench and golden replays through the dispatcher, and the bench device.
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>
#include <cmath>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/log.h"
#include "common/torch/autocast.h"
#include "common/torch/boxed_call.h"
#include "common/torch/dtype_map.h"
#include "common/torch/ivalue_walk.h"
#include "common/torch/torch_pch.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

// `inputs` with `tensor(t)` for every defined tensor and `device` for every Device value.
template <typename F>
Stack MapInputs(const Stack& inputs, const F& tensor, const c10::Device& device) {
  Stack out;
  out.reserve(inputs.size());
  for (const c10::IValue& v : inputs) {
    out.push_back(common::MapLeaves(v, [&](const c10::IValue& leaf) {
      if (leaf.isTensor() && leaf.toTensor().defined()) return c10::IValue(tensor(leaf.toTensor()));
      if (leaf.isDevice()) return c10::IValue(device);
      return leaf;
    }));
  }
  return out;
}

// The golden is computed in float64 for any float input below it (none for float64-only or
// non-float inputs), and kept in msprobe's golden dtype: float64 for float32 inputs, float32 when
// every floating input is float16/bfloat16 or the dtypes are mixed. msprobe computed the latter
// in float32, which is not exact where a sum cancels: a correctly rounded float16 GEMM was then
// more than 1 ULP from its golden at such elements (4 false errors in 141 clean float16 mm calls,
// lowp_false_errors). Computed in float64 and rounded once to float32, the golden is within
// 2^-24 of the exact value relative to itself, far inside a float16/bfloat16 ULP, and the
// metrics keep msprobe's float32 arithmetic (issue 36).
struct GoldenDtypes {
  at::ScalarType compute, keep;
};
std::optional<GoldenDtypes> GoldenTarget(const Stack& inputs) {
  std::set<at::ScalarType> dtypes;
  for (const c10::IValue& v : inputs) {
    common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
      if (leaf.isTensor() && leaf.toTensor().defined() && leaf.toTensor().is_floating_point()) {
        dtypes.insert(leaf.toTensor().scalar_type());
      }
    });
  }
  dtypes.erase(at::kDouble);
  if (dtypes.empty()) return std::nullopt;
  const bool only_float32 = dtypes.size() == 1 && *dtypes.begin() == at::kFloat;
  return GoldenDtypes{at::kDouble, only_float32 ? at::kDouble : at::kFloat};
}

bool IsDtypeArgument(const c10::Argument& arg) {
  const c10::TypePtr& t = arg.real_type();
  return t->kind() == c10::TypeKind::ScalarTypeType ||
         (t->kind() == c10::TypeKind::OptionalType &&
          t->castRaw<c10::OptionalType>()->getElementType()->kind() ==
              c10::TypeKind::ScalarTypeType);
}

// Runs `op` on `stack`, which then holds its results; the error text if it threw.
Replay Run(const c10::OperatorHandle& op, Stack stack) {
  try {
    at::NoGradGuard no_grad;
    // Never a short stack: DecodeCall filled it to the schema's length.
    if (stack.size() != op.schema().arguments().size()) {
      return Replay::Failed(absl::StrCat("internal: ", stack.size(), " values for ",
                                         op.schema().arguments().size(), " arguments; not called"));
    }
    common::CallBoxedForResults(op, stack);  // an op returning nothing: what it wrote
    Replay r;
    r.results = std::move(stack);
    return r;
  } catch (const std::exception& e) {
    return Replay::Failed(ErrorText(e), IsOutOfMemory(e));
  }
}

// The bench stands in for the reference accelerator, so on CUDA it computes float32 in float32:
// no TF32 in cuBLAS or cuDNN (PyTorch's default lets cuDNN convolutions round float32 inputs to
// TF32's 10-bit mantissa), half and bfloat16 GEMMs summed in float32 (no reduced-precision
// reductions), and deterministic cuDNN algorithms. A verdict then does not depend on whether the
// bench is a GPU or a CPU, nor on the bench host's library defaults. Process-wide: the server
// replays only.
//
// Split-K stays allowed: its partial sums are float32 too. Forbidding it (libtorch 2.x's second
// flag) makes plain cuBLAS refuse every half/bfloat16 GEMM ("requires the cuBLASLt backend"),
// and through cuBLASLt it changed nothing measurable: on an H100 a bfloat16 mm 16x128x24 had ULP
// mean 0.375 with split-K forbidden, as an H200 had with it allowed (tensor cores sum in float32
// in their own order; a float32 loop rounded once: 0.236; a bfloat16 accumulator: ~6.5).
//
// libtorch's API for the reductions moved: 1.13 has only the float16 setter; later releases add
// bfloat16's (its one-argument form leaves split-K allowed in every release that has the flag).
template <typename Context>
auto DisallowBF16Reduction(Context& ctx, int) -> decltype(ctx.setAllowBF16ReductionCuBLAS(false)) {
  return ctx.setAllowBF16ReductionCuBLAS(false);
}
template <typename Context>
void DisallowBF16Reduction(Context&, ...) {}

void UseFullPrecisionOnCuda() {
  at::Context& ctx = at::globalContext();
  ctx.setAllowTF32CuBLAS(false);
  ctx.setAllowTF32CuDNN(false);
  ctx.setAllowFP16ReductionCuBLAS(false);
  DisallowBF16Reduction(ctx, 0);
  ctx.setDeterministicCuDNN(true);
  ctx.setBenchmarkCuDNN(false);
}

}  // namespace

std::string ErrorText(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::StrCat("out of memory (", e.what(), ")");
  }
  if (const auto* c10e = dynamic_cast<const c10::Error*>(&e)) {
    return c10e->what_without_backtrace();
  }
  return e.what();
}

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  if (const auto* sys = dynamic_cast<const std::system_error*>(&e)) {
    return sys->code() == std::errc::resource_unavailable_try_again ||
           sys->code() == std::errc::not_enough_memory;
  }
  const std::string_view text = e.what();
  return text.find("can't allocate memory") != std::string_view::npos ||
         text.find("out of memory") != std::string_view::npos ||
         text.find("Cannot allocate memory") != std::string_view::npos;
}

namespace {

// Matrix products and convolutions (and the composite ops made of them) whose float16/bfloat16
// results an accelerator makes by accumulating in float32 and rounding once.
constexpr std::string_view kGemms[] = {"aten::mm",
                                       "aten::bmm",
                                       "aten::addmm",
                                       "aten::baddbmm",
                                       "aten::addbmm",
                                       "aten::mv",
                                       "aten::addmv",
                                       "aten::dot",
                                       "aten::vdot",
                                       "aten::matmul",
                                       "aten::linear",
                                       "aten::einsum",
                                       "aten::bilinear",
                                       "aten::tensordot",
                                       "aten::inner",
                                       "aten::chain_matmul",
                                       "aten::linalg_multi_dot",
                                       "aten::_addmm_activation",
                                       "aten::conv1d",
                                       "aten::conv2d",
                                       "aten::conv3d",
                                       "aten::convolution",
                                       "aten::_convolution",
                                       "aten::conv_transpose1d",
                                       "aten::conv_transpose2d",
                                       "aten::conv_transpose3d",
                                       "aten::convolution_backward"};
// The ones autocast itself lowers to its dtype, on the CPU and on CUDA, in libtorch 1.13 and 2.x.
constexpr std::string_view kAutocastLowered[] = {
    "aten::mm",     "aten::bmm",    "aten::addmm",  "aten::baddbmm", "aten::addbmm",
    "aten::linear", "aten::matmul", "aten::conv1d", "aten::conv2d",  "aten::conv3d"};

template <std::size_t N>
bool Contains(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool IsGemm(const c10::FunctionSchema& schema) {
  std::string_view name = schema.name();
  if (!name.empty() && name.back() == '_') name.remove_suffix(1);  // in place: addmm_
  return Contains(kGemms, name);
}

// The low-precision float dtype a call of a GEMM computes in, when that is float16 or bfloat16:
// the dtype of its floating inputs when all are float16 or all bfloat16; under autocast to one
// of them, that dtype for the functional ops autocast itself lowers (mv, dot and the composite
// ones it leaves alone) when every floating input is float32 or already that dtype.
std::optional<at::ScalarType> LowPrecisionGemmInput(const c10::FunctionSchema& schema,
                                                    const Stack& inputs,
                                                    std::optional<at::ScalarType> autocast) {
  auto low = [](at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; };
  std::set<at::ScalarType> dtypes;
  for (const c10::IValue& v : inputs) {
    common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
      if (leaf.isTensor() && leaf.toTensor().defined() && leaf.toTensor().is_floating_point()) {
        dtypes.insert(leaf.toTensor().scalar_type());
      }
    });
  }
  if (!autocast) {
    if (dtypes.size() != 1 || !low(*dtypes.begin())) return std::nullopt;
    return *dtypes.begin();
  }
  if (!AutocastKernelDtype(schema, autocast)) return std::nullopt;
  for (at::ScalarType t : dtypes) {
    if (t != at::kFloat && t != *autocast) return std::nullopt;
  }
  return autocast;
}

}  // namespace

Replay ReplayBench(const c10::OperatorHandle& op, const Stack& inputs, const c10::Device& device,
                   std::optional<at::ScalarType> autocast) {
  // A GEMM in float16/bfloat16 on the CPU: libtorch's CPU kernels may round every partial sum
  // to that dtype (LowPrecisionGemmDtypes), where an accelerator, and a CUDA bench, accumulates
  // in float32. The bench computes it as they do: the operands at that dtype's values (under
  // autocast, rounded to it as autocast would), the products summed in float32, the result
  // rounded once.
  if (device.is_cpu() && IsGemm(op.schema())) {
    if (const std::optional<at::ScalarType> low =
            LowPrecisionGemmInput(op.schema(), inputs, autocast)) {
      Stack raised = MapInputs(
          inputs,
          [&](const at::Tensor& t) {
            if (!t.is_floating_point() || t.scalar_type() == at::kDouble) return t.clone();
            return t.to(*low).to(at::kFloat);  // to(low) is a no-op unless autocast rounds
          },
          device);
      const common::AutocastScope no_autocast(device.type(), std::nullopt);
      Replay r = Run(op, std::move(raised));
      for (c10::IValue& v : r.results) {
        v = common::MapLeaves(v, [&](const c10::IValue& leaf) {
          if (leaf.isTensor() && leaf.toTensor().defined() &&
              leaf.toTensor().scalar_type() == at::kFloat) {
            return c10::IValue(leaf.toTensor().to(*low));
          }
          return leaf;
        });
      }
      return r;
    }
  }
  // Copies, even on the CPU: an in-place op writes its arguments. From page-locked memory to a
  // GPU the copy is queued on this thread's stream and the host goes on (the caching host
  // allocator keeps the source until the copy is done).
  Stack copies = MapInputs(
      inputs,
      [&](const at::Tensor& t) {
        return t.to(device, /*non_blocking=*/!device.is_cpu() && t.is_pinned(), /*copy=*/true);
      },
      device);
  const common::AutocastScope scope(device.type(), autocast);
  return Run(op, std::move(copies));
}

std::optional<at::ScalarType> AutocastKernelDtype(const c10::FunctionSchema& schema,
                                                  std::optional<at::ScalarType> autocast) {
  // Autocast registers the functional overloads only (not `out=` ones).
  if (!autocast || (*autocast != at::kHalf && *autocast != at::kBFloat16) ||
      !schema.overload_name().empty() || !Contains(kAutocastLowered, schema.name())) {
    return std::nullopt;
  }
  return autocast;
}

Replay ReplayGolden(const c10::OperatorHandle& op, const Stack& inputs, const c10::Device& device,
                    std::optional<at::ScalarType> autocast) {
  const std::optional<GoldenDtypes> dtypes = GoldenTarget(inputs);
  const std::optional<at::ScalarType> target =
      dtypes ? std::optional<at::ScalarType>(dtypes->compute) : std::nullopt;
  // Under autocast the kernel saw its floating inputs (all but float64: autocast's eligibility
  // rule) rounded to the autocast dtype.
  const std::optional<at::ScalarType> kernel = AutocastKernelDtype(op.schema(), autocast);
  Stack golden = MapInputs(
      inputs,
      [&](const at::Tensor& t) {
        const bool async = !device.is_cpu() && t.is_pinned();
        if (target && t.is_floating_point() && t.scalar_type() != at::kDouble) {
          // Moved, then raised where the golden runs (a GPU casts faster than the host).
          at::Tensor moved = t.to(device, /*non_blocking=*/async);
          if (kernel) moved = moved.to(*kernel);
          return moved.to(*target);
        }
        return t.to(device, /*non_blocking=*/async, /*copy=*/true);
      },
      device);
  // A dtype argument naming a low-precision float (`sum(x, dtype=float16)`) is raised with the
  // tensors, or the golden would round to it.
  if (target) {
    const auto& args = op.schema().arguments();
    for (std::size_t i = 0; i < golden.size() && i < args.size(); ++i) {
      if (IsDtypeArgument(args[i]) && golden[i].isInt()) {
        const auto st = static_cast<at::ScalarType>(golden[i].toInt());
        if (st == at::kHalf || st == at::kBFloat16 || st == at::kFloat) {
          golden[i] = c10::IValue(*target);
        }
      }
    }
  }
  const common::AutocastScope no_autocast(device.type(), std::nullopt);
  Replay r = Run(op, std::move(golden));
  if (dtypes && dtypes->keep != dtypes->compute) {
    for (c10::IValue& v : r.results) {
      v = common::MapLeaves(v, [&](const c10::IValue& leaf) {
        if (leaf.isTensor() && leaf.toTensor().defined() &&
            leaf.toTensor().scalar_type() == dtypes->compute) {
          return c10::IValue(leaf.toTensor().to(dtypes->keep));
        }
        return leaf;
      });
    }
  }
  return r;
}

Replay GoldenReplayer::ReplayOn(const c10::OperatorHandle& op, const Stack& inputs,
                                const c10::Device& device, std::optional<at::ScalarType> autocast) {
  if (device.is_cpu()) return ReplayGolden(op, inputs, device, autocast);
  const c10::FunctionSchema* schema = &op.schema();
  {
    absl::ReaderMutexLock lock(&mu_);
    if (on_cpu_.contains(schema)) {
      return ReplayGolden(op, inputs, c10::Device(c10::kCPU), autocast);
    }
  }
  Replay on_device = ReplayGolden(op, inputs, device, autocast);
  if (on_device.ran()) return on_device;
  // No kernel for float64 on that device, or no memory for it: the host computes it. An op
  // whose golden then runs on the host goes there from now on, unless it only lacked memory.
  Replay on_host = ReplayGolden(op, inputs, c10::Device(c10::kCPU), autocast);
  if (on_host.ran() && !on_device.out_of_memory) {
    const std::string name = toString(schema->operator_name());
    absl::MutexLock lock(&mu_);
    if (on_cpu_.emplace(schema, name).second) {
      common::LogInfo(absl::StrCat("the golden of ", name, " runs on the CPU from now on: on ",
                                   device.str(), " it failed: ", on_device.error));
    }
  }
  return on_host;
}

std::vector<std::string> GoldenReplayer::OpsOnCpu() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [schema, name] : on_cpu_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// Whether `product` (a matrix product of a [4, n] and an [n, 4] operand) of `dtype` rounds its
// partial sums to `dtype` in any of the four layouts (either operand transposed or not). Each
// output element sums one 1 and n - 1 terms a quarter of the dtype's unit roundoff at 1: in
// float32 the sum is exact (1.5); a low-precision accumulator loses the terms added to 1 (the 1
// comes first in one probe and last in the other, so both orders of a sequential sum are seen).
template <typename Product>
bool RoundsPartialSums(at::ScalarType dtype, int mantissa_bits, const Product& product) {
  const int64_t n = (int64_t{1} << (mantissa_bits + 1)) + 1;  // n - 1 terms sum to 0.5
  const double tiny = std::ldexp(1.0, -(mantissa_bits + 2));
  const auto cpu = at::TensorOptions().dtype(dtype);
  for (const bool one_first : {true, false}) {
    at::Tensor column = at::full({n}, tiny, cpu);
    column[one_first ? 0 : n - 1] = 1.0;
    const at::Tensor ones = at::ones({4, n}, cpu);
    const at::Tensor columns = column.unsqueeze(1).expand({n, 4}).contiguous();
    for (const bool a_transposed : {false, true}) {
      for (const bool b_transposed : {false, true}) {
        const at::Tensor a = a_transposed ? ones.t().contiguous().t() : ones;
        const at::Tensor b = b_transposed ? columns.t().contiguous().t() : columns;
        const at::Tensor out = product(a, b).to(at::kDouble);
        if (!at::all(out == 1.5).item<bool>()) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> LowPrecisionGemmDtypes(const c10::Device& device) {
  std::vector<std::string> dtypes;
  if (!device.is_cpu()) return dtypes;
  at::NoGradGuard no_grad;
  for (const auto& [dtype, mantissa_bits, name] :
       {std::tuple{at::kBFloat16, 7, "bfloat16"}, std::tuple{at::kHalf, 10, "float16"}}) {
    try {
      const bool rounds =
          RoundsPartialSums(
              dtype, mantissa_bits,
              [](const at::Tensor& a, const at::Tensor& b) { return at::mm(a, b); }) ||
          RoundsPartialSums(dtype, mantissa_bits, [](const at::Tensor& a, const at::Tensor& b) {
            return at::bmm(a.unsqueeze(0), b.unsqueeze(0));
          });
      if (rounds) dtypes.emplace_back(name);
    } catch (const std::exception&) {
      // No kernel for that dtype here: such a call is not replayed, nothing passes unseen.
    }
  }
  return dtypes;
}

absl::StatusOr<std::vector<c10::Device>> ResolveBenchDevices(const std::string& name, int gpus) {
  auto all_gpus = [gpus] {
    std::vector<c10::Device> all;
    for (int i = 0; i < gpus; ++i) all.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(i));
    return all;
  };
  if (name == "auto") {
    return gpus > 0 ? all_gpus() : std::vector<c10::Device>{c10::Device(c10::kCPU)};
  }
  std::vector<c10::Device> devices;
  for (absl::string_view part : absl::StrSplit(name, ',')) {
    const std::string item(absl::StripAsciiWhitespace(part));
    if (item == "cuda") {
      if (gpus == 0) {
        return absl::InvalidArgumentError(
            "bench_device: cuda asked for, but this libtorch sees 0 CUDA device(s)");
      }
      for (const c10::Device& d : all_gpus()) devices.push_back(d);
      continue;
    }
    c10::Device device(c10::kCPU);
    try {
      device = c10::Device(item);
    } catch (const std::exception&) {
      return absl::InvalidArgumentError(absl::StrCat("bench_device: not a device: \"", item, "\""));
    }
    if (device.is_cuda()) {
      const int index = device.has_index() ? device.index() : 0;
      if (index >= gpus) {
        return absl::InvalidArgumentError(absl::StrCat("bench_device: ", item,
                                                       " asked for, but this libtorch sees ", gpus,
                                                       " CUDA device(s)"));
      }
      device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
    } else if (!device.is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench_device: only cpu and cuda are supported, got \"", item, "\""));
    }
    if (std::find(devices.begin(), devices.end(), device) != devices.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bench_device: ", device.str(), " is named twice in \"", name, "\""));
    }
    devices.push_back(device);
  }
  if (devices.size() > 1 && std::any_of(devices.begin(), devices.end(),
                                        [](const c10::Device& d) { return d.is_cpu(); })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bench_device: \"", name, "\" mixes the CPU with GPUs; a bench is the CPU or GPUs"));
  }
  return devices;
}

absl::StatusOr<std::vector<c10::Device>> ResolveBenchDevices(const std::string& name) {
  const int gpus = at::detail::getCUDAHooks().hasCUDA()
                       ? static_cast<int>(at::detail::getCUDAHooks().getNumGPUs())
                       : 0;
  absl::StatusOr<std::vector<c10::Device>> devices = ResolveBenchDevices(name, gpus);
  if (devices.ok() && devices->front().is_cuda()) UseFullPrecisionOnCuda();
  return devices;
}

}  // namespace parity::server
