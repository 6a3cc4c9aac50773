"""The fault suite's training script: a small attention block that touches every kind of op the
suite plants faults in, in float32, float16 and bfloat16, forward and backward.

    /usr/bin/python3 tests/faults/train_faults.py --config config.json --fault gelu_tanh

One call of each faulty op per step, in this order (so the suite knows each fault's call index):
embedding, index_select, linear, layer_norm, matmul (scores), softmax, matmul (mix), gelu,
mm (bfloat16), tanh, relu, mean (float32), sum (float16), mse_loss.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's parity package, after any installed one (an installed agent wins).
sys.path.append(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)

BATCH, TOKENS, WIDTH, VOCAB = 8, 16, 64, 50


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.fc1 = torch.nn.Linear(WIDTH, WIDTH)
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.act = torch.nn.GELU()
        # Stored in float32, used in bfloat16 (as autocast would): a low-precision matmul.
        self.proj = torch.nn.Parameter(torch.randn(WIDTH, WIDTH) / WIDTH ** 0.5)
        self.head = torch.nn.Linear(WIDTH, 1)

    def forward(self, tokens, order):
        h = self.embed(tokens)                                   # indexing
        h = torch.index_select(h, 1, order)                      # indexing
        h = self.norm(self.fc1(h))                               # matmul-like, normalisation
        # Sharp attention: the diagonal of the scores is ~1.6 * WIDTH, past float32's exp range,
        # so a softmax that does not subtract the row maximum overflows.
        scores = torch.matmul(h, h.transpose(1, 2)) * 1.6         # matmul-like (bmm)
        h = torch.matmul(torch.softmax(scores, dim=-1), h) + h   # reduction + matmul-like
        h = self.act(h)                                          # elementwise
        low = torch.mm(h.reshape(-1, WIDTH).bfloat16(), self.proj.bfloat16())  # bfloat16 matmul
        h = torch.tanh(low.float().reshape(h.shape))             # transcendental
        h = torch.relu(h)                                        # exact standard
        centred = h - h.mean(dim=-1, keepdim=True)               # float32 reduction
        half = centred.reshape(BATCH, -1).half()
        energy = (half * half).sum(dim=-1).float()               # float16 reduction (1024 terms)
        return self.head(h).mean(dim=(1, 2)) + 1e-3 * energy


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="Parity (msprobe-style) config.json; none: no agent")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--fault", help="a fault from tests/faults/faults.py")
    args = parser.parse_args()

    if args.fault:
        import faults  # pylint: disable=import-outside-toplevel
        faults.plant(args.fault)
    torch.manual_seed(0)
    model = Block()
    # foreach: the update is one _foreach_add_ over every parameter, as optimizers run on GPUs
    # (an op that returns nothing: judged by the parameters it writes).
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    tokens = torch.randint(0, VOCAB, (BATCH, TOKENS))
    order = torch.randperm(TOKENS)
    target = torch.randn(BATCH)

    debugger = None
    if args.config:
        import parity  # pylint: disable=import-outside-toplevel
        debugger = parity.PrecisionDebugger(config_path=args.config)
        debugger.start(model)
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(tokens, order), target)
        loss.backward()
        opt.step()
        if debugger is not None:
            debugger.step()
    if debugger is not None:
        debugger.stop()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
