"""A training of the fused-operator forms the Llama example does not call, on the simulated NPU
(tests/npu_sim), for tests/faults/test_fused_variants.py:

- a causal attention with a learned positional bias (npu_fusion_attention's pse, BNSS, with the
  compressed causal mask, sparse_mode 2): the forward and a grad with dpse;
- a bidirectional attention called with sparse_mode 3 and a band (pre_tockens, next_tockens) but
  no atten_mask, which torch_npu computes over the whole score matrix;
- AdamW through npu_apply_adam_w (out=(param, exp_avg, exp_avg_sq), the powers of the step before,
  beta ** (step - 1)), as torch_npu's and MindSpeed's fused AdamW call it.

    python3 fused_variants.py --config config.json --npu-sim LIB [--dtype bfloat16] [--steps N]
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, "..", "..", "python"))

HEADS, SEQ, HEAD_DIM = 2, 16, 8
CAUSAL = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)  # torch_npu's compressed


class NpuAdamW(torch.optim.Optimizer):
    """AdamW by torch_npu's fused kernel, one call per parameter."""

    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):  # pylint: disable=arguments-differ
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                # torch_npu.npu_apply_adam_w(..., out=(p, exp_avg, exp_avg_sq)) is this overload.
                torch.ops.npu.npu_apply_adam_w.out(
                    beta1 ** (state["step"] - 1), beta2 ** (state["step"] - 1), group["lr"],
                    group["weight_decay"], beta1, beta2, group["eps"], p.grad, None, False, False,
                    var=p, m=state["exp_avg"], v=state["exp_avg_sq"])


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        dim = HEADS * HEAD_DIM
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.bias = torch.nn.Parameter(0.5 * torch.randn(1, HEADS, SEQ, SEQ))
        self.cross = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim, bias=False)

    def heads(self, proj, x):
        b = x.shape[0]
        q, k, v = proj(x).reshape(b, SEQ, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        return q.contiguous(), k.contiguous(), v.contiguous()

    def forward(self, x):
        scale = 1.0 / math.sqrt(HEAD_DIM)
        q, k, v = self.heads(self.qkv, x)
        h = torch.ops.npu.npu_fusion_attention(q, k, v, HEADS, "BNSD", pse=self.bias.to(q.dtype),
                                               atten_mask=CAUSAL, scale=scale, sparse_mode=2)[0]
        h = h.transpose(1, 2).reshape(x.shape)
        q, k, v = self.heads(self.cross, x + h)
        y = torch.ops.npu.npu_fusion_attention(q, k, v, HEADS, "BNSD", scale=scale,
                                               pre_tockens=4, next_tockens=0, sparse_mode=3)[0]
        return self.out(y.transpose(1, 2).reshape(x.shape))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--npu-sim", required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = parser.parse_args()
    torch.ops.load_library(args.npu_sim)
    torch.manual_seed(args.seed)
    dtype = getattr(torch, args.dtype)
    model = Block().to(dtype)
    x = torch.randn(2, SEQ, HEADS * HEAD_DIM).to(dtype)
    target = torch.randn(2, SEQ, HEADS * HEAD_DIM).to(dtype)
    opt = NpuAdamW(model.parameters())
    import parity  # pylint: disable=import-outside-toplevel
    debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        debugger.start(model)
        opt.zero_grad()
        loss = F.mse_loss(model(x).float(), target.float())
        loss.backward()
        opt.step()
        debugger.stop()
        debugger.step()
        print(f"loss {loss.item():.6f}", flush=True)
    debugger.close()


if __name__ == "__main__":
    main()
