"""The simulated NPU's MoE kernels: torch_npu's MoE operators (schemas declared by
libparity_npu_sim.so, from oplib/npu/torch_npu_schemas.json) given CPU kernels written here,
apart from the reference library's (oplib/npu/moe.cc): group boundaries walked in Python, the
tokens' sums by index_add instead of a gather and a sum, the expert ends by searchsorted; the
token permutation in torch_npu's index convention (sorted_indices maps each routing slot to its
permuted row), which tests/oplib/test_upstream_goldens.py checks against op-plugin's goldens.

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
    """torch_npu's convention: sorted_indices[slot] is the permuted row that holds the slot (the
    inverse of the stable sort), as op-plugin's test_npu_moe_token_permute_and_unpermute.py
    checks it."""
    topk = 1 if indices.dim() == 1 else indices.shape[1]
    flat = indices.reshape(-1)
    if FAULT == "permute_reverse_ties":
        order = flat.numel() - 1 - torch.sort(flat.flip(0), stable=True).indices
    else:
        order = torch.sort(flat, stable=True).indices
    n = order.numel()
    keep = min(num_out_tokens, n) if num_out_tokens and num_out_tokens > 0 else n + (
        num_out_tokens or 0)
    row_of_slot = torch.empty(n, dtype=torch.int32)
    row_of_slot[order] = torch.arange(n, dtype=torch.int32)
    return tokens[order[:keep] // topk], row_of_slot


def _slots(sorted_indices, rows):
    """(slot, row) pairs of the slots whose row was kept."""
    rows_of = sorted_indices.reshape(-1).long()
    slots = torch.nonzero(rows_of < rows).reshape(-1)
    return slots, rows_of[slots]


def token_unpermute(permuted, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    topk = 1 if probs is None else probs.shape[-1]
    slots, rows = _slots(sorted_indices, permuted.shape[0])
    gathered = permuted[rows].float()
    if probs is not None and FAULT != "unpermute_no_probs":
        gathered = gathered * probs.reshape(-1)[slots].float().unsqueeze(1)
    out = torch.zeros(sorted_indices.numel() // topk, permuted.shape[1], dtype=torch.float32)
    out.index_add_(0, torch.div(slots, topk, rounding_mode="floor"), gathered)
    return out.to(permuted.dtype)


def _permute_grad(grad_permuted, sorted_indices, tokens, topk, dtype):
    slots, rows = _slots(sorted_indices, grad_permuted.shape[0])
    out = torch.zeros(tokens, grad_permuted.shape[1], dtype=torch.float32)
    out.index_add_(0, torch.div(slots, topk, rounding_mode="floor"), grad_permuted[rows].float())
    if FAULT == "permute_grad_half":
        out = out * 0.5
    return out.to(dtype)


def token_permute_grad(tokens, grad_permuted, indices, sorted_indices, padded_mode=False):
    topk = 1 if indices.dim() == 1 else indices.shape[1]
    return _permute_grad(grad_permuted, sorted_indices, tokens.shape[0], topk, grad_permuted.dtype)


def token_permute_grad_v2(grad_permuted, sorted_indices, tokens_size_0, tokens_dtype, num_topk,
                          padded_mode=False):
    return _permute_grad(grad_permuted, sorted_indices, tokens_size_0, num_topk, tokens_dtype)


def _unpermute_grad(grad, sorted_indices, rows, dtype, probs, permuted):
    topk = 1 if probs is None else probs.shape[-1]
    slots, kept_rows = _slots(sorted_indices, rows)
    g = grad[torch.div(slots, topk, rounding_mode="floor")].float()
    d_permuted = torch.zeros(rows, grad.shape[1], dtype=torch.float32)
    if probs is None:
        d_permuted[kept_rows] = g
        # torch_npu returns an uninitialised 0-dim tensor where there is no probs' gradient.
        return d_permuted.to(dtype), torch.empty((), dtype=grad.dtype)
    weight = probs.reshape(-1)[slots].float().unsqueeze(1)
    d_permuted[kept_rows] = g if FAULT == "unpermute_grad_no_probs" else g * weight
    d_probs = torch.zeros(probs.numel(), dtype=torch.float32)
    d_probs[slots] = (permuted[kept_rows].float() * g).sum(1)
    return d_permuted.to(dtype), d_probs.reshape(probs.shape).to(probs.dtype)


def token_unpermute_grad(permuted, grad, sorted_indices, probs=None, padded_mode=False,
                         restore_shape=None):
    return _unpermute_grad(grad, sorted_indices, permuted.shape[0], permuted.dtype, probs,
                           permuted)


def token_unpermute_grad_v2(grad, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
                            probs=None, padded_mode=False, restore_shape=None,
                            permuted_tokens=None):
    return _unpermute_grad(grad, sorted_indices, permuted_tokens_size_0, permuted_tokens_dtype,
                           probs, permuted_tokens)


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
            v = int(src_to_dst[j * n + i])
            r = torch.zeros(rows.shape[-1]) if v == -1 else rows[v].float()  # -1: dropped
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
                   ("npu_moe_token_permute_grad_v2", token_permute_grad_v2),
                   ("npu_moe_token_unpermute_grad_v2", token_unpermute_grad_v2),
                   ("npu_moe_init_routing", init_routing),
                   ("npu_moe_compute_expert_tokens", compute_expert_tokens),
                   ("npu_moe_finalize_routing", finalize_routing)):
    _LIB.impl(_name, _fn, "CPU")
