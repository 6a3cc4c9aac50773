"""What parity.replicas costs a data-parallel training (docs/replicas.md): the Llama of
tests/e2e/replica_ranks.py (DDP over gloo, AdamW, an all_gather a step) on 2 and 4 ranks, with
no Parity and with every replica digested (gradients, parameters, collectives; operator checking
off, parity.check_calls false), against a parity-server that compares them, rows interleaved
round by round. Each line: the median over ranks and rounds of the median step time, and its
ratio to the bare row of the same world.

    /usr/bin/python3 tests/bench/replica_overhead.py [--rounds 3] [--steps 12] [--worlds 2,4]
"""
import argparse
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

def rendezvous():
    """A file path that does not exist yet, for the ranks of one training to meet at."""
    return os.path.join(harness.tempdir("parity_rendezvous_"), "store")


SCRIPT = os.path.join(HERE, "..", "e2e", "replica_ranks.py")


def step_ms(config, world, steps, parity):
    args = [harness.PYTHON, SCRIPT, config, str(world), rendezvous(), str(steps)]
    if not parity:
        args.append("--no-parity")
    r = harness.run(args, timeout=240)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return statistics.median(float(m) for m in re.findall(r"step_ms ([0-9.]+)", r.stdout))


def measure(worlds, steps, rounds):
    """{(world, parity): [median step ms per round]} and the server's (comparisons, parameter
    mismatches): rows interleaved round by round, against one parity-server (no replay)."""
    work = harness.tempdir("parity_replica_overhead_")
    server = harness.Server(work, extra=["--replay=false"])
    try:
        config = harness.agent_config(os.path.join(work, "config.json"), server.port,
                                      replicas=["gradients", "parameters", "collectives"],
                                      check_calls=False)
        times = {(w, p): [] for w in worlds for p in (False, True)}
        for _ in range(rounds):
            for w in worlds:
                for parity in (False, True):
                    times[(w, parity)].append(step_ms(config, w, steps, parity))
        checks = sum(server.metric("parity_server_replica_checks_total", kind=k, verdict=v)
                     for k in ("gradients", "parameters", "collective")
                     for v in ("pass", "error", "skip"))
        mismatches = server.metric("parity_server_replica_mismatches_total", kind="parameters")
    finally:
        server.stop()
    return times, checks, mismatches


def report(times, worlds, steps, rounds, checks, mismatches):
    print(f"replica overhead: Llama dim 64, 2 layers, 2x16 tokens, DDP over gloo, AdamW; "
          f"{steps} steps (median after the first), {rounds} rounds, {os.cpu_count()} cores")
    print(f"{'ranks':>5} {'mode':34} {'ms/step':>9} {'ratio':>6} {'spread':>11} {'+ms/step':>9}")
    for w in worlds:
        bare = statistics.median(times[(w, False)])
        for parity in (False, True):
            ms = statistics.median(times[(w, parity)])
            mode = "replicas digested and compared" if parity else "no Parity"
            ratios = [t / bare for t in times[(w, parity)]]
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
            print(f"{w:>5} {mode:34} {ms:9.2f} {ms / bare:6.2f} {spread:>11} {ms - bare:9.2f}")
    print(f"comparisons on the server: {checks:.0f}; parameter mismatches: {mismatches:.0f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--quick", action="store_true", help="1 round, 3 steps, 2 ranks")
    args = parser.parse_args()
    rounds, steps, worlds = (1, 3, [2]) if args.quick else \
        (args.rounds, args.steps, [int(w) for w in args.worlds.split(",")])
    times, checks, mismatches = measure(worlds, steps, rounds)
    report(times, worlds, steps, rounds, checks, mismatches)


if __name__ == "__main__":
    main()
