"""Agent overhead on training step time, measured side by side in one process:
no agent -> agent loaded but stopped -> started with the per-signature budget -> started
exhaustive (every call checked, block policy, parity-server on loopback). Two more rows split
the exhaustive cost: "every call, drop" captures every call but never waits for the server;
"exhaustive, no replay" sends every call (block) to a server started with --replay=false, which
decodes and answers but does not replay: the agent's and the transport's own cost. On a machine
where the server shares the training's cores, the difference to "exhaustive" is the replay, and
"every call, drop, server niced" shows the remedy for drop mode: the server at nice 19.
Each line is the median step time (forward + backward + SGD) as a ratio to "no agent".

    /usr/bin/python3 tests/bench/agent_overhead.py [--quick]
"""
import argparse
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import harness  # noqa: E402


def mlp():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 10))
    return model, torch.randn(64, 256)


def encoder():
    model = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                             dropout=0.0, batch_first=True)
    return model, torch.randn(8, 32, 128)


def step_times(model, x, steps):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad()
        model(x).float().pow(2).mean().backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return statistics.median(times[2:])  # the first steps warm up allocators and caches


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    steps = 6 if args.quick else 30
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the server shares this machine's cores
    workloads = {"mlp": mlp(), "encoder": encoder()}
    results = {name: {} for name in workloads}
    for name, (model, x) in workloads.items():
        results[name]["no agent"] = step_times(model, x, steps)

    import parity  # noqa: E402  pylint: disable=import-outside-toplevel
    os.environ["PARITY_AGENT_LIB"] = harness.AGENT_LIB
    ops = parity.load_agent()
    for name, (model, x) in workloads.items():
        results[name]["loaded, stopped"] = step_times(model, x, steps)

    workdir = harness.tempdir("parity_overhead_")
    server = harness.Server(workdir, None, extra=["--workers=1", "--golden=true"])
    # The same server at the lowest CPU priority (nice 19), as one sharing the training's machine
    # should run under the drop policy: the training's threads go first when both want a core.
    niced = harness.Server(harness.tempdir("parity_overhead_niced_"), None,
                           extra=["--workers=1", "--golden=true"], nice=19)
    sink_dir = harness.tempdir("parity_overhead_sink_")
    sink = harness.Server(sink_dir, None, extra=["--workers=1", "--replay=false"])
    try:
        modes = {
            "started, budget 1/signature": ({"max_checks_per_signature": 1,
                                             "budget_period": "run"}, server),
            "started, every call, drop": ({"policy": "drop"}, server),
            "started, exhaustive, no replay": ({"policy": "block"}, sink),
            "started, exhaustive": ({"policy": "block"}, server),
            # Last: whatever it leaves behind must not slow the other rows.
            "every call, drop, server niced": ({"policy": "drop"}, niced),
        }
        for mode, (parity_opts, target) in modes.items():
            for name, (model, x) in workloads.items():
                config = {"task": "tensor", "tensor": {"online_run_ut": True,
                                                       "host": "127.0.0.1", "port": target.port},
                          "parity": dict(plaintext=True, log_level="warning", **parity_opts)}
                import json  # pylint: disable=import-outside-toplevel
                error = ops.start(json.dumps(config))
                if error:
                    raise SystemExit(error)
                results[name][mode] = step_times(model, x, steps)
                ops.flush(60000)
                counters = json.loads(ops.counters())
                ops.stop()
                results[name][mode + " calls"] = counters["sent"]
    finally:
        server.stop()
        niced.stop()
        sink.stop()

    print(f"agent overhead: median step time, fwd+bwd+SGD, {steps} steps, 1 torch thread")
    print(f"{'workload':9} {'mode':31} {'ms/step':>9} {'ratio':>7} {'calls sent':>11}")
    for name, r in results.items():
        base = r["no agent"]
        for mode in ("no agent", "loaded, stopped", "started, budget 1/signature",
                     "started, every call, drop", "every call, drop, server niced",
                     "started, exhaustive, no replay",
                     "started, exhaustive"):
            calls = r.get(mode + " calls", "")
            print(f"{name:9} {mode:31} {r[mode] * 1e3:9.2f} {r[mode] / base:7.2f} {calls:>11}")


if __name__ == "__main__":
    main()
