"""An LLM-shaped training that draws random numbers every step, for the random-operator suite
(tests/faults/test_random_ops.py): the Llama block of docs/examples/train_llama.py with attention
and residual dropout, a batch chosen by randperm, NEFTune-style uniform noise on the token
embeddings, Gaussian gradient noise from randn, and next tokens sampled by multinomial.

    python3 random_train.py --config config.json [--fault NAME] [--steps 3] [--autocast bf16]
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "examples"))
# The checkout's parity package, after any installed one (an installed agent wins).
sys.path.append(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

import train_llama  # noqa: E402  pylint: disable=wrong-import-position


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="Parity config.json; none: no agent")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--fault", help="a fault from tests/faults/random_faults.py")
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none")
    parser.add_argument("--dropout", type=float, default=0.1)
    args = parser.parse_args()
    if args.fault:
        import random_faults  # pylint: disable=import-outside-toplevel
        random_faults.plant(args.fault)
    train_llama.DROPOUT = args.dropout
    torch.manual_seed(0)
    seq, dim = 32, 64
    model = train_llama.Llama(dim=dim, seq=seq)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3)
    pool = torch.randint(0, 128, (64, seq + 1))
    neftune = 5 / math.sqrt(seq * dim)
    model.tok_embeddings.register_forward_hook(
        lambda m, i, out: out + torch.empty_like(out).uniform_(-1, 1) * neftune)
    debugger = None
    if args.config:
        import parity  # pylint: disable=import-outside-toplevel
        debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        if debugger is not None:
            debugger.start(model)
        batch = pool[torch.randperm(pool.shape[0])[:8]]
        tokens, targets = batch[:, :-1], batch[:, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            logits = model(tokens)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():  # gradient noise (Neelakantan et al.), one draw for all parameters
            noise = torch.randn(sum(p.numel() for p in params)) * 1e-3
            offset = 0
            for p in params:
                p.grad.add_(noise[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        opt.step()
        with torch.no_grad():
            probs = torch.softmax(logits[:, -1].float(), dim=-1)
            torch.multinomial(probs, 4, replacement=True)
        if debugger is not None:
            debugger.stop()
            debugger.step()
        print(f"loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
