"""Builds Parity's agent for the interpreter that runs it (docs/install.md).

The torch half (libparity_agent.so) is compiled against this interpreter's torch, with its
compiler flags and C++ ABI (cmake/PythonTorch.cmake); the transport (libparity_transport.so)
is the one PARITY_TRANSPORT_LIB names, or built from this checkout with the system's gRPC. Both
go into the package, the agent finding the transport beside it ($ORIGIN). The torch version and
ABI built for are recorded in parity/_build_info.json: the package refuses another torch.

Environment (all optional):
  PARITY_TRANSPORT_LIB   an installed libparity_transport.so: only the torch half is built
  PARITY_PIP_BUILD_DIR   the CMake build folder (default: <checkout>/build-pip/<python>-<torch>)
  PARITY_CMAKE_ARGS      more CMake arguments
"""
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def torch_info():
    import torch  # pylint: disable=import-outside-toplevel
    abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)  # pylint: disable=protected-access
    # The build folder is keyed by the torch build, not its version string alone: two builds of
    # one version (CPU and CUDA wheels, another ABI, another environment) get folders of their own.
    build = f"{torch.__version__}|{getattr(torch.version, 'git_version', '')}|{abi}|" \
        f"{os.path.realpath(os.path.dirname(torch.__file__))}"
    return {"torch": torch.__version__, "cxx11_abi": abi,
            "build_key": hashlib.sha256(build.encode()).hexdigest()[:10],
            "package": os.path.dirname(os.path.abspath(torch.__file__)),
            "cmake_prefix_path": torch.utils.cmake_prefix_path}


def torch_cmake_args(info):
    """A pip or conda torch carries its headers and libraries in its package folder: taken from
    there, not through its CMake config, which in PyPI's CUDA wheels wants a CUDA toolkit that a
    training host need not have (cmake/PythonTorch.cmake). A distribution's torch (Debian's keeps
    its headers in /usr/include) is found by its config."""
    package = info["package"]
    if os.path.isdir(os.path.join(package, "include", "torch")) and \
            os.path.exists(os.path.join(package, "lib", "libtorch.so")):
        return [f"-DPARITY_PYTHON_TORCH={package}",
                f"-DPARITY_PYTHON_TORCH_CXX11_ABI={int(info['cxx11_abi'])}"]
    return [f"-DCMAKE_PREFIX_PATH={info['cmake_prefix_path']}", "-DPARITY_PYTHON_TORCH="]


PROGRESS_SECONDS = 5  # a progress line at most this often while the agent builds


def progress(message, log=None):
    """pip shows a build's output only with -v (stdout and stderr alike): the line goes to stderr
    for it, to the terminal where there is one, and to `log` (a file beside the build, named in
    the first line) for a pip run whose output goes nowhere (nohup, CI)."""
    print("parity: " + message, file=sys.stderr, flush=True)
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write("parity: " + message + "\n")
    except OSError:
        pass
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(time.strftime("%H:%M:%S ") + message + "\n")


def build_with_progress(args, log):
    """Runs the build, its output on stdout (pip -v shows the compiler's lines), and says how far
    it is every PROGRESS_SECONDS from ninja's or make's "[n/N]" / "[ p%]" counters, then the
    last count reached. Returns (steps run, steps in all); (0, 0) when there was nothing to do."""
    start = last = time.monotonic()
    done = total = 0
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace")
    for line in proc.stdout:
        sys.stdout.write(line)
        m = re.match(r"\[(\d+)/(\d+)\]", line) or re.match(r"\[\s*(\d+)%\]", line)
        if m:
            done, total = (int(m.group(1)), int(m.group(2))) if m.lastindex == 2 else \
                (int(m.group(1)), 100)
        now = time.monotonic()
        if m and now - last >= PROGRESS_SECONDS:
            last = now
            progress(f"building the agent: {done}/{total} steps, {now - start:.0f} s", log)
    if proc.wait() != 0:
        raise subprocess.CalledProcessError(proc.returncode, args)
    if total:
        progress(f"building the agent: {done}/{total} steps, {time.monotonic() - start:.0f} s", log)
    else:
        progress("building the agent: up to date", log)
    return done, total


class BuildAgent(build_py):
    """build_py, then the agent's libraries into the package."""

    def run(self):
        super().run()
        try:
            info = torch_info()
        except ImportError as e:
            raise SystemExit("parity: torch is not importable by this interpreter "
                             f"({sys.executable}): install torch first, then run pip with "
                             "--no-build-isolation so that the build sees it") from e
        tag = (f"py{sys.version_info[0]}{sys.version_info[1]}-torch{info['torch']}-"
               f"abi{int(info['cxx11_abi'])}-{info['build_key']}")
        build = os.environ.get("PARITY_PIP_BUILD_DIR") or os.path.join(ROOT, "build-pip", tag)
        transport = os.environ.get("PARITY_TRANSPORT_LIB", "")
        if transport and not os.path.isfile(transport):
            raise SystemExit(f"parity: PARITY_TRANSPORT_LIB={transport} is not a file")
        args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                *torch_cmake_args(info), "-DPARITY_AGENT_ONLY=ON",
                "-DPARITY_WERROR=OFF", f"-DPARITY_TRANSPORT_LIB={os.path.abspath(transport)}"
                if transport else "-DPARITY_TRANSPORT_LIB="]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"] if not os.path.exists(os.path.join(build, "CMakeCache.txt")) \
                else []
        args += ["-DPARITY_AGENT_PACKAGE_RPATH=ON"]  # no build folder in the installed RUNPATH
        args += shlex.split(os.environ.get("PARITY_CMAKE_ARGS", ""))
        os.makedirs(build, exist_ok=True)
        log = os.path.join(build, "progress.log")
        progress(f"building the agent against torch {info['torch']} (C++11 ABI "
                 f"{int(info['cxx11_abi'])}) in {build}: "
                 + ("the torch half only" if transport else "both halves") +
                 f", on {os.cpu_count() or 1} cores; a line every {PROGRESS_SECONDS} s here and "
                 f"in {log} (pip -v shows the compiler's lines too)", log)
        start = time.monotonic()
        print("parity: " + " ".join(args), flush=True)
        subprocess.run(args, check=True)
        targets = ["parity_agent"] + ([] if transport else ["parity_transport"])
        build_with_progress(["cmake", "--build", build, "--target", *targets, "--parallel",
                             str(os.cpu_count() or 1)], log)
        progress(f"built in {time.monotonic() - start:.0f} s", log)
        # An editable install (pip install -e) imports the package from this folder: the
        # libraries go beside its sources (.gitignore keeps them out of the checkout's history).
        out = os.path.join(HERE, "parity") if getattr(self, "editable_mode", False) \
            else os.path.join(self.build_lib, "parity")
        os.makedirs(out, exist_ok=True)
        shutil.copy2(os.path.join(build, "agent", "libparity_agent.so"), out)
        shutil.copy2(transport or os.path.join(build, "agent", "libparity_transport.so"),
                     os.path.join(out, "libparity_transport.so"))
        with open(os.path.join(out, "_build_info.json"), "w", encoding="utf-8") as f:
            json.dump({"torch": info["torch"], "cxx11_abi": info["cxx11_abi"],
                       "transport": "given" if transport else "built"}, f)


class BinaryDistribution(Distribution):
    """The wheel holds shared libraries: a platform wheel, not a pure-Python one."""

    def has_ext_modules(self):
        return True


setup(packages=["parity"], package_dir={"parity": "parity"}, cmdclass={"build_py": BuildAgent},
      distclass=BinaryDistribution)
