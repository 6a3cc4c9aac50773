"""Planted faults: this process plays a faulty accelerator by overriding one aten kernel for the
CPU dispatch key before the agent starts (../shared/faults/README.md). The server never loads
these, so its replay is the correct reference. Each fault says why it is harmful or benign.

An override replaces the CPU kernel for every dtype, and calling the same op inside it would
recurse into the override, so each fault computes the cases it does not corrupt through other
ops (noted where the result may differ in rounding: that is benign by construction).

FAULTS maps a name to a Fault: the function that plants it, whether it is harmful, and where a
harmful fault must be reported: the op as the CSV names it (`aten::gelu`; a backward op is
named after its forward call), the phase, the per-step call index of the first faulty call in
tests/faults/train_faults.py, and the ops allowed to show errors (the faulty kernel may also
run in other calls, such as the backward of the same op).
"""
import collections

import torch

from override import override

Fault = collections.namedtuple("Fault", "plant kind op phase call_index allowed_ops")


_dispatch_key = "CPU"  # the device whose kernel a fault replaces (plant's `device`)


def _override(op, kernel):
    override(op, kernel, _dispatch_key)


def _next_up(x):
    return torch.nextafter(x, torch.full_like(x, float("inf")))


def _sum_last(x, dim, keepdim, dtype):
    """sum over `dim` without aten::sum: x moved to the last dim, times a ones vector (float32
    accumulation, a different order than the CPU kernel: benign)."""
    dims = [d % x.dim() for d in ([dim] if isinstance(dim, int) else list(dim))] or \
        list(range(x.dim()))
    keep = [d for d in range(x.dim()) if d not in dims]
    moved = x.permute(keep + dims)
    flat = moved.reshape([moved.shape[i] for i in range(len(keep))] + [-1])
    acc = flat.double() if flat.dtype == torch.float64 else flat.float()
    out = torch.matmul(acc, torch.ones(acc.shape[-1], dtype=acc.dtype))
    if keepdim:
        for d in sorted(dims):
            out = out.unsqueeze(d)
    return out.to(dtype or (x.dtype if x.is_floating_point() else torch.int64))


# ---- harmful -------------------------------------------------------------------------------------

def gelu_tanh():
    """gelu evaluated with the tanh approximation when the exact form was asked for (errors
    ~1e-3 relative, far beyond float32 rounding)."""
    def bad(x, approximate="none"):
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + torch.tanh(inner))
    _override("gelu", bad)


def gelu_backward_tanh():
    """The backward of exact gelu uses the derivative of the tanh approximation: the forward is
    right and the gradients are wrong, ~1e-3 relative."""
    def bad(grad, x, approximate="none"):
        k = 0.7978845608028654
        inner = k * (x + 0.044715 * x * x * x)
        t = torch.tanh(inner)
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x)
        return grad * d
    _override("gelu_backward", bad)


def softmax_no_max():
    """softmax without subtracting the row maximum: exact in real arithmetic, but exp overflows
    on large logits and the row becomes inf/inf = NaN."""
    def bad(x, dim, half_to_float):
        e = torch.exp(x)
        return e / e.sum(dim, keepdim=True)
    _override("_softmax", bad)


def bmm_bfloat16_inputs():
    """A float32 batched matmul that rounds its inputs to bfloat16 first (an accelerator's
    'fast' mode): ~3 significant digits where 7 were asked for."""
    def bad(a, b):
        if a.dtype == torch.float32:
            a, b = a.bfloat16().float(), b.bfloat16().float()
        return torch.stack([torch.mm(a[i], b[i]) for i in range(a.shape[0])])
    _override("bmm", bad)


def layer_norm_eps():
    """layer_norm with epsilon 1e-2 instead of the 1e-5 asked for: every output scaled wrong by
    up to 0.5% on unit-variance rows."""
    def bad(x, normalized_shape, weight, bias, eps):
        dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
        mean = x.mean(dims, keepdim=True)
        var = ((x - mean) ** 2).mean(dims, keepdim=True)
        rstd = torch.rsqrt(var + 1e-2)
        out = (x - mean) * rstd
        if weight is not None:
            out = out * weight
        if bias is not None:
            out = out + bias
        return out, mean, rstd
    _override("native_layer_norm", bad)


def sum_float16_accumulator():
    """A float16 sum that accumulates in float16: over 1024 terms the running sum's rounding
    (one float16 ulp is 1.0 at 1024) swamps the small terms; the bench accumulates in float32."""
    def bad(x, dim, keepdim=False, dtype=None):
        if x.dtype != torch.float16 or dim is None or len(dim) != 1:
            return _sum_last(x, dim, keepdim, dtype)
        acc = torch.zeros_like(x.select(dim[0], 0))
        for i in range(x.shape[dim[0]]):
            acc = acc + x.select(dim[0], i)  # rounded to float16 at every step
        return acc.unsqueeze(dim[0]) if keepdim else acc
    _override("sum.dim_IntList", bad)


def index_select_off_by_one():
    """index_select along an inner dimension reads the next element (a stride bug): every value
    comes from the wrong token. Along dim 0 (which aten::embedding uses) it is right."""
    def bad(x, dim, index):
        shifted = torch.remainder(index + (1 if dim % x.dim() else 0), x.shape[dim])
        return torch.gather(x, dim, _expand_index(x, dim, shifted))
    _override("index_select", bad)


def _expand_index(x, dim, index):
    shape = [1] * x.dim()
    shape[dim] = index.numel()
    full = list(x.shape)
    full[dim] = index.numel()
    return index.reshape(shape).expand(full)


def mm_bfloat16_accumulator():
    """A bfloat16 matmul that accumulates in bfloat16 (8 significant bits): the partial sums over
    64 products lose most of their low bits; the bench accumulates in float32."""
    def bad(a, b):
        if a.dtype != torch.bfloat16:
            return torch.bmm(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0)
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.bfloat16)
        for k in range(a.shape[1]):
            acc = acc + a[:, k:k + 1] * b[k:k + 1, :]  # rounded to bfloat16 at every step
        return acc
    _override("mm", bad)


def softmax_backward_no_sum():
    """softmax's backward without the sum term: grad_in = y * grad_out, where the Jacobian asks for
    y * (grad_out - sum(y * grad_out)); gradients are wrong wherever the row's dot is non-zero."""
    def bad(grad_output, output, dim, input_dtype):
        return (grad_output * output).to(input_dtype)
    _override("_softmax_backward_data", bad)


def embedding_backward_overwrite():
    """embedding's backward scatters without accumulating: a token seen twice in the batch keeps
    only one of its gradients (the classic scatter-without-atomics bug)."""
    def bad(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
        grad = grad_output.reshape(-1, grad_output.shape[-1])
        out = torch.zeros(num_weights, grad.shape[-1], dtype=grad.dtype)
        out.index_put_((indices.reshape(-1),), grad, accumulate=False)
        return out
    _override("embedding_dense_backward", bad)


# ---- benign --------------------------------------------------------------------------------------

def gelu_one_ulp():
    """gelu whose every output is one float32 ulp above the correct result: within what any
    correct float32 implementation may differ by."""
    def off(x, approximate="none"):
        exact = 0.5 * x.double() * (1.0 + torch.erf(x.double() / 2 ** 0.5))
        return _next_up(exact.float())
    _override("gelu", off)


def mean_reordered():
    """A float32 mean that sums the two halves of the row separately, then adds them: another
    summation order, the kind a different vector width gives."""
    def off(x, dim, keepdim=False, dtype=None):
        if dim is None or len(dim) != 1 or x.shape[dim[0]] < 2:
            return _sum_last(x, dim or [], keepdim, dtype) / _count(x, dim)
        n = x.shape[dim[0]]
        first = _sum_last(x.narrow(dim[0], 0, n // 2), dim, keepdim, dtype)
        second = _sum_last(x.narrow(dim[0], n // 2, n - n // 2), dim, keepdim, dtype)
        return (first + second) / n
    _override("mean.dim", off)


def _count(x, dim):
    n = 1
    for d in (dim or range(x.dim())):
        n *= x.shape[d]
    return n


def relu_negative_zero():
    """relu that returns -0.0 for negative inputs (x * 0): equal to 0.0 under IEEE comparison;
    an exact standard must not call it a mismatch."""
    def off(x):
        return x * (x > 0).to(x.dtype)
    _override("relu", off)


def tanh_correctly_rounded():
    """tanh computed in float64 and rounded once: a different (better) transcendental than the
    CPU's vectorised approximation; differs from the bench by at most about one ulp."""
    def off(x):
        return torch.tanh(x.double()).to(x.dtype) if x.dtype != torch.float64 else \
            (torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1)
    _override("tanh", off)


def mm_bfloat16_split_k():
    """A bfloat16 matmul that accumulates in float32 in two halves of K and rounds once: another
    order of the same float32 accumulation."""
    def off(a, b):
        if a.dtype != torch.bfloat16:
            return torch.bmm(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0)
        k = a.shape[1] // 2
        lo = torch.bmm(a[:, :k].float().unsqueeze(0), b[:k].float().unsqueeze(0))
        hi = torch.bmm(a[:, k:].float().unsqueeze(0), b[k:].float().unsqueeze(0))
        return (lo + hi).squeeze(0).bfloat16()
    _override("mm", off)


def sum_float16_pairwise():
    """A float16 sum accumulated in float32 in another order, rounded once to float16."""
    def off(x, dim, keepdim=False, dtype=None):
        return _sum_last(x.flip(list(dim)) if dim else x, dim, keepdim, dtype)
    _override("sum.dim_IntList", off)


def gelu_backward_float64():
    """gelu's backward evaluated in float64 and rounded once: a more accurate kernel than the
    CPU's, within rounding of it."""
    def off(grad, x, approximate="none"):
        xd = x.double()
        cdf = 0.5 * (1.0 + torch.erf(xd / 2 ** 0.5))
        pdf = torch.exp(-0.5 * xd * xd) / (2 * 3.141592653589793) ** 0.5
        return (grad.double() * (cdf + xd * pdf)).to(grad.dtype)
    _override("gelu_backward", off)


def sgd_update_float16():
    """The optimizer's update (SGD's _foreach_add_, one call for every parameter, as optimizers
    run on GPUs) applied in float16: parameters lose 13 bits at every step (harmful)."""
    def bad(self, other, alpha=1):
        for param, grad in zip(self, other):
            param.copy_(param.half() + grad.half() * alpha)
    _override("_foreach_add_.List", bad)


def _harmful(plant, op, phase, call_index, allowed=None):
    return Fault(plant, "harmful", op, phase, call_index, frozenset(allowed or [op]))


def _benign(plant):
    return Fault(plant, "benign", None, None, None, frozenset())


FAULTS = {
    # name: (where it must be reported)             dtype     kind of op
    "gelu_tanh": _harmful(gelu_tanh, "aten::gelu", "forward", 0),              # f32 elementwise
    "gelu_backward_tanh": _harmful(gelu_backward_tanh, "aten::gelu", "backward", 0),  # f32 bwd
    "softmax_no_max": _harmful(softmax_no_max, "aten::softmax", "forward", 0),  # f32 reduction
    "bmm_bfloat16_inputs": _harmful(bmm_bfloat16_inputs, "aten::matmul", "forward", 0),  # matmul
    "layer_norm_eps": _harmful(layer_norm_eps, "aten::layer_norm", "forward", 0),  # normalisation
    "sum_float16_accumulator": _harmful(sum_float16_accumulator, "aten::sum", "forward", 0),  # f16
    "index_select_off_by_one": _harmful(index_select_off_by_one, "aten::index_select", "forward",
                                        0),                                     # indexing
    "mm_bfloat16_accumulator": _harmful(mm_bfloat16_accumulator, "aten::mm", "forward", 0),  # bf16
    "softmax_backward_no_sum": _harmful(softmax_backward_no_sum, "aten::softmax", "backward",
                                        0),                                     # f32 bwd reduction
    "embedding_backward_overwrite": _harmful(embedding_backward_overwrite, "aten::embedding",
                                             "backward", 0),                    # indexing bwd
    "sgd_update_float16": _harmful(sgd_update_float16, "aten::_foreach_add_", "forward", 0),  # optim
    "gelu_one_ulp": _benign(gelu_one_ulp),                 # f32 elementwise, 1 ulp
    "mean_reordered": _benign(mean_reordered),             # f32 reduction order
    "relu_negative_zero": _benign(relu_negative_zero),     # -0.0 for 0.0
    "tanh_correctly_rounded": _benign(tanh_correctly_rounded),  # another transcendental
    "mm_bfloat16_split_k": _benign(mm_bfloat16_split_k),   # bf16 accumulation order
    "sum_float16_pairwise": _benign(sum_float16_pairwise),  # f16 reduction order
    "gelu_backward_float64": _benign(gelu_backward_float64),  # f32 bwd, more accurate
}


def plant(name, device="cpu"):
    """Plants fault `name` in the kernel of `device` ("cpu", or "cuda" for a training on a GPU:
    gelu_tanh is written for any device; the others build CPU tensors)."""
    global _dispatch_key  # pylint: disable=global-statement
    _dispatch_key = "CUDA" if str(device).startswith("cuda") else "CPU"
    if name not in FAULTS:
        raise SystemExit(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
    FAULTS[name].plant()
