"""A training step that calls a custom operator, myops::scaled_tanh, checked by Parity.

The operator is declared here with its device kernel (in a real training it comes from your
extension or fused-kernel library); the server replays it through the reference library built
from my_ops.cc, loaded with --reference_libraries=libmy_ops.so (docs/operators.md).

    python3 train_custom_op.py --config config.json [--steps 3] [--wrong-kernel]

--wrong-kernel plays a faulty device kernel: it ignores alpha.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))

LIB = torch.library.Library("myops", "DEF")  # pylint: disable=no-member
LIB.define("scaled_tanh(Tensor x, float alpha=1.0) -> Tensor")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--wrong-kernel", action="store_true")
    args = parser.parse_args()

    def device_kernel(x, alpha=1.0):
        if args.wrong_kernel:
            return torch.tanh(x)
        return alpha * torch.tanh(x / alpha)

    LIB.impl("scaled_tanh", device_kernel, "CPU")

    import parity  # pylint: disable=import-outside-toplevel
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        debugger.start(model)
        with torch.no_grad():
            y = torch.ops.myops.scaled_tanh(model(torch.randn(8, 16)), 3.0)
        debugger.stop()
        debugger.step()
        print(f"mean {y.mean().item():.6f}", flush=True)
    debugger.close()


if __name__ == "__main__":
    main()
