"""A small real training run checked by Parity: an MLP with LayerNorm and GELU on a synthetic
regression task, forward and backward, SGD, 20 steps.

    python3 train_mlp.py --config config.json            # the msprobe-style API
    PARITY_CONFIG=config.json LD_PRELOAD=.../libparity_agent.so python3 train_mlp.py --no-agent
    python3 train_mlp.py --no-agent                       # no checking at all

--fault NAME plants a fault from tests/faults (this process plays a faulty accelerator).
--device cuda trains on the GPU (the agent copies each call's tensors to the host off the
training's stream).
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# The checkout's parity package, after any installed one (an installed agent wins).
sys.path.append(os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "faults"))


class Mlp(torch.nn.Module):
    def __init__(self, width=64, dropout=0.0):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, width)
        self.norm = torch.nn.LayerNorm(width)
        self.act = torch.nn.GELU()
        self.drop = torch.nn.Dropout(dropout)
        self.fc2 = torch.nn.Linear(width, 1)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.norm(self.fc1(x)))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", help="Parity (msprobe-style) config.json")
    parser.add_argument("--no-agent", action="store_true", help="do not import parity")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fault", help="plant a fault from tests/faults/faults.py")
    parser.add_argument("--device", default="cpu", help="where to train: cpu, cuda, cuda:N")
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="dropout after the activation (checked as a random op)")
    parser.add_argument("--losses", help="write each step's loss here (bit-exact hex)")
    parser.add_argument("--kill-at-step", type=int, default=-1,
                        help="SIGKILL the pid in $PARITY_SERVER_PID at this step (a test)")
    parser.add_argument("--loop", choices=["once", "msprobe"], default="once",
                        help="once: start() before the loop; msprobe: start()/stop()/step() "
                             "every iteration, as msprobe's docs write the loop")
    args = parser.parse_args()

    if args.fault:
        import faults  # pylint: disable=import-outside-toplevel
        faults.plant(args.fault, args.device)
    torch.manual_seed(0)
    model = Mlp(dropout=args.dropout).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.randn(64, 32).to(args.device)
    target = data[:, :4].sum(dim=1, keepdim=True)

    debugger = None
    if not args.no_agent:
        import parity  # pylint: disable=import-outside-toplevel
        debugger = parity.PrecisionDebugger(config_path=args.config)
        if args.loop == "once":
            debugger.start(model)
    losses = []
    for step in range(args.steps):
        if step == args.kill_at_step:
            os.kill(int(os.environ["PARITY_SERVER_PID"]), 9)
        if debugger is not None and args.loop == "msprobe":
            debugger.start(model)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if debugger is not None:
            if args.loop == "msprobe":
                debugger.stop()
            debugger.step()
    if debugger is not None:
        debugger.close()
        print("parity counters:", json.dumps(debugger.counters()))
    if args.losses:
        with open(args.losses, "w", encoding="utf-8") as f:
            f.write("\n".join(float(l).hex() for l in losses) + "\n")
    print(f"final loss {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
