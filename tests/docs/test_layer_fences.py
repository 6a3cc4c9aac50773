"""The server's floors are fenced by the compiler (issue 67; cmake/ParityTargets.cmake,
parity_layer): for each floor's target, a file that includes a header of a higher floor stops at
the preprocessor with the fence's message, one that includes its own floor's and lower floors'
headers passes, and a torch-free floor that includes torch stops too. The probes are
preprocessed with the target's own fence first, as the build compiles its sources.
Arguments: the C++ compiler, then torch's include directories (from CMake)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PARITY_BUILD_DIR", os.path.join(ROOT, "build"))
COMPILER = sys.argv[1] if len(sys.argv) > 1 else "c++"
# (The compiler's own directories stay its own: -isystem /usr/include would break libstdc++'s
# include_next.)
TORCH_INCLUDES = [d for d in sys.argv[2:] if d and d not in ("/usr/include", "/usr/local/include")]


def cmake_floors():
    """PARITY_SERVER_FLOORS as cmake/ParityTargets.cmake sets it: the one list of the floors."""
    with open(os.path.join(ROOT, "cmake", "ParityTargets.cmake"), encoding="utf-8") as f:
        m = re.search(r"set\(PARITY_SERVER_FLOORS ([a-z ]+)\)", f.read())
    return m.group(1).split()


FLOORS = cmake_floors()
TARGETS = {"compare": "parity_compare", "random": "parity_random", "call": "parity_call",
           "replay": "parity_replay", "results": "parity_results",
           "metrics": "parity_server_metrics", "check": "parity_check",
           "service": "parity_service", "config": "parity_server_config",
           "app": "parity_server_lib"}
TORCH_FREE = {"compare", "random", "call", "results", "metrics", "service", "config"}


def a_header_of(floor):
    folder = os.path.join(ROOT, "server", floor)
    return "server/%s/%s" % (floor, sorted(f for f in os.listdir(folder) if f.endswith(".h"))[0])


def preprocess(floor, include):
    fence = os.path.join(BUILD, "layer_fences", TARGETS[floor])
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
        f.write(f"#include {include}\n")
    try:
        args = [COMPILER, "-std=c++17", "-E", "-o", os.devnull, f"-I{fence}", f"-I{ROOT}",
                f"-I{os.path.join(BUILD, 'proto')}"] + [f"-isystem{d}" for d in TORCH_INCLUDES]
        r = subprocess.run(args + [f.name], capture_output=True, text=True)
        return r.returncode, r.stderr
    finally:
        os.unlink(f.name)


class LayerFencesTest(unittest.TestCase):
    def test_every_floor_has_its_target_and_fence(self):
        self.assertEqual(sorted(FLOORS), sorted(TARGETS))
        for floor, target in TARGETS.items():
            self.assertTrue(os.path.isdir(os.path.join(BUILD, "layer_fences", target)), target)

    def test_a_higher_floor_does_not_compile_and_a_lower_one_does(self):
        for i, floor in enumerate(FLOORS):
            for up in FLOORS[i + 1:]:
                header = a_header_of(up)
                code, err = preprocess(floor, f'"{header}"')
                self.assertNotEqual(code, 0, f"server/{floor}/ included {header}")
                self.assertIn(f"server/{floor}/ includes {header}: {up}/ is a higher floor", err)
            for down in FLOORS[:i + 1]:
                if floor in TORCH_FREE and down not in TORCH_FREE:
                    continue  # a torch floor's headers bring torch (next test)
                header = a_header_of(down)
                code, err = preprocess(floor, f'"{header}"')
                self.assertEqual(code, 0, f"server/{floor}/ including {header}:\n{err[-2000:]}")

    def test_a_torch_free_floor_that_includes_torch_does_not_compile(self):
        for floor in sorted(TORCH_FREE):
            # Directly, and (above the replay) through a torch floor's header.
            includes = ["<ATen/core/Tensor.h>"]
            if FLOORS.index(floor) > FLOORS.index("replay"):
                includes.append('"server/replay/call_values.h"')
            for include in includes:
                code, err = preprocess(floor, include)
                self.assertNotEqual(code, 0, f"server/{floor}/ included {include}")
                self.assertIn(f"server/{floor}/ is torch-free: it includes a torch header", err)
        code, err = preprocess("replay", "<ATen/core/Tensor.h>")
        self.assertEqual(code, 0, err[-2000:])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
