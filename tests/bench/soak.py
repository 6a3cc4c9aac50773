"""Soak: many short exhaustive trainings, one after another, against the same two servers (one
replaying, one that only decodes and answers), to catch a stall that one run in hundreds shows.
Every run is a fresh process (agent_overhead.py's child: one session per process) cycling over
the workloads (MLP, encoder, Llama), both loop styles (start once; msprobe's start/stop/step every
iteration), tensor reuse on and off, and the two servers; policy block, mutual TLS.

A run that does not end within --timeout is a stall: the soak stops there and writes
stalled_row.txt (gdb stacks of every thread of the training and of both servers, and the
training's log) in its work folder, and exits 1. It also checks after every run that both servers
are still up and that the run sent calls.

    /usr/bin/python3 tests/bench/soak.py [--minutes 10] [--runs N] [--steps 10] [--timeout 300]
"""
import argparse
import collections
import itertools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import agent_overhead  # noqa: E402
import harness  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=10, help="stop starting runs after this")
    parser.add_argument("--runs", type=int, default=0, help="stop after this many runs (0: time)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--timeout", type=int, default=300, help="seconds before a run stalls")
    args = parser.parse_args()

    workdir = harness.tempdir("parity_soak_")
    server_tls, client_tls = harness.make_certs(os.path.join(workdir, "certs"))
    replaying = harness.Server(workdir, server_tls, extra=["--workers=1", "--golden=true"])
    sink = harness.Server(harness.tempdir("parity_soak_sink_"), server_tls,
                          extra=["--workers=1", "--replay=false"])
    servers = {"replay": replaying, "sink": sink}
    env = dict(os.environ, PARITY_AGENT_LIB=harness.AGENT_LIB)
    combos = itertools.cycle(itertools.product(("mlp", "encoder", "llama"), ("once", "msprobe"),
                                               ("reuse", "no reuse"), ("replay", "sink")))
    done = collections.Counter()
    longest = (0.0, "")
    deadline = time.monotonic() + args.minutes * 60
    try:
        while (args.runs and sum(done.values()) < args.runs) or (
                not args.runs and time.monotonic() < deadline):
            workload, loop, reuse, target = next(combos)
            parity_opts = {"policy": "block", "log_level": "warning"}
            if reuse == "no reuse":
                parity_opts["reuse_bytes"] = 0
            config = {"task": "tensor",
                      "tensor": {"online_run_ut": True, "host": "127.0.0.1",
                                 "port": servers[target].port, "tls_path": client_tls},
                      "parity": parity_opts}
            label = f"{workload}, {loop}, {reuse}, {target}"
            spec = {"mode": label, "loop": loop, "steps": args.steps, "config": config,
                    "workloads": [workload]}
            start = time.monotonic()
            row = json.loads(agent_overhead.run_child(spec, env, workdir, [replaying, sink],
                                                      timeout=args.timeout))
            seconds = time.monotonic() - start
            longest = max(longest, (seconds, label))
            if not row[workload][1]:
                raise RuntimeError(f"run {label} sent no calls: {row}")
            for name, server in servers.items():
                if server.proc.poll() is not None:
                    raise RuntimeError(f"the {name} server exited ({server.proc.returncode}) "
                                       f"during run {label}")
            done[label] += 1
    finally:
        replaying.stop()
        sink.stop()
    total = sum(done.values())
    print(f"soak: {total} runs ({len(done)} combinations of workload, loop style, reuse and "
          f"server, {min(done.values())}-{max(done.values())} each), {args.steps} steps each, "
          f"no stall (timeout {args.timeout} s); longest run {longest[0]:.1f} s ({longest[1]})")


if __name__ == "__main__":
    main()
