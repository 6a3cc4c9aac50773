// Real calls, built by running ops here (this process plays the device) and encoding them as the
// agent does, checked by the CallChecker: clean calls pass, planted faults are errors on the
// right output with the right metric, malformed calls get a clear status.
#include "server/replay/call_checker.h"
#include "parity/v1/parity.pb.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/torch/autocast.h"
#include "common/torch/generator_read.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/call/verdict_encoder.h"
#include "server/compare/judge.h"
#include "server/replay/aten_compat.h"
#include "server/replay/stages.h"
#include "tests/testing/op_cases.h"

// An op whose GPU kernel refuses float64, as some vendor kernels do: the golden of a CUDA bench
// must then fall back to the CPU.
at::Tensor TwiceOnCpu(const at::Tensor& x) { return x * 2; }
at::Tensor TwiceNoCudaDouble(const at::Tensor& x) {
  TORCH_CHECK(x.scalar_type() != at::kDouble,
              "\"twice_no_cuda_double\" not implemented for 'Double'");
  return x * 2;
}
TORCH_LIBRARY(parity_test, m) { m.def("twice_no_cuda_double(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(parity_test, CPU, m) { m.impl("twice_no_cuda_double", TwiceOnCpu); }
TORCH_LIBRARY_IMPL(parity_test, CUDA, m) { m.impl("twice_no_cuda_double", TwiceNoCudaDouble); }

namespace parity::server {
namespace {

using parity::server::GoldenDevice;
using testing::CleanCases;
using ::testing::HasSubstr;
using testing::OpCase;
using testing::R;
using testing::Stack;

bool CudaPresent() { return at::hasCUDA() && at::getNumGPUs() > 0; }

// Every case runs with the bench on the CPU and, where this libtorch sees a GPU, on CUDA
// (scripts/gpu-check.sh runs them on a GPU host; elsewhere the CUDA instances are skipped).
class CallCheckerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !CudaPresent()) {
      GTEST_SKIP() << "no CUDA device in this libtorch: the bench-on-CUDA case needs a GPU host";
    }
    checker_ = MakeChecker(GoldenDevice::kAuto);
    ASSERT_NE(checker_, nullptr);
    ASSERT_EQ(checker_->bench_device(), Device());
  }

  std::string Device() const { return GetParam() == "cuda" ? "cuda:0" : "cpu"; }

  // A checker of this instance's bench; its golden where `golden_device` says.
  std::unique_ptr<CallChecker> MakeChecker(GoldenDevice golden_device) {
    parity::server::CheckerOptions options;
    options.bench_device = Device();
    options.golden_device = golden_device;
    auto checker = CallChecker::Create(options, StandardsTable::Default());
    EXPECT_TRUE(checker.ok()) << checker.status();
    return checker.ok() ? *std::move(checker) : nullptr;
  }

  v1::ApiCall MakeCall(const std::string& name, const std::string& overload, testing::Stack args,
                       v1::Phase phase = v1::PHASE_FORWARD,
                       const std::function<void(testing::Stack&)>& tamper = nullptr) {
    return testing::BuildCall(name, overload, std::move(args), phase, tamper, ++sequence_);
  }

  // The typed check and the verdict it becomes (what the agent receives).
  struct Result {
    CallOutcome check;
    v1::Verdict verdict;
  };
  Result Check(const v1::ApiCall& call) {
    CallOutcome check = checker_->Judge(call);
    v1::Verdict verdict = ToVerdict(ServerCall(call), check);
    return {std::move(check), std::move(verdict)};
  }

  std::unique_ptr<CallChecker> checker_;
  uint64_t sequence_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Bench, CallCheckerTest, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_P(CallCheckerTest, CleanCallsOfEveryStandardPass) {
  std::set<std::string> ops;
  for (const OpCase& c : CleanCases()) {
    SCOPED_TRACE(c.name + "." + c.overload);
    Result r = Check(MakeCall(c.name, c.overload, c.args(), c.phase));
    EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
    ASSERT_GT(r.verdict.outputs_size(), 0);
    EXPECT_EQ(r.verdict.outputs(0).standard(), c.standard);
    ops.insert(c.name);
  }
  EXPECT_GE(ops.size(), 30u);
}

// The golden is replayed only where the standard reads it: an op exact by construction (one
// floating dtype throughout), a binary-standard op and a call with only integer outputs are
// decided by the bench alone, bit for bit; a copy that casts, and a computing op, still get it.
TEST_P(CallCheckerTest, ExactCallsAreDecidedByTheBenchWithoutAGolden) {
  const at::Tensor x = R({6, 8}, 1), y = R({6, 8}, 2);
  struct Case {
    v1::ApiCall call;
    bool golden;
    const char* standard;
  };
  const std::vector<Case> cases = {
      {MakeCall("aten::t", "", {x}), false, "binary"},
      {MakeCall("aten::cat", "", {c10::List<at::Tensor>({x, y}), 1}), false, "binary"},
      {MakeCall("aten::relu", "", {x}), false, "binary"},
      {MakeCall("aten::gt", "Tensor", {x, y}), false, "binary"},
      {MakeCall("aten::_to_copy", "",
                {x, c10::IValue(static_cast<int64_t>(at::kBFloat16)), c10::IValue(), c10::IValue(),
                 c10::IValue(), false, c10::IValue()}),
       true, "benchmark"},
      {MakeCall("aten::gelu", "", {x, std::string("none")}), true, "benchmark"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.call.op_name());
    Result r = Check(c.call);
    EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
    EXPECT_TRUE(r.check.cpu.bench_ran);
    EXPECT_EQ(r.check.cpu.golden_ran, c.golden);
    ASSERT_GT(r.verdict.outputs_size(), 0);
    EXPECT_EQ(r.verdict.outputs(0).standard(), c.standard);
  }
  // RoPE's rotate_half concatenated in the wrong order: every element moved, so the binary
  // standard finds them all.
  Result r = Check(MakeCall("aten::cat", "", {c10::List<at::Tensor>({x, y}), 1}, v1::PHASE_FORWARD,
                            [&](Stack& out) {
                              out[0] = at::cat({y, x}, 1);
                            }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.verdict.outputs(0).standard(), "binary");
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "mismatch_rate");
  EXPECT_FALSE(r.check.cpu.golden_ran);
  // One float element off by one ulp in a copy: still caught.
  r = Check(MakeCall("aten::clone", "", {x, c10::IValue()}, v1::PHASE_FORWARD, [&](Stack& out) {
    at::Tensor bad = x.clone();
    bad[2][3] = std::nextafter(bad[2][3].item<float>(), 1e9f);
    out[0] = bad;
  }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
}

// A call made under CPU autocast: the hook sees float32 inputs and a bfloat16 output. Replayed
// under the same autocast on the bench device it passes; a fault inside the region is an error.
TEST_P(CallCheckerTest, CallsUnderAutocastReplayUnderAutocast) {
  const at::Tensor x = R({8, 64}, 1), w = R({32, 64}, 2), b = R({32}, 3);
  v1::ApiCall clean, faulty;
  {
    const common::AutocastScope autocast(c10::DeviceType::CPU, at::kBFloat16);
    clean = MakeCall("aten::linear", "", {x, w, b});
    // A bfloat16 GEMM that drops the bias.
    faulty = MakeCall("aten::linear", "", {x, w, b}, v1::PHASE_FORWARD, [&](Stack& out) {
      out[0] = at::matmul(x.to(at::kBFloat16), w.t().to(at::kBFloat16));
    });
  }
  ASSERT_EQ(clean.outputs(0).tensor().dtype(), wire::kBFloat16) << "not run under autocast";
  ASSERT_EQ(clean.inputs(0).tensor().dtype(), wire::kFloat32);
  clean.set_autocast_dtype(v1::DTYPE_BFLOAT16);
  faulty.set_autocast_dtype(v1::DTYPE_BFLOAT16);
  Result r = Check(clean);
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  ASSERT_EQ(r.check.outputs.size(), 1u);
  EXPECT_EQ(r.check.outputs[0].bench_dtype, wire::kBFloat16) << "bench not under autocast";
  EXPECT_EQ(r.check.outputs[0].dtype, wire::kBFloat16);
  r = Check(faulty);
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  // The worker's own autocast state is left as it was.
  EXPECT_FALSE(common::ActiveAutocast(c10::DeviceType::CPU).has_value());
}

// Under autocast the kernel receives its inputs rounded to the autocast dtype: the golden starts
// from those (rounded, then widened), so it is the exact product of what the kernel multiplied.
// A device whose bfloat16 linear is correctly rounded is then within half a ULP everywhere;
// against a golden of the float32 inputs as captured, a quarter of its elements were over 1 ULP
// (the inputs' rounding), and whether it passed turned on a few elements at rounding ties.
TEST_P(CallCheckerTest, TheGoldenUnderAutocastStartsFromTheInputsTheKernelReceived) {
  const at::Tensor x = R({64, 256}, 51), w = R({128, 256}, 52), b = R({128}, 53);
  auto exact = [](const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kDouble); };
  v1::ApiCall call;
  {
    const common::AutocastScope autocast(c10::DeviceType::CPU, at::kBFloat16);
    call = MakeCall("aten::linear", "", {x, w, b}, v1::PHASE_FORWARD, [&](Stack& out) {
      // The most accurate kernel there is: the bfloat16 operands' product, rounded once.
      out[0] = at::addmm(exact(b), exact(x), exact(w).t()).to(at::kBFloat16);
    });
  }
  call.set_autocast_dtype(v1::DTYPE_BFLOAT16);
  ASSERT_EQ(call.inputs(0).tensor().dtype(), wire::kFloat32);
  Result r = Check(call);
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  ASSERT_EQ(r.check.outputs.size(), 1u);
  const OutputJudgement& j = r.check.outputs[0].judgement;
  ASSERT_TRUE(j.device.has_value() && j.bench.has_value());
  EXPECT_LE(j.device->ulp_max, 0.5 + 1e-6) << "the golden is not the kernel's exact product";
  EXPECT_EQ(j.device->ulp_over_threshold_ratio, 0);
  // The bench accumulates in float32 and rounds once: within a ULP of the same golden.
  EXPECT_LT(j.bench->ulp_max, 1.0);

  // The same kernel wrong by one bfloat16 step on every 50th element is still an error.
  v1::ApiCall faulty;
  {
    const common::AutocastScope autocast(c10::DeviceType::CPU, at::kBFloat16);
    faulty = MakeCall("aten::linear", "", {x, w, b}, v1::PHASE_FORWARD, [&](Stack& out) {
      at::Tensor y = at::addmm(exact(b), exact(x), exact(w).t()).to(at::kBFloat16);
      at::Tensor flat = y.view({-1});
      at::Tensor every = flat.slice(0, 0, flat.numel(), 50);
      every.copy_(every.to(at::kFloat) * (1 + 1.0 / 64));  // 2 steps of 2^-7 near 1
      out[0] = y;
    });
  }
  faulty.set_autocast_dtype(v1::DTYPE_BFLOAT16);
  r = Check(faulty);
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "ulp_error");
}

// A float16/bfloat16 GEMM accumulates in float32 and rounds once on an accelerator, and so on the
// bench: on the CPU too, where libtorch 1.13 without AVX-512 rounds a bfloat16 mm's partial sums
// to bfloat16 when the second operand is not transposed (LowPrecisionGemmDtypes). A device that
// accumulates in float32 matches the bench's error exactly; one that accumulates in bfloat16 is
// an error, which a bench with that kernel would pass (it agrees with the fault bit for bit).
TEST_P(CallCheckerTest, LowPrecisionGemmsAccumulateInFloat32OnTheBench) {
  const at::Tensor a = R({16, 128}, 1).to(at::kBFloat16), b = R({128, 24}, 2).to(at::kBFloat16);
  auto float32_accumulated = [](const at::Tensor& x, const at::Tensor& y) {
    return at::mm(x.to(at::kFloat), y.to(at::kFloat)).to(x.scalar_type());
  };
  // On the CPU the bench runs the very float32 kernel the device's results were made with: the
  // same errors exactly. cuBLAS sums in float32 in its own order (tensor cores): on an H100 and an
  // H200 this mm had ULP mean 0.375 against the float32 loop's 0.236, split-K allowed or not.
  // A bfloat16 accumulator is ~6.5: under twice the float32 loop's error is float32 summation.
  const bool cpu = GetParam() == "cpu";
  auto expect_bench_equals_device = [cpu](const CallOutcome& c) {
    ASSERT_EQ(c.outputs.size(), 1u);
    const OutputJudgement& j = c.outputs[0].judgement;
    ASSERT_TRUE(j.device.has_value() && j.bench.has_value());
    if (cpu) {
      EXPECT_EQ(j.device->ulp_mean, j.bench->ulp_mean) << "the bench is not float32-accumulated";
      EXPECT_EQ(j.device->max_abs_error, j.bench->max_abs_error);
    } else {
      EXPECT_LT(j.bench->ulp_mean, 2 * j.device->ulp_mean) << "the bench is not float32-summed";
    }
  };
  Result r = Check(MakeCall("aten::mm", "", {a, b}, v1::PHASE_FORWARD,
                            [&](Stack& out) { out[0] = float32_accumulated(a, b); }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.check.outputs[0].bench_dtype, wire::kBFloat16);
  expect_bench_equals_device(r.check);

  // Every partial sum rounded to bfloat16, one product at a time (the fault suite's
  // mm_bfloat16_accumulator).
  r = Check(MakeCall("aten::mm", "", {a, b}, v1::PHASE_FORWARD, [&](Stack& out) {
    at::Tensor acc = at::zeros({a.size(0), b.size(1)}, at::kBFloat16);
    for (int64_t k = 0; k < a.size(1); ++k) {
      acc = acc + a.narrow(1, k, 1) * b.narrow(0, k, 1);
    }
    out[0] = acc;
  }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "ulp_error");

  // bmm and baddbmm, and float16 (which libtorch 1.13's CPU mm has no kernel for).
  const at::Tensor a3 = a.unsqueeze(0), b3 = b.unsqueeze(0);
  r = Check(MakeCall("aten::bmm", "", {a3, b3}, v1::PHASE_FORWARD,
                     [&](Stack& out) { out[0] = float32_accumulated(a, b).unsqueeze(0); }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  expect_bench_equals_device(r.check);
  const at::Tensor c3 = R({1, 16, 24}, 3).to(at::kBFloat16);
  r = Check(MakeCall("aten::baddbmm", "", {c3, a3, b3, 1, 1}, v1::PHASE_FORWARD, [&](Stack& out) {
    out[0] = at::baddbmm(c3.to(at::kFloat), a3.to(at::kFloat), b3.to(at::kFloat)).to(at::kBFloat16);
  }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  expect_bench_equals_device(r.check);
  // The float16 call is made of the bfloat16 one (libtorch 1.13's CPU cannot run it to make it).
  const at::Tensor h = a.to(at::kHalf), g = b.to(at::kHalf);
  v1::ApiCall half = MakeCall("aten::mm", "", {a, b}, v1::PHASE_FORWARD,
                              [&](Stack& out) { out[0] = float32_accumulated(h, g); });
  half.clear_inputs();
  ASSERT_TRUE(common::EncodeValue(h, nullptr, {}, "in", half.add_inputs()).ok());
  ASSERT_TRUE(common::EncodeValue(g, nullptr, {}, "in", half.add_inputs()).ok());
  r = Check(half);
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.check.outputs[0].bench_dtype, wire::kFloat16);
  expect_bench_equals_device(r.check);

  // Convolutions too (libtorch 1.13's bfloat16 conv2d on a CPU without AVX-512: 18x the error of
  // float32 accumulation), forward and backward.
  const at::Tensor img = R({2, 8, 12, 12}, 7).to(at::kBFloat16);
  const at::Tensor kernel = R({4, 8, 3, 3}, 8).to(at::kBFloat16);
  const at::Tensor conv = at::conv2d(img.to(at::kFloat), kernel.to(at::kFloat)).to(at::kBFloat16);
  r = Check(MakeCall("aten::conv2d", "",
                     {img, kernel, c10::IValue(), c10::List<int64_t>({1, 1}),
                      c10::List<int64_t>({0, 0}), c10::List<int64_t>({1, 1}), 1},
                     v1::PHASE_FORWARD, [&](Stack& out) { out[0] = conv; }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  expect_bench_equals_device(r.check);
  const at::Tensor grad = R({2, 4, 10, 10}, 9).to(at::kBFloat16);
  const auto grads = at::convolution_backward(grad.to(at::kFloat), img.to(at::kFloat),
                                              kernel.to(at::kFloat), c10::nullopt, {1, 1}, {0, 0},
                                              {1, 1}, false, {0, 0}, 1, {true, true, false});
  r = Check(MakeCall("aten::convolution_backward", "",
                     {grad, img, kernel, c10::IValue(), c10::List<int64_t>({1, 1}),
                      c10::List<int64_t>({0, 0}), c10::List<int64_t>({1, 1}), false,
                      c10::List<int64_t>({0, 0}), 1, c10::List<bool>({true, true, false})},
                     v1::PHASE_BACKWARD, [&](Stack& out) {
                       out[0] = std::get<0>(grads).to(at::kBFloat16);
                       out[1] = std::get<1>(grads).to(at::kBFloat16);
                     }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  ASSERT_GE(r.check.outputs.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const OutputJudgement& j = r.check.outputs[i].judgement;
    ASSERT_TRUE(j.device.has_value() && j.bench.has_value()) << i;
    if (cpu) {
      EXPECT_EQ(j.device->ulp_mean, j.bench->ulp_mean) << "grad " << i;
    }
  }

  // Under autocast: float32 operands, which autocast rounds to bfloat16 first (the device's
  // results are made outside the autocast region, or its own GEMMs would make them).
  const at::Tensor x = R({16, 128}, 4), w = R({128, 24}, 5), v = R({128}, 6);
  const at::Tensor xw = float32_accumulated(x.to(at::kBFloat16), w.to(at::kBFloat16));
  const at::Tensor xv =
      float32_accumulated(x.to(at::kBFloat16), v.to(at::kBFloat16).unsqueeze(1)).squeeze(1);
  const at::Tensor xv_float = at::mv(x, v);
  v1::ApiCall matrix, vector, mv;
  {
    const common::AutocastScope autocast(c10::DeviceType::CPU, at::kBFloat16);
    matrix =
        MakeCall("aten::matmul", "", {x, w}, v1::PHASE_FORWARD, [&](Stack& out) { out[0] = xw; });
    vector =
        MakeCall("aten::matmul", "", {x, v}, v1::PHASE_FORWARD, [&](Stack& out) { out[0] = xv; });
    // mv is not one of the ops autocast lowers: float32 on the device and on the bench.
    mv =
        MakeCall("aten::mv", "", {x, v}, v1::PHASE_FORWARD, [&](Stack& out) { out[0] = xv_float; });
  }
  // CUDA's autocast lowers mv (the CPU's does not): the mv case is the CPU bench's.
  for (v1::ApiCall* call : {&matrix, &vector, &mv}) {
    if (call == &mv && !cpu) continue;
    call->set_autocast_dtype(v1::DTYPE_BFLOAT16);
    r = Check(*call);
    EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
    EXPECT_EQ(r.check.outputs[0].bench_dtype, call == &mv ? wire::kFloat32 : wire::kBFloat16);
    expect_bench_equals_device(r.check);
  }
}

// The probe names bfloat16 exactly when this libtorch's CPU mm, on random matrices, in some
// layout, disagrees with float32 accumulation rounded once on most elements; a CUDA bench is
// never named (cuBLAS is set to accumulate in float32).
TEST(LowPrecisionGemmDtypesTest, NamesTheDtypesWhoseCpuGemmsRoundPartialSums) {
  const at::Tensor a = R({32, 256}, 7).to(at::kBFloat16), b = R({256, 32}, 8).to(at::kBFloat16);
  const at::Tensor want = at::mm(a.to(at::kFloat), b.to(at::kFloat)).to(at::kBFloat16);
  double worst = 1;
  for (const at::Tensor& x : {a, a.t().contiguous().t()}) {
    for (const at::Tensor& y : {b, b.t().contiguous().t()}) {
      worst = std::min(worst, at::eq(at::mm(x, y), want).to(at::kDouble).mean().item<double>());
    }
  }
  const std::vector<std::string> named = LowPrecisionGemmDtypes(c10::Device(c10::kCPU));
  const bool bf16_named = std::find(named.begin(), named.end(), "bfloat16") != named.end();
  EXPECT_EQ(bf16_named, worst < 0.5) << "share of elements equal in the worst layout: " << worst;
  EXPECT_TRUE(LowPrecisionGemmDtypes(c10::Device(c10::kCUDA, 0)).empty());
}

// `Scalar[]` arrives as a list of floats (AdamW's foreach bias correction): it replays.
TEST_P(CallCheckerTest, ScalarListsReplay) {
  const c10::List<at::Tensor> tensors({R({4, 8}, 1), R({8}, 2)});
  Result r = Check(MakeCall("aten::_foreach_div_", "ScalarList",
                            {tensors, c10::List<c10::Scalar>({0.9, 0.99})}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.verdict.outputs_size(), 2);
}

TEST_P(CallCheckerTest, HarmfulFaultsAreErrorsOnTheFaultyOutput) {
  const at::Tensor x = R({16, 32}, 1), w = R({24, 32}, 2);
  // gelu evaluated with the tanh approximation when the exact form was asked for.
  Result r = Check(MakeCall("aten::gelu", "", {x * 3, std::string("none")}, v1::PHASE_FORWARD,
                            [&](Stack& out) { out[0] = at::gelu(x * 3, "tanh"); }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.verdict.outputs(0).standard(), "benchmark");
  // softmax without subtracting the max: overflows on large logits.
  const at::Tensor logits = R({4, 16}, 3) * 40 + 60;
  r = Check(MakeCall("aten::_softmax", "", {logits, 1, false}, v1::PHASE_FORWARD, [&](Stack& out) {
    at::Tensor e = at::exp(logits);
    out[0] = e / e.sum(1, true);
  }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "inf_nan_error_rate");
  // matmul with fp32 inputs rounded to bfloat16 first.
  r = Check(MakeCall("aten::mm", "", {x, w.t()}, v1::PHASE_FORWARD, [&](Stack& out) {
    out[0] = at::mm(x.to(at::kBFloat16).to(at::kFloat), w.t().to(at::kBFloat16).to(at::kFloat));
  }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "ulp_error");
  // layer_norm with a different epsilon: only the normalised output (output 0) is wrong.
  const at::Tensor ln_in = R({8, 32}, 4) * 0.05;
  r = Check(MakeCall(
      "aten::native_layer_norm", "",
      {ln_in, c10::List<int64_t>({32}), c10::IValue(), c10::IValue(), 1e-5}, v1::PHASE_FORWARD,
      [&](Stack& out) { out[0] = std::get<0>(at::native_layer_norm(ln_in, {32}, {}, {}, 1e-3)); }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(StatusText(r.verdict.outputs(0).status()), "error");
  EXPECT_EQ(StatusText(r.verdict.outputs(1).status()), "pass");  // mean is untouched
  // add off by a relative 1e-5 on some elements: the absolute-threshold standard catches it.
  r = Check(MakeCall("aten::add", "Tensor", {x, w.narrow(0, 0, 16), 1}, v1::PHASE_FORWARD,
                     [](Stack& out) { out[0] = out[0].toTensor() * (1 + 1e-5); }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "rel_error_rate");
  // index_select off by one row.
  r = Check(MakeCall("aten::index_select", "", {x, 0, at::tensor({3, 5}, at::kLong)},
                     v1::PHASE_FORWARD, [&](Stack& out) {
                       out[0] = x.index_select(0, at::tensor({4, 6}, at::kLong));
                     }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  // A backward fault: gelu_backward computed for the tanh form.
  r = Check(MakeCall("aten::gelu_backward", "", {w.narrow(0, 0, 16), x * 3, std::string("none")},
                     v1::PHASE_BACKWARD, [&](Stack& out) {
                       out[0] = at::gelu_backward(w.narrow(0, 0, 16), x * 3, "tanh");
                     }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(r.verdict.phase(), v1::PHASE_BACKWARD);
}

TEST_P(CallCheckerTest, BenignDifferencesPass) {
  const at::Tensor x = R({16, 32}, 1);
  // One float32 ULP on every element of a benchmark-standard op.
  Result r =
      Check(MakeCall("aten::gelu", "", {x, std::string("none")}, v1::PHASE_FORWARD, [](Stack& out) {
        at::Tensor t = out[0].toTensor();
        out[0] = at::nextafter(t, t + 1);
      }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  // A reduction summed in another order.
  r = Check(MakeCall("aten::sum", "dim_IntList", {x, c10::List<int64_t>({1}), false, c10::IValue()},
                     v1::PHASE_FORWARD,
                     [&](Stack& out) { out[0] = x.flip(1).cumsum(1).select(1, 31); }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  // -0.0 instead of 0.0 from an exact op.
  r = Check(MakeCall("aten::relu", "", {x}, v1::PHASE_FORWARD, [](Stack& out) {
    at::Tensor t = out[0].toTensor();
    out[0] = at::where(t == 0, at::full_like(t, -0.0), t);
  }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
}

TEST_P(CallCheckerTest, InPlaceAndOutVariantsCompareTheMutatedArgument) {
  const at::Tensor x = R({4, 8}, 1), y = R({4, 8}, 2);
  Result r = Check(MakeCall("aten::add_", "Tensor", {x, y, 1}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  r = Check(MakeCall("aten::mul_", "Tensor", {x, y}, v1::PHASE_FORWARD,
                     [](Stack& out) { out[0] = out[0].toTensor() + 1; }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  r = Check(MakeCall("aten::add", "out", {x, y, 1, at::empty({4, 8})}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
}

// Ops that return nothing and write their arguments (the _foreach_ ops optimizers run on GPUs,
// fused optimizers) are judged by those arguments after the call, one output per tensor.
TEST_P(CallCheckerTest, OpsReturningNothingAreJudgedByTheArgumentsTheyWrite) {
  const c10::List<at::Tensor> params({R({4, 8}, 1), R({16}, 2), R({3, 3}, 3)});
  const c10::List<at::Tensor> grads({R({4, 8}, 4), R({16}, 5), R({3, 3}, 6)});
  const v1::ApiCall clean = MakeCall("aten::_foreach_add_", "List", {params, grads, -0.01});
  ASSERT_EQ(clean.outputs_size(), 1);  // the written list, as the agent sends it
  Result r = Check(clean);
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  ASSERT_EQ(r.verdict.outputs_size(), 3);
  EXPECT_THAT(r.verdict.outputs(1).shape(), ::testing::ElementsAre(16));
  // An update applied in float16: the second parameter is off.
  r = Check(MakeCall(
      "aten::_foreach_add_", "List", {params, grads, -0.01}, v1::PHASE_FORWARD, [&](Stack& out) {
        c10::List<at::Tensor> bad = out[0].toTensorList();
        bad.set(1,
                (params.get(1).to(at::kHalf) - 0.01 * grads.get(1).to(at::kHalf)).to(at::kFloat));
        out[0] = bad;
      }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_EQ(StatusText(r.verdict.outputs(0).status()), "pass");
  EXPECT_EQ(StatusText(r.verdict.outputs(1).status()), "error");
  // A call that carries no outputs (an agent that did not send them): a SKIP that says so.
  v1::ApiCall bare = clean;
  bare.clear_outputs();
  r = Check(bare);
  EXPECT_EQ(StatusText(r.verdict.status()), "SKIP");
  EXPECT_THAT(r.verdict.message(), HasSubstr("nothing to compare"));
}

// A newer torch's operators that the bench's libtorch lacks are registered on the bench with
// their decomposition (server/replay/aten_compat.cc): torch 2.x AdamW's foreach calls replay on
// a torch 1.13 bench, and a wrong element is still the error it is.
TEST_P(CallCheckerTest, NewerTorchsForeachOpsReplayThroughTheirDecomposition) {
  const std::vector<std::string>& added = RegisterMissingAtenOps();
  if (TORCH_VERSION_MAJOR < 2) {
    EXPECT_THAT(added, ::testing::IsSupersetOf(
                           {"aten::_foreach_lerp_.Scalar", "aten::_foreach_mul_.Tensor"}));
  }
  const c10::List<at::Tensor> params({R({4, 8}, 1), R({16}, 2), R({3, 3}, 3)});
  const c10::List<at::Tensor> averages({R({4, 8}, 4), R({16}, 5), R({3, 3}, 6)});
  Result r = Check(MakeCall("aten::_foreach_lerp_", "Scalar", {params, averages, 0.1}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  EXPECT_EQ(r.verdict.outputs_size(), 3);
  r = Check(MakeCall("aten::_foreach_mul_", "Tensor", {params, R({}, 7)}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  r = Check(MakeCall("aten::_foreach_lerp", "List", {params, averages, averages}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  r = Check(MakeCall("aten::_foreach_add_", "Tensor", {params, R({}, 8), 0.5}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  // One value per tensor in `scalars` (torch 2.x's AdamW with tensor hyperparameters): the
  // outputs computed here, each with its own value.
  const at::Tensor scalars = at::tensor({0.5, -1.0, 2.0});
  r = Check(MakeCall("aten::_foreach_addcmul_", "Tensor", {params, averages, averages, scalars},
                     v1::PHASE_FORWARD, [&](Stack& out) {
                       c10::List<at::Tensor> want;
                       for (int64_t i = 0; i < 3; ++i) {
                         const at::Tensor a = averages.get(i);
                         want.push_back(params.get(i) + scalars[i].item<float>() * a * a);
                       }
                       out[0] = want;
                     }));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  // The third tensor's update with the weight 0.2 instead of 0.1: that output alone is wrong.
  r = Check(MakeCall("aten::_foreach_lerp_", "Scalar", {params, averages, 0.1}, v1::PHASE_FORWARD,
                     [&](Stack& out) {
                       c10::List<at::Tensor> bad = out[0].toTensorList();
                       bad.set(2, params.get(2).lerp(averages.get(2), 0.2));
                       out[0] = bad;
                     }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_EQ(StatusText(r.verdict.outputs(0).status()), "pass");
  EXPECT_EQ(StatusText(r.verdict.outputs(2).status()), "error");
}

// torch 2.x's scaled_dot_product_attention, on a bench whose libtorch lacks it (1.13), replays
// through the server's decomposition (GQA heads, causal mask, scale): outputs computed here
// independently pass, and a kernel that forgets the scale is an error.
TEST_P(CallCheckerTest, ScaledDotProductAttentionOfTorch2Replays) {
  RegisterMissingAtenOps();
  const at::Tensor q = R({2, 4, 8, 16}, 1), k = R({2, 2, 8, 16}, 2), v = R({2, 2, 8, 16}, 3);
  const auto attention = [&](double scale) {
    const at::Tensor kk =
        at::cat({k.narrow(1, 0, 1), k.narrow(1, 0, 1), k.narrow(1, 1, 1), k.narrow(1, 1, 1)}, 1);
    const at::Tensor vv =
        at::cat({v.narrow(1, 0, 1), v.narrow(1, 0, 1), v.narrow(1, 1, 1), v.narrow(1, 1, 1)}, 1);
    at::Tensor scores = at::einsum("bhqd,bhkd->bhqk", {q, kk}) * scale;
    scores = scores + at::full({8, 8}, -1e30).triu(1);
    return at::einsum("bhqk,bhkd->bhqd", {at::softmax(scores, -1), vv});
  };
  const testing::Stack args = {q, k, v, c10::IValue(), 0.0, true, c10::IValue(), true};
  for (const double scale : {0.25, 1.0}) {
    const Result r =
        Check(MakeCall("aten::scaled_dot_product_attention", "", args, v1::PHASE_FORWARD,
                       [&](Stack& out) { out[0] = attention(scale); }));
    EXPECT_EQ(StatusText(r.verdict.status()), scale == 0.25 ? "pass" : "error")
        << scale << " " << r.verdict.ShortDebugString();
  }
}

TEST_P(CallCheckerTest, TuplesAndIntegerOutputsAreJudgedPerOutput) {
  const at::Tensor x = R({4, 8}, 1);
  Result r = Check(MakeCall("aten::topk", "", {x, 3, 1, true, true}));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  ASSERT_EQ(r.verdict.outputs_size(), 2);
  EXPECT_EQ(r.verdict.outputs(1).dtype(), wire::kInt64);
  r = Check(MakeCall("aten::argmax", "", {x, 1, false}, v1::PHASE_FORWARD,
                     [](Stack& out) { out[0] = out[0].toTensor() + 1; }));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "mismatch_rate");
}

// Random ops are checked (tests/server/replay/random_ops_test.cc); a call the agent skipped is
// SKIP.
TEST_P(CallCheckerTest, AgentSkipsAreSkip) {
  v1::ApiCall call = MakeCall("aten::relu", "", {R({2}, 1)});
  Result r;
  call.set_skip_reason("generator argument could not be sent");
  r = Check(call);
  EXPECT_EQ(StatusText(r.verdict.status()), "SKIP");
  EXPECT_EQ(r.verdict.message(), "generator argument could not be sent");
}

// A read-only argument the device changed (ApiCall.inputs_written): an error naming it, before
// the outputs' own verdict (here pass), echoed in the verdict; also for a call the server cannot
// replay. An impossible count rejects the call.
TEST_P(CallCheckerTest, AWrittenReadOnlyArgumentIsAnErrorNamingIt) {
  v1::ApiCall call = MakeCall("aten::relu", "", {R({2, 4}, 1)});
  v1::InputWritten* w = call.add_inputs_written();
  w->set_index(0);
  w->set_name("self");
  w->set_changed_elements(2);
  w->set_elements(8);
  Result r = Check(call);
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_THAT(r.verdict.message(),
              ::testing::StartsWith("inputs[0] (self) changed during the call: 2 of 8 "
                                    "elements (25%), an argument aten::relu must only read"));
  ASSERT_EQ(r.check.outputs.size(), 1u);
  EXPECT_EQ(StatusText(r.check.outputs[0].judgement.status), "pass");
  ASSERT_EQ(r.verdict.inputs_written_size(), 1);
  EXPECT_EQ(r.verdict.inputs_written(0).changed_elements(), 2u);
  EXPECT_EQ(r.verdict.failed_metric(), "input_written");
  EXPECT_EQ(r.verdict.error_code(), 0);
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "");  // the output's own comparison passed

  // An operator the server cannot replay (SKIP, UNIMPLEMENTED) that wrote its input: an error,
  // and an error carries code 0 (the proto's contract), not the SKIP's 12.
  v1::ApiCall unknown = call;
  unknown.set_op_name("myops::not_registered");
  unknown.set_sequence(call.sequence() + 100);
  r = Check(unknown);
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_THAT(r.verdict.message(), HasSubstr("unknown operator"));
  EXPECT_EQ(r.check.error_code, absl::StatusCode::kOk);
  EXPECT_EQ(r.verdict.error_code(), 0);
  EXPECT_EQ(r.verdict.failed_metric(), "input_written");
  unknown.clear_inputs_written();
  unknown.set_sequence(call.sequence() + 150);
  r = Check(unknown);
  EXPECT_EQ(StatusText(r.verdict.status()), "SKIP");
  EXPECT_EQ(r.verdict.error_code(), 12);
  EXPECT_EQ(r.verdict.failed_metric(), "");

  for (auto [changed, elements, index] :
       {std::tuple<uint64_t, uint64_t, uint32_t>{9, 8, 0}, {0, 8, 0}, {1, 0, 0}, {1, 8, 5}}) {
    v1::ApiCall bad = call;
    bad.set_sequence(call.sequence() + 200 + changed + index);
    bad.mutable_inputs_written(0)->set_changed_elements(changed);
    bad.mutable_inputs_written(0)->set_elements(elements);
    bad.mutable_inputs_written(0)->set_index(index);
    r = Check(bad);
    EXPECT_EQ(StatusText(r.verdict.status()), "rejected") << changed << " " << elements;
    EXPECT_EQ(r.verdict.error_code(), 3);
    EXPECT_THAT(r.verdict.message(), HasSubstr("inputs_written[0]"));
    EXPECT_EQ(r.verdict.inputs_written_size(), 0);
  }
}

// An operator the bench lacks, from a training on another torch: the SKIP names both versions;
// from a training on the bench's own torch (or an agent that does not say) it does not.
TEST_P(CallCheckerTest, AnOperatorFromAnotherTorchIsSkipNamingBothVersions) {
  v1::ApiCall call = MakeCall("aten::add", "Tensor", {R({2, 3}, 1), R({2, 3}, 2), 1});
  call.set_op_name("aten::_an_operator_of_torch_9");
  call.set_overload("");
  const std::string bench = "torch " + common::TorchVersion();
  CallOutcome newer = checker_->Judge(ServerCall(call, "torch 2.15.0"));
  EXPECT_EQ(newer.status, CheckStatus::kSkip);
  EXPECT_THAT(newer.message, HasSubstr("unknown operator \"aten::_an_operator_of_torch_9\""));
  EXPECT_THAT(newer.message, HasSubstr("(the training runs torch 2.15.0, the bench " + bench +
                                       ": a server on the training's torch version or a newer "
                                       "one replays it)"));
  call.set_op_name("aten::add");
  call.set_overload("NewInTorch9");
  CallOutcome overload = checker_->Judge(ServerCall(call, "torch 9.0.0"));
  EXPECT_THAT(overload.message, HasSubstr("aten::add has no overload \"NewInTorch9\""));
  EXPECT_THAT(overload.message, HasSubstr("the training runs torch 9.0.0, the bench " + bench));
  for (const std::string& same : {bench, std::string()}) {
    CallOutcome c = checker_->Judge(ServerCall(call, same));
    EXPECT_EQ(c.status, CheckStatus::kSkip);
    EXPECT_THAT(c.message, Not(HasSubstr("the training runs"))) << same;
  }
}

TEST_P(CallCheckerTest, MalformedCallsGetClearStatuses) {
  v1::ApiCall good = MakeCall("aten::add", "Tensor", {R({2, 3}, 1), R({2, 3}, 2), 1});
  // Unknown op and unknown overload.
  v1::ApiCall c = good;
  c.set_op_name("aten::no_such_op");
  Result r = Check(c);
  EXPECT_EQ(StatusText(r.verdict.status()), "SKIP");
  EXPECT_EQ(r.verdict.error_code(), static_cast<int>(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(r.verdict.message(), HasSubstr("unknown operator \"aten::no_such_op\""));
  c = good;
  c.set_overload("Bogus");
  r = Check(c);
  EXPECT_THAT(r.verdict.message(), HasSubstr("aten::add has no overload \"Bogus\""));
  // Wrong byte count.
  c = good;
  c.mutable_inputs(0)->mutable_tensor()->mutable_data()->pop_back();
  r = Check(c);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_EQ(r.verdict.error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.verdict.message(), HasSubstr("inputs[0].tensor.data: expected 24 bytes"));
  // Huge shape.
  c = good;
  c.mutable_inputs(1)->mutable_tensor()->set_shape(0, int64_t{1} << 40);
  r = Check(c);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_EQ(r.verdict.error_code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  // Wrong argument type: a string where the schema wants a Tensor.
  c = good;
  c.mutable_inputs(1)->set_string_value("oops");
  r = Check(c);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_THAT(r.verdict.message(), HasSubstr("arguments do not match aten::add.Tensor"));
  // Strings over their caps, and names holding control characters (they would forge lines in
  // the CSVs and logs).
  c = good;
  c.set_module_path(std::string(2000, 'm'));
  r = Check(c);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_EQ(r.verdict.error_code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(r.verdict.message(), HasSubstr("ApiCall.module_path: 2000 bytes, at most 1024"));
  c = good;
  c.set_overload("Tensor\nforged,row");
  r = Check(c);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_EQ(r.verdict.error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.verdict.message(), HasSubstr("ApiCall.overload: \"Tensor\\nforged,row\" holds"));
  c = good;
  c.set_skip_reason("why\r\nnot");
  r = Check(c);
  EXPECT_EQ(r.verdict.message(), "why\\r\\nnot");
  // Output structure differs from the bench's.
  c = good;
  c.add_outputs()->set_int_value(1);
  r = Check(c);
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_THAT(r.verdict.message(), HasSubstr("output structure is different"));
  // Shape of the device output differs.
  c = MakeCall("aten::relu", "", {R({2, 3}, 1)});
  *c.mutable_outputs(0) = MakeCall("aten::relu", "", {R({3, 2}, 1)}).outputs(0);
  r = Check(c);
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_THAT(r.verdict.outputs(0).message(), HasSubstr("The shape of bench(2, 3) and npu(3, 2)"));
}

// An output too large to send travels as statistics only (DATA_FORM_STATS_ONLY); the server
// compares them with the same statistics of its bench and golden outputs.
TEST_P(CallCheckerTest, StatsOnlyOutputsAreJudgedByTheirStatistics) {
  const at::Tensor x = R({64, 128}, 5) * 2;
  auto stats_only = [](v1::ApiCall call) {
    for (v1::Value& out : *call.mutable_outputs()) {
      v1::Tensor& t = *out.mutable_tensor();
      at::Tensor device = at::from_blob(t.mutable_data()->data(), {64, 128}).clone();
      common::EncodeOptions opts;
      opts.max_inline_tensor_bytes = 0;  // no sink: larger tensors go as statistics only
      opts.max_tensor_bytes = 0;
      v1::Value summary;
      EXPECT_TRUE(common::EncodeValue(device, nullptr, opts, "out", &summary).ok());
      EXPECT_EQ(summary.tensor().form(), v1::DATA_FORM_STATS_ONLY);
      out = summary;
    }
    return call;
  };
  Result r = Check(stats_only(MakeCall("aten::gelu", "", {x, std::string("none")})));
  EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
  ASSERT_EQ(r.verdict.outputs_size(), 1);
  EXPECT_EQ(r.verdict.outputs(0).standard(), "statistics");
  EXPECT_THAT(r.verdict.outputs(0).message(), HasSubstr("statistics only"));
  EXPECT_EQ(r.verdict.outputs(0).metrics().count("stats_l2_norm_error"), 1u);
  // gelu with the tanh approximation: the L2 norm moves ~1e-3, past float32's floor.
  r = Check(stats_only(MakeCall("aten::gelu", "", {x, std::string("none")}, v1::PHASE_FORWARD,
                                [&](Stack& out) { out[0] = at::gelu(x, "tanh"); })));
  EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
  EXPECT_THAT(r.verdict.outputs(0).failed_metric(), ::testing::StartsWith("stats_"));
  // A NaN the bench does not produce.
  r = Check(stats_only(
      MakeCall("aten::gelu", "", {x, std::string("none")}, v1::PHASE_FORWARD, [&](Stack& out) {
        at::Tensor t = out[0].toTensor().clone();
        t.view(-1)[7] = std::nan("");
        out[0] = t;
      })));
  EXPECT_EQ(StatusText(r.verdict.status()), "error");
  EXPECT_EQ(r.verdict.outputs(0).failed_metric(), "stats_inf_nan_count");
}

// A client in another language may omit trailing arguments that have schema defaults; the server
// fills them in, so the kernel always gets the schema's full stack (a short one made kernels read
// memory in front of the stack: "Expected Tensor but got InvalidTag(49)").
TEST_P(CallCheckerTest, OmittedDefaultedArgumentsTakeTheSchemaDefaults) {
  const at::Tensor x = R({4, 8}, 1), w = R({6, 8}, 2), y = R({4, 8}, 3);
  struct Case {
    std::string name, overload;
    Stack full;
    int keep;  // inputs actually sent
  };
  const std::vector<Case> cases = {
      {"aten::linear", "", {x, w, at::Tensor()}, 2},       // bias=None
      {"aten::gelu", "", {x, std::string("none")}, 1},     // approximate="none"
      {"aten::add", "Tensor", {x, y, 1}, 2},               // alpha=1
      {"aten::softmax", "int", {x, 1, c10::IValue()}, 2},  // dtype=None
      {"aten::sum", "dim_IntList", {x, c10::List<int64_t>({1}), false, c10::IValue()}, 2},
      {"aten::leaky_relu", "", {x, 0.01}, 1},  // negative_slope=0.01
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + "." + c.overload);
    v1::ApiCall call = MakeCall(c.name, c.overload, c.full);
    while (call.inputs_size() > c.keep) call.mutable_inputs()->RemoveLast();
    Result r = Check(call);
    EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
    ASSERT_EQ(r.verdict.outputs_size(), 1);
    EXPECT_NE(r.verdict.outputs(0).standard(), "");
  }
  // A missing argument without a default, and one argument too many, are refused before any
  // kernel runs.
  v1::ApiCall mm = MakeCall("aten::mm", "", {x, w.t().contiguous()});
  mm.mutable_inputs()->RemoveLast();
  Result r = Check(mm);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_EQ(r.verdict.error_code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.verdict.message(), HasSubstr("argument 1 (mat2) of aten::mm"));
  EXPECT_THAT(r.verdict.message(), HasSubstr("is missing and has no default"));
  v1::ApiCall relu = MakeCall("aten::relu", "", {x});
  *relu.add_inputs() = relu.inputs(0);
  r = Check(relu);
  EXPECT_EQ(r.verdict.status(), v1::VERDICT_STATUS_REJECTED);
  EXPECT_THAT(r.verdict.message(), HasSubstr("the call has 2 arguments, aten::relu"));
}

// The bench's own error against the golden is float32's: a TF32 bench (cuDNN's default on CUDA
// for convolutions) would be off by ~5e-4 of the output's size and make every device look good.
TEST_P(CallCheckerTest, BenchComputesFloat32InFloat32) {
  const at::Tensor a = R({64, 1024}, 11), b = R({1024, 64}, 12);
  const at::Tensor img = R({4, 64, 16, 16}, 13), ker = R({64, 64, 3, 3}, 14);
  const c10::List<int64_t> ones({1, 1}), zeros({0, 0});
  const std::vector<std::pair<std::string, Stack>> cases = {
      {"aten::mm", {a, b}},
      {"aten::convolution", {img, ker, c10::IValue(), ones, ones, ones, false, zeros, 1}},
  };
  for (const auto& [name, args] : cases) {
    SCOPED_TRACE(name);
    Stack golden = args;
    for (c10::IValue& v : golden) {
      if (v.isTensor()) v = v.toTensor().to(at::kDouble);
    }
    c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").callBoxed(golden);
    const double rms = golden[0].toTensor().pow(2).mean().sqrt().item<double>();
    Result r = Check(MakeCall(name, "", args));
    // The device here is this CPU. mm's verdict compares its float32 accumulation with the
    // bench's (the ULP standard's share ratio): against an H100's cuBLAS, a CPU's GEMM at
    // k = 1024 is an error (6.2% of elements over 32 ULP against the GPU's 3.4%), so only the
    // verdict of a CPU bench, the same kernels as the device, is known here.
    if (GetParam() == "cpu" || name != "aten::mm") {
      EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
    }
    ASSERT_EQ(r.verdict.outputs_size(), 1);
    const auto& metrics = r.verdict.outputs(0).metrics();
    ASSERT_TRUE(metrics.contains("bench_rmse")) << r.verdict.ShortDebugString();
    EXPECT_LT(metrics.at("bench_rmse"), 2e-5 * rms);
  }
}

// The device is this GPU, in float16 and bfloat16 (the dtypes a CPU bench barely covers): clean
// calls pass, a matmul whose inputs were rounded to bfloat16 first is an error.
TEST_P(CallCheckerTest, HalfPrecisionCallsFromTheGpu) {
  if (GetParam() != "cuda") GTEST_SKIP() << "the device side runs on the GPU";
  const auto cuda = [](const at::Tensor& t, at::ScalarType dtype) {
    return t.to(at::Device(at::kCUDA, 0), dtype);
  };
  for (const at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor a = cuda(R({64, 512}, 21), dtype), b = cuda(R({512, 64}, 22), dtype);
    const at::Tensor x = cuda(R({32, 256}, 23), dtype);
    const at::Tensor img = cuda(R({2, 16, 16, 16}, 24), dtype);
    const at::Tensor ker = cuda(R({32, 16, 3, 3}, 25), dtype);
    const c10::List<int64_t> ones({1, 1}), zeros({0, 0});
    const std::vector<std::pair<std::string, Stack>> clean = {
        {"aten::mm", {a, b}},
        {"aten::gelu", {x, std::string("none")}},
        {"aten::_softmax", {x, 1, false}},
        {"aten::native_layer_norm",
         {x, c10::List<int64_t>({256}), c10::IValue(), c10::IValue(), 1e-5}},
        {"aten::convolution", {img, ker, c10::IValue(), ones, ones, ones, false, zeros, 1}},
        {"aten::sum", {x, c10::List<int64_t>({1}), false, c10::IValue()}},
    };
    for (const auto& [name, args] : clean) {
      const std::string overload = name == "aten::sum" ? "dim_IntList" : "";
      Result r = Check(MakeCall(name, overload, args));
      EXPECT_EQ(StatusText(r.verdict.status()), "pass")
          << name << " " << r.verdict.ShortDebugString();
    }
    if (dtype == at::kHalf) {  // inputs rounded to bfloat16 first: 3 mantissa bits fewer
      Result r = Check(MakeCall("aten::mm", "", {a, b}, v1::PHASE_FORWARD, [&](Stack& out) {
        out[0] = at::mm(a.to(at::kBFloat16).to(dtype), b.to(at::kBFloat16).to(dtype));
      }));
      EXPECT_EQ(StatusText(r.verdict.status()), "error") << r.verdict.ShortDebugString();
    }
  }
}

// With a CUDA bench the golden runs on the GPU too (parity.golden_device "auto"): the
// verdicts are those of the CPU's golden (the same bench, golden_device "cpu"), whatever the
// standard, for clean calls and for planted faults. On the CPU instance both goldens are the
// CPU's: the test is meant for the GPU host.
TEST_P(CallCheckerTest, GoldenOnTheBenchDeviceGivesTheVerdictsOfTheCpuGolden) {
  std::unique_ptr<CallChecker> on_cpu = MakeChecker(GoldenDevice::kCpu);
  ASSERT_NE(on_cpu, nullptr);
  std::vector<v1::ApiCall> calls;
  for (const OpCase& c : CleanCases())
    calls.push_back(MakeCall(c.name, c.overload, c.args(), c.phase));
  const at::Tensor a = R({64, 96}, 31), b = R({96, 48}, 32), x = R({16, 256}, 33);
  calls.push_back(MakeCall("aten::mm", "", {a, b}, v1::PHASE_FORWARD,
                           [](Stack& out) { out[0] = out[0].toTensor() * 1.001; }));
  calls.push_back(MakeCall("aten::_softmax", "", {x, 1, false}, v1::PHASE_FORWARD,
                           [](Stack& out) { out[0] = out[0].toTensor().roll(1, 1); }));
  calls.push_back(MakeCall("aten::gelu", "", {x, std::string("none")}, v1::PHASE_FORWARD,
                           [](Stack& out) { out[0] = out[0].toTensor() + 1e-3; }));
  int errors = 0;
  for (const v1::ApiCall& call : calls) {
    const CallOutcome here = checker_->Judge(call);
    const CallOutcome there = on_cpu->Judge(call);
    SCOPED_TRACE(call.op_name());
    errors += here.status == CheckStatus::kError;
    EXPECT_EQ(StatusText(here.status), StatusText(there.status)) << here.message;
    ASSERT_EQ(here.outputs.size(), there.outputs.size());
    for (std::size_t i = 0; i < here.outputs.size(); ++i) {
      const v1::OutputVerdict h = ToVerdict(ServerCall(call), here).outputs(static_cast<int>(i));
      const v1::OutputVerdict t = ToVerdict(ServerCall(call), there).outputs(static_cast<int>(i));
      EXPECT_EQ(h.status(), t.status()) << i;
      EXPECT_EQ(h.failed_metric(), t.failed_metric()) << i;
      EXPECT_EQ(h.standard(), t.standard()) << i;
      for (const auto& [name, value] : t.metrics()) {
        ASSERT_TRUE(h.metrics().contains(name)) << name;
        // Two float64 goldens differ by far less than anything a threshold sees, but by more
        // than float64's rounding: the GPU's and the CPU's float64 kernels are other code (their
        // own erf/tanh, constants). Measured on an H200 with torch 2.11 (2026-11-26): up to
        // 1.2e-5 of the metric (bfloat16 gelu 'tanh'), 1.6e-9 on float32 ULP metrics; the
        // thresholds these metrics meet are 10x apart.
        EXPECT_NEAR(h.metrics().at(name), value, 1e-4 * std::max(1e-3, std::abs(value))) << name;
      }
    }
  }
  EXPECT_EQ(errors, 3);  // the planted faults, on either golden
  EXPECT_THAT(checker_->GoldenOpsOnCpu(), ::testing::IsEmpty());
}

// An op with no float64 kernel on the GPU: its golden runs on the CPU, and from then on goes
// there directly (CallChecker::GoldenOpsOnCpu names it).
TEST_P(CallCheckerTest, AGoldenTheGpuCannotRunRunsOnTheCpu) {
  if (GetParam() != "cuda") GTEST_SKIP() << "the fallback is from a GPU's golden";
  const at::Tensor x = R({32, 64}, 41);
  for (int i = 0; i < 2; ++i) {
    Result r = Check(MakeCall("parity_test::twice_no_cuda_double", "", {x}));
    EXPECT_EQ(StatusText(r.verdict.status()), "pass") << r.verdict.ShortDebugString();
    EXPECT_TRUE(r.check.cpu.golden_ran);
  }
  EXPECT_THAT(checker_->GoldenOpsOnCpu(),
              ::testing::ElementsAre("parity_test::twice_no_cuda_double"));
  Result fault = Check(MakeCall("parity_test::twice_no_cuda_double", "", {x}, v1::PHASE_FORWARD,
                                [](Stack& out) { out[0] = out[0].toTensor() * 1.01; }));
  EXPECT_EQ(StatusText(fault.verdict.status()), "error") << fault.verdict.ShortDebugString();
}

TEST(BenchDevicesTest, NamesResolveToTheHostsGpus) {
  auto names = [](const std::string& name, int gpus) {
    absl::StatusOr<std::vector<c10::Device>> d = ResolveBenchDevices(name, gpus);
    if (!d.ok()) return absl::StrCat("error: ", d.status().message());
    std::vector<std::string> out;
    for (const c10::Device& device : *d) out.push_back(device.str());
    return absl::StrJoin(out, ",");
  };
  EXPECT_EQ(names("auto", 0), "cpu");
  EXPECT_EQ(names("auto", 1), "cuda:0");
  EXPECT_EQ(names("auto", 4), "cuda:0,cuda:1,cuda:2,cuda:3");
  EXPECT_EQ(names("cpu", 4), "cpu");
  EXPECT_EQ(names("cuda", 2), "cuda:0,cuda:1");
  EXPECT_EQ(names("cuda:2", 4), "cuda:2");
  EXPECT_EQ(names("cuda:0, cuda:2", 4), "cuda:0,cuda:2");
  EXPECT_THAT(names("cuda", 0), HasSubstr("sees 0 CUDA device(s)"));
  EXPECT_THAT(names("cuda:3", 2), HasSubstr("cuda:3 asked for, but this libtorch sees 2"));
  EXPECT_THAT(names("cuda:1,cuda:1", 2), HasSubstr("cuda:1 is named twice"));
  EXPECT_THAT(names("cpu,cuda:0", 2), HasSubstr("mixes the CPU with GPUs"));
  EXPECT_THAT(names("meta", 2), HasSubstr("only cpu and cuda are supported"));
  EXPECT_THAT(names("tpu:3", 2), HasSubstr(R"(not a device: "tpu:3")"));
  EXPECT_THAT(names("gpu0", 2), HasSubstr("not a device: \"gpu0\""));
}

TEST(CallCheckerCreateTest, AutoPicksEveryGpuWhenPresent) {
  parity::server::CheckerOptions options;
  options.bench_device = "auto";
  auto c = CallChecker::Create(options, StandardsTable::Default());
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> gpus;
  const int count = CudaPresent() ? static_cast<int>(at::getNumGPUs()) : 0;
  for (int i = 0; i < count; ++i) gpus.push_back(absl::StrCat("cuda:", i));
  EXPECT_EQ((*c)->bench_device(), gpus.empty() ? "cpu" : absl::StrJoin(gpus, ","));
  EXPECT_EQ((*c)->bench_gpus(), static_cast<int>(gpus.size()));
}

TEST(CallCheckerCreateTest, RejectsUnavailableBenchDevice) {
  parity::server::CheckerOptions options;
  options.bench_device = "tpu:3";
  EXPECT_FALSE(CallChecker::Create(options, StandardsTable::Default()).ok());
  options.bench_device = "cuda:7";
  auto c = CallChecker::Create(options, StandardsTable::Default());
  ASSERT_EQ(c.ok(), at::getNumGPUs() > 7);
  if (!c.ok()) {
    EXPECT_THAT(c.status().message(),
                HasSubstr(absl::StrCat("sees ", at::getNumGPUs(), " CUDA device(s)")));
  }
}

}  // namespace
}  // namespace parity::server
