"""An MoE (mixture of experts) training as torch_npu / MindSpeed write it, checked by Parity.

Two MoE layers over a residual stream: a router (softmax, top-k), the tokens permuted by expert
(npu_moe_token_permute), each expert's two GEMMs as one npu_grouped_matmul over the permuted
rows (MindSpeed's custom autograd.Function, whose backward calls npu_grouped_matmul again for
the inputs' gradient and, over the inner dimension (group_type 2), for the weights'), SiLU,
and the tokens back weighted by their routing probabilities (npu_moe_token_unpermute). Every
step also runs the layer once without gradients through the routing family
(npu_moe_init_routing, npu_moe_compute_expert_tokens, npu_grouped_matmul.List,
npu_moe_finalize_routing), as an inference path does.

    python3 train_moe.py --config config.json            # on an NPU, with torch_npu
    python3 train_moe.py --config config.json --npu-sim build/tests/libparity_npu_sim.so

--npu-sim LIB: Parity's simulated NPU (tests/npu_sim: torch_npu's schemas with CPU kernels of
its own; its MoE kernels are tests/npu_sim/moe_sim.py) instead of torch_npu.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.append(os.path.join(HERE, "..", "..", "python"))  # the checkout's agent, after any installed


def load_npu(sim_library):
    """torch_npu's operators: the simulated NPU (its library and MoE kernels), or torch_npu."""
    if sim_library:
        torch.ops.load_library(sim_library)
        sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "npu_sim"))
        import moe_sim  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    else:
        import torch_npu  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import


def gmm(x, weight, group_list, group_type=0):
    return torch.ops.npu.npu_grouped_matmul([x], [weight], group_list=group_list,
                                            group_type=group_type, split_item=3)[0]


class GroupedMatmul(torch.autograd.Function):
    """MindSpeed's grouped GEMM: x [tokens, in] rows grouped by expert, weight [E, in, out]."""

    @staticmethod
    def forward(ctx, x, weight, group_list):  # pylint: disable=arguments-differ
        ctx.save_for_backward(x, weight, group_list)
        return gmm(x, weight, group_list)

    @staticmethod
    def backward(ctx, dy):  # pylint: disable=arguments-differ
        x, weight, group_list = ctx.saved_tensors
        dx = gmm(dy, weight.transpose(1, 2), group_list)
        dw = gmm(x.t(), dy, group_list, group_type=2)  # [E, in, out], groups along the tokens
        return dx, dw, None


class Permute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tokens, indices):  # pylint: disable=arguments-differ
        permuted, sorted_indices = torch.ops.npu.npu_moe_token_permute(tokens, indices)
        ctx.save_for_backward(tokens, indices, sorted_indices)
        ctx.mark_non_differentiable(sorted_indices)
        return permuted, sorted_indices

    @staticmethod
    def backward(ctx, d_permuted, _):  # pylint: disable=arguments-differ
        tokens, indices, sorted_indices = ctx.saved_tensors
        return torch.ops.npu.npu_moe_token_permute_grad(tokens, d_permuted, indices,
                                                        sorted_indices), None


class Unpermute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, permuted, sorted_indices, probs):  # pylint: disable=arguments-differ
        ctx.save_for_backward(permuted, sorted_indices, probs)
        return torch.ops.npu.npu_moe_token_unpermute(permuted, sorted_indices, probs)

    @staticmethod
    def backward(ctx, dy):  # pylint: disable=arguments-differ
        permuted, sorted_indices, probs = ctx.saved_tensors
        d_permuted, d_probs = torch.ops.npu.npu_moe_token_unpermute_grad(
            permuted, dy, sorted_indices, probs)
        return d_permuted, None, d_probs


class MoeLayer(torch.nn.Module):
    def __init__(self, dim, ffn, experts, topk):
        super().__init__()
        self.experts, self.topk = experts, topk
        self.router = torch.nn.Linear(dim, experts, bias=False)
        self.w1 = torch.nn.Parameter(torch.randn(experts, dim, ffn) / math.sqrt(dim))
        self.w2 = torch.nn.Parameter(torch.randn(experts, ffn, dim) / math.sqrt(ffn))

    def route(self, x):
        probs, indices = torch.topk(torch.softmax(self.router(x), -1), self.topk)
        return probs, indices

    def forward(self, x):
        probs, indices = self.route(x)
        permuted, sorted_indices = Permute.apply(x, indices)
        counts = torch.bincount(indices.reshape(-1), minlength=self.experts)
        group_list = counts.cumsum(0)
        h = F.silu(GroupedMatmul.apply(permuted, self.w1, group_list))
        return Unpermute.apply(GroupedMatmul.apply(h, self.w2, group_list), sorted_indices, probs)

    @torch.no_grad()
    def infer(self, x):
        """The same layer through the routing family, as an inference path runs it."""
        probs, indices = self.route(x)
        n = x.shape[0]
        row_idx = torch.arange(n * self.topk, dtype=torch.int32).reshape(self.topk, n).t()
        expanded_x, expanded_row_idx, expanded_experts = torch.ops.npu.npu_moe_init_routing(
            x, row_idx.contiguous(), indices.int(), n)
        ends = torch.ops.npu.npu_moe_compute_expert_tokens(expanded_experts, self.experts)
        ends = [int(e) for e in ends]
        h = torch.ops.npu.npu_grouped_matmul.List([expanded_x], [self.w1], group_list=ends,
                                                   split_item=2)[0]
        o = torch.ops.npu.npu_grouped_matmul.List([F.silu(h)], [self.w2], group_list=ends,
                                                   split_item=2)[0]
        return torch.ops.npu.npu_moe_finalize_routing(o, x, None, None, probs, expanded_row_idx,
                                                      indices.int())


class MoeModel(torch.nn.Module):
    def __init__(self, dim, ffn, experts, topk, layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(MoeLayer(dim, ffn, experts, topk)
                                          for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="Parity (msprobe-style) config.json")
    parser.add_argument("--no-agent", action="store_true", help="train without Parity")
    parser.add_argument("--npu-sim", help="the simulated NPU's library instead of torch_npu")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--ffn", type=int, default=64)
    parser.add_argument("--experts", type=int, default=4)
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="the parameters' and activations' dtype (an MoE LLM's: bfloat16)")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    load_npu(args.npu_sim)
    torch.manual_seed(args.seed)
    model = MoeModel(args.dim, args.ffn, args.experts, args.topk, args.layers).to(dtype)
    x = torch.randn(args.tokens, args.dim).to(dtype)
    target = torch.randn(args.tokens, args.dim).to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    debugger = None
    if not args.no_agent:
        import parity  # pylint: disable=import-outside-toplevel
        debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        if debugger is not None:
            debugger.start(model)
        opt.zero_grad()
        loss = F.mse_loss(model(x).float(), target.float())
        loss.backward()
        opt.step()
        model.layers[0].infer(x)
        if debugger is not None:
            debugger.stop()
            debugger.step()
        print(f"loss {loss.item():.6f}", flush=True)
    if debugger is not None:
        debugger.close()


if __name__ == "__main__":
    main()
