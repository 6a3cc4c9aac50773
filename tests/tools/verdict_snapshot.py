"""Runs the example trainings through the real agent and parity-server and writes every verdict,
normalised (no times, no paths), one JSON object per line, sorted: a change that must not change
verdicts (a refactor, a faster path) is checked by diffing two snapshots.

    PARITY_BUILD_DIR=build /usr/bin/python3 tests/tools/verdict_snapshot.py OUT.jsonl
    diff <(before) <(after)

Each line: rank, step, sequence, op, overload, phase, forward op, status, and per output its
status, standard, failed metric and the metrics rounded to 6 significant digits (the server's
arithmetic is deterministic on one machine; rounding keeps the file readable). Runs: the MLP
example (clean, 4 steps) and the fault suite's block (clean and one harmful fault, 2 steps):
RUNS below.
"""
import argparse
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

ROOT = harness.ROOT

# (name, script and arguments). Each runs on its own rank, so one server keeps them apart.
RUNS = [
    ("mlp", [os.path.join(ROOT, "docs", "examples", "train_mlp.py"), "--steps", "4"]),
    ("faults_clean", [os.path.join(ROOT, "tests", "faults", "train_faults.py"), "--steps", "2"]),
    ("faults_gelu", [os.path.join(ROOT, "tests", "faults", "train_faults.py"), "--steps", "2",
                     "--fault", "gelu_tanh"]),
]


def rounded(value):
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.6g}")
    return value


def normalise(record, run):
    outputs = []
    for out in record.get("outputs", []):
        outputs.append({
            "status": out.get("status"),
            "standard": out.get("standard"),
            "failed_metric": out.get("failed_metric"),
            "metrics": {k: rounded(v) for k, v in sorted(out.get("metrics", {}).items())},
        })
    return {"run": run, "step": record.get("step"), "sequence": record.get("sequence"),
            "op": record.get("op"), "overload": record.get("overload"),
            "phase": record.get("phase"), "forward_op": record.get("forward_op"),
            "status": record.get("status"), "outputs": outputs}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    args = parser.parse_args()
    work = harness.tempdir("parity_snapshot_")
    server_tls, client_tls = harness.make_certs(os.path.join(work, "certs"))
    server = harness.Server(work, server_tls)
    try:
        config = harness.agent_config(os.path.join(work, "config.json"), server.port, client_tls,
                                      policy="block")
        for rank, (name, script) in enumerate(RUNS):
            r = harness.run([harness.PYTHON, *script, "--config", config],
                            env={"RANK": str(rank), "WORLD_SIZE": str(len(RUNS))})
            if r.returncode != 0:
                sys.exit(f"{name} failed:\n{r.stderr[-3000:]}")
    finally:
        server.stop()
    names = dict(enumerate(name for name, _ in RUNS))
    lines = sorted(json.dumps(normalise(x, names.get(x["rank"], x["rank"])), sort_keys=True)
                   for x in server.records())
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} verdicts in {args.out}")


if __name__ == "__main__":
    main()
