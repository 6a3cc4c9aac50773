"""Agent overhead on training step time, every row measured in a fresh process (the agent keeps
one session per process) against the same servers, rows interleaved round by round so that each
ratio compares runs made moments apart:
  no agent -> agent loaded, never started -> started with the per-signature budget -> every call
  under policy drop -> exhaustive (every call checked, policy block, parity-server on loopback).
Two more rows split the exhaustive cost: "exhaustive, no replay" sends every call (block) to a
server started with --replay=false, which decodes and answers but does not replay, confined to
the machine's last core with taskset: the agent's and the transport's own cost ("no buffer
pool": the same with parity.snapshot_pool_bytes = 0, every snapshot a fresh allocation; "no
reuse": parity.reuse_bytes = 0, every tensor sent in full, not named again when equal;
"training's priority": parity.background_nice = 0, the agent's threads not niced; "no random
detection" and "no input-write check": parity.detect_random and parity.detect_input_writes off;
"co-located server": the server as docs/deploy.md runs one on the training's host, nice 19, a
worker per core, one libtorch thread each, with its own bound row; "verdicts one by one": the
default server with parity.verdict_hold_ms 0, each verdict sent alone as soon as it is ready). On a
machine where the server shares the training's cores, the difference to "exhaustive" is the
replay; "every call, drop, server niced" shows the remedy for
drop mode: the server at nice 19.
Each mode runs in both loop styles: "once" starts the session before the loop (Parity's own
style), "msprobe" calls PrecisionDebugger's start() / stop() / step() every iteration as msprobe's
docs show. Each line is the median step time (forward + backward + SGD) as a ratio to "no agent".
Every connection is mutual TLS (certificates made by deploy/gen-certs.sh) unless --plaintext.
A "bound [loop]" row precedes each "exhaustive [loop]" row: the step time the replays alone
allow (docs/performance.md#the-bound), from the bare row's CPU per step and the server's
bench, golden and random stage CPU read around the exhaustive row; its "/bound" column is the
exhaustive step over the bound.

    /usr/bin/python3 tests/bench/agent_overhead.py [--quick] [--rounds N] [--steps N]
                                                   [--rows no replay,...]
                                                   [--workloads mlp,encoder,llama,llama-bf16]
(--quick: 6 steps, 1 round, the mlp workload only unless --workloads says otherwise: every mode
still runs once, msprobe's loop for the default policy only, which is what ctest's
agent_overhead_smoke keeps working)
                                                   [--plaintext]

"llama-wide" and "llama-1k" (not in the default list) are the same Llama-style model at dim 256,
FFN 688, 4x128 tokens (about 11x the training's compute per call; 1.4 s a step on one core of
the development VM) and at dim 1024, FFN 2816, 2x128 tokens (an LLM's width: the matmuls'
work per byte of tensor is 8-16x Llama's; about 10 s a step there with Debian's reference BLAS):
the same 527 calls a step, to show how the per-call costs weigh as calls grow. Run them with
fewer steps (--steps 8 for llama-wide; --steps 5 for llama-1k: about 25 minutes for
--rows "exhaustive [,co-located" and 3 rounds).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import harness  # noqa: E402

WORKLOADS = ("mlp", "encoder", "llama", "llama-bf16")
LLAMA_SHAPES = {
    "llama": (dict(dim=128, seq=64), (4, 64)),
    # 4x the width, 2x the tokens: ~11x the compute per call
    "llama-wide": (dict(dim=256, heads=4, kv_heads=2, hidden=688, seq=128), (4, 128)),
    # 8x the width, the same tokens: 64-130x the matmul work per call
    "llama-1k": (dict(dim=1024, heads=8, kv_heads=4, hidden=2816, seq=128), (2, 128)),
}


def workload(name):
    import torch  # pylint: disable=import-outside-toplevel
    torch.manual_seed(0)
    if name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                    torch.nn.Linear(512, 512), torch.nn.GELU(),
                                    torch.nn.Linear(512, 10))
        return model, torch.randn(64, 256)
    if name.startswith("llama"):  # docs/examples/train_llama.py: RMSNorm, RoPE, GQA, SwiGLU
        sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "examples"))
        import train_llama  # pylint: disable=import-outside-toplevel
        # (model shape, token batch); llama-bf16 is the default shape under autocast.
        shape, tokens = LLAMA_SHAPES.get(name, LLAMA_SHAPES["llama"])
        return train_llama.Llama(layers=2, **shape), torch.randint(0, 128, tokens)
    model = torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                             dropout=0.0, batch_first=True)
    return model, torch.randn(8, 32, 128)


def child(spec):
    """One row: runs every workload in this process, prints {workload: [seconds, sent]}."""
    import torch  # pylint: disable=import-outside-toplevel
    torch.set_num_threads(1)  # the servers share this machine's cores
    debugger = None
    if spec["mode"] == "loaded":
        import parity  # pylint: disable=import-outside-toplevel
        parity.load_agent()
    elif spec["config"] is not None:
        import parity  # pylint: disable=import-outside-toplevel
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec["config"], f)
        debugger = parity.PrecisionDebugger(f.name)
        if spec["loop"] in ("once", "stopped"):
            debugger.start()
        if spec["loop"] == "stopped":
            debugger.stop()  # msprobe's stop(): capture paused for the whole run
    out = {}
    sent_before = 0
    for name in spec["workloads"]:
        model, x = workload(name)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        times = []
        replay_before = replay_cpu(spec.get("metrics_port"))
        cpu_before, thread_before = process_cpu(), process_cpu(thread=True)
        copies_before = debugger.counters()["snapshot_seconds"] if debugger is not None else 0.0
        for _ in range(spec["steps"]):
            start = time.perf_counter()
            if debugger is not None and spec["loop"] == "msprobe":
                debugger.start()
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name.endswith("bf16")):
                y = model(x)
            y.float().pow(2).mean().backward()
            opt.step()
            if debugger is not None and spec["loop"] == "msprobe":
                debugger.stop()
                debugger.step()
            times.append(time.perf_counter() - start)
        cpu = (process_cpu() - cpu_before) / spec["steps"]
        thread = (process_cpu(thread=True) - thread_before) / spec["steps"]
        copies = "" if debugger is None else (
            debugger.counters()["snapshot_seconds"] - copies_before) / spec["steps"]
        sent = ""
        if debugger is not None and spec["loop"] != "stopped":
            debugger.flush(300)
            total = debugger.counters()["sent"]
            sent, sent_before = total - sent_before, total
        replay = ""
        if replay_before is not None:  # after the flush: every call of these steps replayed
            replay = (replay_cpu(spec["metrics_port"]) - replay_before) / spec["steps"]
        # The first steps warm up caches: the median of the others.
        out[name] = [statistics.median(times[2:]), sent, cpu, replay, thread, copies]
    print(json.dumps(out))


def run_child(spec, env, workdir, servers, timeout=600):
    """One row's process; its last stdout line. A row that stalls is an error, reported with the
    stacks of every thread of the training and of the servers (gdb, when installed) so that the
    stall can be read, not only seen."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child",
                                 json.dumps(spec)], env=env, stdout=subprocess.PIPE, stderr=err,
                                text=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            report = os.path.join(workdir, "stalled_row.txt")
            with open(report, "w", encoding="utf-8") as f:
                f.write(f"row {spec['mode']} ({spec['loop']}) stalled for {timeout} s\n")
                for name, pid in [("training", proc.pid)] + [
                        (f"server on port {s.port}", s.proc.pid) for s in servers]:
                    if shutil.which("gdb"):
                        stacks = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex",
                                                 "thread apply all bt"], capture_output=True,
                                                text=True, check=False, timeout=120).stdout
                        f.write(f"==== {name} (pid {pid})\n{stacks}\n")
                err.seek(0)
                f.write("==== training's stderr\n" + err.read())
            proc.kill()
            proc.wait()
            raise RuntimeError(f"row {spec['mode']} stalled for {timeout} s; stacks and its "
                               f"log in {report}") from None
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"row {spec['mode']} failed (exit {proc.returncode}):\n"
                               f"{err.read()[-3000:]}")
        return out.strip().splitlines()[-1]


def process_cpu(thread=False):
    """CPU seconds so far of the whole process, or (`thread`) of the calling thread alone."""
    import resource  # pylint: disable=import-outside-toplevel
    r = resource.getrusage(resource.RUSAGE_THREAD if thread else resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def replay_cpu(metrics_port):
    """The server's worker CPU seconds in replays so far (bench, golden, random), or None."""
    if metrics_port is None:
        return None
    return sum(harness.metric(metrics_port, "parity_server_stage_cpu_seconds_total", stage=s)
               for s in ("bench", "golden", "random"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=0, help="rounds of every row (default 3)")
    parser.add_argument("--steps", type=int, default=0,
                        help="training steps of every row (default 30, 6 with --quick)")
    parser.add_argument("--rows", help="only the rows whose name contains one of these "
                        "comma-separated words, or \";\"-separated (row names hold commas; \"no agent\" always runs)")
    parser.add_argument("--workloads", help=f"comma-separated (default {','.join(WORKLOADS)}; "
                        "mlp with --quick, ctest's smoke run: every row, one workload)")
    parser.add_argument("--plaintext", action="store_true",
                        help="connect without TLS (default: mutual TLS, certificates made here)")
    parser.add_argument("--baseline-agent-lib",
                        help="another build's libparity_agent.so: each row but 'no agent' runs "
                        "twice a round, with this build's agent and then with that one (rows "
                        "marked [baseline]), interleaved, e.g. to show what a change costs")
    parser.add_argument("--replica-worlds",
                        help="also the replicas rows (docs/replicas.md): the Llama on these "
                        "comma-separated numbers of data-parallel gloo ranks, with and without "
                        "parity.replicas (tests/bench/replica_overhead.py's rows, after the "
                        "table; --rounds and --steps apply)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    steps = args.steps or (6 if args.quick else 30)
    rounds = args.rounds or (1 if args.quick else 3)

    workdir = harness.tempdir("parity_overhead_")
    # Mutual TLS as a cluster runs it (the transport's cost included), unless --plaintext.
    server_tls, client_tls = (None, None) if args.plaintext else harness.make_certs(
        os.path.join(workdir, "certs"))
    server = harness.Server(workdir, server_tls, extra=["--workers=1", "--golden=true"])
    # The same server at the lowest CPU priority (nice 19), as one sharing the training's machine
    # should run under the drop policy: the training's threads go first when both want a core.
    niced = harness.Server(harness.tempdir("parity_overhead_niced_"), server_tls,
                           extra=["--workers=1", "--golden=true"], nice=19)
    # A server sharing the training's host as docs/deploy.md#a-server-on-the-trainings-host
    # runs it: nice 19, a worker per core, one libtorch thread each.
    colocated = harness.Server(harness.tempdir("parity_overhead_colocated_"), server_tls,
                               extra=[f"--workers={os.cpu_count() or 1}", "--intra_op_threads=1",
                                      "--golden=true"], nice=19)
    # The default server sending each verdict alone as soon as it is ready (verdict_hold_ms 0,
    # the behaviour before verdicts waited for company): the hold's effect, side by side.
    unheld = harness.Server(harness.tempdir("parity_overhead_unheld_"), server_tls,
                            extra=["--workers=1", "--golden=true", "--verdict_hold_ms=0"])
    # The agent and transport alone: a server that decodes and answers without replaying,
    # confined to the last core (the training runs one torch thread).
    sink = harness.Server(harness.tempdir("parity_overhead_sink_"), server_tls,
                          extra=["--workers=1", "--replay=false"],
                          cpus=str(os.cpu_count() - 1) if (os.cpu_count() or 1) > 1 else None)
    servers = [server, niced, colocated, unheld, sink]

    def config(target, **parity_opts):
        tensor = {"online_run_ut": True, "host": "127.0.0.1", "port": target.port}
        parity_opts = dict(log_level="warning", **parity_opts)
        if client_tls:
            tensor["tls_path"] = client_tls
        else:
            parity_opts["plaintext"] = True
        return {"task": "tensor", "tensor": tensor, "parity": parity_opts}

    rows = [("no agent", "once", None), ("loaded, never started", "once", None),
            ("started, then stopped", "stopped", lambda: config(server, policy="drop"))]
    modes = [
        ("budget 1/signature", lambda: config(server, max_checks_per_signature=1,
                                              budget_period="run")),
        ("budget 1/signature, operator names",
         lambda: config(server, max_checks_per_signature=1, budget_period="run",
                        api_names="operator")),
        ("every call, drop", lambda: config(server, policy="drop")),
        # The configuration's default policy: block, at most block_timeout_ms (10 s) a call.
        ("every call, default policy", lambda: config(server)),
        ("every call, drop, server niced", lambda: config(niced, policy="drop")),
        ("exhaustive, no replay", lambda: config(sink, policy="block")),
        ("exhaustive, no replay, no buffer pool",
         lambda: config(sink, policy="block", snapshot_pool_bytes=0)),
        ("exhaustive, no replay, no reuse", lambda: config(sink, policy="block", reuse_bytes=0)),
        # parity.detect_random off: what watching every call's generator costs (on by default).
        ("exhaustive, no replay, no random detection",
         lambda: config(sink, policy="block", detect_random=False)),
        # parity.detect_input_writes off: what comparing every read-only argument after its call
        # with its copy at entry costs (on by default).
        ("exhaustive, no replay, no input-write check",
         lambda: config(sink, policy="block", detect_input_writes=False)),
        ("exhaustive, no replay, training's priority",
         lambda: config(sink, policy="block", background_nice=0)),
        ("exhaustive, no reuse", lambda: config(server, policy="block", reuse_bytes=0)),
        ("exhaustive, training's priority",
         lambda: config(server, policy="block", background_nice=0)),
        ("exhaustive", lambda: config(server, policy="block")),
        ("exhaustive, verdicts one by one", lambda: config(unheld, policy="block")),
        ("exhaustive, co-located server", lambda: config(colocated, policy="block")),
    ]
    for loop in ("once", "msprobe"):
        rows += [(f"{name} [{loop}]", loop, make) for name, make in modes]
    if args.quick and not args.rows:
        # ctest's smoke: every mode once; msprobe's loop (the same modes, another loop) for the
        # default policy only. Half the processes, the same code paths.
        rows = [r for r in rows if r[1] != "msprobe" or r[0] == "every call, default policy "
                "[msprobe]"]
    if args.rows:
        # Row names hold commas: ";" separates words when present.
        words = args.rows.split(";" if ";" in args.rows else ",")
        rows = [r for r in rows if r[0] == "no agent" or any(w in r[0] for w in words)]
    rows = [(name, loop, make, harness.AGENT_LIB) for name, loop, make in rows]
    if args.baseline_agent_lib:
        baseline = os.path.abspath(args.baseline_agent_lib)
        twinned = []
        for row in rows:
            twinned.append(row)
            if row[0] != "no agent":
                twinned.append((row[0] + " [baseline]", row[1], row[2], baseline))
        rows = twinned
        print(f"[baseline]: {baseline}; the others: {harness.AGENT_LIB}")
    workloads = (args.workloads or ("mlp" if args.quick else ",".join(WORKLOADS))).split(",")
    results = {row[0]: {w: [] for w in workloads} for row in rows}
    sent = {row[0]: {w: [] for w in workloads} for row in rows}
    cpu = {row[0]: {w: [] for w in workloads} for row in rows}
    thread_cpu = {row[0]: {w: [] for w in workloads} for row in rows}
    copies = {row[0]: {w: [] for w in workloads} for row in rows}
    replay = {row[0]: {w: [] for w in workloads} for row in rows}
    # Messages the servers received for each row (all its workloads): calls sent per message say
    # how well the sender batches (one wake-up, one message and one socket write per batch).
    messages = {row[0]: [] for row in rows}

    def received():
        return sum(harness.metric(srv.metrics_port, "parity_server_messages_received_total")
                   for srv in servers)
    try:
        for _ in range(rounds):
            for name, loop, make, lib in rows:
                env = dict(os.environ, PARITY_AGENT_LIB=lib)
                spec = {"mode": "loaded" if name.startswith("loaded") else name, "loop": loop,
                        "steps": steps, "config": make() if make else None,
                        "workloads": workloads}
                if name.startswith("exhaustive ["):  # the bound reads its replays' CPU
                    spec["metrics_port"] = server.metrics_port
                elif name.startswith("exhaustive, co-located server ["):
                    spec["metrics_port"] = colocated.metrics_port
                before = received()
                row = json.loads(run_child(spec, env, workdir, servers))
                messages[name].append(received() - before)
                for w in workloads:
                    results[name][w].append(row[w][0])
                    if row[w][1] != "":
                        sent[name][w].append(row[w][1])
                    cpu[name][w].append(row[w][2])
                    thread_cpu[name][w].append(row[w][4])
                    if row[w][5] != "":
                        copies[name][w].append(row[w][5])
                    if row[w][3] != "":
                        replay[name][w].append(row[w][3])
    finally:
        for srv in servers:
            srv.stop()

    print(f"agent overhead: median step time, fwd+bwd+SGD, {steps} steps, 1 torch thread, "
          f"median of {rounds} rounds (one process per row and round)")
    print("ratio: the median over rounds of the row's step over the 'no agent' step of the same "
          "round; spread: the lowest and highest of those per-round ratios (for 'no agent', its "
          "own steps' lowest and highest over their median, across rounds)")
    print("cpu ms: the training process's whole CPU time per step (getrusage RUSAGE_SELF: every "
          "thread, the training's, the sender's, gRPC's, user and system), its ratio beside; "
          "train ms: the training thread's alone (RUSAGE_THREAD), which the step waits for; "
          "copy ms: the agent's snapshot_seconds a step (its copies and the compares that prove "
          "tensors unchanged, on the training thread)")
    print("bound [loop]: the longer of the bare step and (the bare step's CPU + the CPU of the "
          f"bench, golden and random replays of the exhaustive [loop] row's step) / "
          f"{os.cpu_count()} cores, medians over rounds (docs/performance.md#the-bound); "
          "'/bound' is the exhaustive row's step over it")
    width = max(40, max(len(r[0]) for r in rows) + 1)
    print("calls/msg: the calls the row sent (all workloads) per message the servers received "
          "(Hello, stats and chunks included)")
    print(f"{'workload':11} {'mode':{width}} {'ms/step':>9} {'ratio':>7} {'spread':>13} "
          f"{'cpu ms':>8} {'cpu x':>6} {'train ms':>8} {'copy ms':>7} {'calls sent':>11} "
          f"{'calls/msg':>9} {'/bound':>7}")
    cores = os.cpu_count() or 1
    noisy = []
    for w in workloads:
        base_runs = results["no agent"][w]
        base = statistics.median(base_runs)
        base_cpu = statistics.median(cpu["no agent"][w])
        # The bare row's own noise: how far its rounds stray from their median.
        base_spread = (min(base_runs) / base, max(base_runs) / base)
        if base_spread[1] - 1 > 0.03 or 1 - base_spread[0] > 0.03:
            noisy.append(f"{w}: 'no agent' rounds span {base_spread[0]:.3f}-{base_spread[1]:.3f} "
                         "of their median, wider than +-3%: ratios here cannot resolve 3%")
        for name, _, _, _ in rows:
            runs = results[name][w]
            ms = statistics.median(runs)
            per_round = [r / b for r, b in zip(runs, base_runs)]
            ratio = statistics.median(per_round)
            spread = base_spread if name == "no agent" else (min(per_round), max(per_round))
            spread_text = f"{spread[0]:.2f}-{spread[1]:.2f}"
            cpu_ms = statistics.median(cpu[name][w])
            copy_ms = f"{statistics.median(copies[name][w]) * 1e3:7.2f}" if copies[name][w] else ""
            calls = int(statistics.median(sent[name][w])) if sent[name][w] else ""
            per_message = ""
            if sent[name][w] and statistics.median(messages[name]) > 0:
                row_calls = sum(statistics.median(sent[name][x]) for x in workloads)
                per_message = f"{row_calls / statistics.median(messages[name]):9.1f}"
            bound = ""
            if replay[name][w]:
                bound_s = max(base, (base_cpu + statistics.median(replay[name][w])) / cores)
                bound = f"{ms / bound_s:7.2f}"
                label = name.replace("exhaustive", "bound")
                print(f"{w:11} {label:{width}} {bound_s * 1e3:9.2f} {bound_s / base:7.2f} "
                      f"{'':>13} {'':>8} {'':>6} {'':>8} {'':>7} {'':>11} {'':>9}")
            print(f"{w:11} {name:{width}} {ms * 1e3:9.2f} {ratio:7.2f} {spread_text:>13} "
                  f"{cpu_ms * 1e3:8.2f} {cpu_ms / base_cpu:6.2f} "
                  f"{statistics.median(thread_cpu[name][w]) * 1e3:8.2f} {copy_ms:>7} {calls:>11} "
                  f"{per_message:>9} {bound:>7}")
    for line in noisy:
        print("NOISY " + line)
    if args.replica_worlds:
        import replica_overhead  # pylint: disable=import-outside-toplevel
        worlds = [int(w) for w in args.replica_worlds.split(",")]
        times, checks, mismatches = replica_overhead.measure(worlds, steps, rounds)
        replica_overhead.report(times, worlds, steps, rounds, checks, mismatches)

if __name__ == "__main__":
    main()
