"""End-to-end harness: the real parity-server binary with mutual TLS on loopback, and helpers to
read its result files. Paths come from the environment set by ctest (PARITY_BUILD_DIR)."""
import csv
import glob
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("PARITY_BUILD_DIR", os.path.join(ROOT, "build")))
SERVER = os.path.join(BUILD, "server", "parity-server")
# The training side (the agent and the test libraries a training loads) is this build's unless
# PARITY_TRAINING_BUILD_DIR names one made for another torch, with PARITY_PYTHON that torch's
# interpreter and PARITY_TEST_AGENT_LIB the agent pip installed there (scripts/torch-matrix.sh):
# then the server (this build, Debian's torch) checks trainings of another torch.
TRAINING_BUILD = os.path.abspath(os.environ.get("PARITY_TRAINING_BUILD_DIR") or BUILD)
TRAINING_LIBS = os.path.join(TRAINING_BUILD, "tests")
AGENT_LIB = os.environ.get("PARITY_TEST_AGENT_LIB") or \
    os.path.join(TRAINING_BUILD, "agent", "libparity_agent.so")
# Debian's python3 (Debian's torch) unless the build was configured for another (tests/CMakeLists.txt).
PYTHON = os.environ.get("PARITY_PYTHON") or "/usr/bin/python3"
# The python3 of the server's torch, to load what the server loads (its reference libraries): the
# trainings' unless the torch matrix runs them on another torch (scripts/torch-matrix.sh).
SERVER_PYTHON = os.environ.get("PARITY_SERVER_PYTHON") or PYTHON
# Where the servers the tests start run their bench: cpu here, cuda on a GPU host (gpu-check.sh).
BENCH_DEVICE = os.environ.get("PARITY_TEST_BENCH_DEVICE") or "cpu"
TRAIN = os.path.join(ROOT, "docs", "examples", "train_mlp.py")
# The simulated accelerator's GEMMs (tests/device): float32 accumulation where this host's
# libtorch would round partial sums to float16/bfloat16.
DEVICE = os.path.join(ROOT, "tests", "device")
DEVICE_GEMMS = os.path.join(TRAINING_LIBS, "libparity_test_float32_gemms.so")


def make_certs(directory):
    subprocess.run([os.path.join(ROOT, "deploy", "gen-certs.sh"), directory, "2"], check=True,
                   stdout=subprocess.DEVNULL)
    return os.path.join(directory, "server"), os.path.join(directory, "client")


class Server:
    """parity-server on ephemeral ports; stop() sends SIGTERM and waits."""

    def __init__(self, workdir, tls_dir=None, extra=(), nice=0, port=0, cpus=None):
        self.out = os.path.join(workdir, "results")
        port_file = os.path.join(workdir, "ports")
        if os.path.exists(port_file):
            os.remove(port_file)
        # cpus: a taskset list ("1") confining the server to those cores.
        args = (["taskset", "-c", cpus] if cpus else []) + \
            (["nice", "-n", str(nice)] if nice else []) + [SERVER, f"--port={port}", "--metrics_port=0", "--metrics_host=127.0.0.1",
                "--host=127.0.0.1", f"--output_dir={self.out}", f"--port_file={port_file}",
                f"--bench_device={BENCH_DEVICE}", *extra]
        args.append(f"--tls_path={tls_dir}" if tls_dir else "--plaintext")
        self.log = open(os.path.join(workdir, "server.log"), "w", encoding="utf-8")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("parity-server did not start: " + self.read_log())
            time.sleep(0.05)  # polling a file the server writes once it listens
        with open(port_file, encoding="utf-8") as f:
            self.port, self.metrics_port = (int(v) for v in f.read().split())

    def read_log(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log.name, encoding="utf-8") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        if not self.log.closed and os.environ.get("PARITY_MATRIX_REPORT"):
            checked = [r for r in self.records() if r["status"] in ("pass", "warning", "error")]
            # The torch of the trainings it checked, from each agent's Hello (the matrix checks
            # that they ran the torch it installed).
            torches = sorted(set(re.findall(r"agent connected: .*?, torch ([^,]*), run ",
                                            self.read_log())))
            report(calls=len(checked), agent_torch=torches)
        self.log.close()

    def rows(self, prefix):
        """Rows (dicts) of every result CSV starting with `prefix`."""
        out = []
        for path in sorted(glob.glob(os.path.join(self.out, prefix + "*.csv"))):
            with open(path, encoding="utf-8-sig", newline="") as f:
                out.extend(csv.DictReader(f))
        return out

    def metric(self, name, **labels):
        """The value of series `name{labels}` on the server's /metrics (it must be running)."""
        return metric(self.metrics_port, name, **labels)

    def records(self):
        out = []
        for path in sorted(glob.glob(os.path.join(self.out, "parity_results_*.jsonl"))):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.split("\n")
            # A server killed mid-write may leave its last line without its end (the server
            # removes it when it restarts on the folder); every other line must be whole JSON.
            if lines and not text.endswith("\n"):
                cut = lines.pop()
                try:
                    out.append(json.loads(cut))
                except json.JSONDecodeError:
                    pass
            out.extend(json.loads(line) for line in lines if line.strip())
        return out


def report(**measured):
    """Appends what a suite measured (calls=..., recall="8/8", false_errors=...) as one JSON line
    to the file PARITY_MATRIX_REPORT names (scripts/torch-matrix.sh sums the numbers per suite);
    nothing without it. Every server's judged calls are reported when it stops."""
    path = os.environ.get("PARITY_MATRIX_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(measured) + "\n")


def metric(metrics_port, name, **labels):
    """The value of series `name{labels}` on a running server's /metrics at `metrics_port`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    for line in text.splitlines():
        if line.startswith(name + ("{" if labels else " ")) and all(w in line for w in wanted):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{labels} not exported")


def agent_config(path, port, client_tls=None, **parity):
    """Writes an msprobe-style agent config.json."""
    tensor = {"online_run_ut": True, "host": "127.0.0.1", "port": port}
    if client_tls:
        tensor["tls_path"] = client_tls
    else:
        parity.setdefault("plaintext", True)
    if parity.get("policy") == "block":
        # Tests that count every verdict wait as long as the (loaded) test server takes.
        parity.setdefault("block_timeout_ms", 0)
    config = {"task": "tensor", "level": "L1", "rank": [], "step": [], "tensor": tensor,
              "parity": parity}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    return path


def script_against(work, server, text, **parity):
    """Writes `text` as work/train.py and an agent config for `server` (policy block, `parity`
    keys added); returns (script, config)."""
    config = agent_config(os.path.join(work, "config.json"), server.port, policy="block", **parity)
    script = os.path.join(work, "train.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(text)
    return script, config


def run(args, env=None, timeout=600):
    """Runs a training (or any program) with the agent library and the simulated accelerator's
    GEMMs (DEVICE); its CompletedProcess. `env`: variables to set, or to unset (None)."""
    full_env = dict(os.environ)
    for key, value in (env or {}).items():  # None: unset
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    full_env["PARITY_AGENT_LIB"] = AGENT_LIB
    full_env["PYTHONPATH"] = os.pathsep.join(
        [DEVICE] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
    full_env.setdefault("PARITY_TEST_FLOAT32_GEMMS", DEVICE_GEMMS)
    return subprocess.run(args, env=full_env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def torch_version(python):
    """torch's "major.minor.patch" as `python` imports it."""
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1].split("+")[0].split("a")[0]


_SAME_TORCH = []


def same_torch():
    """Whether the trainings run the server's libtorch (a random op's draws replay bit for bit
    only then): always, but in the torch matrix (SERVER_PYTHON another interpreter)."""
    if not _SAME_TORCH:
        _SAME_TORCH.append(SERVER_PYTHON == PYTHON or
                           torch_version(SERVER_PYTHON) == torch_version(PYTHON))
    return _SAME_TORCH[0]


def tempdir(prefix):
    return tempfile.mkdtemp(prefix=prefix)


def free_port():
    """A loopback port free at the time of the call (for programs that cannot take port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_against_server(prefix, script, args=(), server_args=(), agent_options=None):
    """Runs `script --config CONFIG *args` against a fresh plaintext parity-server (policy block)
    and returns (server, the finished process). The server is still running: call stop().
    `agent_options`: more keys of the agent config's "parity" section."""
    workdir = tempdir(prefix)
    server = Server(workdir, None, extra=server_args)
    config = agent_config(os.path.join(workdir, "config.json"), server.port, policy="block",
                          **(agent_options or {}))
    try:
        return server, run([PYTHON, script, "--config", config, *args])
    except BaseException:
        server.stop()
        raise


def first_error(records):
    """The earliest record judged error (by step, then sequence), or None."""
    errors = sorted((r for r in records if r["status"] == "error"),
                    key=lambda r: (r["step"], r["sequence"]))
    return errors[0] if errors else None


def train_as_ranks(prefix, runs, command, fault_of):
    """Trains each of `runs` against one server (policy block), run i as RANK i, with
    PARITY_NPU_SIM_FAULT set to fault_of(run) ("" for none): the fault suites' set-up.
    `command(config, run)` is the training's command line. Returns (workdir, records by rank,
    the server's log, {run: the end of its stderr} for the runs that failed)."""
    workdir = tempdir(prefix)
    server = Server(workdir, None)
    failures = {}
    try:
        config = agent_config(os.path.join(workdir, "config.json"), server.port, policy="block",
                              flush_timeout_ms=300000)
        for rank, one in enumerate(runs):
            r = run(command(config, one),
                    env={"RANK": str(rank), "PARITY_NPU_SIM_FAULT": fault_of(one) or ""})
            if r.returncode != 0:
                failures[one] = r.stderr[-2000:]
    finally:
        server.stop()
    by_rank = {}
    for record in server.records():
        by_rank.setdefault(record["rank"], []).append(record)
    return workdir, by_rank, server.read_log(), failures


def first_error_key(records):
    """(op, phase, step) of the earliest error among `records`, or None."""
    first = first_error(records)
    return (first["op"], first["phase"], first["step"]) if first else None


def suite_row(name, width, calls, records, count_width):
    """One line of a fault suite's table: the run, its calls of interest, its errors, its first."""
    first = first_error_key(records)
    errors = sum(1 for r in records if r["status"] == "error")
    return (f"{name:{width}} {calls:{count_width}} {errors:6}  "
            f"{' '.join(map(str, first)) if first else '-'}")
