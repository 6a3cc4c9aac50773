"""A training step that calls custom operators, myops::scaled_tanh and (with --random)
myops::fused_dropout_add, checked by Parity.

The operators are declared here with their device kernels (in a real training they come from
your extension or fused-kernel library); the server replays them through the reference library
built from my_ops.cc, loaded with --reference_libraries=libmy_ops.so (docs/operators.md).
fused_dropout_add draws random numbers: give the agent and the server the same operator
catalogue listing it (parity.operator_catalogue, catalogue.json next to this script), so that
the agent sends the generator's state and the server replays the same draws.

    python3 train_custom_op.py --config config.json [--steps 3] [--wrong-kernel] [--random]

--wrong-kernel plays a faulty device kernel: it ignores alpha; --wrong-dropout a faulty
fused_dropout_add: it does not rescale the kept values by 1/(1-p).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's parity package, after any installed one (an installed agent wins).
sys.path.append(os.path.join(HERE, "..", "..", "..", "python"))

LIB = torch.library.Library("myops", "DEF")  # pylint: disable=no-member
LIB.define("scaled_tanh(Tensor x, float alpha=1.0) -> Tensor")
LIB.define("fused_dropout_add(Tensor x, Tensor residual, float p, bool train) -> Tensor")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--wrong-kernel", action="store_true")
    parser.add_argument("--random", action="store_true", help="call fused_dropout_add too")
    parser.add_argument("--wrong-dropout", action="store_true")
    args = parser.parse_args()

    def device_kernel(x, alpha=1.0):
        if args.wrong_kernel:
            return torch.tanh(x)
        return alpha * torch.tanh(x / alpha)

    def fused_dropout_add(x, residual, p, train):
        dropped = torch.nn.functional.dropout(x, p, train)
        if args.wrong_dropout:
            dropped = dropped * (1 - p)
        return dropped + residual

    LIB.impl("scaled_tanh", device_kernel, "CPU")
    LIB.impl("fused_dropout_add", fused_dropout_add, "CPU")

    import parity  # pylint: disable=import-outside-toplevel
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 16)
    debugger = parity.PrecisionDebugger(config_path=args.config)
    for _ in range(args.steps):
        debugger.start(model)
        with torch.no_grad():
            x = torch.randn(8, 16)
            y = torch.ops.myops.scaled_tanh(model(x), 3.0)
            if args.random:
                y = torch.ops.myops.fused_dropout_add(y, x, 0.1, True)
        debugger.stop()
        debugger.step()
        print(f"mean {y.mean().item():.6f}", flush=True)
    debugger.close()


if __name__ == "__main__":
    main()
