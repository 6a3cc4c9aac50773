"""How far each device's float32 kernels are from float64, op by op: the mean and max relative
error of the elements the standard calls normal (|golden| >= 2**-20), on N(0, sigma^2) inputs.

A benchmark-standard verdict compares the device's error with the bench's (ratio > 2 of mean
relative error, floor 2**-14, is an error): when the training's device and the bench run
different kernels (a CPU-tensor training against a CUDA bench, an NPU against a GPU), a kernel
that is less accurate than the bench's in some input range is reported there. This prints the
two sides' errors so such a verdict can be told from a planted fault. The CPU column always; a
CUDA column where torch sees a GPU (scripts/gpu-check.sh runs it in its e2e phase).
    /usr/bin/python3 tests/bench/kernel_accuracy.py [--elements N]
"""
import argparse

import torch
import torch.nn.functional as F

OPS = {
    "gelu": F.gelu,
    "gelu tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "exp": torch.exp,
    "softmax": lambda x: torch.softmax(x.view(-1, 1024), -1),
    "layer_norm": lambda x: F.layer_norm(x.view(-1, 1024), (1024,)),
}


def errors(fn, x, golden):
    normal = golden.abs() >= 2.0 ** -20
    rel = ((fn(x).double().cpu() - golden).abs() / golden.abs())[normal]
    return rel.mean().item(), rel.max().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=1 << 20)
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    torch.manual_seed(0)
    head = "%-12s %5s" % ("op", "sigma") + "".join(
        " %11s %9s" % (d + " mean", "max") for d in devices)
    print("float32 against float64, relative error over normal elements; torch", torch.__version__)
    print(head + ("  mean ratio cpu/cuda" if len(devices) > 1 else ""))
    for name, fn in OPS.items():
        for sigma in (1.0, 2.0, 4.0):
            x = torch.randn(args.elements) * sigma
            golden = fn(x.double())
            row = "%-12s %5.1f" % (name, sigma)
            means = []
            for d in devices:
                mean, top = errors(fn, x.to(d), golden)
                means.append(mean)
                row += " %11.3g %9.3g" % (mean, top)
            if len(means) > 1:
                row += "  %8.2f (floored: %.2f)" % (
                    means[0] / max(means[1], 1e-300), means[0] / max(means[1], 2.0 ** -14))
            print(row)


if __name__ == "__main__":
    main()
