"""What msprobe's call-site names cost a torch call (parity.api_names "call_site", the default):
the same small op timed bare, under a TorchFunctionMode that only passes each call through (what
torch's own mode dispatch costs), and under Parity's naming mode (python/parity/_call_site.py:
the name table's lookup and the two foreign calls that tell the agent's hook), interleaved,
best of the rounds, on one thread.

    PARITY_BUILD_DIR=build /usr/bin/python3 tests/bench/call_site_bench.py [--quick]

A budgeted training pays this on every torch call its Python makes, checked or not; with
parity.api_names "operator" it pays none of it (docs/performance.md).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

from parity import _call_site  # noqa: E402  pylint: disable=wrong-import-position


class PassThrough(TorchFunctionMode):
    """A mode that does nothing but call the function: torch's dispatch to a mode, alone."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **kwargs) if kwargs else func(*args)


def per_call_us(n, a, b):
    start = time.perf_counter()
    for _ in range(n):
        torch.add(a, b)
    return (time.perf_counter() - start) / n * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    build = os.environ.get("PARITY_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
    lib = os.path.join(build, "agent", "libparity_agent.so")
    import ctypes  # pylint: disable=import-outside-toplevel
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)  # parity_agent_set_api, as an import makes it found
    torch.set_num_threads(1)
    a, b = torch.randn(16), torch.randn(16)
    n, rounds = (2000, 1) if args.quick else (100000, 5)
    best = {"bare": 1e9, "pass-through mode": 1e9, "Parity's naming mode": 1e9}
    for _ in range(rounds):
        best["bare"] = min(best["bare"], per_call_us(n, a, b))
        with PassThrough():
            best["pass-through mode"] = min(best["pass-through mode"], per_call_us(n, a, b))
        mode = _call_site.enter(lib)
        if mode is None:
            print(f"{lib} has no parity_agent_set_api")
            return 1
        try:
            best["Parity's naming mode"] = min(best["Parity's naming mode"], per_call_us(n, a, b))
        finally:
            _call_site.leave(mode)
    print(f"call_site_bench: torch.add of 16 floats, torch {torch.__version__}, one thread, "
          f"best of {rounds} rounds of {n} calls")
    for row, us in best.items():
        print(f"  {row:24s} {us:6.2f} us a call  +{us - best['bare']:5.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
