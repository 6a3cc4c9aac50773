"""Where the CPU time of an exhaustive check goes, on both sides (docs/performance.md).

For each workload (agent_overhead.py's: the MLP, the transformer encoder layer, the Llama-style
LLM in float32), one training process checks every call (policy block) over mutual TLS against
one parity-server (one worker, float64 golden on) on this machine, then the same training runs
without the agent. Each side is measured three ways in the same run:

  - Parity's own counters: the agent's snapshot, encode and serialize time (counters()), the
    server's worker CPU per stage (parity_server_stage_cpu_seconds_total: parse, decode, bench,
    golden, compare, random, write) and how often each stage ran;
  - the process's whole CPU time (getrusage / /proc/PID/stat), so that what no counter covers
    (gRPC's threads, TLS, the queues, the interpreter) is the remainder, not a guess;
  - perf (Debian's linux-perf, when installed and allowed), sampling each process at 499 Hz
    (the training only while its loop runs, through perf's control fifo),
    grouped by shared object: TLS (libssl, libcrypto), gRPC (libgrpc, libgpr, libabsl),
    protobuf, torch compute (libtorch_cpu, libc10, BLAS, OpenMP), Parity's own code, libc,
    kernel, Python.

Costs are printed per checked call and per MB of payload the agent sent.

    /usr/bin/python3 tests/bench/cost_profile.py [--steps N] [--workloads mlp,encoder,llama]
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import harness  # noqa: E402

STAGES = ("parse", "decode", "bench", "golden", "compare", "random", "write")
DSO_GROUPS = [  # (group, regular expression on the shared object's name), first match wins
    ("TLS", r"libssl|libcrypto"),
    ("gRPC", r"libgrpc|libgpr|libabsl|libaddress_sorting|libupb|libre2|libcares"),
    ("protobuf", r"libprotobuf"),
    ("torch compute", r"libtorch|libc10|blas|lapack|libgomp|libmkl|libsleef|libdnnl"),
    ("Parity", r"libparity|parity-server|_C\.cpython|parity_agent"),
    ("libc", r"libc\.so|libc-|libstdc\+\+|libm\.so|ld-linux"),
    ("kernel", r"\[kernel|kallsyms"),
    ("Python", r"python3"),
]


def perf_control(command):
    """Tells a `perf record -D -1 --control fifo:CTL,ACK` around this process to start or stop
    sampling, and waits for its acknowledgement (no-op without one)."""
    ctl, ack = os.environ.get("PARITY_PERF_CTL"), os.environ.get("PARITY_PERF_ACK")
    if not ctl:
        return
    with open(ctl, "w", encoding="ascii") as f:
        f.write(command + "\n")
    with open(ack, encoding="ascii") as f:
        f.readline()


def child(spec):
    """The training: `steps` steps of one workload, with or without the agent; prints JSON."""
    import torch  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, HERE)
    import agent_overhead  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)
    debugger = None
    if spec["config"]:
        import parity  # pylint: disable=import-outside-toplevel
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec["config"], f)
        debugger = parity.PrecisionDebugger(f.name)
        debugger.start()
    model, x = agent_overhead.workload(spec["workload"])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    perf_control("enable")  # perf samples the training loop only, not the imports
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for _ in range(spec["steps"]):
        opt.zero_grad()
        model(x).float().pow(2).mean().backward()
        opt.step()
    train_wall = time.perf_counter() - start
    counters = {}
    if debugger is not None:
        debugger.flush(300)
        counters = debugger.counters()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    perf_control("disable")
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(json.dumps({"wall": train_wall, "cpu": cpu, "counters": counters}))


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stage_metrics(server):
    out = {}
    for stage in STAGES:
        out[stage] = (server.metric("parity_server_stage_cpu_seconds_total", stage=stage),
                      server.metric("parity_server_stage_runs_total", stage=stage))
    return out


def perf_usable():
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "stat", "-e", "task-clock", "true"], capture_output=True,
                           check=False)
    return probe.returncode == 0


def perf_groups(data):
    """Share of samples by DSO group, from `perf report --sort dso`."""
    if not os.path.exists(data):
        return {}
    rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso",
                          "--percent-limit", "0"], capture_output=True, text=True, check=False)
    shares = {}
    for line in rep.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S.*)$", line)
        if not m:
            continue
        pct, dso = float(m.group(1)), m.group(2).strip()
        group = next((g for g, pat in DSO_GROUPS if re.search(pat, dso)), "other")
        shares[group] = shares.get(group, 0.0) + pct / 100
    return shares


def run_child(spec, perf_out=None):
    cmd = [harness.PYTHON, os.path.abspath(__file__), "--child", json.dumps(spec)]
    env = dict(os.environ, PARITY_AGENT_LIB=harness.AGENT_LIB)
    if perf_out:
        ctl, ack = perf_out + ".ctl", perf_out + ".ack"
        for fifo in (ctl, ack):
            if not os.path.exists(fifo):
                os.mkfifo(fifo)
        cmd = ["perf", "record", "-q", "-F", "499", "-D", "-1", "--control",
               f"fifo:{ctl},{ack}", "-o", perf_out, "--"] + cmd
        env.update(PARITY_PERF_CTL=ctl, PARITY_PERF_ACK=ack)
    proc = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=1800)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def profile(name, steps, use_perf, workdir, tls):
    server_tls, client_tls = tls
    os.makedirs(os.path.join(workdir, name), exist_ok=True)
    server = harness.Server(os.path.join(workdir, name), server_tls,
                            extra=["--workers=1", "--golden=true"])
    perf_server = None
    try:
        config = {"task": "tensor",
                  "tensor": {"online_run_ut": True, "host": "127.0.0.1", "port": server.port,
                             "tls_path": client_tls},
                  "parity": {"policy": "block", "log_level": "warning"}}
        before = stage_metrics(server)
        cpu_before = proc_cpu(server.proc.pid)
        server_data = os.path.join(workdir, f"{name}.server.perf")
        agent_data = os.path.join(workdir, f"{name}.agent.perf")
        if use_perf:
            perf_server = subprocess.Popen(["perf", "record", "-q", "-F", "499", "-o",
                                            server_data, "-p", str(server.proc.pid)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # perf attaching: samples before it only shorten the profile
        checked = run_child({"workload": name, "steps": steps, "config": config},
                            agent_data if use_perf else None)
        if perf_server is not None:
            perf_server.send_signal(2)
            perf_server.wait(timeout=120)
        after = stage_metrics(server)
        server_cpu = proc_cpu(server.proc.pid) - cpu_before
    finally:
        server.stop()
    bare = run_child({"workload": name, "steps": steps, "config": None})
    stages = {s: (after[s][0] - before[s][0], int(after[s][1] - before[s][1])) for s in STAGES}
    return {"steps": steps, "checked": checked, "bare": bare, "stages": stages, "server_cpu": server_cpu,
            "server_perf": perf_groups(server_data) if use_perf else {},
            "agent_perf": perf_groups(agent_data) if use_perf else {}}


def report(name, r, out=sys.stdout):
    c = r["checked"]["counters"]
    calls = max(c.get("sent", 0), 1)
    mb = c.get("sent_bytes", 0) / 1e6
    agent_cpu = r["checked"]["cpu"] - r["bare"]["cpu"]

    def row(what, seconds, note=""):
        per_call = seconds / calls * 1e6
        per_mb = seconds / mb * 1e3 if mb else float("nan")
        print(f"  {what:34} {seconds:9.3f} s {per_call:10.1f} us/call {per_mb:9.1f} ms/MB"
              f"  {note}", file=out)

    print(f"{name}: {c.get('sent', 0)} calls checked, {mb:.1f} MB sent, "
          f"{c.get('reused_bytes', 0) / 1e6:.1f} MB of tensors named again instead; training CPU "
          f"{r['bare']['cpu']:.2f} s alone, {r['checked']['cpu']:.2f} s with the agent", file=out)
    print(" agent (the training process's CPU above the bare training)", file=out)
    row("total", agent_cpu)
    row("snapshot copies (training thread)", c.get("snapshot_seconds", 0), "wall, per copy")
    row("encode (sender thread)", c.get("encode_cpu_seconds", 0))
    row("serialize (sender thread)", c.get("serialize_cpu_seconds", 0))
    # What the counters above do not cover, from the whole process's CPU (getrusage: every
    # thread, user and system): gRPC's threads, TLS, the kernel's socket and wake-up work, the
    # queue, the hook's own bookkeeping. The side-by-side figure (agent_overhead.py's cpu ms
    # column) is this total per step.
    covered = sum(c.get(k, 0) for k in ("snapshot_seconds", "encode_cpu_seconds",
                                        "serialize_cpu_seconds"))
    row("not covered by a counter", agent_cpu - covered,
        f"{(agent_cpu - covered) / agent_cpu:.0%} of the total" if agent_cpu > 0 else "")
    ap = r["agent_perf"]
    total_checked = r["checked"]["cpu"]
    if ap:  # shares of the whole process, the training's own compute included
        for group in ("TLS", "gRPC", "protobuf", "Parity", "libc", "kernel"):
            row(f"{group} (perf share x process CPU)", ap.get(group, 0) * total_checked,
                f"{ap.get(group, 0):.1%} of samples")
    print(" server (worker CPU by stage; the rest of the process from /proc and perf)", file=out)
    row("total", r["server_cpu"])
    staged = 0.0
    for stage in STAGES:
        secs, runs = r["stages"][stage]
        staged += secs
        if runs:
            row(stage, secs, f"{runs} runs")
    row("other (gRPC threads, TLS, queues)", r["server_cpu"] - staged)
    sp = r["server_perf"]
    if sp:
        for group in ("TLS", "gRPC", "protobuf", "torch compute", "Parity", "libc", "kernel"):
            row(f"{group} (perf share x process CPU)", sp.get(group, 0) * r["server_cpu"],
                f"{sp.get(group, 0):.1%} of samples")

    # The bound: the training's own step time, or the CPU the step and the replays of its calls
    # need spread over the machine's cores when that is longer (docs/performance.md).
    steps = r["steps"]
    replay = r["stages"]["bench"][0] + r["stages"]["golden"][0] + r["stages"]["random"][0]
    bare_step = r["bare"]["wall"] / steps
    bound = max(bare_step, (r["bare"]["cpu"] + replay) / (os.cpu_count() or 1) / steps)
    checked_step = r["checked"]["wall"] / steps
    print(f" step time: bare {bare_step * 1e3:.1f} ms, exhaustive {checked_step * 1e3:.1f} ms "
          f"({checked_step / bare_step:.2f}x bare), bound {bound * 1e3:.1f} ms "
          f"(training {r['bare']['cpu'] / steps * 1e3:.1f} + replays {replay / steps * 1e3:.1f} "
          f"ms CPU over {os.cpu_count()} cores): exhaustive / bound {checked_step / bound:.2f}",
          file=out)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--workloads", default="mlp,encoder,llama")
    parser.add_argument("--no-perf", action="store_true", help="counters and /proc only")
    parser.add_argument("--json", help="also write the raw measurements here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    use_perf = not args.no_perf and perf_usable()
    workdir = harness.tempdir("parity_cost_")
    tls = harness.make_certs(os.path.join(workdir, "certs"))
    print(f"cost profile: exhaustive (policy block), mutual TLS, one server worker, golden on, "
          f"{args.steps} steps, 1 torch thread; perf {'on' if use_perf else 'off'}")
    results = {}
    for name in args.workloads.split(","):
        results[name] = profile(name, args.steps, use_perf, workdir, tls)
        report(name, results[name])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
