// The MoE references of oplib/npu against a second opinion: npu_grouped_matmul in each release's
// form equals one GEMM per group written out here (rows of x, the inner dimension, lists;
// cumulative ends and sizes; one output or one per group); low precision is computed in float32
// and rounded once; the routing ops equal loops written from torch_npu's documented equivalents;
// the token permutation follows torch_npu's index convention and its _grad ops (every release's
// form) equal autograd through the upstream golden composition; quantized calls are refused with
// the reason.
#include <torch/csrc/autograd/autograd.h>

#include <map>

#include "parity/v1/parity.pb.h"
#include "server/compare/standards.h"
#include "server/replay/call_checker.h"
#include "tests/oplib/npu_test_support.h"
#include "tests/testing/op_cases.h"

namespace parity::server {
namespace {

using Named = std::map<std::string, c10::IValue>;

// `name` called with the named arguments, every other one at its default.
Stack CallNamed(const std::string& name, const Named& given) {
  const auto dot = name.find('.');
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
      name.substr(0, dot).c_str(), dot == std::string::npos ? "" : name.substr(dot + 1).c_str());
  Stack args;
  for (const c10::Argument& a : op.schema().arguments()) {
    auto it = given.find(a.name());
    args.push_back(it != given.end() ? it->second : *a.default_value());
  }
  op.callBoxed(&args);
  return args;
}

std::vector<at::Tensor> Outs(const Stack& s) { return s.at(0).toTensorVector(); }
c10::List<at::Tensor> L(std::vector<at::Tensor> v) { return c10::List<at::Tensor>(v); }
// A 1-D int64 tensor (group_list).
at::Tensor Longs(std::vector<int64_t> v) { return at::tensor(c10::ArrayRef<int64_t>(v)); }
bool Close(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::allclose(a.to(at::kDouble), b.to(at::kDouble), 1e-12, 1e-12);
}

class NpuMoeTest : public NpuReferenceTest {};

// The call as the agent records it: every argument, the omitted ones at their defaults.
v1::ApiCall Recorded(const std::string& name, const std::string& overload, Stack args,
                     const std::function<void(Stack&)>& tamper = nullptr) {
  const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  const auto& schema = op.schema();
  for (std::size_t i = args.size(); i < schema.arguments().size(); ++i) {
    args.push_back(*schema.arguments()[i].default_value());
  }
  return testing::BuildCall(name, overload, std::move(args), v1::PHASE_FORWARD, tamper);
}

TEST_F(NpuMoeTest, GroupedMatmulEveryFormEqualsOneGemmPerGroup) {
  const std::vector<int64_t> sizes = {5, 0, 7};  // an expert may get no token
  const at::Tensor x = at::randn({12, 8}, at::kDouble);
  std::vector<at::Tensor> w;
  for (int e = 0; e < 3; ++e) w.push_back(at::randn({8, 6}, at::kDouble));
  std::vector<at::Tensor> expected;
  int64_t offset = 0;
  for (int e = 0; e < 3; ++e) {
    expected.push_back(at::mm(x.narrow(0, offset, sizes[e]), w[e]));
    offset += sizes[e];
  }
  const at::Tensor joined = at::cat(expected, 0);
  const at::Tensor ends = Longs({5, 5, 12});
  const at::Tensor counts = Longs({5, 0, 7});
  // Master's form: group_list a tensor of cumulative ends or of sizes; one weight per expert or
  // one [E, K, N] tensor; one output or one per group.
  for (const auto& [list, type] : {std::pair{ends, int64_t{0}}, std::pair{counts, int64_t{1}}}) {
    const Named args{{"x", L({x})},
                     {"weight", L(w)},
                     {"group_list", list},
                     {"group_list_type", type},
                     {"group_type", int64_t{0}},
                     {"split_item", int64_t{3}}};
    EXPECT_TRUE(Close(Outs(CallNamed("npu::npu_grouped_matmul", args))[0], joined)) << type;
    Named stacked = args;
    stacked["weight"] = L({at::stack(w)});
    stacked["split_item"] = int64_t{0};
    const std::vector<at::Tensor> per_group = Outs(CallNamed("npu::npu_grouped_matmul", stacked));
    ASSERT_EQ(per_group.size(), 3u);
    for (int e = 0; e < 3; ++e) EXPECT_TRUE(Close(per_group[e], expected[e])) << e;
  }
  // `.List` and the older releases' forms (int[] cumulative ends).
  const c10::List<int64_t> int_ends({5, 5, 12});
  for (const char* form : {"npu::npu_grouped_matmul.List", "npu::npu_grouped_matmul.release_6_0"}) {
    const Named args{
        {"x", L({x})}, {"weight", L(w)}, {"group_list", int_ends}, {"split_item", int64_t{2}}};
    EXPECT_TRUE(Close(Outs(CallNamed(form, args))[0], joined)) << form;
  }
  const Named b70{{"x", L({x})},
                  {"weight", L(w)},
                  {"group_list", ends},
                  {"group_type", int64_t{0}},
                  {"split_item", int64_t{3}}};
  EXPECT_TRUE(Close(Outs(CallNamed("npu::npu_grouped_matmul.release_7_0", b70))[0], joined));
  // No grouping: lists of x, weights and biases, pairwise.
  const std::vector<at::Tensor> xs = {at::randn({3, 8}, at::kDouble),
                                      at::randn({4, 5}, at::kDouble)};
  const std::vector<at::Tensor> ws = {at::randn({8, 2}, at::kDouble),
                                      at::randn({5, 7}, at::kDouble)};
  const std::vector<at::Tensor> bs = {at::randn({2}, at::kDouble), at::randn({7}, at::kDouble)};
  const std::vector<at::Tensor> pairs = Outs(
      CallNamed("npu::npu_grouped_matmul",
                {{"x", L(xs)}, {"weight", L(ws)}, {"bias", L(bs)}, {"group_type", int64_t{-1}}}));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(Close(pairs[i], at::mm(xs[i], ws[i]) + bs[i])) << i;
}

// The weights' gradient of an MoE layer: x^T [H, M] and dy [M, N] split along the tokens.
TEST_F(NpuMoeTest, GroupedMatmulOverTheInnerDimensionIsTheWeightsGradient) {
  const at::Tensor xt = at::randn({8, 12}, at::kDouble);
  const at::Tensor dy = at::randn({12, 6}, at::kDouble);
  const at::Tensor dw =
      Outs(CallNamed("npu::npu_grouped_matmul", {{"x", L({xt})},
                                                 {"weight", L({dy})},
                                                 {"group_list", Longs({5, 5, 12})},
                                                 {"group_type", int64_t{2}},
                                                 {"split_item", int64_t{3}}}))[0];
  ASSERT_EQ(dw.sizes(), (std::vector<int64_t>{3, 8, 6}));
  EXPECT_TRUE(Close(dw[0], at::mm(xt.narrow(1, 0, 5), dy.narrow(0, 0, 5))));
  EXPECT_TRUE(Close(dw[1], at::zeros({8, 6}, at::kDouble)));  // no token: no gradient
  EXPECT_TRUE(Close(dw[2], at::mm(xt.narrow(1, 5, 7), dy.narrow(0, 5, 7))));
}

// bfloat16 in, each group computed in float32 and rounded once: within half a bfloat16 ulp of
// the float64 product, where a bfloat16 accumulation is not.
TEST_F(NpuMoeTest, GroupedMatmulOfBfloat16RoundsOnce) {
  const at::Tensor x = at::randn({16, 256}).to(at::kBFloat16);
  const at::Tensor w = at::randn({2, 256, 32}).to(at::kBFloat16);
  const at::Tensor y = Outs(CallNamed("npu::npu_grouped_matmul", {{"x", L({x})},
                                                                  {"weight", L({w})},
                                                                  {"group_list", Longs({9, 16})},
                                                                  {"group_type", int64_t{0}},
                                                                  {"split_item", int64_t{3}}}))[0];
  ASSERT_EQ(y.scalar_type(), at::kBFloat16);
  const at::Tensor exact =
      at::cat({at::mm(x.narrow(0, 0, 9).to(at::kDouble), w[0].to(at::kDouble)),
               at::mm(x.narrow(0, 9, 7).to(at::kDouble), w[1].to(at::kDouble))});
  // float32's error is far below bfloat16's spacing: nearly every element is the exact product
  // rounded once, and none is more than one bfloat16 spacing from it.
  const at::Tensor rounded = exact.to(at::kBFloat16).to(at::kDouble);
  const at::Tensor off = (y.to(at::kDouble) - rounded).abs();
  EXPECT_GE(off.eq(0).to(at::kDouble).mean().item<double>(), 0.99);
  EXPECT_TRUE(off.le(rounded.abs() * std::ldexp(1.0, -7)).all().item<bool>());
}

TEST_F(NpuMoeTest, QuantizedGroupedMatmulsAreRefusedWithTheReason) {
  const at::Tensor x = at::randn({4, 8}), w = at::randn({8, 2});
  auto refused = [&](const Named& extra, const std::string& word) {
    Named args{{"x", L({x})}, {"weight", L({w})}};
    for (const auto& [k, v] : extra) args[k] = v;
    try {
      CallNamed("npu::npu_grouped_matmul", args);
      ADD_FAILURE() << word << " was not refused";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  refused({{"scale", L({at::ones({2})})}}, "scale");
  refused({{"per_token_scale", L({at::ones({4})})}}, "per_token_scale");
  refused({{"act_type", int64_t{5}}}, "act_type");
  refused({{"output_dtype", int64_t{1}}}, "output_dtype");
  refused({{"group_list", Longs({3, 2})}, {"weight", L({w, w})}, {"group_type", int64_t{0}}},
          "must not decrease");
}

// torch_npu's documented equivalents, as loops.
TEST_F(NpuMoeTest, RoutingOpsFollowTorchNpusDocumentedEquivalents) {
  const int64_t n = 6, k = 2, h = 4, experts = 5;
  const at::Tensor x = at::randn({n, h}, at::kDouble);
  const at::Tensor expert = at::randint(0, experts, {n, k}, at::kInt);
  const at::Tensor row_idx = at::arange(n * k, at::kInt).reshape({k, n}).t().contiguous();
  const Stack r = Call("npu::npu_moe_init_routing", {x, row_idx, expert, int64_t{4}});
  // Stable sort by expert of the slots j = i * k + c.
  std::vector<int64_t> slots(n * k);
  for (int64_t j = 0; j < n * k; ++j) slots[j] = j;
  const auto* e = expert.data_ptr<int32_t>();
  std::stable_sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return e[a] < e[b]; });
  const at::Tensor expanded_x = T(r, 0), expanded_row = T(r, 1), expanded_expert = T(r, 2);
  ASSERT_EQ(expanded_x.size(0), 4 * k);
  for (int64_t i = 0; i < n * k; ++i) {
    const int64_t src = row_idx.data_ptr<int32_t>()[slots[i]];
    EXPECT_EQ(expanded_expert[i].item<int64_t>(), e[slots[i]]) << i;
    EXPECT_EQ(expanded_row[src].item<int64_t>(), i) << i;
    if (i < 4 * k) {
      EXPECT_TRUE(Close(expanded_x[i], x[src % n])) << i;
    }
  }
  // Each expert's end in the sorted order.
  const at::Tensor ends =
      T(Call("npu::npu_moe_compute_expert_tokens", {expanded_expert, experts}), 0);
  for (int64_t x_e = 0, seen = 0; x_e < experts; ++x_e) {
    for (int64_t i = 0; i < n * k; ++i) seen += e[slots[i]] == x_e;
    EXPECT_EQ(ends[x_e].item<int64_t>(), seen) << x_e;
  }
  // out[i] = skip1 + skip2 + sum_c scales[i, c] * (rows[dst[c * n + i]] + bias[expert[i, c]]).
  const at::Tensor rows = at::randn({n * k, h}, at::kDouble);
  const at::Tensor skip1 = at::randn({n, h}, at::kDouble), skip2 = at::randn({n, h}, at::kDouble);
  const at::Tensor bias = at::randn({experts, h}, at::kDouble);
  const at::Tensor scales = at::rand({n, k}, at::kDouble);
  const at::Tensor dst = at::randperm(n * k, at::kLong).to(at::kInt);
  const at::Tensor out =
      T(Call("npu::npu_moe_finalize_routing", {rows, skip1, skip2, bias, scales, dst, expert}), 0);
  for (int64_t i = 0; i < n; ++i) {
    at::Tensor want = skip1[i] + skip2[i];
    for (int64_t c = 0; c < k; ++c) {
      want = want + scales[i][c] *
                        (rows[dst[c * n + i].item<int64_t>()] + bias[expert[i][c].item<int64_t>()]);
    }
    EXPECT_TRUE(at::allclose(out[i], want, 1e-12, 1e-12)) << i;
  }
}

// torch_npu's index convention (op-plugin test/test_custom_ops/
// test_npu_moe_token_permute_and_unpermute.py and its _backward.py): the fused permute's
// sorted_indices is argsort of Megatron's stable sort order (each slot's permuted row), and the
// fused unpermute of s equals Megatron's unpermute (index_copy) of argsort(s); the _grad ops of
// every release form are autograd's gradients of that composition. Permute then unpermute with
// the routing probabilities is each token times the sum of its probabilities.
TEST_F(NpuMoeTest, TokenPermutationFollowsTorchNpusConventionAndItsGradients) {
  const int64_t n = 5, topk = 2, h = 3;
  const at::Tensor tokens = at::randn({n, h}, at::kDouble);
  const at::Tensor indices = at::randint(0, 4, {n, topk}, at::kLong);
  const at::Tensor probs = at::rand({n, topk}, at::kDouble);
  const Stack p = Call("npu::npu_moe_token_permute", {tokens, indices});
  const at::Tensor permuted = T(p, 0), sorted = T(p, 1);
  const at::Tensor order = at::argsort(indices.reshape(-1), /*stable=*/true, 0, false);
  EXPECT_EQ(sorted.scalar_type(), at::kInt);
  EXPECT_TRUE(at::equal(sorted.to(at::kLong), at::argsort(order, /*stable=*/true, 0, false)));
  EXPECT_TRUE(Close(permuted, tokens.index_select(0, order.div(topk, "floor"))));
  const at::Tensor back = T(Call("npu::npu_moe_token_unpermute", {permuted, sorted, probs}), 0);
  EXPECT_TRUE(Close(back, tokens * probs.sum(1, true)));

  // Autograd through Megatron's composition: permute = index_select by the sort order,
  // unpermute = index_copy to argsort(s) (= the order), weight, sum.
  const at::Tensor t = tokens.clone().requires_grad_(true);
  const at::Tensor pr = probs.clone().requires_grad_(true);
  const at::Tensor perm = t.index_select(0, order.div(topk, "floor"));
  const at::Tensor perm_leaf = perm.detach().requires_grad_(true);
  const at::Tensor unperm =
      (at::zeros({n * topk, h}, at::kDouble).index_copy(0, order, perm_leaf).reshape({n, topk, h}) *
       pr.unsqueeze(-1))
          .sum(1);
  const at::Tensor dy = at::randn({n, h}, at::kDouble);
  const auto g = torch::autograd::grad({unperm}, {perm_leaf, pr}, {dy});
  const Stack ug = Call("npu::npu_moe_token_unpermute_grad", {permuted, dy, sorted, probs});
  EXPECT_TRUE(Close(T(ug, 0), g[0])) << "d permuted_tokens";
  EXPECT_TRUE(Close(T(ug, 1), g[1])) << "d probs";
  const Stack ug2 = CallNamed("npu::npu_moe_token_unpermute_grad_v2",
                              {{"grad_unpermuted_tokens", dy},
                               {"sorted_indices", sorted},
                               {"permuted_tokens_size_0", n * topk},
                               {"permuted_tokens_dtype", static_cast<int64_t>(at::kDouble)},
                               {"probs", probs},
                               {"permuted_tokens", permuted}});
  EXPECT_TRUE(Close(T(ug2, 0), g[0])) << "v2: d permuted_tokens";
  EXPECT_TRUE(Close(T(ug2, 1), g[1])) << "v2: d probs";
  const at::Tensor dperm = at::randn({n * topk, h}, at::kDouble);
  const auto gt = torch::autograd::grad({perm}, {t}, {dperm});
  EXPECT_TRUE(
      Close(T(Call("npu::npu_moe_token_permute_grad", {tokens, dperm, indices, sorted}), 0), gt[0]))
      << "d tokens";
  EXPECT_TRUE(Close(T(Call("npu::npu_moe_token_permute_grad_v2",
                           {dperm, sorted, n, static_cast<int64_t>(at::kDouble), topk}),
                      0),
                    gt[0]))
      << "v2: d tokens";
  // Without probs there is no probabilities' gradient: undefined (torch_npu's uninitialised
  // 0-dim tensor there is then not compared).
  const Stack no_probs =
      Call("npu::npu_moe_token_unpermute_grad",
           {permuted, at::randn({n * topk, h}, at::kDouble), sorted, c10::IValue()});
  EXPECT_FALSE(T(no_probs, 1).defined());
}

// Through the server's checker, as an agent's call arrives: every MoE op replayed and judged
// (not SKIP as unknown); a torch_npu 6.0 call of npu_grouped_matmul (int[] group_list where the
// newest form takes a Tensor) replayed through the release_6_0 form under its own name, a planted
// error in it found; arguments that fit no form rejected, naming the newest.
TEST_F(NpuMoeTest, TheCheckerReplaysAndJudgesEveryMoeCall) {
  server::CheckerOptions options;
  options.bench_device = "cpu";
  auto checker = CallChecker::Create(options, StandardsTable::Default());
  ASSERT_TRUE(checker.ok()) << checker.status();
  const at::Tensor x = at::randn({12, 16}), tokens = at::randn({6, 16});
  const std::vector<at::Tensor> w = {at::randn({16, 8}), at::randn({16, 8}), at::randn({16, 8})};
  const at::Tensor expert = at::randint(0, 3, {6, 2}, at::kInt);
  const at::Tensor row_idx = at::arange(12, at::kInt).reshape({2, 6}).t().contiguous();
  const at::Tensor sorted = at::argsort(expert.reshape(-1).to(at::kLong), true, 0, false);
  const c10::IValue none;
  struct Case {
    const char* overload;
    Stack args;
  };
  const std::vector<std::pair<std::string, Case>> calls = {
      {"npu::npu_grouped_matmul",
       {"",
        {L({x}), L(w), none, none, none, none, none, none, Longs({4, 9, 12}), none, none, none,
         int64_t{3}, int64_t{0}}}},
      {"npu::npu_grouped_matmul",
       {"List",
        {L({x}), L(w), none, none, none, none, none, none, c10::List<int64_t>({4, 9, 12})}}},
      {"npu::npu_moe_init_routing", {"", {tokens, row_idx, expert, int64_t{6}}}},
      {"npu::npu_moe_compute_expert_tokens",
       {"", {std::get<0>(expert.reshape(-1).sort()).contiguous(), int64_t{3}}}},
      {"npu::npu_moe_finalize_routing",
       {"",
        {at::randn({12, 16}), tokens, none, none, at::rand({6, 2}),
         at::randperm(12, at::kLong).to(at::kInt), expert}}},
      {"npu::npu_moe_token_permute", {"", {tokens, expert.to(at::kLong)}}},
      {"npu::npu_moe_token_unpermute",
       {"", {at::randn({12, 16}), sorted.to(at::kInt), at::rand({6, 2})}}},
      {"npu::npu_moe_token_permute_grad",
       {"", {tokens, at::randn({12, 16}), expert.to(at::kLong), sorted.to(at::kInt)}}},
      {"npu::npu_moe_token_unpermute_grad",
       {"", {at::randn({12, 16}), at::randn({6, 16}), sorted.to(at::kInt), at::rand({6, 2})}}},
      {"npu::npu_moe_token_permute_grad_v2",
       {"",
        {at::randn({12, 16}), sorted.to(at::kInt), int64_t{6}, static_cast<int64_t>(at::kFloat),
         int64_t{2}}}},
      {"npu::npu_moe_token_unpermute_grad_v2",
       {"",
        {at::randn({6, 16}), sorted.to(at::kInt), int64_t{12}, static_cast<int64_t>(at::kFloat),
         at::rand({6, 2}), false, none, at::randn({12, 16})}}},
      {"npu::_npu_moe_token_unpermute",
       {"", {at::randn({12, 16}), sorted.to(at::kInt), at::rand({6, 2})}}},
  };
  for (const auto& [op, c] : calls) {
    const CallOutcome r = (*checker)->Judge(Recorded(op, c.overload, c.args));
    EXPECT_EQ(r.status, CheckStatus::kPass) << op << "." << c.overload << ": " << r.message;
  }
  // torch_npu 6.0's form, sent under the operator's own name.
  const Stack old_form = {
      L({x}), L(w), none, none, none, none, none, c10::List<int64_t>({4, 9, 12}), int64_t{2}, none};
  v1::ApiCall call = Recorded("npu::npu_grouped_matmul", "release_6_0", old_form);
  call.set_overload("");
  CallOutcome r = (*checker)->Judge(call);
  EXPECT_EQ(r.status, CheckStatus::kPass) << r.message;
  call = Recorded("npu::npu_grouped_matmul", "release_6_0", old_form, [](Stack& out) {
    std::vector<at::Tensor> o = out[0].toTensorVector();
    o[0].narrow(0, 4, 5).mul_(1.01);  // the second expert's rows 1% off
    out[0] = c10::IValue(c10::List<at::Tensor>(o));
  });
  call.set_overload("");
  r = (*checker)->Judge(call);
  EXPECT_EQ(r.status, CheckStatus::kError) << r.message;
  // No form takes a string for group_list: rejected, naming the newest form.
  v1::ApiCall bad = Recorded("npu::npu_grouped_matmul", "release_6_0", old_form);
  bad.set_overload("");
  bad.mutable_inputs(7)->set_string_value("4,9,12");
  r = (*checker)->Judge(bad);
  EXPECT_EQ(r.status, CheckStatus::kRejected) << r.message;
  EXPECT_NE(r.message.find("int? per_token_scale_dtype"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace parity::server
