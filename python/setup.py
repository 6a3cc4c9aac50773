"""Builds Parity's agent for the interpreter that runs it (docs/install.md).

The torch half (libparity_agent.so) is compiled against this interpreter's torch, with its
compiler flags and C++ ABI (torch.utils.cmake_prefix_path); the transport (libparity_transport.so)
is the one PARITY_TRANSPORT_LIB names, or built from this checkout with the system's gRPC. Both
go into the package, the agent finding the transport beside it ($ORIGIN). The torch version and
ABI built for are recorded in parity/_build_info.json: the package refuses another torch.

Environment (all optional):
  PARITY_TRANSPORT_LIB   an installed libparity_transport.so: only the torch half is built
  PARITY_PIP_BUILD_DIR   the CMake build folder (default: <checkout>/build-pip/<python>-<torch>)
  PARITY_CMAKE_ARGS      more CMake arguments
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def torch_info():
    import torch  # pylint: disable=import-outside-toplevel
    return {"torch": torch.__version__,
            "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),  # pylint: disable=protected-access
            "cmake_prefix_path": torch.utils.cmake_prefix_path}


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
        tag = f"py{sys.version_info[0]}{sys.version_info[1]}-torch{info['torch']}"
        build = os.environ.get("PARITY_PIP_BUILD_DIR") or os.path.join(ROOT, "build-pip", tag)
        transport = os.environ.get("PARITY_TRANSPORT_LIB", "")
        if transport and not os.path.isfile(transport):
            raise SystemExit(f"parity: PARITY_TRANSPORT_LIB={transport} is not a file")
        args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                f"-DCMAKE_PREFIX_PATH={info['cmake_prefix_path']}", "-DPARITY_AGENT_ONLY=ON",
                "-DPARITY_WERROR=OFF", f"-DPARITY_TRANSPORT_LIB={os.path.abspath(transport)}"
                if transport else "-DPARITY_TRANSPORT_LIB="]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"] if not os.path.exists(os.path.join(build, "CMakeCache.txt")) \
                else []
        args += shlex.split(os.environ.get("PARITY_CMAKE_ARGS", ""))
        print("parity: " + " ".join(args), flush=True)
        subprocess.run(args, check=True)
        targets = ["parity_agent"] + ([] if transport else ["parity_transport"])
        subprocess.run(["cmake", "--build", build, "--target", *targets, "--parallel",
                        str(os.cpu_count() or 1)], check=True)
        out = os.path.join(self.build_lib, "parity")
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
