// The reference library of torch_npu's fused operators (oplib/npu), loaded as the server loads
// it: every recorded schema registered with a kernel for every backend; each backward the
// derivative of its forward (directional finite differences in float64); attention's layouts,
// grouped-query heads, sparse modes and varlen (TND) against direct formulas; what it refuses,
// refused with a reason; AdamW's step against libtorch's own optimizer.
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/optim/adamw.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/oplib/npu_test_support.h"

namespace parity::server {
namespace {

at::Tensor R(at::IntArrayRef shape) { return at::randn(shape, at::kDouble); }

// <dy, (f(x + e u) - f(x - e u)) / 2e> for the forward's output 0 with input `which` moved.
double Directional(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& f,
                   std::vector<at::Tensor> inputs, std::size_t which, const at::Tensor& u,
                   const at::Tensor& dy) {
  const double e = 1e-6;
  std::vector<at::Tensor> plus = inputs, minus = inputs;
  plus[which] = inputs[which] + e * u;
  minus[which] = inputs[which] - e * u;
  return ((f(plus) - f(minus)) / (2 * e) * dy).sum().item<double>();
}

void ExpectGradients(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& f,
                     const std::vector<at::Tensor>& inputs, const at::Tensor& dy,
                     const std::vector<std::pair<std::size_t, at::Tensor>>& grads,
                     const std::string& what) {
  for (const auto& [which, grad] : grads) {
    const at::Tensor u = at::randn_like(inputs[which]);
    const double expected = Directional(f, inputs, which, u, dy);
    const double got = (grad * u).sum().item<double>();
    EXPECT_NEAR(got, expected, 1e-6 * std::max(1.0, std::abs(expected)))
        << what << ": gradient of input " << which;
  }
}

TEST_F(NpuReferenceTest, EveryRecordedSchemaIsRegisteredWithAKernelForEveryBackend) {
  std::ifstream in(std::string(PARITY_SOURCE_DIR) + "/oplib/npu/torch_npu_schemas.json");
  const nlohmann::json data = nlohmann::json::parse(in);
  ASSERT_GE(data["schemas"].size(), 29u);
  for (const nlohmann::json& e : data["schemas"]) {
    const std::string schema = e["schema"];
    const std::string name = schema.substr(0, schema.find('('));
    const auto dot = name.find('.');
    const auto handle = c10::Dispatcher::singleton().findSchema(
        {"npu::" + name.substr(0, dot), dot == std::string::npos ? "" : name.substr(dot + 1)});
    ASSERT_TRUE(handle.has_value()) << schema;
    std::ostringstream printed, recorded;
    printed << handle->schema();
    recorded << torch::jit::parseSchema("npu::" + schema);
    EXPECT_EQ(printed.str(), recorded.str());
    EXPECT_TRUE(handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd))
        << schema;
  }
}

TEST_F(NpuReferenceTest, NormAndActivationBackwardsAreTheirForwardsDerivatives) {
  at::manual_seed(1);
  {  // npu_rms_norm over the last two dims (gamma 2-D)
    const at::Tensor x = R({3, 4, 5}), g = R({4, 5}), dy = R({3, 4, 5});
    auto f = [](const std::vector<at::Tensor>& in) {
      return T(Call("npu::npu_rms_norm", {in[0], in[1], 1e-6}), 0);
    };
    const Stack fwd = Call("npu::npu_rms_norm", {x, g, 1e-6});
    const Stack b = Call("npu::npu_rms_norm_backward", {dy, x, g, T(fwd, 1)});
    ExpectGradients(f, {x, g}, dy, {{0, T(b, 0)}, {1, T(b, 1)}}, "rms_norm");
  }
  for (const std::string mode : {"half", "interleave"}) {
    const at::Tensor x = R({2, 6, 3, 8}), r1 = R({1, 6, 1, 8}), r2 = R({1, 6, 1, 8}),
                     dy = R({2, 6, 3, 8});
    auto f = [&](const std::vector<at::Tensor>& in) {
      return T(Call("npu::npu_rotary_mul", {in[0], in[1], in[2], mode}), 0);
    };
    const Stack b = Call("npu::npu_rotary_mul_backward", {dy, x, r1, r2, mode});
    ExpectGradients(f, {x, r1, r2}, dy, {{0, T(b, 0)}, {1, T(b, 1)}, {2, T(b, 2)}},
                    "rotary_mul " + mode);
  }
  {
    const at::Tensor x = R({4, 10}), dy = R({4, 5});
    auto f = [](const std::vector<at::Tensor>& in) {
      return T(Call("npu::npu_swiglu", {in[0], int64_t{-1}}), 0);
    };
    ExpectGradients(f, {x}, dy, {{0, T(Call("npu::npu_swiglu_backward", {dy, x, int64_t{-1}}), 0)}},
                    "swiglu");
  }
  for (const std::string op : {"npu::npu_fast_gelu", "npu::npu_mish"}) {
    const at::Tensor x = R({5, 7}), dy = R({5, 7});
    auto f = [&](const std::vector<at::Tensor>& in) { return T(Call(op, {in[0]}), 0); };
    ExpectGradients(f, {x}, dy, {{0, T(Call(op + "_backward", {dy, x}), 0)}}, op);
  }
  {
    const at::Tensor x = R({2, 3, 6, 6}), dy = R({2, 3, 6, 6});
    const at::Tensor mask = at::rand({2, 1, 6, 6}) > 0.7;
    auto f = [&](const std::vector<at::Tensor>& in) {
      return T(Call("npu::npu_scaled_masked_softmax", {in[0], mask, at::Scalar(0.5), false}), 0);
    };
    const at::Tensor y = f({x});
    ExpectGradients(f, {x}, dy,
                    {{0, T(Call("npu::npu_scaled_masked_softmax_backward",
                                {dy, y, mask, at::Scalar(0.5), false}),
                           0)}},
                    "scaled_masked_softmax");
  }
}

TEST_F(NpuReferenceTest, DataMovementAndGemmBackwards) {
  at::manual_seed(2);
  for (bool transpose_first : {true, false}) {
    const at::Tensor x = R({2, 3, 4});
    const std::vector<int64_t> perm = {1, 0, 2};
    const std::vector<int64_t> shape =
        transpose_first ? std::vector<int64_t>{3, 8} : std::vector<int64_t>{3, 2, 4};
    auto f = [&](const std::vector<at::Tensor>& in) {
      return T(Call("npu::npu_confusion_transpose", {in[0], perm, shape, transpose_first}), 0);
    };
    const at::Tensor y = f({x}), dy = at::randn_like(y);
    // torch_npu's derivative passes the input's shape and !transpose_first.
    const at::Tensor dx = T(Call("npu::npu_confusion_transpose_backward",
                                 {dy, perm, x.sizes().vec(), !transpose_first}),
                            0);
    ExpectGradients(f, {x}, dy, {{0, dx}}, "confusion_transpose");
  }
  {
    const at::Tensor x = R({5, 4}), w = R({3, 4}), dy = R({5, 3});
    auto f = [](const std::vector<at::Tensor>& in) {
      return T(Call("npu::npu_linear", {in[0], in[1], c10::IValue()}), 0);
    };
    const Stack b = Call("npu::npu_linear_backward", {dy, x, w});
    ExpectGradients(f, {x, w}, dy, {{0, T(b, 0)}, {1, T(b, 1)}}, "linear");
  }
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{4}, {4}}, {{4}, {2, 4, 3}}, {{2, 3, 4}, {4}}, {{2, 1, 3, 4}, {5, 4, 2}}, {{3, 4}, {4, 2}}};
  for (const auto& [a_shape, b_shape] : shapes) {
    const at::Tensor a = R(a_shape), b = R(b_shape);
    const at::Tensor dy = at::randn_like(at::matmul(a, b));
    auto f = [](const std::vector<at::Tensor>& in) { return at::matmul(in[0], in[1]); };
    for (const char* op : {"npu::matmul_backward", "aten::matmul_backward"}) {
      const Stack g = Call(op, {dy, a, b, c10::List<bool>({true, true})});
      ExpectGradients(f, {a, b}, dy, {{0, T(g, 0)}, {1, T(g, 1)}}, op);
    }
  }
}

// softmax(scale * (q k^T + pse) masked) v in (B, N, S, D) with the K/V heads repeated.
at::Tensor Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                     const c10::optional<at::Tensor>& mask, const c10::optional<at::Tensor>& pse) {
  const int64_t group = q.size(1) / k.size(1);
  at::Tensor s = at::matmul(q, k.repeat_interleave(group, 1).transpose(-1, -2));
  if (pse) s = s + *pse;
  s = s * scale;
  if (mask) s = s.masked_fill(*mask, -INFINITY);
  return at::matmul(at::softmax(s, -1), v.repeat_interleave(group, 1));
}

Stack Fa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t heads,
         const std::string& layout, const c10::IValue& mask, double scale, int64_t sparse,
         int64_t pre = 2147483647, int64_t next = 2147483647, const c10::IValue& pse = {},
         const c10::IValue& seq_q = {}, const c10::IValue& seq_kv = {}, double keep = 1.0) {
  return NpuReferenceTest::Call(
      "npu::npu_fusion_attention",
      {q, k, v, heads, layout, pse, c10::IValue(), mask, scale, keep, pre, next, int64_t{0},
       c10::IValue(), seq_q, seq_kv, sparse, true, false});
}

// npu_fusion_attention_grad with the forward's statistics (softmax_max, softmax_sum), its output
// (attention_in) and the call's options; softmax_in empty, no dropout, no band. sparse_mode masks
// only with an atten_mask (torch_npu's doc: without one the whole matrix is computed).
Stack FaGrad(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& dy,
             int64_t heads, const std::string& layout, const c10::IValue& pse,
             const c10::IValue& softmax_max, const c10::IValue& softmax_sum,
             const c10::IValue& attention_in, double scale, int64_t sparse,
             const c10::IValue& mask = {}) {
  return NpuReferenceTest::Call("npu::npu_fusion_attention_grad", {q,
                                                                   k,
                                                                   v,
                                                                   dy,
                                                                   heads,
                                                                   layout,
                                                                   pse,
                                                                   c10::IValue(),
                                                                   mask,
                                                                   softmax_max,
                                                                   softmax_sum,
                                                                   at::empty({0}, q.options()),
                                                                   attention_in,
                                                                   scale,
                                                                   1.0,
                                                                   int64_t{2147483647},
                                                                   int64_t{2147483647},
                                                                   int64_t{0},
                                                                   int64_t{0},
                                                                   int64_t{0},
                                                                   int64_t{0},
                                                                   c10::IValue(),
                                                                   c10::IValue(),
                                                                   c10::IValue(),
                                                                   sparse,
                                                                   true,
                                                                   false});
}

TEST_F(NpuReferenceTest, FusionAttentionLayoutsGroupsAndSparseModes) {
  at::manual_seed(3);
  const int64_t B = 2, N = 4, NKV = 2, S1 = 6, S2 = 9, D = 8;
  const at::Tensor q = R({B, N, S1, D}), k = R({B, NKV, S2, D}), v = R({B, NKV, S2, D});
  const double scale = 0.3;
  const at::Tensor i = at::arange(S1).unsqueeze(1), j = at::arange(S2).unsqueeze(0);
  const at::Tensor compressed = at::ones({2048, 2048}, at::kBool).triu(1);
  // sparse_mode -> the mask it means on (S1, S2).
  const std::vector<std::pair<int64_t, at::Tensor>> modes = {
      {2, j > i},
      {3, j - i > S2 - S1},
      {4, (j - i - (S2 - S1) > 1).logical_or(i + S2 - S1 - j > 2)}};
  for (const auto& [mode, mask] : modes) {
    const at::Tensor expected = Attention(q, k, v, scale, mask, c10::nullopt);
    const Stack r = Fa(q, k, v, N, "BNSD", compressed, scale, mode, 2, 1);
    EXPECT_TRUE(at::allclose(T(r, 0), expected, 1e-10, 1e-10)) << "sparse_mode " << mode;
  }
  {  // mode 0: the given mask and the pre/next band together; mode 1: the mask alone
    const at::Tensor given = at::rand({B, 1, S1, S2}) > 0.8;
    const at::Tensor band = (j - i > 3).logical_or(i - j > 1);
    EXPECT_TRUE(at::allclose(T(Fa(q, k, v, N, "BNSD", given, scale, 0, 1, 3), 0),
                             Attention(q, k, v, scale, given.logical_or(band), c10::nullopt)));
    EXPECT_TRUE(at::allclose(T(Fa(q, k, v, N, "BNSD", given, scale, 1, 0, 0), 0),
                             Attention(q, k, v, scale, given, c10::nullopt)));
  }
  {  // pse is added before the scale; softmax_max/sum are the rows' statistics, 8 wide
    const at::Tensor pse = R({1, N, S1, S2});
    const Stack r = Fa(q, k, v, N, "BNSD", {}, scale, 0, 2147483647, 2147483647, pse);
    EXPECT_TRUE(at::allclose(T(r, 0), Attention(q, k, v, scale, c10::nullopt, pse)));
    const at::Tensor s = (at::matmul(q, k.repeat_interleave(2, 1).transpose(-1, -2)) + pse) * scale;
    EXPECT_EQ(T(r, 1).sizes(), (std::vector<int64_t>{B, N, S1, 8}));
    EXPECT_TRUE(at::allclose(T(r, 1).select(-1, 7), std::get<0>(s.max(-1))));
    EXPECT_TRUE(
        at::allclose(T(r, 2).select(-1, 0), at::exp(s - std::get<0>(s.max(-1, true))).sum(-1)));
  }
  // Without an atten_mask, no sparse_mode masks anything (torch_npu's doc): the whole matrix.
  for (int64_t mode : {0, 2, 3, 4}) {
    EXPECT_TRUE(at::allclose(T(Fa(q, k, v, N, "BNSD", {}, scale, mode, 2, 1), 0),
                             Attention(q, k, v, scale, c10::nullopt, c10::nullopt), 1e-10, 1e-10))
        << "sparse_mode " << mode << " without a mask";
  }
  // Every layout gives the BNSD result, laid out its way.
  const at::Tensor expected = T(Fa(q, k, v, N, "BNSD", compressed, scale, 3), 0);
  auto bsnd = [](const at::Tensor& x) { return x.transpose(1, 2).contiguous(); };
  auto bsh = [&](const at::Tensor& x) { return bsnd(x).reshape({x.size(0), x.size(2), -1}); };
  auto sbh = [&](const at::Tensor& x) { return bsh(x).transpose(0, 1).contiguous(); };
  EXPECT_TRUE(at::allclose(T(Fa(bsnd(q), bsnd(k), bsnd(v), N, "BSND", compressed, scale, 3), 0),
                           bsnd(expected)));
  EXPECT_TRUE(at::allclose(T(Fa(bsh(q), bsh(k), bsh(v), N, "BSH", compressed, scale, 3), 0),
                           bsh(expected)));
  EXPECT_TRUE(at::allclose(T(Fa(sbh(q), sbh(k), sbh(v), N, "SBH", compressed, scale, 3), 0),
                           sbh(expected)));
  {  // TND: two sequences of lengths (2, 4) / (5, 4), each its own causal problem
    const at::Tensor tq = R({6, N, D}), tk = R({9, NKV, D}), tv = R({9, NKV, D});
    const Stack r = Fa(tq, tk, tv, N, "TND", compressed, scale, 3, 2147483647, 2147483647, {},
                       std::vector<int64_t>{2, 6}, std::vector<int64_t>{5, 9});
    auto one = [&](int64_t qs, int64_t ql, int64_t ks, int64_t kl) {
      auto to = [](const at::Tensor& x) { return x.permute({1, 0, 2}).unsqueeze(0); };
      const at::Tensor m = at::arange(kl).unsqueeze(0) - at::arange(ql).unsqueeze(1) > kl - ql;
      return Attention(to(tq.narrow(0, qs, ql)), to(tk.narrow(0, ks, kl)), to(tv.narrow(0, ks, kl)),
                       scale, m, c10::nullopt)
          .squeeze(0)
          .permute({1, 0, 2});
    };
    EXPECT_TRUE(at::allclose(T(r, 0), at::cat({one(0, 2, 0, 5), one(2, 4, 5, 4)}, 0)));
    EXPECT_EQ(T(r, 1).sizes(), (std::vector<int64_t>{6, N, 8}));
  }
}

TEST_F(NpuReferenceTest, FusionAttentionGradIsTheDerivativeForEveryInput) {
  at::manual_seed(4);
  const int64_t B = 2, N = 4, NKV = 2, S1 = 5, S2 = 7, D = 4;
  const at::Tensor q = R({B, S1, N, D}), k = R({B, S2, NKV, D}), v = R({B, S2, NKV, D}),
                   pse = R({B, N, S1, S2}), dy = R({B, S1, N, D});
  const double scale = 0.5;
  auto f = [&](const std::vector<at::Tensor>& in) {
    return T(Fa(in[0], in[1], in[2], N, "BSND", {}, scale, 3, 2147483647, 2147483647, in[3]), 0);
  };
  const Stack fwd = Fa(q, k, v, N, "BSND", {}, scale, 3, 2147483647, 2147483647, pse);
  const Stack g = FaGrad(q, k, v, dy, N, "BSND", pse, T(fwd, 1), T(fwd, 2), T(fwd, 0), scale, 3);
  ExpectGradients(f, {q, k, v, pse}, dy, {{0, T(g, 0)}, {1, T(g, 1)}, {2, T(g, 2)}, {3, T(g, 3)}},
                  "fusion_attention");
}

// A fused backward computes from what the real kernel is handed (the forward's softmax_max,
// softmax_sum and output for attention; the forward's rstd for RMSNorm), never recomputing it:
// given the statistics of a deliberately different forward, it agrees with a kernel that uses them
// and not with one that recomputes them. So a faulty forward does not make its correct backward an
// error.
TEST_F(NpuReferenceTest, FusedBackwardsUseTheStatisticsTheyAreGiven) {
  at::manual_seed(6);
  {
    const int64_t N = 2, S1 = 4, S2 = 5, D = 3;
    const at::Tensor q = R({1, N, S1, D}), k = R({1, N, S2, D}), v = R({1, N, S2, D}),
                     dy = R({1, N, S1, D});
    const double scale = 0.7;
    // The forward the statistics come from saw another query (a faulty forward, say).
    const Stack other = Fa(q * 1.5 + 0.2, k, v, N, "BNSD", {}, scale, 0);
    auto grad = [&](const c10::IValue& max, const c10::IValue& sum, const c10::IValue& out) {
      return FaGrad(q, k, v, dy, N, "BNSD", {}, max, sum, out, scale, 0);
    };
    const Stack given = grad(T(other, 1), T(other, 2), T(other, 0));
    // A kernel that uses them: P = exp(S - max) / sum, D = rowsum(dY * O).
    const at::Tensor max = T(other, 1).narrow(-1, 0, 1).to(at::kDouble);
    const at::Tensor sum = T(other, 2).narrow(-1, 0, 1).to(at::kDouble);
    const at::Tensor p = at::exp(at::matmul(q, k.transpose(-1, -2)) * scale - max) / sum;
    const at::Tensor dp = at::matmul(dy, v.transpose(-1, -2));
    const at::Tensor dz = p * (dp - (dy * T(other, 0)).sum(-1, true)) * scale;
    EXPECT_TRUE(at::allclose(T(given, 0), at::matmul(dz, k), 1e-10, 1e-12)) << "dq";
    EXPECT_TRUE(at::allclose(T(given, 1), at::matmul(dz.transpose(-1, -2), q), 1e-10, 1e-12))
        << "dk";
    EXPECT_TRUE(at::allclose(T(given, 2), at::matmul(p.transpose(-1, -2), dy), 1e-10, 1e-12))
        << "dv";
    // A kernel that recomputes them from Q and K (what the call gets without statistics).
    const at::Tensor none = at::empty({0}, q.options());
    const Stack recomputed = grad(none, none, none);
    for (int i = 0; i < 3; ++i) {
      EXPECT_FALSE(at::allclose(T(given, i), T(recomputed, i), 1e-3, 1e-3)) << "output " << i;
    }
  }
  {
    const at::Tensor x = R({3, 8}), g = R({8}), dy = R({3, 8});
    const at::Tensor other_rstd = T(Call("npu::npu_rms_norm", {x * 2 + 0.5, g, 1e-6}), 1);
    const Stack given = Call("npu::npu_rms_norm_backward", {dy, x, g, other_rstd});
    const at::Tensor xhat = x * other_rstd, dxhat = dy * g;
    EXPECT_TRUE(at::allclose(
        T(given, 0), other_rstd * (dxhat - xhat * (dxhat * xhat).mean(-1, true)), 1e-10, 1e-12));
    EXPECT_TRUE(at::allclose(T(given, 1), (dy * xhat).sum(0), 1e-10, 1e-12));
    const at::Tensor own_rstd = T(Call("npu::npu_rms_norm", {x, g, 1e-6}), 1);
    const Stack recomputed = Call("npu::npu_rms_norm_backward", {dy, x, g, own_rstd});
    EXPECT_FALSE(at::allclose(T(given, 0), T(recomputed, 0), 1e-3, 1e-3));
  }
}

// A second opinion at the shapes an LLM layer uses (2 sequences of 128 tokens, hidden 512, 8
// query heads of 64 over 2 key/value heads, FFN 2 x 688): each fused reference equals a
// composition of aten ops written here from the operator's definition, in float64; and each
// backward equals libtorch's autograd through that composition.
TEST_F(NpuReferenceTest, FusedReferencesEqualAtenCompositionsAtLlmShapes) {
  at::manual_seed(7);
  const int64_t B = 2, S = 128, H = 512, N = 8, NKV = 2, D = 64, F = 688;
  auto close = [](const at::Tensor& a, const at::Tensor& b) {
    return at::allclose(a, b, 1e-10, 1e-11);
  };
  auto autograd = [](const std::function<at::Tensor(const std::vector<at::Tensor>&)>& f,
                     std::vector<at::Tensor> in, const at::Tensor& dy) {
    for (at::Tensor& t : in) t = t.detach().requires_grad_(true);
    const at::Tensor y = f(in);
    std::vector<at::Tensor> grads;
    for (const at::Tensor& g : torch::autograd::grad({y}, in, {dy})) grads.push_back(g);
    return grads;
  };
  {  // RMSNorm: x * rsqrt(mean(x^2) + eps) * gamma
    const at::Tensor x = R({B, S, H}), g = R({H}), dy = R({B, S, H});
    auto f = [](const std::vector<at::Tensor>& in) {
      return in[0] * at::rsqrt(in[0].pow(2).mean(-1, true) + 1e-6) * in[1];
    };
    const Stack fwd = Call("npu::npu_rms_norm", {x, g, 1e-6});
    EXPECT_TRUE(close(T(fwd, 0), f({x, g}))) << "rms_norm";
    const Stack bwd = Call("npu::npu_rms_norm_backward", {dy, x, g, T(fwd, 1)});
    const auto want = autograd(f, {x, g}, dy);
    EXPECT_TRUE(close(T(bwd, 0), want[0])) << "rms_norm dx";
    EXPECT_TRUE(close(T(bwd, 1), want[1])) << "rms_norm dgamma";
  }
  {  // RoPE, 'half': x * cos + rotate_half(x) * sin, rotate_half = cat(-x2, x1)
    const at::Tensor x = R({B, S, N, D}), c = R({1, S, 1, D}), sn = R({1, S, 1, D}),
                     dy = R({B, S, N, D});
    auto f = [](const std::vector<at::Tensor>& in) {
      const auto halves = in[0].chunk(2, -1);
      return in[0] * in[1] + at::cat({-halves[1], halves[0]}, -1) * in[2];
    };
    EXPECT_TRUE(
        close(T(Call("npu::npu_rotary_mul", {x, c, sn, std::string("half")}), 0), f({x, c, sn})))
        << "rotary_mul";
    const Stack bwd = Call("npu::npu_rotary_mul_backward", {dy, x, c, sn, std::string("half")});
    const auto want = autograd(f, {x, c, sn}, dy);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(T(bwd, i), want[i])) << "rotary_mul grad " << i;
  }
  {  // SwiGLU: silu(a) * b of the two halves of the last dim
    const at::Tensor x = R({B, S, 2 * F}), dy = R({B, S, F});
    auto f = [](const std::vector<at::Tensor>& in) {
      const auto halves = in[0].chunk(2, -1);
      return at::silu(halves[0]) * halves[1];
    };
    EXPECT_TRUE(close(T(Call("npu::npu_swiglu", {x, int64_t{-1}}), 0), f({x}))) << "swiglu";
    EXPECT_TRUE(close(T(Call("npu::npu_swiglu_backward", {dy, x, int64_t{-1}}), 0),
                      autograd(f, {x}, dy)[0]))
        << "swiglu grad";
  }
  {  // Causal grouped-query attention, BSND, sparse_mode 2: softmax(q k^T * scale, causal) v
    const at::Tensor q = R({B, S, N, D}), k = R({B, S, NKV, D}), v = R({B, S, NKV, D}),
                     dy = R({B, S, N, D});
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const at::Tensor causal = at::arange(S).unsqueeze(0) > at::arange(S).unsqueeze(1);
    auto f = [&](const std::vector<at::Tensor>& in) {
      const auto bnsd = [](const at::Tensor& t) { return t.transpose(1, 2); };
      return Attention(bnsd(in[0]), bnsd(in[1]), bnsd(in[2]), scale, causal, c10::nullopt)
          .transpose(1, 2);
    };
    const at::Tensor compressed = at::ones({2048, 2048}, at::kBool).triu(1);  // torch_npu's
    const Stack fwd = Fa(q, k, v, N, "BSND", compressed, scale, 2);
    EXPECT_TRUE(close(T(fwd, 0), f({q, k, v}))) << "fusion_attention";
    const Stack g =
        FaGrad(q, k, v, dy, N, "BSND", {}, T(fwd, 1), T(fwd, 2), T(fwd, 0), scale, 2, compressed);
    const auto want = autograd(f, {q, k, v}, dy);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(close(T(g, i), want[i])) << "fusion_attention grad " << i;
    }
  }
}

TEST_F(NpuReferenceTest, WhatTheReferenceCannotRebuildIsRefusedWithTheReason) {
  const at::Tensor q = R({1, 2, 4, 8});
  auto message = [&](const std::function<void()>& call) {
    try {
      call();
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              Fa(q, q, q, 2, "BNSD", {}, 1.0, 0, 1, 1, {}, {}, {}, 0.9);
            }).find("keep_prob 0.9 < 1 applies a dropout mask drawn from the device's generator"),
            std::string::npos);
  EXPECT_NE(message([&] {
              Fa(q, q, q, 2, "BNSD", {}, 1.0, 6);
            }).find("sparse_mode 6 is not supported by the reference (0-4 are)"),
            std::string::npos);
  EXPECT_NE(
      message([&] { Fa(q, q, q, 2, "NSD", {}, 1.0, 0); }).find("input_layout 'NSD' is not one of"),
      std::string::npos);
  EXPECT_NE(message([&] {
              Call("npu::npu_apply_adam",
                   {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, q, c10::IValue(), c10::IValue()});
            }).find("torch_npu updates them through the .out overload"),
            std::string::npos);
}

TEST_F(NpuReferenceTest, ApplyAdamWIsOneStepOfLibtorchsAdamW) {
  at::manual_seed(5);
  const double lr = 0.01, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const at::Tensor start = R({4, 3});
  at::Tensor param = start.clone().requires_grad_(true);
  torch::optim::AdamW opt({param},
                          torch::optim::AdamWOptions(lr).betas({b1, b2}).eps(eps).weight_decay(wd));
  at::Tensor var = start.clone(), m = at::zeros_like(start), v = at::zeros_like(start);
  for (int step = 1; step <= 3; ++step) {
    const at::Tensor grad = R({4, 3});
    param.mutable_grad() = grad.clone();
    opt.step();
    // The powers before this step: ApplyAdamW advances them itself (op-plugin's goldens).
    Call("npu::npu_apply_adam_w.out", {std::pow(b1, step - 1), std::pow(b2, step - 1), lr, wd, b1,
                                       b2, eps, grad, c10::IValue(), false, false, var, m, v});
    EXPECT_TRUE(at::allclose(var, param.detach(), 1e-12, 1e-12)) << "step " << step;
  }
}

}  // namespace
}  // namespace parity::server

namespace parity::server {
namespace {

TEST_F(NpuReferenceTest, ForwardOnlyOperatorsMatchTheirAtenMeaning) {
  at::manual_seed(6);
  const at::Tensor x = R({2, 6, 3, 3}), w = R({6}), b = R({6});
  const Stack gn = Call("npu::npu_group_norm_silu", {x, w, b, int64_t{3}, 1e-5});
  EXPECT_TRUE(at::allclose(T(gn, 0), at::silu(at::group_norm(x, 3, w, b, 1e-5))));
  EXPECT_EQ(T(gn, 1).sizes(), (std::vector<int64_t>{2, 3}));
  const at::Tensor y = R({4, 5});
  EXPECT_TRUE(
      at::allclose(T(Call("npu::npu_layer_norm_eval",
                          {y, std::vector<int64_t>{5}, w.narrow(0, 0, 5), b.narrow(0, 0, 5), 1e-5}),
                     0),
                   at::layer_norm(y, {5}, w.narrow(0, 0, 5), b.narrow(0, 0, 5), 1e-5)));
  EXPECT_TRUE(at::equal(T(Call("npu::npu_sort_v2", {y, int64_t{-1}, true}), 0),
                        std::get<0>(y.sort(-1, true))));
  // MoE gating: top-k of the softmax; finished rows go to expert E; row_idx = j * rows + i.
  const at::Tensor logits = R({5, 8}).to(at::kFloat);
  const at::Tensor finished = at::tensor({0, 1, 0, 0, 0}).to(at::kBool);
  const Stack g = Call("npu::npu_moe_gating_top_k_softmax", {logits, finished, int64_t{2}});
  const auto top = at::softmax(logits, -1).topk(2, -1);
  EXPECT_TRUE(at::allclose(T(g, 0), std::get<0>(top)));
  at::Tensor idx = std::get<1>(top).to(at::kInt);
  idx[1].fill_(8);
  EXPECT_TRUE(at::equal(T(g, 1), idx));
  EXPECT_TRUE(at::equal(T(g, 2), at::arange(10, at::kInt).reshape({2, 5}).t()));
}

}  // namespace
}  // namespace parity::server

namespace parity::server {
namespace {

// The kernels run on inputs decoded from the network: malformed shapes and arguments are a
// c10::Error the server reports as SKIP, never a crash or an out-of-bounds read (this suite also
// runs under ASan and UBSan, scripts/sanitize.sh).
TEST_F(NpuReferenceTest, MalformedCallsAreErrorsNotCrashes) {
  const at::Tensor q = R({1, 4, 6, 8}), k = R({1, 3, 6, 8}), odd = R({1, 4, 6, 7});
  const std::vector<std::function<void()>> calls = {
      [&] { Fa(q, k, k, 4, "BNSD", {}, 1.0, 0); },      // 4 heads over 3 KV heads
      [&] { Fa(q, odd, odd, 4, "BNSD", {}, 1.0, 0); },  // head dims differ
      [&] { Fa(q, q, q, 0, "BNSD", {}, 1.0, 0); },      // head_num 0
      [&] {
        Fa(R({2, 6, 30}), R({2, 6, 30}), R({2, 6, 30}), 4, "BSH", {}, 1.0, 0);
      },     // 30 / 4
      [&] {  // TND lengths past the tokens, and not cumulative
        Fa(R({6, 2, 8}), R({6, 2, 8}), R({6, 2, 8}), 2, "TND", {}, 1.0, 3, 2147483647, 2147483647,
           {}, std::vector<int64_t>{4, 9}, std::vector<int64_t>{4, 9});
      },
      [&] {
        Fa(R({6, 2, 8}), R({6, 2, 8}), R({6, 2, 8}), 2, "TND", {}, 1.0, 3, 2147483647, 2147483647,
           {}, std::vector<int64_t>{4, 2}, std::vector<int64_t>{4, 6});
      },
      [&] {
        Fa(R({6, 2, 8}), R({6, 2, 8}), R({6, 2, 8}), 2, "TND", {}, 1.0, 3);
      },  // no lengths
      [&] {
        Fa(q, q, q, 4, "BNSD", R({1, 1, 3, 3}) > 0, 1.0, 1);
      },  // mask of another size
      [&] {
        Call("npu::npu_rms_norm", {R({3}), R({2, 3}), 1e-6});
      },  // gamma wider than x
      [&] {
        Call("npu::npu_swiglu", {R({3, 5}), int64_t{-1}});
      },  // odd dim
      [&] {
        Call("npu::npu_rotary_mul", {R({2, 5}), R({2, 5}), R({2, 5}), std::string("half")});
      },
      [&] {
        Call("npu::npu_rotary_mul", {R({2, 4}), R({2, 4}), R({2, 4}), std::string("x")});
      },
      [&] {
        Call("npu::npu_group_norm_silu",
             {R({2, 5, 3}), c10::IValue(), c10::IValue(), int64_t{2}, 1e-5});
      },
      [&] {
        Call("npu::npu_moe_gating_top_k_softmax", {R({3, 4}), c10::IValue(), int64_t{5}});
      },
      [&] {
        Call("npu::npu_confusion_transpose",
             {R({2, 3}), std::vector<int64_t>{0, 0}, std::vector<int64_t>{6}, true});
      },
      [&] {
        Call("npu::npu_confusion_transpose_backward",
             {R({2, 3}), std::vector<int64_t>{1, 5}, std::vector<int64_t>{3, 2}, false});
      },
      [&] {
        Call("npu::matmul_backward", {R({2}), R({2, 3}), R({4, 2}), c10::List<bool>({true, true})});
      },
  };
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_THROW(calls[i](), c10::Error) << "call " << i;
  }
}

}  // namespace
}  // namespace parity::server
