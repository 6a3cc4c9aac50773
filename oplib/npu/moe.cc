// torch_npu's MoE operators: npu_grouped_matmul in the forms of three op-plugin releases (the
// expert GEMMs: by list, by rows of one x (group_type 0) and by the shared inner dimension
// (group_type 2, the weights' gradient)), the routing family (npu_moe_init_routing,
// npu_moe_compute_expert_tokens, npu_moe_finalize_routing) and the fused token permutation
// (npu_moe_token_permute / npu_moe_token_unpermute and their _grad ops in the forms of op-plugin
// 26.0.0, 26.1.0 and master), in torch_npu's index convention (SlotsOf), not Megatron's.
//
// GEMMs of float16/bfloat16 inputs are computed in float32 and rounded once (the cube unit's
// accumulation), as every GEMM reference here. Quantized and pseudo-quantized calls (scale,
// offset, antiquant_*, per_token_scale, the activation_* inputs, a fused activation) are
// refused: the call is SKIP with the reason.
#include <algorithm>
#include <string>
#include <vector>

#include "oplib/npu/kernels.h"

namespace parity::oplib::npu {
namespace {

struct GroupedMatmulCall {
  std::vector<at::Tensor> x, weight, bias;
  std::optional<std::vector<int64_t>> group_list;
  int64_t group_list_type = 0;  // 0: cumulative ends; 1: sizes
  std::optional<int64_t> group_type;
  int64_t split_item = 0;
  std::optional<at::ScalarType> output_dtype;
};

std::string ArgName(const Args& a, std::size_t i) { return a.op().schema().arguments()[i].name(); }

// Arguments of the quantized forms: each must be absent (None or an empty list).
void RefuseQuantized(const Args& a, std::initializer_list<std::size_t> lists) {
  for (std::size_t i : lists) {
    TORCH_CHECK(a.tensors(i).empty(), a.op_name(), ": ", ArgName(a, i),
                " is given: quantized grouped matmuls are not replayed");
  }
}

void RefuseSet(const Args& a, std::initializer_list<std::size_t> optionals) {
  for (std::size_t i : optionals) {
    TORCH_CHECK(a.at(i).isNone(), a.op_name(), ": ", ArgName(a, i), " = ", a.at(i),
                " is not replayed (quantized or low-bit grouped matmuls)");
  }
}

std::optional<std::vector<int64_t>> GroupListTensor(const std::optional<at::Tensor>& t) {
  if (!t) return std::nullopt;
  const at::Tensor v = t->to(at::kCPU, at::kLong).contiguous().reshape(-1);
  return std::vector<int64_t>(v.data_ptr<int64_t>(), v.data_ptr<int64_t>() + v.numel());
}

// Each group's size along the grouped axis.
std::vector<int64_t> GroupSizes(const std::string& op, const std::vector<int64_t>& list,
                                int64_t type) {
  TORCH_CHECK(type == 0 || type == 1, op, ": group_list_type ", type,
              " is not replayed (2: [index, size] pairs, int8 calls only)");
  std::vector<int64_t> sizes;
  int64_t previous = 0;
  for (int64_t v : list) {
    const int64_t size = type == 0 ? v - previous : v;
    TORCH_CHECK(size >= 0, op, ": group_list ", c10::IntArrayRef(list),
                type == 0 ? " must not decrease (cumulative ends, group_list_type 0)"
                          : " must not be negative (sizes, group_list_type 1)");
    sizes.push_back(size);
    previous = type == 0 ? v : previous + v;
  }
  return sizes;
}

at::Tensor Gemm(const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias,
                at::ScalarType out) {
  at::Tensor y = at::matmul(Upcast(x), Upcast(w));
  if (bias != nullptr) y = y + Upcast(*bias);
  return y.to(out);
}

// One weight tensor [E, K, N] (and bias [E, N]) holds E groups' weights.
std::vector<at::Tensor> PerGroup(const std::vector<at::Tensor>& list, int64_t dims) {
  if (list.size() == 1 && list[0].dim() == dims + 1) return list[0].unbind(0);
  return list;
}

Stack AsList(std::vector<at::Tensor> outs) {
  c10::List<at::Tensor> list;
  for (at::Tensor& t : outs) list.push_back(std::move(t));
  return {c10::IValue(std::move(list))};
}

// group_type 2, the weights' gradient of an MoE layer: x [M, K] and weight [K, N] split along K
// into the groups.
Stack InnerDimensionGroups(const std::string& op, const GroupedMatmulCall& c,
                           at::ScalarType out_type, bool one_output) {
  std::vector<at::Tensor> outs;
  TORCH_CHECK(c.x.size() == 1 && c.weight.size() == 1 && c.x[0].dim() == 2 &&
                  c.weight[0].dim() == 2 && c.group_list,
              op, ": group_type 2 takes one 2-D x, one 2-D weight and a group_list");
  TORCH_CHECK(c.bias.empty(), op, ": group_type 2 takes no bias");
  const std::vector<int64_t> sizes = GroupSizes(op, *c.group_list, c.group_list_type);
  int64_t offset = 0;
  for (int64_t size : sizes) {
    TORCH_CHECK(offset + size <= c.x[0].size(1) && offset + size <= c.weight[0].size(0), op,
                ": group_list covers ", offset + size, " of the inner dimension, x has ",
                c.x[0].size(1), " and weight ", c.weight[0].size(0));
    outs.push_back(Gemm(c.x[0].narrow(1, offset, size), c.weight[0].narrow(0, offset, size),
                        nullptr, out_type));
    offset += size;
  }
  if (one_output) return AsList({at::stack(outs)});
  return AsList(std::move(outs));
}

Stack RunGroupedMatmul(const std::string& op, GroupedMatmulCall c) {
  TORCH_CHECK(!c.x.empty() && !c.weight.empty(), op, ": x and weight must not be empty");
  const int64_t type = c.group_type.value_or(c.group_list ? 0 : -1);
  TORCH_CHECK(type == -1 || type == 0 || type == 2, op, ": group_type ", type,
              " (-1: none, 0: rows of x, 2: the inner dimension)");
  TORCH_CHECK(c.split_item >= 0 && c.split_item <= 3, op, ": split_item ", c.split_item);
  const at::ScalarType out_type = c.output_dtype.value_or(c.x[0].scalar_type());
  const bool one_output = c.split_item >= 2;
  std::vector<at::Tensor> outs;
  if (type == 2) return InnerDimensionGroups(op, c, out_type, one_output);
  const std::vector<at::Tensor> weights = PerGroup(c.weight, 2);
  const std::vector<at::Tensor> biases = PerGroup(c.bias, 1);
  TORCH_CHECK(biases.empty() || biases.size() == weights.size(), op, ": ", biases.size(),
              " biases for ", weights.size(), " weights");
  auto bias_of = [&](std::size_t g) { return biases.empty() ? nullptr : &biases[g]; };
  if (type == -1 || !c.group_list) {
    TORCH_CHECK(c.x.size() == weights.size(), op, ": ", c.x.size(), " x for ", weights.size(),
                " weights without a group_list");
    for (std::size_t g = 0; g < weights.size(); ++g) {
      outs.push_back(Gemm(c.x[g], weights[g], bias_of(g), out_type));
    }
    if (one_output) return AsList({at::cat(outs, 0)});
    return AsList(std::move(outs));
  }
  // group_type 0: the rows of one x, in groups, each through its expert's weight.
  const at::Tensor x = c.x.size() == 1 ? c.x[0] : at::cat(c.x, 0);
  TORCH_CHECK(x.dim() == 2, op, ": group_type 0 takes 2-D x, got ", x.sizes());
  const std::vector<int64_t> sizes = GroupSizes(op, *c.group_list, c.group_list_type);
  TORCH_CHECK(sizes.size() == weights.size(), op, ": group_list has ", sizes.size(), " groups for ",
              weights.size(), " weights");
  int64_t offset = 0;
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    TORCH_CHECK(offset + sizes[g] <= x.size(0), op, ": group_list covers ", offset + sizes[g],
                " rows of x's ", x.size(0));
    outs.push_back(Gemm(x.narrow(0, offset, sizes[g]), weights[g], bias_of(g), out_type));
    offset += sizes[g];
  }
  if (!one_output) return AsList(std::move(outs));
  // Rows after the last group belong to no expert: zeros (MindSpeed's group_list always ends at
  // x's last row).
  if (offset < x.size(0)) {
    outs.push_back(
        at::zeros({x.size(0) - offset, weights[0].size(-1)}, x.options().dtype(out_type)));
  }
  return AsList({at::cat(outs, 0)});
}

std::optional<at::ScalarType> OptionalDtype(const Args& a, std::size_t i) {
  const std::optional<int64_t> v = a.optional_i64(i);
  if (!v) return std::nullopt;
  return static_cast<at::ScalarType>(*v);
}

int64_t OrZero(const std::optional<int64_t>& v) { return v.value_or(0); }

// x, weight and bias: the first three arguments of every form.
GroupedMatmulCall Lists(const Args& a) {
  GroupedMatmulCall c;
  c.x = a.tensors(0);
  c.weight = a.tensors(1);
  c.bias = a.tensors(2);
  return c;
}

}  // namespace

namespace {

// The forms from op-plugin 7.0 on share their first 16 arguments: x, weight, bias, the quantized
// ones (3-7), group_list (8), the activation inputs (9-11), split_item, group_type,
// group_list_type and act_type (12-15). `tensor_list`: group_list is a Tensor (else int[]).
GroupedMatmulCall FromNewerForm(const Args& a, bool tensor_list) {
  RefuseQuantized(a, {3, 4, 5, 6, 7, 9, 10, 11});
  TORCH_CHECK(OrZero(a.optional_i64(15)) == 0, a.op_name(), ": act_type ", a.at(15),
              " (a fused activation) is not replayed");
  GroupedMatmulCall c = Lists(a);
  c.group_list = tensor_list ? GroupListTensor(a.optional_tensor(8)) : a.optional_ints(8);
  c.split_item = OrZero(a.optional_i64(12));
  c.group_type = a.optional_i64(13);
  c.group_list_type = OrZero(a.optional_i64(14));
  return c;
}

}  // namespace

// op-plugin master (torch_npu 26.x): group_list a Tensor; output_dtype and the low-bit dtypes
// as ints (refused when given).
Stack GroupedMatmul(const Args& a) {
  RefuseSet(a, {17, 18, 19, 20, 21});
  return RunGroupedMatmul(a.op_name(), FromNewerForm(a, /*tensor_list=*/true));
}

// `.List` (every release from 7.0): group_list as int[] (cumulative ends), output_dtype a
// ScalarType.
Stack GroupedMatmulList(const Args& a) {
  GroupedMatmulCall c = FromNewerForm(a, /*tensor_list=*/false);
  c.output_dtype = OptionalDtype(a, 16);
  return RunGroupedMatmul(a.op_name(), std::move(c));
}

// op-plugin 7.0.0: as master up to act_type, then output_dtype as a ScalarType.
Stack GroupedMatmulRelease70(const Args& a) {
  GroupedMatmulCall c = FromNewerForm(a, /*tensor_list=*/true);
  c.output_dtype = OptionalDtype(a, 16);
  return RunGroupedMatmul(a.op_name(), std::move(c));
}

// op-plugin 6.0.x: (x, weight, bias, scale, offset, antiquant_scale, antiquant_offset,
// int[]? group_list, split_item, output_dtype); a group_list groups the rows of x.
Stack GroupedMatmulRelease60(const Args& a) {
  RefuseQuantized(a, {3, 4, 5, 6});
  GroupedMatmulCall c = Lists(a);
  c.group_list = a.optional_ints(7);
  c.split_item = OrZero(a.optional_i64(8));
  c.output_dtype = OptionalDtype(a, 9);
  return RunGroupedMatmul(a.op_name(), std::move(c));
}

// The tokens sorted by expert (stable): expanded_expert_idx the sorted experts,
// expanded_row_idx[source slot] = its position in that order, expanded_x the first
// min(active_num, rows) * k of those rows (torch_npu's documented equivalent).
Stack MoeInitRouting(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const at::Tensor& row_idx = a.tensor(1);
  const at::Tensor& expert_idx = a.tensor(2);
  const int64_t active_num = a.i64(3);
  TORCH_CHECK(x.dim() == 2 && expert_idx.dim() == 2 && row_idx.sizes() == expert_idx.sizes() &&
                  expert_idx.size(0) == x.size(0),
              a.op_name(), ": x [N, H], row_idx and expert_idx [N, k] expected, got ", x.sizes(),
              ", ", row_idx.sizes(), ", ", expert_idx.sizes());
  TORCH_CHECK(active_num >= 0, a.op_name(), ": active_num ", active_num);
  const int64_t n = x.size(0), k = expert_idx.size(1);
  const at::Tensor order =
      at::argsort(expert_idx.reshape(-1).to(at::kLong), /*stable=*/true, 0, false);
  const at::Tensor expanded_expert = expert_idx.reshape(-1).index_select(0, order);
  const at::Tensor dst_to_src = row_idx.reshape(-1).to(at::kLong).index_select(0, order);
  TORCH_CHECK(n * k == 0 || (dst_to_src.min().item<int64_t>() >= 0 &&
                             dst_to_src.max().item<int64_t>() < n * k),
              a.op_name(), ": row_idx holds values outside [0, N * k)");
  const at::Tensor expanded_row =
      at::zeros({n * k}, row_idx.options().dtype(at::kInt))
          .index_copy(0, dst_to_src, at::arange(n * k, row_idx.options().dtype(at::kInt)));
  const int64_t active = std::min(active_num, n) * k;
  const at::Tensor expanded_x = x.index_select(0, dst_to_src.narrow(0, 0, active).remainder(n));
  return Results({expanded_x, expanded_row, expanded_expert.to(at::kInt)});
}

// For each expert, the end of its rows in the expert-sorted order (a binary search on the NPU).
Stack MoeComputeExpertTokens(const Args& a) {
  const at::Tensor& sorted = a.tensor(0);
  const int64_t experts = a.i64(1);
  TORCH_CHECK(sorted.dim() == 1 && experts > 0, a.op_name(), ": a 1-D sorted expert list and ",
              "num_expert > 0 expected");
  const at::Tensor e = sorted.to(at::kLong);
  TORCH_CHECK(e.numel() == 0 || (e.min().item<int64_t>() >= 0 && e.max().item<int64_t>() < experts),
              a.op_name(), ": expert ids outside [0, ", experts, ")");
  const at::Tensor counts = at::bincount(e, {}, experts);
  return Results({counts.cumsum(0).to(sorted.scalar_type())});
}

// out[i] = skip1[i] + skip2[i] + sum_j scales[i, j] * (rows[src_to_dst[j * N + i]]
//          + bias[expert[i, j]]) (torch_npu's documented equivalent, where a row index of -1
//          is a zero row; drop_pad_mode 0 only).
Stack MoeFinalizeRouting(const Args& a) {
  const at::Tensor& rows_in = a.tensor(0);
  const std::optional<at::Tensor> skip1 = a.optional_tensor(1), skip2 = a.optional_tensor(2),
                                  bias = a.optional_tensor(3), scales = a.optional_tensor(4);
  const at::Tensor& src_to_dst = a.tensor(5);
  const std::optional<at::Tensor> experts = a.optional_tensor(6);
  TORCH_CHECK(OrZero(a.optional_i64(7)) == 0, a.op_name(), ": drop_pad_mode ", a.at(7),
              " is not replayed");
  const int64_t k = scales ? scales->size(1) : a.optional_i64(8).value_or(1);
  const int64_t nk = src_to_dst.numel();
  TORCH_CHECK(k > 0 && nk % k == 0, a.op_name(), ": ", nk, " rows for k = ", k);
  const int64_t n = nk / k;
  const int64_t h = rows_in.size(-1);
  const at::Tensor rows = Upcast(rows_in).reshape({-1, h});
  at::Tensor out = at::zeros({n, h}, rows.options());
  if (skip1) out = out + Upcast(*skip1);
  if (skip2) out = out + Upcast(*skip2);
  // A row index of -1 is a dropped slot, a zero row (the doc's equivalent computation).
  const at::Tensor dst = src_to_dst.to(at::kLong).reshape(-1);
  const at::Tensor dropped = dst == -1;
  const at::Tensor safe_dst = at::where(dropped, at::zeros_like(dst), dst);
  for (int64_t j = 0; j < k; ++j) {
    at::Tensor r = rows.index_select(0, safe_dst.narrow(0, j * n, n)) *
                   dropped.narrow(0, j * n, n).logical_not().unsqueeze(1).to(rows.scalar_type());
    if (bias) {
      TORCH_CHECK(experts, a.op_name(), ": bias needs export_for_source_row");
      r = r + Upcast(*bias).index_select(0, experts->to(at::kLong).select(1, j));
    }
    if (scales) r = r * Upcast(*scales).narrow(1, j, 1);
    out = out + r;
  }
  return Results({out.to(rows_in.scalar_type())});
}

namespace {

int64_t TopK(const at::Tensor& indices) { return indices.dim() == 1 ? 1 : indices.size(1); }

// The fused kernels' sorted_indices (torch_npu's convention, not Megatron's): for each routing
// slot j (token j / topk's (j % topk)-th expert choice), the row of the permuted tokens that holds
// it, i.e. the inverse of the stable argsort of the flattened indices. op-plugin's own test
// (test/test_custom_ops/test_npu_moe_token_permute_and_unpermute.py) compares the fused op's
// sorted_indices with argsort of the Megatron golden's, and unpermutes with argsort of the fused
// ones: the fused unpermute gathers, out[j] = permuted[s[j]]. A slot whose row is at or past
// `rows` was dropped (num_out_tokens) and contributes nothing.
struct Slots {
  at::Tensor row;   // [slots] int64: the permuted row of each slot, `rows` where it was dropped
  at::Tensor kept;  // [slots] bool: the slot has a row
};

Slots SlotsOf(const at::Tensor& sorted_indices, int64_t rows, const std::string& op) {
  const at::Tensor s = sorted_indices.to(at::kLong).reshape(-1);
  TORCH_CHECK(s.numel() == 0 || s.min().item<int64_t>() >= 0, op,
              ": sorted_indices holds a negative row");
  const at::Tensor kept = s < rows;
  return {at::where(kept, s, at::zeros_like(s)), kept};
}

// rows[s[j]] for each slot j, zeros for a dropped slot: [slots, H] in the rows' dtype.
at::Tensor Gather(const at::Tensor& rows, const Slots& slots) {
  const at::Tensor g = rows.index_select(0, slots.row);
  return g * slots.kept.unsqueeze(1).to(g.scalar_type());
}

void RefusePadded(const Args& a, std::size_t i) {
  TORCH_CHECK(!a.boolean(i), a.op_name(), ": padded_mode is not replayed");
}

// d tokens[t] = sum over t's topk slots j of grad_permuted[s[j]].
at::Tensor PermuteGradOf(const at::Tensor& grad, const at::Tensor& sorted_indices, int64_t tokens,
                         int64_t topk, at::ScalarType out, const std::string& op) {
  TORCH_CHECK(topk > 0 && sorted_indices.numel() == tokens * topk, op, ": ", sorted_indices.numel(),
              " sorted_indices for ", tokens, " tokens of topk ", topk);
  const at::Tensor g = Upcast(grad).reshape({grad.size(0), -1});
  const at::Tensor per_slot = Gather(g, SlotsOf(sorted_indices, grad.size(0), op));
  return per_slot.reshape({tokens, topk, -1}).sum(1).to(out);
}

// d permuted[s[j]] = d out[j / topk] * probs[j]; d probs[j] = <permuted[s[j]], d out[j / topk]>.
// Without probs the second output is undefined: there is no such gradient (torch_npu returns an
// uninitialised 0-dim tensor there, which is not compared).
Stack UnpermuteGradOf(const at::Tensor& grad, const at::Tensor& sorted_indices, int64_t rows,
                      at::ScalarType out, const std::optional<at::Tensor>& probs,
                      const std::optional<at::Tensor>& permuted, const std::string& op) {
  const int64_t topk = probs ? probs->size(-1) : 1;
  const int64_t slots = sorted_indices.numel();
  TORCH_CHECK(slots == grad.size(0) * topk, op, ": ", slots, " sorted_indices for ", grad.size(0),
              " unpermuted tokens of topk ", topk);
  const Slots s = SlotsOf(sorted_indices, rows, op);
  at::Tensor g = Upcast(grad).reshape({grad.size(0), 1, -1}).expand({grad.size(0), topk, -1});
  g = g.reshape({slots, -1});
  at::Tensor d_slot = probs ? g * Upcast(*probs).reshape({slots, 1}) : g;
  d_slot = d_slot * s.kept.unsqueeze(1).to(d_slot.scalar_type());
  const at::Tensor d_permuted =
      at::zeros({rows, g.size(1)}, g.options()).index_add(0, s.row, d_slot).to(out);
  if (!probs) return Results({d_permuted, at::Tensor()});
  TORCH_CHECK(permuted.has_value() && permuted->defined(), op,
              ": the probabilities' gradient needs permuted_tokens");
  const at::Tensor per_slot = Gather(Upcast(*permuted).reshape({permuted->size(0), -1}), s);
  const at::Tensor d_probs = (per_slot * g).sum(1).reshape(probs->sizes());
  return Results({d_permuted, d_probs.to(probs->scalar_type())});
}

}  // namespace

// The tokens ordered by expert (a stable sort of the flattened indices), the first
// num_out_tokens rows kept (all when absent; num_out_tokens <= 0 drops -num_out_tokens, as
// op-plugin sizes the output); sorted_indices in the fused convention (SlotsOf).
Stack MoeTokenPermute(const Args& a) {
  const at::Tensor& tokens = a.tensor(0);
  const at::Tensor& indices = a.tensor(1);
  const int64_t num_out = a.optional_i64(2).value_or(0);
  RefusePadded(a, 3);
  const int64_t topk = TopK(indices);
  const int64_t flat = indices.numel();
  TORCH_CHECK(indices.size(0) == tokens.size(0), a.op_name(), ": ", indices.size(0),
              " index rows for ", tokens.size(0), " tokens");
  const int64_t kept = num_out > 0 ? std::min(num_out, flat) : std::max<int64_t>(num_out + flat, 0);
  const at::Tensor order =
      at::argsort(indices.reshape(-1).to(at::kLong), /*stable=*/true, 0, false);
  const at::Tensor permuted = tokens.reshape({tokens.size(0), -1})
                                  .index_select(0, order.narrow(0, 0, kept).div(topk, "floor"));
  const at::Tensor inverse =
      at::empty_like(order).index_copy(0, order, at::arange(flat, order.options()));
  return Results({permuted, inverse.to(at::kInt)});
}

// out[t] = sum over t's topk slots j of permuted[s[j]] * probs[t, j % topk] (the fused unpermute
// gathers; op-plugin's golden index_copy's with argsort(s), the same).
Stack MoeTokenUnpermute(const Args& a) {
  const at::Tensor& permuted = a.tensor(0);
  const at::Tensor& sorted_indices = a.tensor(1);
  const std::optional<at::Tensor> probs = a.optional_tensor(2);
  RefusePadded(a, 3);
  const int64_t topk = probs ? probs->size(-1) : 1;
  const int64_t slots = sorted_indices.numel();
  TORCH_CHECK(topk > 0 && slots % topk == 0 && (!probs || probs->numel() == slots), a.op_name(),
              ": ", slots, " sorted_indices for probs of ",
              probs ? probs->sizes() : at::IntArrayRef{});
  const at::Tensor rows = Upcast(permuted).reshape({permuted.size(0), -1});
  at::Tensor per_slot = Gather(rows, SlotsOf(sorted_indices, permuted.size(0), a.op_name()));
  per_slot = per_slot.reshape({slots / topk, topk, -1});
  if (probs) per_slot = per_slot * Upcast(*probs).reshape({slots / topk, topk, 1});
  return Results({per_slot.sum(1).to(permuted.scalar_type())});
}

// _npu_moe_token_unpermute (op-plugin master): the same, and permuted_tokens handed through for
// the backward (not a result: it is the input, or nothing, by CANN version; not compared).
Stack MoeTokenUnpermuteSaving(const Args& a) {
  Stack out = MoeTokenUnpermute(a);
  out.emplace_back(a.tensor(0));
  return out;
}

// npu_moe_token_permute_grad (op-plugin 26.0.0): tokens, grad, indices, sorted_indices.
Stack MoeTokenPermuteGrad(const Args& a) {
  const at::Tensor& tokens = a.tensor(0);
  RefusePadded(a, 4);
  return Results({PermuteGradOf(a.tensor(1), a.tensor(3), tokens.size(0), TopK(a.tensor(2)),
                                a.tensor(1).scalar_type(), a.op_name())
                      .reshape(tokens.sizes())});
}

// npu_moe_token_permute_grad_v2 (26.1.0 and master): grad, sorted_indices, tokens_size_0,
// tokens_dtype, num_topK.
Stack MoeTokenPermuteGradV2(const Args& a) {
  RefusePadded(a, 5);
  return Results({PermuteGradOf(a.tensor(0), a.tensor(1), a.i64(2), a.i64(4),
                                static_cast<at::ScalarType>(a.i64(3)), a.op_name())});
}

// npu_moe_token_unpermute_grad (26.0.0, 26.1.0): permuted_tokens, grad, sorted_indices, probs.
Stack MoeTokenUnpermuteGrad(const Args& a) {
  const at::Tensor& permuted = a.tensor(0);
  RefusePadded(a, 4);
  return UnpermuteGradOf(a.tensor(1), a.tensor(2), permuted.size(0), permuted.scalar_type(),
                         a.optional_tensor(3), permuted, a.op_name());
}

// npu_moe_token_unpermute_grad_v2 (master): grad, sorted_indices, permuted_tokens_size_0,
// permuted_tokens_dtype, probs, padded_mode, restore_shape, permuted_tokens.
Stack MoeTokenUnpermuteGradV2(const Args& a) {
  RefusePadded(a, 5);
  return UnpermuteGradOf(a.tensor(0), a.tensor(1), a.i64(2), static_cast<at::ScalarType>(a.i64(3)),
                         a.optional_tensor(4), a.optional_tensor(7), a.op_name());
}

}  // namespace parity::oplib::npu
