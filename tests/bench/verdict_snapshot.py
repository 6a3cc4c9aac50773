"""Verdict snapshots: runs the example trainings (and a few planted faults) against a parity-server
built from this tree and keeps every checked output's verdict, so that a change meant to make
checking cheaper can be shown not to change what it decides.

    /usr/bin/python3 tests/bench/verdict_snapshot.py take  BEFORE.json   # with the old build
    /usr/bin/python3 tests/bench/verdict_snapshot.py take  AFTER.json    # with the new build
    /usr/bin/python3 tests/bench/verdict_snapshot.py diff  BEFORE.json AFTER.json

`take --agent KEY=NUMBER` sets a parity.* agent option for every run (e.g. reuse_bytes=0 takes
the snapshot with every tensor sent in full); `take --server=FLAG` a server flag (e.g.
`--server=--bench_device=cuda`: the same trainings judged by a bench on the GPU, to diff against
the CPU bench's snapshot, as scripts/gpu-check.sh does).

Each run uses policy `block` (every call is checked) and fixed seeds, so the same calls arrive in
the same order. A snapshot maps (run, rank, step, call index, phase, op, output) to the call's
status and message head, the output's status, two-way status, failed metric, standard and metric
values. `diff` prints four lists, each grouped by op: verdict changes (status or two-way status:
a cheaper check must have none), failed-metric changes (the same status for another reason),
standard changes (which standard judged an output) and metric value changes; it exits 1 when a
verdict changed or a call went missing.
"""
import argparse
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

EXAMPLES = os.path.join(harness.ROOT, "docs", "examples")
RUNS = {
    "mlp": [os.path.join(EXAMPLES, "train_mlp.py"), "--steps", "4", "--dropout", "0.1"],
    "mlp_fault_gelu": [os.path.join(EXAMPLES, "train_mlp.py"), "--steps", "2", "--fault",
                       "gelu_tanh"],
    "llama_fp32": [os.path.join(EXAMPLES, "train_llama.py"), "--steps", "2", "--dropout", "0.1"],
    "llama_bf16": [os.path.join(EXAMPLES, "train_llama.py"), "--steps", "2", "--autocast",
                   "bf16"],
    "llama_fault_rope": [os.path.join(EXAMPLES, "train_llama.py"), "--steps", "1", "--fault",
                         "rope_rotates_wrong_half"],
    "llama_bf16_fault_gemm": [os.path.join(EXAMPLES, "train_llama.py"), "--steps", "1",
                              "--autocast", "bf16", "--fault", "matmul_bf16_accumulator"],
    "llama_fused_bf16": [os.path.join(EXAMPLES, "train_llama.py"), "--steps", "1", "--autocast",
                         "bf16", "--fused", "--npu-sim",
                         os.path.join(harness.BUILD, "tests", "libparity_npu_sim.so")],
}


def take(path, runs, agent_options=(), server_flags=()):
    snapshot = {}
    env = dict(os.environ, PARITY_AGENT_LIB=harness.AGENT_LIB)
    for name in runs:
        workdir = harness.tempdir(f"parity_snapshot_{name}_")
        server = harness.Server(workdir, None,
                                extra=["--workers=1", "--golden=true", *server_flags])
        try:
            config = harness.agent_config(os.path.join(workdir, "config.json"), server.port,
                                          policy="block", log_level="warning",
                                          **dict(agent_options))
            subprocess.run([harness.PYTHON, *RUNS[name], "--config", config], check=True,
                           cwd=workdir, stdout=subprocess.DEVNULL, timeout=900, env=env)
        finally:
            server.stop()
        records = server.records()
        for r in records:
            call = (name, r.get("rank", 0), r.get("step", 0), r["call_index"], r["phase"],
                    r["op"])
            base = "|".join(str(v) for v in call)
            snapshot[base] = {"status": r["status"], "message": r["message"].split("\n")[0]}
            for o in r["outputs"]:
                snapshot[f"{base}|out{o['index']}"] = {
                    "status": o["status"], "two_way_status": o["two_way_status"],
                    "failed_metric": o["failed_metric"], "standard": o["standard"],
                    "metrics": o["metrics"]}
        print(f"{name}: {len(records)} calls", file=sys.stderr)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(snapshot, f, indent=0, sort_keys=True)


def diff(before_path, after_path, out=sys.stdout):
    with open(before_path, encoding="utf-8") as f:
        before = json.load(f)
    with open(after_path, encoding="utf-8") as f:
        after = json.load(f)
    missing = sorted(set(before) - set(after))
    added = sorted(set(after) - set(before))
    verdicts, reasons, standards, metrics = (collections.defaultdict(list) for _ in range(4))
    for key in sorted(set(before) & set(after)):
        b, a = before[key], after[key]
        op = key.split("|")[5]
        for field in ("status", "two_way_status"):
            if b.get(field) != a.get(field):
                verdicts[op].append(f"{key}: {field} {b.get(field)} -> {a.get(field)}")
        if b.get("failed_metric") != a.get("failed_metric"):
            reasons[op].append(f"{b.get('failed_metric')} -> {a.get('failed_metric')}")
        if b.get("standard") != a.get("standard"):
            standards[op].append(f"{b.get('standard')} -> {a.get('standard')}")
        for m in sorted(set(b.get("metrics", {})) | set(a.get("metrics", {}))):
            vb, va = b.get("metrics", {}).get(m), a.get("metrics", {}).get(m)
            if vb != va:
                metrics[op].append(f"{m} {vb} -> {va}")
    outputs = sum(1 for k in before if "|out" in k)
    print(f"{len(before) - outputs} calls, {outputs} outputs before; "
          f"{len(missing)} keys missing after, {len(added)} new", file=out)
    for k in missing[:20]:
        print(f"  missing: {k}", file=out)
    for k in added[:20]:
        print(f"  new: {k}", file=out)

    def show(title, groups, limit):
        print(f"{title}: {sum(len(v) for v in groups.values())} in {len(groups)} ops", file=out)
        for op in sorted(groups):
            counted = collections.Counter(groups[op])
            shown = "; ".join(f"{c}x {what}" if c > 1 else what
                              for what, c in counted.most_common(limit))
            print(f"  {op}: {shown}", file=out)

    show("verdict changes", verdicts, 5)
    show("failed-metric changes (same status)", reasons, 3)
    show("standard changes", standards, 3)
    show("metric value changes", metrics, 3)
    return 1 if verdicts or missing else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("take")
    t.add_argument("path")
    t.add_argument("--runs", default=",".join(RUNS), help="comma-separated: " + ",".join(RUNS))
    t.add_argument("--agent", action="append", default=[], metavar="KEY=NUMBER",
                   help="a parity.* agent option for every run, e.g. reuse_bytes=0")
    t.add_argument("--server", action="append", default=[], metavar="FLAG",
                   help="a parity-server flag for every run, e.g. --bench_device=cuda")
    d = sub.add_parser("diff")
    d.add_argument("before")
    d.add_argument("after")
    args = parser.parse_args()
    if args.cmd == "take":
        take(args.path, args.runs.split(","),
             [(k, int(v)) for k, v in (o.split("=", 1) for o in args.agent)], args.server)
        return 0
    return diff(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
