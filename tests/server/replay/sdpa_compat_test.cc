// torch 2.x's attention kernels on a bench whose libtorch lacks them (server/replay/
// sdpa_compat.cc): a torch 2.x training's SDPA forward and backward calls (the CPU flash kernel,
// CUDA's flash and memory-efficient ones) replay through the decomposition. The device values here
// are computed apart from it, by autograd through attention written out in float64 (GQA, causal):
// they pass, and a backward whose query gradient is 1% off is an error. inductor's
// _reinterpret_tensor replays as the view it is, and one reaching past what was sent is refused.
// (Against the real kernels of a pip torch wheel: tests/e2e/test_torch2_features.py, run by
// scripts/torch-matrix.sh.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/version.h>

#include <cmath>

#include "parity/v1/parity.pb.h"
#include "server/call/verdict_encoder.h"
#include "server/compare/standards.h"
#include "server/replay/aten_compat.h"
#include "server/replay/call_checker.h"
#include "tests/testing/op_cases.h"

namespace parity::server {
namespace {

using testing::R;
using testing::Stack;

// Attention of q (B, 4, L, D) over k, v (B, 2, S, D), causal, in float64.
struct Math {
  at::Tensor out, lse, dq, dk, dv;
};

Math Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dout,
            double scale) {
  const at::Tensor qd = q.to(at::kDouble).requires_grad_(true);
  const at::Tensor kd = k.to(at::kDouble).requires_grad_(true);
  const at::Tensor vd = v.to(at::kDouble).requires_grad_(true);
  auto heads = [](const at::Tensor& t) {  // kv head h serves query heads 2h and 2h + 1
    return at::stack({t, t}, 2).flatten(1, 2);
  };
  const int64_t l = q.size(2), s = k.size(2);
  const at::Tensor scores =
      at::einsum("bhqd,bhkd->bhqk", {qd, heads(kd)}) * scale +
      at::full({l, s}, -std::numeric_limits<double>::infinity(), qd.options()).triu(1);
  Math m;
  m.out = at::einsum("bhqk,bhkd->bhqd", {at::softmax(scores, -1), heads(vd)});
  m.lse = at::logsumexp(scores, -1).detach();
  const auto g = torch::autograd::grad({m.out}, {qd, kd, vd}, {dout.to(at::kDouble)});
  m.out = m.out.detach();
  m.dq = g[0];
  m.dk = g[1];
  m.dv = g[2];
  return m;
}

class SdpaCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterMissingAtenOps();
    CheckerOptions options;
    options.bench_device = "cpu";
    auto checker = CallChecker::Create(options, StandardsTable::Default());
    ASSERT_TRUE(checker.ok()) << checker.status();
    checker_ = *std::move(checker);
  }

  // The call with its outputs replaced by `outputs` (the device's values), then `edit`ed on the
  // wire (an argument the kernel here would refuse to run with).
  v1::Verdict Check(const std::string& op, Stack args, const Stack& outputs,
                    const std::function<void(v1::ApiCall&)>& edit = nullptr) {
    v1::ApiCall call = testing::BuildCall(
        op, "", std::move(args), v1::PHASE_BACKWARD,
        [&](Stack& out) {
          for (std::size_t i = 0; i < outputs.size() && i < out.size(); ++i) {
            if (!outputs[i].isNone()) out[i] = outputs[i];
          }
        },
        ++sequence_);
    if (edit) edit(call);
    return ToVerdict(ServerCall(call), checker_->Judge(call));
  }

  std::unique_ptr<CallChecker> checker_;
  uint64_t sequence_ = 0;
};

std::string Status(const v1::Verdict& v) { return v1::VerdictStatus_Name(v.status()); }

TEST_F(SdpaCompatTest, TheCpuFlashKernelAndItsBackwardReplay) {
  if (TORCH_VERSION_MAJOR < 2) {
    EXPECT_THAT(RegisterMissingAtenOps(),
                ::testing::IsSupersetOf(std::vector<std::string>{
                    "aten::_scaled_dot_product_flash_attention_for_cpu",
                    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
                    "aten::_scaled_dot_product_flash_attention_backward",
                    "aten::_scaled_dot_product_efficient_attention_backward",
                    "inductor::_reinterpret_tensor"}));
  }
  const at::Tensor q = R({2, 4, 8, 16}, 1), k = R({2, 2, 8, 16}, 2), v = R({2, 2, 8, 16}, 3),
                   dout = R({2, 4, 8, 16}, 4);
  const double scale = 0.25;
  const Math m = Attend(q, k, v, dout, scale);
  const at::Tensor out = m.out.to(at::kFloat), lse = m.lse.to(at::kFloat);
  v1::Verdict r = Check("aten::_scaled_dot_product_flash_attention_for_cpu",
                        {q, k, v, 0.0, true, c10::IValue(), scale}, {out, lse});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  const Stack backward = {dout, q, k, v, out, lse, 0.0, true, c10::IValue(), scale};
  r = Check("aten::_scaled_dot_product_flash_attention_for_cpu_backward", backward,
            {m.dq.to(at::kFloat), m.dk.to(at::kFloat), m.dv.to(at::kFloat)});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  r = Check("aten::_scaled_dot_product_flash_attention_for_cpu_backward", backward,
            {(m.dq * 1.01).to(at::kFloat), m.dk.to(at::kFloat), m.dv.to(at::kFloat)});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_ERROR") << r.ShortDebugString();
  EXPECT_EQ(r.outputs(0).status(), v1::VERDICT_STATUS_ERROR);
  EXPECT_EQ(r.outputs(1).status(), v1::VERDICT_STATUS_PASS);
  // bfloat16, as an LLM's attention runs: computed in float32, rounded once. (Its backward
  // reads the bfloat16 output it is handed, as the kernels do, where autograd here would use the
  // exact one: the real kernel is its second opinion, in test_torch2_features.py.)
  const auto bf = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
  const Math mb = Attend(bf(q), bf(k), bf(v), bf(dout), scale);
  r = Check("aten::_scaled_dot_product_flash_attention_for_cpu",
            {bf(q), bf(k), bf(v), 0.0, true, c10::IValue(), scale},
            {bf(mb.out), mb.lse.to(at::kFloat)});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  // With dropout the mask came from the training's generator: not rebuilt, SKIP saying why.
  r = Check("aten::_scaled_dot_product_flash_attention_for_cpu_backward", backward, {},
            [](v1::ApiCall& call) { call.mutable_inputs(6)->set_double_value(0.1); });
  EXPECT_EQ(Status(r), "VERDICT_STATUS_SKIP");
  EXPECT_NE(r.message().find("dropout_p 0.1 > 0"), std::string::npos) << r.message();
}

TEST_F(SdpaCompatTest, CudasFlashAndEfficientKernelsReplay) {
  const at::Tensor q = R({1, 4, 6, 8}, 5), k = R({1, 2, 6, 8}, 6), v = R({1, 2, 6, 8}, 7),
                   dout = R({1, 4, 6, 8}, 8);
  const Math m = Attend(q, k, v, dout, 0.5);
  const at::Tensor out = m.out.to(at::kFloat), lse = m.lse.to(at::kFloat);
  const at::Tensor none = at::empty({0});
  v1::Verdict r = Check(
      "aten::_scaled_dot_product_flash_attention_backward",
      {dout, q, k, v, out, lse, none, none, int64_t{6}, int64_t{6}, 0.0, true, none, none, 0.5},
      {m.dq.to(at::kFloat), m.dk.to(at::kFloat), m.dv.to(at::kFloat)});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  // The memory-efficient kernel pads its logsumexp to its block: the backward reads the rows'.
  const at::Tensor padded = at::cat({lse, at::zeros({1, 4, 26})}, -1);
  r = Check("aten::_scaled_dot_product_efficient_attention_backward",
            {dout, q, k, v, at::empty({0}), out, padded, none, none, 0.0,
             std::vector<bool>{true, true, true, false}, true, 0.5},
            {m.dq.to(at::kFloat), m.dk.to(at::kFloat), m.dv.to(at::kFloat), c10::IValue()});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  // Its forward: the output compared, the padded logsumexp and the bookkeeping not.
  r = Check("aten::_scaled_dot_product_efficient_attention",
            {q, k, v, c10::IValue(), true, 0.0, true, 0.5}, {out, padded, none, none});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  EXPECT_EQ(r.outputs(1).status(), v1::VERDICT_STATUS_SKIP);
}

TEST_F(SdpaCompatTest, InductorsReinterpretTensorIsAView) {
  const at::Tensor x = R({4, 6}, 9);
  v1::Verdict r = Check("inductor::_reinterpret_tensor",
                        {x, std::vector<int64_t>{3, 4}, std::vector<int64_t>{6, 1}, int64_t{2}},
                        {x.as_strided({3, 4}, {6, 1}, 2).clone()});
  EXPECT_EQ(Status(r), "VERDICT_STATUS_PASS") << r.ShortDebugString();
  EXPECT_EQ(r.outputs(0).standard(), "binary");
  r = Check("inductor::_reinterpret_tensor",
            {x, std::vector<int64_t>{3, 4}, std::vector<int64_t>{6, 1}, int64_t{2}}, {},
            [](v1::ApiCall& call) { call.mutable_inputs(3)->set_int_value(12); });
  EXPECT_EQ(Status(r), "VERDICT_STATUS_SKIP");
  EXPECT_NE(r.message().find("reaches past what the training sent"), std::string::npos)
      << r.message();
}

}  // namespace
}  // namespace parity::server
