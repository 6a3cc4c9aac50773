"""The server's floors are fenced by the compiler (issue 67; cmake/ParityTargets.cmake,
parity_layer): for each floor's target, a file that includes a header of a higher floor stops at
the preprocessor with the fence's message, one that includes its own floor's and lower floors'
headers passes, a torch-free floor that includes torch stops too, and so does a floor past the
wire's edge (all but server/call/ and server/service/) that includes parity.pb.h, directly or
through an edge header. The probes are
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
# The wire's edge: the floors that read the message (docs/design.md#the-tree).
EDGE = {"call", "service", "app"}


def cmake_layers(option):
    """The floors server/CMakeLists.txt marks `option` in their parity_layer()."""
    with open(os.path.join(ROOT, "server", "CMakeLists.txt"), encoding="utf-8") as f:
        return {m.group(1) for m in re.finditer(r"parity_layer\(\w+ (\w+)([A-Z_ ]*)\)", f.read())
                if option in m.group(2).split()}


def headers_of(floor):
    folder = os.path.join(ROOT, "server", floor)
    return ["server/%s/%s" % (floor, f) for f in sorted(os.listdir(folder)) if f.endswith(".h")]


def a_header_of(floor, for_floor=None):
    """The first header of `floor`; for a floor past the edge, the first that does not name
    parity.pb.h (an edge floor's others are the edge's own)."""
    headers = headers_of(floor)
    if for_floor is None or for_floor in EDGE or floor not in EDGE:
        return headers[0]
    for h in headers:
        if not any(d.endswith("parity.pb.h") for d in dependencies(h)):
            return h
    raise AssertionError(f"server/{floor}/ has no header free of parity.pb.h")


def dependencies(header):
    """Every file `header` includes, directly or not (the compiler's -M list)."""
    args = [COMPILER, "-std=c++17", "-M", f"-I{ROOT}", f"-I{os.path.join(BUILD, 'proto')}"] + [
        f"-isystem{d}" for d in TORCH_INCLUDES]
    r = subprocess.run(args + [os.path.join(ROOT, header)], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(r.stderr[-2000:])
    return r.stdout.replace("\\\n", " ").split()


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
                header = a_header_of(down, for_floor=floor)
                code, err = preprocess(floor, f'"{header}"')
                self.assertEqual(code, 0, f"server/{floor}/ including {header}:\n{err[-2000:]}")

    def assert_fenced(self, floors, direct, through, above, *messages):
        """Each of `floors` stops at the preprocessor with `messages` on including any of
        `direct`, and, when above floor `above`, `through` (a lower floor's header that
        includes one of them)."""
        for floor in sorted(floors):
            includes = list(direct)
            if FLOORS.index(floor) > FLOORS.index(above):
                includes.append(through)
            for include in includes:
                code, err = preprocess(floor, include)
                self.assertNotEqual(code, 0, f"server/{floor}/ included {include}")
                for message in messages:
                    self.assertIn(message.format(floor=floor), err)

    def test_a_torch_free_floor_that_includes_torch_does_not_compile(self):
        self.assert_fenced(TORCH_FREE, ["<ATen/core/Tensor.h>"], '"server/replay/call_values.h"',
                           "replay", "server/{floor}/ is torch-free: it includes a torch header")
        code, err = preprocess("replay", "<ATen/core/Tensor.h>")
        self.assertEqual(code, 0, err[-2000:])

    def test_past_the_edge_the_wire_does_not_compile(self):
        proto_free = set(FLOORS) - EDGE
        self.assertEqual(cmake_layers("PROTO_FREE"), proto_free,
                         "server/CMakeLists.txt fences parity.pb.h off every floor but the edge's")
        self.assert_fenced(proto_free, ['"parity/v1/parity.pb.h"', '"parity/v1/parity.grpc.pb.h"'],
                           '"server/call/verdict_encoder.h"', "call",
                           "server/{floor}/ includes parity/v1/parity", "the wire is read at the edge")
        for floor in sorted(EDGE):
            code, err = preprocess(floor, '"parity/v1/parity.pb.h"')
            self.assertEqual(code, 0, err[-2000:])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
