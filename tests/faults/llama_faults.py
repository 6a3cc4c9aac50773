"""Planted faults for the Llama-style workload (docs/examples/train_llama.py), in each building
block a decoder-only LLM is made of. As in faults.py, the training process plays a faulty
accelerator by overriding one aten CPU kernel before the agent starts; the server never loads
these. An override must not call its own op (it would recurse), so each computes through others.

FAULTS maps a name to a Fault: how to plant it, whether it is harmful, where a harmful one must
be reported (the forward op the CSVs name it after, and the phase of the first faulty call),
the ops allowed to show errors (the faulty kernel may also run inside other calls, or in the
backward of the same call), and the precisions it applies to ("fp32", "bf16": a bf16
accumulator fault does nothing to a float32 GEMM).
"""
import collections

import torch

from override import override

Fault = collections.namedtuple("Fault", "plant kind op phase allowed_ops precisions")


_dispatch_key = "CPU"  # the device whose kernel a fault replaces (plant's `device`)


def _override(op, kernel):
    override(op, kernel, _dispatch_key)


# ---- harmful ---------------------------------------------------------------------------------

def rmsnorm_rsqrt_eps():
    """RMSNorm's rsqrt with an epsilon of its own (1e-2) added inside: every normalised
    activation is too small where the mean square is small."""
    _override("rsqrt", lambda x: torch.reciprocal(torch.sqrt(x + 1e-2)))


def rope_rotates_wrong_half():
    """RoPE's rotate_half concatenated in the wrong order (cat(x1, -x2) for cat(-x2, x1)): every
    rotated query and key is wrong. Planted in cat of two tensors; other cats are correct."""
    def bad(tensors, dim=0):
        tensors = list(tensors)
        if len(tensors) == 2:
            tensors = tensors[::-1]  # the fault
        d = dim % tensors[0].dim()
        shape = list(tensors[0].shape)
        shape[d] = sum(t.shape[d] for t in tensors)
        out = tensors[0].new_empty(shape)
        offset = 0
        for t in tensors:
            out.narrow(d, offset, t.shape[d]).copy_(t)
            offset += t.shape[d]
        return out
    _override("cat", bad)


def _softmax_rows(x, dim):
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_unmasked_head():
    """Attention's softmax ignores the causal mask on head 0 (-inf read as 0): that head
    attends to future tokens."""
    def bad(x, dim, half_to_float):
        y = x.clone()
        if y.dim() == 4:
            head = y[:, 0]
            head.masked_fill_(torch.isinf(head), 0.0)
        out = _softmax_rows(y.float() if half_to_float else y, dim)
        return out
    _override("_softmax", bad)


def swiglu_halves_swapped():
    """The gate's activation written to the wrong half of its output (a fused SwiGLU kernel
    reading the halves in the wrong order): the last dimension's halves of silu's result are
    swapped."""
    def bad(x):
        y = x * torch.sigmoid(x)
        half = y.shape[-1] // 2
        return y.roll(half, dims=-1)
    _override("silu", bad)


def silu_overwrites_input():
    """SwiGLU's gate kernel uses its input as scratch (a fused kernel reusing its input buffer):
    its output is right, but the gate's pre-activation, which autograd saved for silu's
    backward, is left holding the sigmoid, and the gradients two ops later are wrong. No output
    comparison sees it: only the check of read-only arguments (parity.detect_input_writes). The
    write goes through `.data`, as a device kernel's does, past autograd's version counter."""
    def bad(x):
        s = torch.sigmoid(x)
        y = x * s
        x.data.copy_(s)  # the fault
        return y
    _override("silu", bad)


def matmul_bf16_accumulator():
    """A bfloat16 GEMM that keeps its running sum in bfloat16 (chunks of 8 along k, each partial
    sum rounded): large relative errors for long reductions. float32 GEMMs are untouched."""
    def bad(a, b):
        def gemm(x, y):  # through bmm: calling mm here would recurse into this override
            return torch.bmm(x.unsqueeze(0), y.unsqueeze(0))[0]
        if a.dtype != torch.bfloat16:
            return gemm(a.double(), b.double()).to(a.dtype)  # correct, rounded once
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
        for k in range(0, a.shape[1], 8):
            part = gemm(a[:, k:k + 8].float(), b[k:k + 8].float())
            acc = (acc.float() + part).to(torch.bfloat16)
        return acc
    _override("mm", bad)


def adamw_wrong_bias_correction():
    """AdamW's multi-tensor update divides by the second moment's bias correction itself rather
    than by its square root: the steps are too large early in training."""
    def bad(tensors, scalars):
        for t, s in zip(tensors, scalars):
            t.mul_(1.0 / (s * s))  # the fault: s is sqrt(1 - beta2^t)
    _override("_foreach_div_.ScalarList", bad)


def cross_entropy_shifted_log_softmax():
    """log_softmax off by a constant (the normaliser computed in a lower precision): the loss
    and its gradient are shifted."""
    def bad(x, dim, half_to_float):
        y = x.float() if half_to_float else x
        shifted = y - y.amax(dim=dim, keepdim=True)
        return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True)) - 0.01
    _override("_log_softmax", bad)


# ---- benign ----------------------------------------------------------------------------------

def rmsnorm_mean_reordered():
    """RMSNorm's mean of squares summed in another order (a ones-vector GEMV in float64, then
    rounded): a correct reduction with different rounding."""
    def off(x, dim, keepdim=False, dtype=None):
        dims = [d % x.dim() for d in dim] if dim else list(range(x.dim()))
        count = 1
        for d in dims:
            count *= x.shape[d]
        total = x.double()
        for d in sorted(dims, reverse=True):
            total = torch.matmul(total.movedim(d, -1), torch.ones(x.shape[d], dtype=torch.float64))
            if keepdim:
                total = total.unsqueeze(d)
        return (total / count).to(dtype or x.dtype)
    _override("mean.dim", off)


def rmsnorm_rsqrt_via_sqrt():
    """A different but correct RMSNorm formula: rsqrt(x) as 1 / sqrt(x) (two roundings)."""
    _override("rsqrt", lambda x: torch.reciprocal(torch.sqrt(x)))


def _harmful(plant, op, phase, allowed=None, precisions=("fp32", "bf16")):
    return Fault(plant, "harmful", op, phase, frozenset(allowed or [op]), tuple(precisions))


def _benign(plant):
    return Fault(plant, "benign", None, None, frozenset(), ("fp32", "bf16"))


FAULTS = {
    "rmsnorm_rsqrt_eps": _harmful(rmsnorm_rsqrt_eps, "aten::rsqrt", "forward"),
    "rope_rotates_wrong_half": _harmful(rope_rotates_wrong_half, "aten::cat", "forward"),
    "softmax_unmasked_head": _harmful(softmax_unmasked_head, "aten::softmax", "forward"),
    "swiglu_halves_swapped": _harmful(swiglu_halves_swapped, "aten::silu", "forward"),
    "silu_overwrites_input": _harmful(silu_overwrites_input, "aten::silu", "forward"),
    "matmul_bf16_accumulator": _harmful(matmul_bf16_accumulator, "aten::linear", "forward",
                                        allowed=["aten::linear", "aten::matmul"],
                                        precisions=("bf16",)),
    "adamw_wrong_bias_correction": _harmful(adamw_wrong_bias_correction, "aten::_foreach_div_",
                                            "forward"),
    "cross_entropy_shifted_log_softmax": _harmful(cross_entropy_shifted_log_softmax,
                                                  "aten::cross_entropy_loss", "forward"),
    "rmsnorm_mean_reordered": _benign(rmsnorm_mean_reordered),
    "rmsnorm_rsqrt_via_sqrt": _benign(rmsnorm_rsqrt_via_sqrt),
}


def plant(name, device="cpu"):
    """Plants fault `name` in the kernel of `device`'s dispatch key ("cpu"; "privateuseone",
    the test NPU, for the faults written for any device: silu_overwrites_input)."""
    global _dispatch_key  # pylint: disable=global-statement
    _dispatch_key = "PrivateUse1" if str(device).startswith("privateuseone") else "CPU"
    if name not in FAULTS:
        raise SystemExit(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
    FAULTS[name].plant()
