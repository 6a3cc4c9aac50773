"""The torch matrix's driver (scripts/torch-matrix.sh says what it does; run that).

For each pip torch version: a venv with the wheel (from PARITY_TORCH_CACHE, downloaded there once),
the agent installed by the README's commands (timed, from a fresh build folder without ccache,
as a new user meets it), the training-side test libraries built against that torch, then each
suite run by that interpreter against the server of PARITY_BUILD_DIR. Each suite appends what it
measured (calls checked, recall, false errors) to PARITY_MATRIX_REPORT (tests/e2e/harness.py's
report()); the table joins them with the suites' outcomes.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(os.environ.get("PARITY_BUILD_DIR") or os.path.join(ROOT, "build"))
CACHE = os.environ.get("PARITY_TORCH_CACHE") or "/var/cache/parity-torch"
WHEELS = os.path.join(CACHE, "wheels")
OUT = os.path.join(BUILD, "torch-matrix")
DEFAULT_VERSIONS = ("2.1.0", "2.6.0", "newest")

# name -> (script, what it runs)
SUITES = {
    "msprobe_loop": ("tests/e2e/test_msprobe_loop.py", "msprobe's start/stop/step loop"),
    "msprobe_api": ("tests/e2e/test_msprobe_api.py", "msprobe's PrecisionDebugger surface"),
    "llama_fault_suite": ("tests/faults/test_llama_faults.py",
                          "Llama faults, fp32 and bf16 autocast, 2 ranks"),
    "npu_fused_suite": ("tests/faults/test_npu_fused.py", "fused NPU ops on the simulated NPU"),
    "random_ops_suite": ("tests/faults/test_random_ops.py", "random ops, clean and faulty"),
    "npu_device": ("tests/e2e/test_npu_device.py", "the PrivateUse1 test device"),
    "torch2_features": ("tests/e2e/test_torch2_features.py",
                        "fake and meta tensors, torch.compile, SDPA with and without dropout"),
    "replicas": ("tests/e2e/test_replicas.py",
                 "replica digests on 2 and 4 gloo ranks (torch 2's optimizer step hooks)"),
    "pip_install": ("tests/e2e/test_pip_install.py",
                    "the installed package: a training outside the checkout, the doctor"),
}


def log(message):
    print(f"torch-matrix: {message}", flush=True)


def run(args, **kwargs):
    return subprocess.run(args, check=True, **kwargs)


def newest_release():
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch"],
                         capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        if line.startswith("torch ("):
            return line.split("(")[1].split(")")[0]
    cached = sorted({os.path.basename(w).split("-")[1] for w in
                     glob.glob(os.path.join(WHEELS, "torch-*.whl"))},
                    key=lambda v: [int(p) for p in v.split("+")[0].split(".") if p.isdigit()])
    if not cached:
        raise SystemExit("torch-matrix: PyPI unreachable and no torch wheel cached: name versions")
    return cached[-1]


def numpy_for(version):
    major, minor = (int(p) for p in version.split(".")[:2])
    return "numpy<2" if (major, minor) < (2, 3) else "numpy"  # torch before 2.3 needs NumPy 1


def make_venv(version):
    """A venv of /usr/bin/python3 with torch==version, NumPy, setuptools and wheel from the cache
    (downloaded there first when missing)."""
    venv = os.path.join(CACHE, "venvs", f"torch-{version}")
    python = os.path.join(venv, "bin", "python")
    wanted = [f"torch=={version}", numpy_for(version), "setuptools", "wheel"]
    if os.path.exists(python):
        have = subprocess.run([python, "-c", "import torch, numpy, wheel; print(torch.__version__)"],
                              capture_output=True, text=True, check=False).stdout.strip()
        if have.split("+")[0] == version:
            return python
        shutil.rmtree(venv)
    os.makedirs(WHEELS, exist_ok=True)
    offline = subprocess.run([sys.executable, "-m", "pip", "download", "--no-index", "-q",
                              "--find-links", WHEELS, "-d", os.path.join(CACHE, "check"),
                              *wanted], capture_output=True, check=False)
    if offline.returncode != 0:
        log(f"downloading torch {version} and its dependencies into {WHEELS} (GBs, once)")
        run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", WHEELS,
             *wanted])
    run(["/usr/bin/python3", "-m", "venv", venv])
    log(f"installing torch {version} into {venv}")
    run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", WHEELS, *wanted])
    return python


def torch_facts(python):
    code = ("import json, os, torch; print(json.dumps({'version': torch.__version__, "
            "'abi': int(torch._C._GLIBCXX_USE_CXX11_ABI), 'package': os.path.dirname(torch.__file__),"
            " 'cuda': torch.version.cuda}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def install_agent(python, facts, fresh):
    """The README's command, in the venv; returns (seconds, site-packages/parity)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARITY_")}
    if fresh:  # as a new user meets it: no build folder, no compiler cache
        for d in glob.glob(os.path.join(ROOT, "build-pip", f"*-torch{facts['version']}-*")):
            shutil.rmtree(d)
        env["CCACHE_DISABLE"] = "1"
    start = time.monotonic()
    logfile = os.path.join(OUT, facts["version"], "install.log")
    with open(logfile, "w", encoding="utf-8") as f:
        r = subprocess.run([python, "-m", "pip", "install", "-v", "--no-build-isolation",
                            "--force-reinstall", "--no-deps", os.path.join(ROOT, "python")],
                           stdout=f, stderr=subprocess.STDOUT, env=env, cwd=OUT, check=False)
    seconds = time.monotonic() - start
    if r.returncode != 0:
        raise RuntimeError(f"pip install failed (exit {r.returncode}): {logfile}")
    site = subprocess.run([python, "-c", "import os, parity; print(os.path.dirname(parity.__file__))"],
                          capture_output=True, text=True, check=True, cwd=OUT).stdout.strip()
    return seconds, site


def build_training_libs(facts, site):
    build = os.path.join(OUT, facts["version"], "training-build")
    args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
            f"-DPARITY_PYTHON_TORCH={facts['package']}",
            f"-DPARITY_PYTHON_TORCH_CXX11_ABI={facts['abi']}", "-DPARITY_AGENT_ONLY=ON",
            "-DPARITY_TRAINING_TEST_LIBS=ON", "-DPARITY_WERROR=OFF",  # as setup.py builds
            f"-DPARITY_TRANSPORT_LIB={os.path.join(site, 'libparity_transport.so')}"]
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        args += ["-G", "Ninja"]
    logfile = os.path.join(OUT, facts["version"], "training-build.log")
    with open(logfile, "w", encoding="utf-8") as f:
        for step in (args, ["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target",
                            "parity_npu_sim", "parity_test_npu_device",
                            "parity_test_float32_gemms"]):
            if subprocess.run(step, stdout=f, stderr=subprocess.STDOUT, check=False).returncode:
                raise RuntimeError(f"the training-side build failed: {logfile}")
    return build


def build_server(version):
    """The server built against pip's torch `version` (its CMake config, as on a GPU host; CUDA
    wheels compile and link with the CUDA toolkit here and replay on the CPU): (build, python)."""
    python = make_venv(version)
    facts = torch_facts(python)
    build = os.path.join(OUT, f"server-torch-{facts['version']}")
    prefix = subprocess.run([python, "-c", "import torch; print(torch.utils.cmake_prefix_path)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_PREFIX_PATH={prefix}", "-DPARITY_WERROR=OFF"]
    targets = ["parity-server", "parity_npu_reference", "parity_transport"]
    if facts.get("cuda"):
        # A CUDA wheel: the compare on the GPU must build (nvcc), with the GPU tests and the
        # benchmark a GPU host runs first (scripts/gpu-check.sh), so that run starts from code
        # known to compile and link.
        args.append("-DPARITY_CUDA_COMPARE=ON")
        targets += ["device_compare_tests", "replay_bench", "crc_bench"]
    if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
        args += ["-G", "Ninja"]
    os.makedirs(OUT, exist_ok=True)
    logfile = os.path.join(OUT, f"server-torch-{facts['version']}.log")
    log(f"building the server against torch {facts['version']} in {build} ({logfile})")
    start = time.monotonic()
    with open(logfile, "w", encoding="utf-8") as f:
        for step in (args, ["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target",
                            *targets]):
            if subprocess.run(step, stdout=f, stderr=subprocess.STDOUT, check=False).returncode:
                raise SystemExit(f"torch-matrix: the server's build failed: {logfile}")
    log(f"server built in {time.monotonic() - start:.0f} s")
    return build, python, facts


def run_suite(name, python, facts, site, training_build, server):
    script = SUITES[name][0]
    folder = os.path.join(OUT, facts["version"])
    report = os.path.join(folder, f"{name}.report.jsonl")
    if os.path.exists(report):
        os.remove(report)
    env = dict(os.environ, PARITY_BUILD_DIR=server["build"],
               PARITY_TRAINING_BUILD_DIR=training_build, PARITY_PYTHON=python,
               PARITY_TEST_AGENT_LIB=os.path.join(site, "libparity_agent.so"),
               PARITY_MATRIX_REPORT=report, PARITY_TEST_BENCH_DEVICE="cpu",
               PARITY_SERVER_PYTHON=server["python"])
    start = time.monotonic()
    with open(os.path.join(folder, f"{name}.log"), "w", encoding="utf-8") as f:
        r = subprocess.run([python, os.path.join(ROOT, script)], stdout=f,
                           stderr=subprocess.STDOUT, env=env, cwd=ROOT, check=False)
    with open(os.path.join(folder, f"{name}.log"), encoding="utf-8") as f:
        text = f.read()
    tail = [line for line in text.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))]
    measured = {}
    if os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            for line in f:
                for key, value in json.loads(line).items():
                    if isinstance(value, list):
                        measured[key] = sorted(set(measured.get(key, [])) | set(value))
                    elif isinstance(value, int):
                        measured[key] = measured.get(key, 0) + value
                    else:
                        measured[key] = value
    # The trainings must have run the torch installed here: each agent names it in its Hello.
    others = [t for t in measured.get("agent_torch", []) if t != facts["version"].split("+")[0]]
    ok = r.returncode == 0 and not others
    if others:
        tail.append(f"agents ran torch {others}, not {facts['version']}")
    return {"suite": name, "ok": ok, "summary": " ".join(tail[-3:]),
            "seconds": round(time.monotonic() - start), **measured}


def render(results, when, server):
    lines = [f"Torch matrix, {when}: {platform.machine()}, {platform.node() or 'host'}, "
             f"{os.cpu_count()} cores; server: {server['build']} ({server['torch']})", "",
             "| torch | C++11 ABI | install | suite | outcome | calls checked | recall | "
             "false errors |", "|---|---|---|---|---|---|---|---|"]
    for v in results:
        head = f"| {v['torch']} | {v['abi']} | {v['install']} |"
        if v.get("error"):
            lines.append(f"{head} (all) | **not run**: {v['error']} | | | |")
            continue
        for s in v["suites"]:
            outcome = "pass" if s["ok"] else f"**fail** ({s['summary'] or 'see its log'})"
            lines.append(f"{head} {s['suite']} | {outcome} ({s['seconds']} s) | "
                         f"{s.get('calls', '-')} | {s.get('recall', '-')} | "
                         f"{s.get('false_errors', '-')} |")
            head = "| | | |"
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("versions", nargs="*", help="torch versions (default: "
                        f"{' '.join(DEFAULT_VERSIONS)}); 'newest' is PyPI's newest release")
    parser.add_argument("--list", action="store_true", help="list the suites and exit")
    parser.add_argument("--reuse-build", action="store_true",
                        help="keep the agent's build folder and ccache (install times then are "
                             "a rebuild's, not a new user's)")
    parser.add_argument("--server-torch", metavar="VERSION",
                        help="build the server against this pip torch (in build/torch-matrix/) "
                             "instead of using PARITY_BUILD_DIR's, of Debian's torch")
    parser.add_argument("--build-only", action="store_true",
                        help="with --server-torch: build the server (and, for a CUDA wheel, the "
                             "CUDA compare with its GPU tests and replay_bench) and stop: the "
                             "check that a GPU host's build compiles and links")
    args = parser.parse_args()
    if args.list:
        for name, (script, what) in SUITES.items():
            print(f"{name:18} {script:40} {what}")
        return 0
    wanted = os.environ.get("PARITY_MATRIX_SUITES", "")
    suites = [s for s in wanted.split(",") if s] or list(SUITES)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise SystemExit(f"torch-matrix: unknown suite(s) {unknown}; --list shows them")
    versions = [newest_release() if v == "newest" else v for v in (args.versions or
                                                                   DEFAULT_VERSIONS)]
    server = {"build": BUILD, "python": "/usr/bin/python3", "torch": "Debian's torch 1.13"}
    if args.server_torch:  # its own folder: the logs of the runs against Debian's server stay
        global OUT  # pylint: disable=global-statement
        OUT = os.path.join(BUILD, "torch-matrix", f"server-{args.server_torch}")
        build, python, facts = build_server(args.server_torch)
        if args.build_only:
            log(f"built against torch {facts['version']} (CUDA {facts.get('cuda')}) in {build}")
            return 0
        server = {"build": build, "python": python,
                  "torch": f"pip's torch {facts['version']}, C++11 ABI {facts['abi']}"}
    results = []
    when = datetime.date.today().isoformat()
    for version in versions:
        os.makedirs(os.path.join(OUT, version), exist_ok=True)
        entry = {"torch": version, "abi": "?", "install": "-", "suites": []}
        results.append(entry)
        try:
            python = make_venv(version)
            facts = torch_facts(python)
            entry.update(torch=facts["version"], abi=facts["abi"])
            os.makedirs(os.path.join(OUT, facts["version"]), exist_ok=True)
            log(f"torch {facts['version']} (C++11 ABI {facts['abi']}): installing the agent")
            seconds, site = install_agent(python, facts, fresh=not args.reuse_build)
            entry["install"] = f"{seconds:.0f} s" + (" (rebuild)" if args.reuse_build else "")
            training_build = build_training_libs(facts, site)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            entry["error"] = str(e)
            log(f"torch {version}: {e}")
            continue
        for name in suites:
            log(f"torch {facts['version']}: {name}")
            result = run_suite(name, python, facts, site, training_build, server)
            entry["suites"].append(result)
            log(f"torch {facts['version']}: {name}: {'pass' if result['ok'] else 'FAIL'} "
                f"({result['seconds']} s) {result['summary']}")
    table = render(results, when, server)
    with open(os.path.join(OUT, "matrix.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    with open(os.path.join(OUT, "matrix.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(table)
    return 0 if all(not v.get("error") and all(s["ok"] for s in v["suites"])
                    for v in results) else 1


if __name__ == "__main__":
    sys.exit(main())
