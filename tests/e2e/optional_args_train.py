"""A training whose backward ops take optional arguments that are absent: losses without class
weights, normalisations without affine parameters, a convolution without bias, an embedding with
a padding index. autograd hands those kernels undefined tensors; each must be replayed and
judged like any other call (tests/e2e/test_optional_args.py).

--fault nll_loss_backward_counts_ignored plants a harmful fault in nll_loss's backward: the mean
is divided by every target, counting the ignored ones (-100), instead of by the targets that
count (`total_weight`), so every gradient of the loss is too small."""
import argparse
import os
import sys
import warnings

import torch
import torch.nn.functional as F

# The checkout's parity package, after any installed one (an installed agent wins).
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
_LIBS = []


def nll_loss_backward_counts_ignored():
    def bad(grad_output, self, target, weight, reduction, ignore_index, total_weight):
        keep = target != ignore_index
        safe = torch.where(keep, target, torch.zeros_like(target))
        grad = torch.zeros_like(self).scatter(1, safe.unsqueeze(1), -1.0)
        grad = grad * keep.unsqueeze(1).to(self.dtype)
        if weight is not None:
            grad = grad * weight.unsqueeze(0)
        if reduction == 1:  # mean: the bug divides by every row, ignored ones included
            return grad * (grad_output / self.shape[0])
        return grad * grad_output
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Overriding a previously registered kernel")
        lib.impl("nll_loss_backward", bad, "CPU")
    _LIBS.append(lib)


class Model(torch.nn.Module):
    def __init__(self, vocab=12, width=8):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width, padding_idx=0)
        self.conv = torch.nn.Conv1d(width, width, 3, padding=1, bias=False)
        self.group = torch.nn.GroupNorm(2, width, affine=False)
        self.norm = torch.nn.LayerNorm(width, elementwise_affine=False)
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)                                     # (B, T, W), padding_idx
        h = self.conv(h.transpose(1, 2))                           # convolution, no bias
        h = self.group(h).transpose(1, 2)                          # group_norm, no affine
        h = self.norm(h)                                           # layer_norm, no affine
        return self.head(h)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--fault")
    args = parser.parse_args()
    if args.fault == "nll_loss_backward_counts_ignored":
        nll_loss_backward_counts_ignored()
    elif args.fault:
        raise SystemExit(f"unknown fault {args.fault!r}")
    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    tokens = torch.randint(0, 12, (4, 6))
    tokens[:, -1] = 0                                              # padding
    target = torch.randint(1, 12, (4, 6))
    target[:, -2:] = -100                                          # ignored positions
    import parity  # pylint: disable=import-outside-toplevel
    debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        debugger.start(model)
        logits = model(tokens).reshape(-1, 12)
        # cross_entropy (log_softmax + nll_loss) and nll_loss itself, both without class weights.
        loss = F.cross_entropy(logits, target.reshape(-1)) + \
            0.5 * F.nll_loss(F.log_softmax(logits, dim=-1), target.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
