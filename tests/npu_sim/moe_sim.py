"""The simulated NPU's MoE kernels: torch_npu's MoE operators (schemas declared by
libparity_npu_sim.so, from oplib/npu/torch_npu_schemas.json) given CPU kernels written here,
apart from the reference library's (oplib/npu/moe.cc): group boundaries walked in Python, the
tokens' sums by index_add instead of a scatter and a sum, the expert ends by searchsorted.

PARITY_NPU_SIM_FAULT plants one of MOE_FAULTS. Import after loading the library."""
import os

import torch

MOE_FAULTS = {
    "gmm_wrong_expert": "npu_grouped_matmul multiplies the last group by the first expert's "
                        "weight",
    "gmm_dw_drop_token": "npu_grouped_matmul over the inner dimension (group_type 2, the weights' "
                         "gradient) skips each group's last token",
    "unpermute_no_probs": "npu_moe_token_unpermute ignores the routing probabilities",
    "gmm_dx_wrong_expert": "npu_grouped_matmul with transposed weights (the inputs' gradient "
                           "of the custom backward) multiplies the last group by the first "
                           "expert's weight",
    "permute_reverse_ties": "npu_moe_token_permute orders the tokens of one expert in reverse",
    "permute_grad_half": "npu_moe_token_permute_grad halves the tokens' gradient",
    "unpermute_grad_no_probs": "npu_moe_token_unpermute_grad leaves the probabilities out of "
                               "the permuted tokens' gradient",
    "init_routing_reverse_ties": "npu_moe_init_routing sorts the slots of one expert in reverse",
    "expert_tokens_off_by_one": "npu_moe_compute_expert_tokens ends every expert but the last "
                                "one row early",
    "finalize_no_skip": "npu_moe_finalize_routing leaves out skip1 (the residual)",
}

FAULT = os.environ.get("PARITY_NPU_SIM_FAULT", "")


def _sizes(group_list, list_type):
    values = [int(v) for v in (group_list.tolist() if torch.is_tensor(group_list)
                               else group_list)]
    if list_type == 1:
        return values
    return [b - a for a, b in zip([0] + values[:-1], values)]


def _gemm(a, b, dtype):
    return (a.float() @ b.float()).to(dtype)


def _grouped(x, weight, bias, group_list, split_item, group_type, list_type, out_dtype=None):
    dtype = out_dtype or x[0].dtype
    if group_type == 2:  # the weights' gradient: groups along the tokens
        xt, dy = x[0], weight[0]
        outs, start = [], 0
        for size in _sizes(group_list, list_type):
            stop = start + size
            if FAULT == "gmm_dw_drop_token" and size > 0:
                stop -= 1
            outs.append(_gemm(xt[:, start:stop], dy[start:stop], dtype))
            start += size
        return [torch.stack(outs)] if split_item >= 2 else outs
    weights = list(weight[0]) if len(weight) == 1 and weight[0].dim() == 3 else list(weight)
    biases = [] if bias is None else (list(bias[0]) if len(bias) == 1 and bias[0].dim() == 2
                                      else list(bias))
    if group_list is None:
        outs = [_gemm(a, w, dtype) for a, w in zip(x, weights)]
    else:
        rows = torch.cat(list(x)) if len(x) > 1 else x[0]
        outs, start = [], 0
        for g, size in enumerate(_sizes(group_list, list_type)):
            wrong = FAULT == "gmm_wrong_expert" or (FAULT == "gmm_dx_wrong_expert" and
                                                    not weights[g].is_contiguous())
            w = weights[0] if wrong and g == len(weights) - 1 else weights[g]
            outs.append(_gemm(rows[start:start + size], w, dtype))
            start += size
    if biases:
        outs = [(o.float() + b.float()).to(dtype) for o, b in zip(outs, biases)]
    return [torch.cat(outs)] if split_item >= 2 else outs


def grouped_matmul(x, weight, bias=None, scale=None, offset=None, antiquant_scale=None,
                   antiquant_offset=None, per_token_scale=None, group_list=None,
                   activation_input=None, activation_quant_scale=None,
                   activation_quant_offset=None, split_item=0, group_type=None,
                   group_list_type=0, act_type=0, tuning_config=None, output_dtype=None,
                   **low_bit_dtypes):
    kind = group_type if group_type is not None else (0 if group_list is not None else -1)
    return _grouped(x, weight, bias, group_list, split_item or 0, kind, group_list_type or 0)


def grouped_matmul_list(x, weight, bias=None, scale=None, offset=None, antiquant_scale=None,
                        antiquant_offset=None, per_token_scale=None, group_list=None,
                        activation_input=None, activation_quant_scale=None,
                        activation_quant_offset=None, split_item=0, group_type=None,
                        group_list_type=0, act_type=0, output_dtype=None):
    kind = group_type if group_type is not None else (0 if group_list is not None else -1)
    return _grouped(x, weight, bias, group_list, split_item or 0, kind, 0, output_dtype)


def token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    topk = 1 if indices.dim() == 1 else indices.shape[1]
    flat = indices.reshape(-1)
    if FAULT == "permute_reverse_ties":
        order = flat.numel() - 1 - torch.sort(flat.flip(0), stable=True).indices
    else:
        order = torch.sort(flat, stable=True).indices
    keep = order.numel() if not num_out_tokens else min(num_out_tokens, order.numel())
    return tokens[order[:keep] // topk], order.to(torch.int32)


def token_unpermute(permuted, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    topk = 1 if probs is None else probs.shape[-1]
    slots = sorted_indices[:permuted.shape[0]].long()
    rows = permuted.float()
    if probs is not None and FAULT != "unpermute_no_probs":
        rows = rows * probs.reshape(-1)[slots].float().unsqueeze(1)
    n = (probs.numel() if probs is not None else sorted_indices.numel()) // topk
    out = torch.zeros(n, permuted.shape[1], dtype=torch.float32)
    out.index_add_(0, torch.div(slots, topk, rounding_mode="floor"), rows)
    return out.to(permuted.dtype)


def token_permute_grad(tokens, grad_permuted, indices, sorted_indices, padded_mode=False):
    topk = 1 if indices.dim() == 1 else indices.shape[1]
    slots = sorted_indices[:grad_permuted.shape[0]].long()
    out = torch.zeros(tokens.shape[0], grad_permuted.shape[1], dtype=torch.float32)
    out.index_add_(0, torch.div(slots, topk, rounding_mode="floor"), grad_permuted.float())
    if FAULT == "permute_grad_half":
        out = out * 0.5
    return out.to(grad_permuted.dtype)


def token_unpermute_grad(permuted, grad, sorted_indices, probs=None, padded_mode=False,
                         restore_shape=None):
    topk = 1 if probs is None else probs.shape[-1]
    slots = sorted_indices[:permuted.shape[0]].long()
    g = grad[torch.div(slots, topk, rounding_mode="floor")].float()
    if probs is None:
        return g.to(grad.dtype), torch.empty(0, dtype=permuted.dtype)
    d_probs = torch.zeros(probs.numel(), dtype=torch.float32)
    d_probs[slots] = (permuted.float() * g).sum(1)
    d_permuted = g * probs.reshape(-1)[slots].float().unsqueeze(1)
    if FAULT == "unpermute_grad_no_probs":
        d_permuted = g
    return d_permuted.to(grad.dtype), d_probs.reshape(probs.shape).to(probs.dtype)


def init_routing(x, row_idx, expert_idx, active_num):
    n, k = expert_idx.shape
    flat = expert_idx.reshape(-1)
    if FAULT == "init_routing_reverse_ties":  # stable on the reversed slots: ties reversed
        order = torch.sort(flat.flip(0), stable=True)
        order = torch.return_types.sort((order.values, flat.numel() - 1 - order.indices))
    else:
        order = torch.sort(flat, stable=True)
    dst_to_src = row_idx.reshape(-1)[order.indices].long()
    expanded_row = torch.empty(n * k, dtype=torch.int32)
    expanded_row[dst_to_src] = torch.arange(n * k, dtype=torch.int32)
    active = min(active_num, n) * k
    return x[dst_to_src[:active] % n], expanded_row, order.values.to(torch.int32)


def compute_expert_tokens(sorted_experts, num_expert):
    ends = torch.searchsorted(sorted_experts.long(), torch.arange(num_expert), right=True)
    if FAULT == "expert_tokens_off_by_one":
        ends[:-1] = (ends[:-1] - 1).clamp(min=0)
    return ends.to(sorted_experts.dtype)


def finalize_routing(rows, skip1, skip2, bias, scales, src_to_dst, experts, drop_pad_mode=0,
                     k=1):
    k = scales.shape[1] if scales is not None else (k or 1)
    n = src_to_dst.numel() // k
    out = torch.zeros(n, rows.shape[-1], dtype=torch.float32)
    for term in (skip2,) if FAULT == "finalize_no_skip" else (skip1, skip2):
        if term is not None:
            out += term.float()
    for i in range(n):
        for j in range(k):
            r = rows[int(src_to_dst[j * n + i])].float()
            if bias is not None:
                r = r + bias[int(experts[i, j])].float()
            out[i] += r * (scales[i, j].float() if scales is not None else 1.0)
    return out.to(rows.dtype)


_LIB = torch.library.Library("npu", "IMPL")  # pylint: disable=invalid-name
for _name, _fn in (("npu_grouped_matmul", grouped_matmul),
                   ("npu_grouped_matmul.List", grouped_matmul_list),
                   ("npu_moe_token_permute", token_permute),
                   ("npu_moe_token_unpermute", token_unpermute),
                   ("npu_moe_token_permute_grad", token_permute_grad),
                   ("npu_moe_token_unpermute_grad", token_unpermute_grad),
                   ("npu_moe_init_routing", init_routing),
                   ("npu_moe_compute_expert_tokens", compute_expert_tokens),
                   ("npu_moe_finalize_routing", finalize_routing)):
    _LIB.impl(_name, _fn, "CPU")
