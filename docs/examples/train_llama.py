"""A small decoder-only transformer (Llama-style) trained with Parity checking it: token
embedding, RMSNorm (pow/mean/rsqrt), rotary position embedding (cat/neg/mul), causal
self-attention with grouped-query attention (fewer KV heads), SwiGLU MLP (silu * mul), tied
output projection, cross-entropy, AdamW (foreach or per-tensor), gradient clipping and a cosine
learning-rate schedule. The default size runs a step in tens of milliseconds on 2 cores.

    python3 train_llama.py --config config.json [--autocast bf16] [--steps 3]
    python3 -m torch.distributed.run --nproc_per_node=2 train_llama.py --config config.json

Under torch.distributed.run it trains with DistributedDataParallel over gloo (CPU), each rank
on its own batch. --fused trains with torch_npu's fused kernels instead of their aten
compositions: npu_rms_norm, npu_rotary_mul, npu_fusion_attention (BSND, grouped-query, causal
sparse_mode 2) and npu_swiglu, forward and backward; they come from torch_npu, or with
--npu-sim LIB from the simulated NPU of Parity's tests (tests/npu_sim: the same schemas with
CPU kernels). --fault NAME plants a fault from tests/faults/llama_faults.py (this process
plays a faulty accelerator); --no-agent trains without Parity.
"""
import argparse
import math
import os
import sys
import types

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's parity package, after any installed one (an installed agent wins).
sys.path.append(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "faults"))


FUSED = False  # --fused: torch_npu's fused kernels (torch.ops.npu.*)


def load_npu(sim_library):
    """torch_npu's operators: the simulated NPU's library, or torch_npu itself."""
    if sim_library:
        torch.ops.load_library(sim_library)
    else:
        import torch_npu  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        if FUSED:
            return torch.ops.npu.npu_rms_norm(x, self.weight, self.eps)[0]
        # As Llama's reference code: in float32, then back to the input's dtype.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.type_as(x)


def rope_tables(head_dim, positions, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(positions).float(), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


class Attention(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = torch.nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = torch.nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin, mask):
        if FUSED:
            return self.fused(x, cos, sin)
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        repeat = self.heads // self.kv_heads  # grouped-query attention
        k = k.repeat_interleave(repeat, dim=1)
        v = v.repeat_interleave(repeat, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1).type_as(q)
        probs = F.dropout(probs, DROPOUT, self.training)  # attention dropout
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, -1)
        return self.wo(out)

    def fused(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim)  # BSND
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim)
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
        q = torch.ops.npu.npu_rotary_mul(q, cos, sin)
        k = torch.ops.npu.npu_rotary_mul(k, cos, sin)
        # Causal (sparse_mode 2) with torch_npu's compressed 2048 x 2048 mask; K/V heads grouped
        # by the kernel itself.
        out = torch.ops.npu.npu_fusion_attention(
            q, k, v, self.heads, "BSND", atten_mask=COMPRESSED_CAUSAL_MASK,
            scale=1.0 / math.sqrt(self.head_dim), sparse_mode=2)[0]
        return self.wo(out.reshape(b, t, -1))


COMPRESSED_CAUSAL_MASK = None
DROPOUT = 0.0  # --dropout: attention-probability and residual dropout


class SwiGLU(torch.nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        if FUSED:  # one projection to both halves, npu_swiglu splits them
            w13 = torch.cat((self.w1.weight, self.w3.weight), dim=0)
            return self.w2(torch.ops.npu.npu_swiglu(F.linear(x, w13), dim=-1))
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(torch.nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.feed_forward = SwiGLU(dim, hidden)

    def forward(self, x, cos, sin, mask):
        h = x + F.dropout(self.attention(self.attention_norm(x), cos, sin, mask), DROPOUT,
                          self.training)
        return h + F.dropout(self.feed_forward(self.ffn_norm(h)), DROPOUT, self.training)


class Llama(torch.nn.Module):
    def __init__(self, vocab=128, dim=64, layers=2, heads=4, kv_heads=2, hidden=172, seq=32):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(vocab, dim)
        self.layers = torch.nn.ModuleList(Block(dim, heads, kv_heads, hidden)
                                          for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = torch.nn.Linear(dim, vocab, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied
        torch.nn.init.normal_(self.tok_embeddings.weight, std=0.02)
        cos, sin = rope_tables(dim // heads, seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        # A plain attribute, not a buffer: DDP broadcasts buffers, and gloo has no bool.
        self.mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.tok_embeddings(tokens)
        cos, sin, mask = self.cos[:t], self.sin[:t], self.mask[:t, :t]
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.output(self.norm(h)).float()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="Parity (msprobe-style) config.json")
    parser.add_argument("--no-agent", action="store_true", help="train without Parity")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: forward under torch.autocast('cpu', bfloat16)")
    parser.add_argument("--foreach", choices=["yes", "no"], default="yes",
                        help="AdamW's multi-tensor (foreach) or per-tensor implementation")
    parser.add_argument("--fault", help="plant a fault from tests/faults/llama_faults.py")
    parser.add_argument("--fused", action="store_true",
                        help="torch_npu's fused kernels for RMSNorm, RoPE, attention, SwiGLU")
    parser.add_argument("--npu-sim", help="with --fused: the simulated NPU's library instead "
                        "of torch_npu (tests/npu_sim)")
    parser.add_argument("--device", default="cpu",
                        help="where to train: cpu, or an accelerator's device (npu, cuda, "
                        "privateuseone: a backend registered on PrivateUse1)")
    parser.add_argument("--device-lib", help="a library to load first (torch.ops.load_library) "
                        "that registers the device, e.g. tests' libparity_test_npu_device.so")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="attention-probability and residual dropout (checked as random ops)")
    args = parser.parse_args()
    global DROPOUT  # pylint: disable=global-statement
    DROPOUT = args.dropout

    if args.device_lib:
        torch.ops.load_library(args.device_lib)
        # A backend registered from C++ alone has no Python device module, which torch 2.x's
        # Module.to() asks for, and the optimizers of later ones ask it whether the device is
        # available (torch_npu registers torch.npu): a module of one available device serves.
        name = torch._C._get_privateuse1_backend_name() \
            if hasattr(torch._C, "_get_privateuse1_backend_name") else None
        if name and not hasattr(torch, name) and hasattr(torch, "_register_device_module"):
            module = types.ModuleType("torch." + name)
            module.is_available = lambda: True
            module.device_count = lambda: 1
            module.current_device = lambda: 0
            torch._register_device_module(name, module)
    device = torch.device(args.device)
    if args.fault:
        import llama_faults  # pylint: disable=import-outside-toplevel
        llama_faults.plant(args.fault, args.device)
    if args.fused:
        global FUSED, COMPRESSED_CAUSAL_MASK  # pylint: disable=global-statement
        load_npu(args.npu_sim)
        FUSED = True
        COMPRESSED_CAUSAL_MASK = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), 1).to(device)
    distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank = 0
    if distributed:
        torch.distributed.init_process_group("gloo")
        rank = torch.distributed.get_rank()
    torch.manual_seed(args.seed)
    model = Llama(dim=args.dim, layers=args.layers, seq=args.seq).to(device)
    # torch 1.x moves a parameter to a PrivateUse1 device (an NPU) as a new Parameter, which
    # unties tied weights: tie them again.
    model.output.weight = model.tok_embeddings.weight
    model.mask = model.mask.to(device)
    torch.manual_seed(args.seed + 1 + rank)  # each rank its own data
    tokens = torch.randint(0, 128, (args.batch, args.seq + 1)).to(device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1,
                            foreach=args.foreach == "yes")
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, 100) / 100)))
    trained = torch.nn.parallel.DistributedDataParallel(model) if distributed else model

    debugger = None
    if not args.no_agent:
        import parity  # pylint: disable=import-outside-toplevel
        debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        if debugger is not None:
            debugger.start(model)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            logits = trained(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        if debugger is not None:
            debugger.stop()
            debugger.step()
        print(f"rank {rank} loss {loss.item():.6f}", flush=True)
    if debugger is not None:
        debugger.close()
    if distributed:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
