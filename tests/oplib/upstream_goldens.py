"""torch_npu's fused operators against the goldens of their owners: each case restates the golden
function of the operator's own upstream test (op-plugin's test/, at commit 517f2e7d, the commit
oplib/npu/torch_npu_schemas.json records) or the documented small-operator equivalent of its API
doc (op-plugin/docs/zh/custom_APIs/torch_npu/), named in the case's docstring; none takes a value
from Parity's references (oplib/npu) or from its simulated NPU (tests/npu_sim).

Run as a probe on one library of torch_npu's operators (the reference library the server loads, or
the simulated NPU a test training loads):

    python upstream_goldens.py LIBRARY [--moe-sim]

prints one JSON line: {case: {"status": "pass" | "fail" | "no kernel", "detail": ...}}. A case is
"no kernel" when the library declares the operator but has no CPU kernel for it (the simulated
NPU implements only what its trainings call). tests/oplib/test_upstream_goldens.py runs it.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

NPU = None  # torch.ops.npu, once the library is loaded


class NoKernel(Exception):
    pass


def call(name, *args, **kwargs):
    packet, _, overload = name.partition(".")
    op = getattr(getattr(NPU, packet), overload) if overload else getattr(NPU, packet)
    try:
        return op(*args, **kwargs)
    except (NotImplementedError, RuntimeError) as e:
        text = str(e)
        if "Could not run" in text or "no kernel" in text.lower():
            raise NoKernel(text.splitlines()[0]) from e
        raise


class Checks:
    """Comparisons of one case; the first failure is its detail."""

    def __init__(self):
        self.failures = []

    def close(self, label, got, want, rtol=1e-4, atol=1e-5):
        got, want = torch.as_tensor(got), torch.as_tensor(want)
        if tuple(got.shape) != tuple(want.shape):
            self.failures.append(f"{label}: shape {tuple(got.shape)}, golden {tuple(want.shape)}")
            return
        g, w = got.double(), want.double()
        bad = ~((g - w).abs() <= atol + rtol * w.abs())
        if bool(bad.any()):
            i = int(bad.reshape(-1).nonzero()[0])
            self.failures.append(f"{label}: {int(bad.sum())} of {bad.numel()} elements differ, "
                                 f"first at {i}: {g.reshape(-1)[i].item():.8g} vs golden "
                                 f"{w.reshape(-1)[i].item():.8g}")

    def equal(self, label, got, want):
        got, want = torch.as_tensor(got), torch.as_tensor(want)
        if tuple(got.shape) != tuple(want.shape) or not torch.equal(got.long(), want.long()):
            self.failures.append(f"{label}: {got.reshape(-1)[:12].tolist()} vs golden "
                                 f"{want.reshape(-1)[:12].tolist()} (shapes {tuple(got.shape)}, "
                                 f"{tuple(want.shape)})")


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def rand(*shape, lo=-1.0, hi=1.0):
    return torch.rand(*shape, dtype=torch.float32) * (hi - lo) + lo


# --- norms ---------------------------------------------------------------------------------------

@case
def rms_norm(c):
    """test/test_custom_ops/test_npu_rms_norm.py, supported_op_exec: rstd = 1 / sqrt(mean(x^2, -1)
    + 1e-6), y = x * rstd * gamma."""
    x, gamma = rand(16, 64, lo=0, hi=100), rand(64, lo=0, hi=100)
    xd = x.double()
    rstd = 1 / torch.sqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6)
    y, got_rstd = call("npu_rms_norm", x, gamma)
    c.close("y", y, xd * rstd * gamma.double())
    c.close("rstd", got_rstd, rstd)


@case
def rms_norm_backward(c):
    """test/test_custom_ops/test_npu_rms_norm_backward.py, supported_op_exec: dgamma = sum(dy * x *
    rstd, 0); dx = dy * gamma * rstd - x * sum(rstd^3 * dy * gamma * x, 1) / D."""
    x, gamma, dy = rand(10, 128, lo=0, hi=100), rand(128, lo=0, hi=100), rand(10, 128, lo=0, hi=100)
    xd, gd, dyd = x.double(), gamma.double(), dy.double()
    rstd = 1 / torch.sqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6)
    dgamma = (dyd * xd * rstd).sum(0)
    dx = dyd * gd * rstd - xd * (rstd ** 3 * dyd * gd * xd).sum(1, keepdim=True) / 128
    got_dx, got_dgamma = call("npu_rms_norm_backward", dy, x, gamma, rstd.float())
    c.close("dx", got_dx, dx, rtol=1e-3, atol=1e-3)
    c.close("dgamma", got_dgamma, dgamma, rtol=1e-4, atol=1e-2)


@case
def layer_norm_eval(c):
    """test/test_base_ops/test_layer_norm_eval.py: nn.LayerNorm(x.shape[1:]).eval()(x) (eps 1e-5),
    here with a given weight and bias."""
    x, w, b = rand(8, 6, 5, lo=1, hi=100), rand(6, 5), rand(6, 5)
    want = F.layer_norm(x.double(), (6, 5), w.double(), b.double(), 1e-5)
    c.close("y", call("npu_layer_norm_eval", x, [6, 5], w, b, 1e-5), want)


@case
def group_norm_silu(c):
    """test/test_custom_ops/test_group_norm_silu.py, supported_op_exec: aten native_group_norm(x,
    gamma, beta, N, C, H*W, group, eps), silu of its output; mean and rstd as it returns them."""
    x, g, b = torch.randn(4, 32, 6, 6), torch.randn(32), torch.randn(32)
    y, mean, rstd = torch.ops.aten.native_group_norm(x.double(), g.double(), b.double(), 4, 32,
                                                     36, 8, 1e-4)
    got = call("npu_group_norm_silu", x, g, b, 8, 1e-4)
    c.close("y", got[0], F.silu(y))
    c.close("mean", got[1], mean)
    c.close("rstd", got[2], rstd, rtol=1e-4, atol=1e-4)


# --- activations and rotary ----------------------------------------------------------------------

def rotary_golden(x, r1, r2, mode):
    """test/test_custom_ops/test_npu_rotary_mul.py: rotary_mul (half: cat(-x2, x1)) and
    rotary_mul_mode (interleave: stack(-x[..., 1::2], x[..., ::2])), out = x * r1 + rot(x) * r2."""
    if mode == "half":
        x1, x2 = torch.chunk(x, 2, -1)
        rot = torch.cat((-x2, x1), dim=-1)
    else:
        rot = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).reshape(x.shape)
    return r1 * x + r2 * rot


@case
def rotary_mul(c):
    """test/test_custom_ops/test_npu_rotary_mul.py, both modes."""
    x, r1, r2 = torch.rand(2, 16, 3, 32), torch.rand(1, 16, 1, 32), torch.rand(1, 16, 1, 32)
    for mode in ("half", "interleave"):
        want = rotary_golden(x.double(), r1.double(), r2.double(), mode)
        c.close(mode, call("npu_rotary_mul", x, r1, r2, mode), want)


@case
def rotary_mul_backward(c):
    """test/test_custom_ops/test_npu_rotary_mul_backward.py, cpu_to_exec: autograd through the
    golden (there with a gradient of ones, here a random one)."""
    x, r1, r2 = torch.rand(2, 16, 3, 32), torch.rand(1, 16, 1, 32), torch.rand(1, 16, 1, 32)
    dy = torch.randn(2, 16, 3, 32)
    for mode in ("half", "interleave"):
        leaves = [t.double().requires_grad_(True) for t in (x, r1, r2)]
        want = torch.autograd.grad(rotary_golden(*leaves, mode), leaves, dy.double())
        got = call("npu_rotary_mul_backward", dy, x, r1, r2, mode)
        for label, g, w in zip(("dx", "dr1", "dr2"), got, want):
            c.close(f"{mode} {label}", g, w, rtol=1e-4, atol=1e-4)


def swiglu_golden(x, dim):
    """op-plugin/docs/zh/custom_APIs/torch_npu/(beta)torch_npu-npu_swiglu.md: A, B the halves of
    x along dim, out = A * sigmoid(A) * B."""
    a, b = torch.chunk(x, 2, dim)
    return a * torch.sigmoid(a) * b


@case
def swiglu(c):
    """The npu_swiglu doc's formula, forward and (autograd through it) backward."""
    x, dy = torch.randn(4, 6, 16), torch.randn(4, 6, 8)
    c.close("y", call("npu_swiglu", x, -1), swiglu_golden(x.double(), -1))
    leaf = x.double().requires_grad_(True)
    want = torch.autograd.grad(swiglu_golden(leaf, -1), leaf, dy.double())[0]
    c.close("dx", call("npu_swiglu_backward", dy, x, -1), want)


@case
def fast_gelu(c):
    """test/test_base_ops/test_fast_gelu.py and test_fast_gelu_backward.py: the NPU's measured
    values, x = [1, 2, 3, 4] -> [0.8458, 1.9357, 2.9819, 3.9956], d/dx [1.0677795, 1.0738151,
    1.0245483, 1.0064018] (fast_gelu and npu_fast_gelu alike)."""
    x = torch.tensor([1., 2., 3., 4.])
    want = torch.tensor([0.8458, 1.9357, 2.9819, 3.9956])
    c.close("npu_fast_gelu", call("npu_fast_gelu", x), want, rtol=1e-4, atol=1e-4)
    c.close("fast_gelu", call("fast_gelu", x), want, rtol=1e-4, atol=1e-4)
    c.close("npu_fast_gelu_backward", call("npu_fast_gelu_backward", torch.ones(4), x),
            torch.tensor([1.0677795, 1.0738151, 1.0245483, 1.0064018]), rtol=1e-5, atol=1e-5)


def mish_golden(x):
    """test/test_base_ops/test_mish.py, cpu_op_exec: x * tanh(softplus(x))."""
    return x * torch.tanh(F.softplus(x))


@case
def mish(c):
    """test/test_base_ops/test_mish.py and test_mish_backward.py (autograd through the golden)."""
    x, dy = rand(10, 30, lo=-5, hi=5), torch.randn(10, 30)
    c.close("y", call("npu_mish", x), mish_golden(x.double()))
    leaf = x.double().requires_grad_(True)
    want = torch.autograd.grad(mish_golden(leaf), leaf, dy.double())[0]
    c.close("dx", call("npu_mish_backward", dy, x), want, rtol=3e-4, atol=1e-5)


def scaled_masked_softmax_golden(x, mask, scale, fixed_triu_mask):
    """test/test_base_ops/test_scaled_masked_softmax.py, cpu_op_exec_forward: softmax((x *
    scale).masked_fill(mask, -10000)), the mask triu(ones, 1) when fixed_triu_mask."""
    if fixed_triu_mask:
        mask = torch.triu(torch.ones(mask.shape), diagonal=1).bool()
    return F.softmax((x * scale).masked_fill(mask, value=-10000), dim=-1)


@case
def scaled_masked_softmax(c):
    """test/test_base_ops/test_scaled_masked_softmax.py, forward and (cpu_op_exec_backward:
    autograd through the golden) backward, with a given mask and the fixed triangular one."""
    x, dy = rand(2, 3, 8, 8, lo=-5, hi=5), torch.randn(2, 3, 8, 8)
    mask = torch.rand(2, 1, 8, 8) < 0.3
    for fixed in (False, True):
        want = scaled_masked_softmax_golden(x.double(), mask, 0.5, fixed)
        y = call("npu_scaled_masked_softmax", x, mask, 0.5, fixed)
        c.close(f"y (fixed_triu_mask {fixed})", y, want)
        leaf = x.double().requires_grad_(True)
        dx = torch.autograd.grad(scaled_masked_softmax_golden(leaf, mask, 0.5, fixed), leaf,
                                 dy.double())[0]
        got = call("npu_scaled_masked_softmax_backward", dy, want.float(), mask, 0.5, fixed)
        c.close(f"dx (fixed_triu_mask {fixed})", got, dx)


# --- linear, layout, sort, gating ----------------------------------------------------------------

@case
def npu_linear(c):
    """test/test_base_ops/test_npu_linear.py and test_npu_linear_backward.py: F.linear, and
    autograd through it for (d input, d weight)."""
    x, w, b, dy = rand(12, 16, lo=-2, hi=2), rand(8, 16, lo=-2, hi=2), rand(8), torch.randn(12, 8)
    c.close("y", call("npu_linear", x, w, b), F.linear(x.double(), w.double(), b.double()))
    leaves = [x.double().requires_grad_(True), w.double().requires_grad_(True)]
    want = torch.autograd.grad(F.linear(*leaves), leaves, dy.double())
    got = call("npu_linear_backward", dy, x, w)
    c.close("dx", got[0], want[0])
    c.close("dw", got[1], want[1])


@case
def confusion_transpose(c):
    """test/test_base_ops/test_confusion_transpose.py and _backward.py: transpose_first:
    x.permute(perm).contiguous().view(shape), else x.view(shape).permute(perm); the backward as
    torch_npu's autograd calls it (op_plugin/config/derivatives.yaml: grad, perm, self's sizes,
    !transpose_first), against autograd through the golden."""
    for shape_in, shape, perm, first in (((1, 12, 32), (1, 12, 4, 8), (0, 2, 1, 3), False),
                                         ((1, 4, 12, 8), (1, 12, 32), (0, 2, 1, 3), True)):
        x = torch.randn(*shape_in)
        want = (x.permute(*perm).contiguous().view(shape) if first
                else x.view(shape).permute(*perm))
        c.close(f"y (transpose_first {first})",
                call("npu_confusion_transpose", x, list(perm), list(shape), first), want)
        dy = torch.randn(want.shape)
        leaf = x.double().requires_grad_(True)
        golden = (leaf.permute(*perm).contiguous().view(shape) if first
                  else leaf.view(shape).permute(*perm))
        dx = torch.autograd.grad(golden, leaf, dy.double())[0]
        got = call("npu_confusion_transpose_backward", dy, list(perm), list(shape_in), not first)
        c.close(f"dx (transpose_first {first})", got, dx)


@case
def sort_v2(c):
    """test/test_base_ops/test_sort_without_indices.py: torch.sort(x.float()).half() of a float16
    input, ascending and descending (the doc's float32 example prints float16-precision values:
    only float16 is its owner's golden)."""
    x = (torch.rand(2, 300) * 200 - 100).half()
    for descending in (False, True):
        want = torch.sort(x.float(), dim=-1, descending=descending)[0].half()
        got = call("npu_sort_v2", x, -1, descending)
        c.equal(f"descending {descending}", got.view(torch.int16), want.view(torch.int16))


@case
def moe_gating_top_k_softmax(c):
    """test/test_custom_ops/test_npu_moe_gating_top_k_softmax.py, cpu_op_exec: softmax in float32,
    the k largest by a stable argsort of -softmax, a finished row's experts set to num_expert,
    row_idx = arange(n * k).reshape(k, n).T."""
    n, e, k = 12, 8, 3
    x = torch.randn(n, e)
    finished = torch.rand(n) < 0.3
    soft = torch.softmax(x.double(), -1)
    idx = torch.argsort(-soft, dim=-1, stable=True)[:, :k]
    y = torch.gather(soft, -1, idx)
    idx = torch.where(finished.unsqueeze(1).expand(n, k), torch.full_like(idx, e), idx)
    row = torch.arange(n * k).reshape(k, n).t()
    got = call("npu_moe_gating_top_k_softmax", x, finished, k)
    c.close("y", got[0], y)
    c.equal("expert_idx", got[1], idx)
    c.equal("row_idx", got[2], row)


# --- MoE -----------------------------------------------------------------------------------------

def megatron_permute(tokens, indices, num_out_tokens=None):
    """test/test_custom_ops/test_npu_moe_token_permute_and_unpermute.py, permute (Megatron's):
    sorted_indices = stable argsort of the flattened indices, permuted = tokens[sorted // topk]."""
    topk = 1 if indices.dim() == 1 else indices.size(1)
    sorted_indices = torch.argsort(indices.reshape(-1), stable=True)
    if num_out_tokens is not None:
        sorted_indices = sorted_indices[:num_out_tokens]
    return tokens.index_select(0, sorted_indices // topk), sorted_indices


def megatron_unpermute(permuted, sorted_indices, probs=None):
    """The same file's unpermute: index_copy_ the rows to sorted_indices, weight by probs, sum each
    token's topk rows."""
    n = probs.numel() if probs is not None else permuted.size(0)
    topk = probs.size(1) if probs is not None else 1
    out = torch.zeros(n, permuted.shape[-1], dtype=permuted.dtype)
    out.index_copy_(0, sorted_indices, permuted)
    out = out.reshape(-1, topk, permuted.size(-1))
    if probs is not None:
        out = out * probs.unsqueeze(-1)
    return out.sum(dim=1)


@case
def moe_token_permute(c):
    """test_npu_moe_token_permute_and_unpermute.py, test_permute: the fused op's permuted tokens
    equal the golden's, its sorted_indices equal argsort(the golden's) (the fused op sorts twice);
    with num_out_tokens, the kept rows."""
    tokens, indices = torch.randn(24, 16), torch.randint(0, 5, (24, 3))
    want, golden_sorted = megatron_permute(tokens, indices)
    got, got_sorted = call("npu_moe_token_permute", tokens, indices)
    c.close("permuted_tokens", got, want)
    c.equal("sorted_indices", got_sorted, torch.argsort(golden_sorted, stable=True))
    c.equal("sorted_indices dtype int32", torch.tensor(got_sorted.dtype == torch.int32), True)
    kept, _ = megatron_permute(tokens, indices, 50)
    c.close("permuted_tokens (num_out_tokens 50)",
            call("npu_moe_token_permute", tokens, indices, 50)[0], kept)


@case
def moe_token_unpermute(c):
    """test_npu_moe_token_permute_and_unpermute.py, test_unpermute: the fused unpermute of
    sorted_indices s equals the golden unpermute of argsort(s); with topk 1, no probs."""
    for topk in (1, 4):
        n = 20
        permuted = torch.randn(n * topk, 16)
        s = torch.argsort(torch.randint(0, 6, (n * topk,)), stable=True).to(torch.int32)
        probs = torch.rand(n, topk) if topk > 1 else None
        want = megatron_unpermute(permuted.double(), torch.argsort(s.long(), stable=True),
                                  None if probs is None else probs.double())
        args = (permuted, s) if probs is None else (permuted, s, probs)
        c.close(f"topk {topk}", call("npu_moe_token_unpermute", *args), want)


@case
def moe_token_permute_round_trip(c):
    """test_npu_moe_token_permute_and_unpermute.py, test_npu_npu_moe_token_permute_unpermute:
    the fused permute then the fused unpermute with probs 1/topk give the tokens back."""
    tokens, indices = torch.randn(24, 16), torch.randint(0, 5, (24, 4))
    permuted, s = call("npu_moe_token_permute", tokens, indices)
    c.close("tokens", call("npu_moe_token_unpermute", permuted, s, torch.full((24, 4), 0.25)),
            tokens)


@case
def moe_token_permute_grad(c):
    """test_npu_moe_token_permute_and_unpermute_backward.py, test_permute: the tokens' gradient
    through the golden permute (autograd), from the fused op's sorted_indices: the 26.0 form
    (npu_moe_token_permute_grad(tokens, grad, indices, sorted_indices)) and the form of 26.1 and
    master (npu_moe_token_permute_grad_v2(grad, sorted_indices, N, dtype, topk))."""
    tokens, indices = torch.randn(24, 16), torch.randint(0, 5, (24, 3))
    leaf = tokens.double().requires_grad_(True)
    permuted, _ = megatron_permute(leaf, indices)
    dy = torch.randn(permuted.shape)
    want = torch.autograd.grad(permuted, leaf, dy.double())[0]
    _, s = call("npu_moe_token_permute", tokens, indices)
    c.close("npu_moe_token_permute_grad",
            call("npu_moe_token_permute_grad", tokens, dy, indices, s), want)
    c.close("npu_moe_token_permute_grad_v2",
            call("npu_moe_token_permute_grad_v2", dy, s, 24, torch.float32, 3), want)


@case
def moe_token_unpermute_grad(c):
    """test_npu_moe_token_permute_and_unpermute_backward.py, test_unpermute: the gradients of
    permuted_tokens and probs through the golden unpermute of argsort(s) (autograd): the form of
    26.0 and 26.1 (npu_moe_token_unpermute_grad(permuted, grad, s, probs)) and master's
    (npu_moe_token_unpermute_grad_v2(grad, s, rows, dtype, probs, ..., permuted))."""
    n, topk = 20, 4
    permuted = torch.randn(n * topk, 16)
    s = torch.argsort(torch.randint(0, 6, (n * topk,)), stable=True).to(torch.int32)
    probs = torch.rand(n, topk)
    leaves = [permuted.double().requires_grad_(True), probs.double().requires_grad_(True)]
    out = megatron_unpermute(leaves[0], torch.argsort(s.long(), stable=True), leaves[1])
    dy = torch.randn(out.shape)
    want = torch.autograd.grad(out, leaves, dy.double())
    got = call("npu_moe_token_unpermute_grad", permuted, dy, s, probs)
    c.close("d permuted_tokens", got[0], want[0])
    c.close("d probs", got[1], want[1])
    got = call("npu_moe_token_unpermute_grad_v2", dy, s, n * topk, torch.float32, probs, False,
               None, permuted)
    c.close("v2 d permuted_tokens", got[0], want[0])
    c.close("v2 d probs", got[1], want[1])


@case
def grouped_matmul(c):
    """test/test_custom_ops/test_npu_grouped_matmul.py, supported_op_exec: x split at the
    group_list's cumulative ends, one matmul (+ bias) per group's weight; split_item 3 (one output)
    concatenated."""
    x, w = torch.randn(12, 8), [torch.randn(8, 5) for _ in range(3)]
    ends = [4, 9, 12]
    want, start = [], 0
    for g, end in enumerate(ends):
        want.append(x[start:end].double() @ w[g].double())
        start = end
    got = call("npu_grouped_matmul", [x], w, group_list=torch.tensor(ends), split_item=3,
               group_type=0)
    c.close("one output", got[0], torch.cat(want))
    got = call("npu_grouped_matmul", [x[0:4], x[4:9], x[9:12]], w)
    for g in range(3):
        c.close(f"list, group {g}", got[g], want[g])


@case
def moe_init_routing(c):
    """op-plugin/docs/.../torch_npu-npu_moe_init_routing.md, the equivalent computation: a stable
    argsort of the flattened expert_idx, expanded_row_idx[dst_to_src] = arange, expanded_x =
    x[dst_to_src[:min(active_num, N) * k] % N]."""
    n, k, h = 10, 2, 6
    x = torch.randn(n, h)
    row_idx = torch.arange(n * k, dtype=torch.int32).reshape(k, n).t().contiguous()
    expert_idx = torch.randint(0, 7, (n, k), dtype=torch.int32)
    order = torch.argsort(expert_idx.reshape(-1), stable=True)
    expanded_expert = expert_idx.reshape(-1)[order]
    dst_to_src = row_idx.reshape(-1)[order].long()
    expanded_row = torch.zeros(n * k, dtype=torch.int32)
    expanded_row[dst_to_src] = torch.arange(n * k, dtype=torch.int32)
    active = min(6, n) * k
    got = call("npu_moe_init_routing", x, row_idx, expert_idx, 6)
    c.close("expanded_x", got[0], x[dst_to_src[:active] % n])
    c.equal("expanded_row_idx", got[1], expanded_row)
    c.equal("expanded_expert_idx", got[2], expanded_expert)


@case
def moe_compute_expert_tokens(c):
    """op-plugin/docs/.../torch_npu-npu_moe_compute_expert_tokens.md: expertTokens_i =
    BinarySearch(sorted, i), the end of expert i's rows; its example [0, 0, 0, 1, 1, 2],
    num_expert 3."""
    sorted_experts = torch.tensor([0, 0, 0, 1, 1, 2], dtype=torch.int32)
    c.equal("example", call("npu_moe_compute_expert_tokens", sorted_experts, 3),
            torch.tensor([3, 5, 6], dtype=torch.int32))
    sorted_experts = torch.sort(torch.randint(0, 9, (40,), dtype=torch.int32))[0]
    want = torch.searchsorted(sorted_experts.long(), torch.arange(12), right=True)
    c.equal("random", call("npu_moe_compute_expert_tokens", sorted_experts, 12), want)


@case
def moe_finalize_routing(c):
    """op-plugin/docs/.../torch_npu-npu_moe_finalize_routing.md, the equivalent computation:
    out[i] = skip1 + skip2 + sum_k scales[i, k] * (rows[src_to_dst[k * N + i]] +
    bias[expert[i, k]]), a row index of -1 (dropped) a zero row."""
    n, k, h, e = 6, 2, 4, 5
    rows, skip1, skip2 = torch.randn(n * k, h), torch.randn(n, h), torch.randn(n, h)
    bias, scales = torch.randn(e, h), torch.randn(n, k)
    dst = torch.randperm(n * k).to(torch.int32)
    dst[3] = -1
    expert = torch.randint(0, e, (n, k), dtype=torch.int32)
    want = skip1.double() + skip2.double()
    for i in range(n):
        for j in range(k):
            v = int(dst[j * n + i])
            row = torch.zeros(h, dtype=torch.float64) if v == -1 else rows[v].double()
            want[i] += scales[i, j].double() * (row + bias[int(expert[i, j])].double())
    got = call("npu_moe_finalize_routing", rows, skip1, skip2, bias, scales, dst, expert)
    c.close("out", got, want)


# --- attention -----------------------------------------------------------------------------------

def band_mask(s1, s2, pre, nxt):
    """The doc example's get_atten_mask for sparse_mode 0 and 4: triu(k=next+1) + tril(k=-pre-1)."""
    ones = torch.ones(s1, s2)
    return (torch.triu(ones, diagonal=nxt + 1) + torch.tril(ones, diagonal=-pre - 1)) > 0


def attention_golden(q, k, v, scale, mask=None, pse=None):
    """BNSD. The doc example's supported_op_exec (qk * scale + mask * -10000, softmax, @ v) and
    test/test_custom_ops/test_npu_flash_attention.py's tforward (its max and sum); a pse added
    before the scale: (qk + pse) * scale, msprobe's own bench function (calculate_qk) and the
    aclnn kernels' pse type 1 that op-plugin passes for npu_fusion_attention."""
    qk = q @ k.transpose(2, 3)
    if pse is not None:
        qk = qk + pse
    qk = qk * scale
    if mask is not None:
        qk = qk + mask.to(qk.dtype) * -10000.0
    x_max = qk.amax(-1, keepdim=True)
    e = torch.exp(qk - x_max)
    x_sum = e.sum(-1, keepdim=True)
    return (e / x_sum) @ v, x_max, x_sum


COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)


@case
def fusion_attention_sparse_modes(c):
    """op-plugin/docs/.../torch_npu-npu_fusion_attention.md's example (BNSD, scale 0.08838):
    sparse_mode 0 (band mask given), 1 (no mask: the whole matrix), 2 and 3 (the compressed
    2048 x 2048 causal mask), 4 (band)."""
    q, k, v = torch.randn(1, 2, 32, 16), torch.randn(1, 2, 32, 16), torch.randn(1, 2, 32, 16)
    qd, kd, vd = q.double(), k.double(), v.double()
    causal = torch.triu(torch.ones(32, 32), diagonal=1).bool()  # the doc's triu(k=1), S1 = S2
    for mode, pre, nxt in ((0, 8, 8), (1, 65536, 65536), (2, 65536, 0), (3, 65536, 0), (4, 8, 8)):
        # What the example passes, and the golden's mask (get_atten_mask).
        given = {0: band_mask(32, 32, pre, nxt), 1: None}.get(mode, COMPRESSED)
        golden = {0: band_mask(32, 32, pre, nxt), 1: None, 2: causal, 3: causal,
                  4: band_mask(32, 32, pre, nxt)}[mode]
        want = attention_golden(qd, kd, vd, 0.08838, golden)[0]
        got = call("npu_fusion_attention", q, k, v, 2, "BNSD", atten_mask=given, scale=0.08838,
                   pre_tockens=pre, next_tockens=nxt, sparse_mode=mode)
        c.close(f"sparse_mode {mode}", got[0], want)


@case
def fusion_attention_without_mask(c):
    """The API doc's sparse_mode constraints: with atten_mask None, sparse_mode, pre_tockens and
    next_tockens take no effect and the whole matrix is computed (tforward of
    test_npu_flash_attention.py, no mask)."""
    q, k, v = torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8)
    want, x_max, x_sum = attention_golden(q.double(), k.double(), v.double(), 0.35)
    for mode, pre, nxt in ((0, 2, 0), (2, 65536, 0), (3, 65536, 0), (4, 4, 4)):
        got = call("npu_fusion_attention", q, k, v, 2, "BNSD", scale=0.35, pre_tockens=pre,
                   next_tockens=nxt, sparse_mode=mode)
        c.close(f"sparse_mode {mode}", got[0], want)
        c.close(f"sparse_mode {mode} softmax_max", got[1], x_max.expand(2, 2, 16, 8))
        c.close(f"sparse_mode {mode} softmax_sum", got[2], x_sum.expand(2, 2, 16, 8))


@case
def fusion_attention_pse(c):
    """pse (BNSS) added before the scale, forward, and the grad (dq, dk, dv, dpse) by autograd
    through the same golden."""
    q, k, v = torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8)
    pse, dy = torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 8)
    leaves = [t.double().requires_grad_(True) for t in (q, k, v, pse)]
    want, x_max, x_sum = attention_golden(*leaves[:3], 0.125, pse=leaves[3])
    got = call("npu_fusion_attention", q, k, v, 2, "BNSD", pse=pse, scale=0.125)
    c.close("attention_out", got[0], want.detach())
    grads = torch.autograd.grad(want, leaves, dy.double())
    got = call("npu_fusion_attention_grad", q, k, v, dy, 2, "BNSD", pse=pse,
               softmax_max=x_max.detach().float().expand(1, 2, 16, 8).contiguous(),
               softmax_sum=x_sum.detach().float().expand(1, 2, 16, 8).contiguous(),
               attention_in=want.detach().float(), scale_value=0.125)
    for label, g, w in zip(("dq", "dk", "dv", "dpse"), got, grads):
        c.close(label, g, w)


@case
def fusion_attention_grad(c):
    """test/test_custom_ops/test_npu_flash_attention.py: tbackward (dv = P^T dy, dq = (P * (dP -
    rowsum(dP * P))) k * scale, dk likewise) from tforward's softmax, its max and sum handed to
    the grad as the forward's softmax_max / softmax_sum."""
    q, k, v, dy = (torch.randn(1, 2, 16, 8) for _ in range(4))
    qd, kd, vd, dyd = q.double(), k.double(), v.double(), dy.double()
    out, x_max, x_sum = attention_golden(qd, kd, vd, 0.3)
    p = torch.exp(qd @ kd.transpose(2, 3) * 0.3 - x_max) / x_sum
    dp = dyd @ vd.transpose(2, 3)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True)) * 0.3
    got = call("npu_fusion_attention_grad", q, k, v, dy, 2, "BNSD",
               softmax_max=x_max.float().expand(1, 2, 16, 8).contiguous(),
               softmax_sum=x_sum.float().expand(1, 2, 16, 8).contiguous(),
               attention_in=out.float(), scale_value=0.3)
    c.close("dq", got[0], ds @ kd)
    c.close("dk", got[1], ds.transpose(2, 3) @ qd)
    c.close("dv", got[2], p.transpose(2, 3) @ dyd)


# --- optimizers ----------------------------------------------------------------------------------

@case
def apply_adam(c):
    """test/test_base_ops/test_apply_adam.py, apply_adam_d: m_t = m + (beta1 - 1)(m - g), v_t = v +
    (beta2 - 1)(v - g^2), lr_t = lr sqrt(1 - beta2_power) / (1 - beta1_power), var - lr_t * m_t /
    (eps + sqrt(v_t)) (nesterov: m_t * beta1 + (1 - beta1) g): the powers as passed."""
    for nesterov in (False, True):
        var, m, g = torch.randn(4, 5), torch.randn(4, 5), torch.randn(4, 5)
        v = torch.rand(4, 5)
        b1p, b2p, lr, b1, b2, eps = 0.9, 0.99, 0.2, 0.5, 0.7, 0.1
        m_t = m.double() + (b1 - 1) * (m.double() - g.double())
        v_t = v.double() + (b2 - 1) * (v.double() - g.double() ** 2)
        lr_t = lr * math.sqrt(1 - b2p) / (1 - b1p)
        step = m_t * b1 + (1 - b1) * g.double() if nesterov else m_t
        want = var.double() - lr_t * step / (eps + torch.sqrt(v_t))
        got = call("npu_apply_adam.out", b1p, b2p, lr, b1, b2, eps, g, False, nesterov,
                   var=var.clone(), m=m.clone(), v=v.clone())
        c.close(f"var (nesterov {nesterov})", got[0], want)
        c.close(f"m (nesterov {nesterov})", got[1], m_t)
        c.close(f"v (nesterov {nesterov})", got[2], v_t)


@case
def apply_adam_w(c):
    """test/test_base_ops/test_apply_adam_w.py and test/test_custom_ops/test_npu_apply_adam_w.py,
    gen_apply_adam_w: the powers advanced first (beta1_power * beta1), var * (1 - lr * wd) - lr *
    m_t / (1 - beta1_power_out) / (sqrt(v_t / (1 - beta2_power_out)) + eps); amsgrad takes the
    max of max_grad_norm and v_t; maximize negates the gradient."""
    for amsgrad, maximize in ((False, False), (True, False), (False, True)):
        var, m, g, v = torch.randn(6, 3), torch.randn(6, 3), torch.randn(6, 3), torch.rand(6, 3)
        mgn = torch.rand(6, 3) if amsgrad else None
        b1p, b2p, lr, wd, b1, b2, eps = 0.81, 0.98, 0.01, 0.1, 0.9, 0.99, 1e-8
        gt = -g.double() if maximize else g.double()
        m_t = m.double() * b1 - (b1 - 1) * gt
        v_t = v.double() * b2 - (b2 - 1) * gt * gt
        second = torch.maximum(mgn.double(), v_t) if amsgrad else v_t
        denom = torch.sqrt(second / (1 - b2p * b2)) + eps
        want = var.double() * (1 - lr * wd) - lr * m_t / (1 - b1p * b1) / denom
        got = call("npu_apply_adam_w.out", b1p, b2p, lr, wd, b1, b2, eps, g, mgn, amsgrad,
                   maximize, var=var.clone(), m=m.clone(), v=v.clone())
        label = f"amsgrad {amsgrad}, maximize {maximize}"
        c.close(f"var ({label})", got[0], want, rtol=1e-5, atol=1e-6)
        c.close(f"m ({label})", got[1], m_t)
        c.close(f"v ({label})", got[2], v_t)


def main():
    global NPU
    torch.ops.load_library(sys.argv[1])
    if "--moe-sim" in sys.argv:
        sys.path.insert(0, sys.argv[sys.argv.index("--moe-sim") + 1])
        import moe_sim  # noqa: F401  (registers the simulated NPU's MoE kernels)
    NPU = torch.ops.npu
    torch.manual_seed(0)
    results = {}
    for name, fn in CASES.items():
        checks = Checks()
        try:
            fn(checks)
            results[name] = ({"status": "fail", "detail": "; ".join(checks.failures)}
                             if checks.failures else {"status": "pass"})
        except NoKernel as e:
            results[name] = {"status": "no kernel", "detail": str(e)}
        except Exception as e:  # pylint: disable=broad-except
            results[name] = {"status": "fail", "detail": f"{type(e).__name__}: {e}"[:600]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
