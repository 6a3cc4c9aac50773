"""The size rules, kept by a test (issue 40): no product source file over
500 lines and no function over 60 lines, except the data tables and SIMD kernels listed in
EXEMPT with the reason each is one. Product sources: the C++ under agent/, common/, server/ and
oplib/ (tests, examples and generated files are not held to it).

A function is found the way a reader finds one: a line at namespace or class-member indent
(0 or 2 spaces) that starts a definition, whose signature ends in `{` on that line or a
continuation line, through the line that closes it at the same indent. Lambdas, control blocks
and nested classes count toward the function they sit in."""
import os
import re
import subprocess
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PRODUCT = ("agent/", "common/", "server/", "oplib/")
SOURCE = re.compile(r"\.(cc|h|inc|c)$")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60

# (file, function name or None for the whole file): why it may be longer.
EXEMPT = {
    ("server/compare/metrics_simd_kernel.inc", None):
        "SIMD kernels: one file instantiated per instruction set (scalar, vec128, AVX2)",
    ("server/compare/metrics_simd_kernel.inc", "NarrowPass"):
        "SIMD kernel: the low-precision pass, one loop body the compiler vectorises",
    ("server/compare/metrics_simd_kernel.inc", "FusedPass"):
        "SIMD kernel: the fused float32/float64 pass",
    ("server/compare/element.h", "AccumulateElement"):
        "the per-element definition the SIMD and CUDA kernels are tested against, whole",
    ("common/config/config_keys.cc", "AgentTable"): "data table: one row per agent config key",
    ("server/config/server_keys.cc", "ServerTable"):
        "data table: one row per server config key",
    ("server/metrics/metrics.cc", "MetricCatalogue"):
        "data table: one row per metric family the server exports",
    ("common/naming/msprobe_tables.cc", "FunctionalOps"):
        "data table: msprobe's torch.nn.functional APIs and the operators they map to",
}

_END_OF_SIGNATURE = re.compile(
    r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->\s*[\w:<>]+)?\s*(:.*)?\{\s*$")
_NOT_A_DEFINITION = re.compile(
    r"^\s*(if|for|while|switch|return|namespace|struct|class|enum|union|else|do|case)\b")
_NAME = re.compile(r"([~\w]+)\s*\(")


def functions(lines):
    """(name, first line number, length) of every function defined in `lines`."""
    found = []
    i = 0
    while i < len(lines):
        if not _END_OF_SIGNATURE.search(lines[i]) or _NOT_A_DEFINITION.match(lines[i]):
            i += 1
            continue
        start = i
        while start > 0 and not re.match(r"^ {0,2}[A-Za-z_~\[]", lines[start]):
            start -= 1
        head = lines[start]
        indent = len(head) - len(head.lstrip(" "))
        before_paren = head.split("(")[0]
        if (indent > 2 or _NOT_A_DEFINITION.match(head) or
                ("=" in before_paren and "operator" not in before_paren)):
            i += 1
            continue
        end = i
        if not lines[i].rstrip().endswith("{}"):
            closing = re.compile("^" + " " * indent + r"\}")
            end = i + 1
            while end < len(lines) and not closing.match(lines[end]):
                end += 1
        name = _NAME.search(" ".join(lines[start:i + 1]))
        found.append((name.group(1) if name else "?", start + 1, end - start + 1))
        i = end + 1
    return found


def violations(name, text):
    """The rule breaks of one file, as messages; EXEMPT entries are not reported."""
    lines = text.split("\n")
    out = []
    if len(lines) - 1 > MAX_FILE_LINES and (name, None) not in EXEMPT:
        out.append(f"{name}: {len(lines) - 1} lines (over {MAX_FILE_LINES})")
    for function, line, length in functions(lines):
        if length > MAX_FUNCTION_LINES and (name, function) not in EXEMPT:
            out.append(f"{name}:{line}: {function} is {length} lines (over {MAX_FUNCTION_LINES})")
    return out


def product_files():
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return [f for f in files if f.startswith(PRODUCT) and SOURCE.search(f)
            and os.path.isfile(os.path.join(ROOT, f))]


def every_product_file(check):
    """check(name, text)'s findings over every product source, in one list."""
    found = []
    for name in product_files():
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            found += check(name, f.read())
    return found


class StructureTest(unittest.TestCase):
    def test_finds_functions_their_names_and_lengths(self):
        text = "\n".join([
            "namespace x {",
            "int Short(int a) { return a; }",
            "std::string Long(const std::string& a,",
            "                 int b) {",
            *["  b += 1;" for _ in range(70)],
            "  if (b) {",
            "    return a;",
            "  }",
            "  return a;",
            "}",
            "struct S {",
            "  void Member() const {",
            "    Work();",
            "  }",
            "};",
            "}  // namespace x",
        ])
        found = {name: (line, length) for name, line, length in functions(text.split("\n"))}
        self.assertEqual(found["Long"], (3, 77))
        self.assertEqual(found["Member"], (81, 3))
        self.assertNotIn("if", found)

    def test_reports_long_files_and_functions_but_not_exempt_ones(self):
        long_function = "void F() {\n" + "  x();\n" * 61 + "}\n"
        self.assertEqual(violations("x/a.cc", long_function),
                         ["x/a.cc:1: F is 63 lines (over 60)"])
        self.assertEqual(violations("x/a.cc", "int x;\n" * 501),
                         ["x/a.cc: 501 lines (over 500)"])
        table = "const Table& AgentTable() {\n" + "  row();\n" * 80 + "}\n"
        self.assertEqual(violations("common/config/config_keys.cc", table), [])
        self.assertEqual(len(violations("x/other.cc", table)), 1)

    def test_every_exemption_still_names_a_long_file_or_function(self):
        stale = []
        for (name, function), _ in EXEMPT.items():
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                lines = f.read().split("\n")
            if function is None:
                if len(lines) - 1 <= MAX_FILE_LINES:
                    stale.append(f"{name} is no longer long")
                continue
            lengths = [n for fn, _, n in functions(lines) if fn == function]
            if not lengths or max(lengths) <= MAX_FUNCTION_LINES:
                stale.append(f"{name}:{function} is no longer long (or gone)")
        self.assertEqual(stale, [], "drop these from EXEMPT")

    def test_product_sources_keep_the_size_rules(self):
        found = every_product_file(violations)
        self.assertEqual(found, [], "\n" + "\n".join(found))


# The server's floors (a file includes from its own floor or lower ones only; the torch-free ones
# include no torch) are enforced by the compiler since issue 67: cmake/ParityTargets.cmake's
# parity_layer, shown by ctest layer_fences (tests/docs/test_layer_fences.py).


# common/ is the floor under both sides: it includes nothing of server/, agent/ or oplib/ (the
# server's configuration, which nests the server components' options, lives in server/config/).
COMPONENT_INCLUDE = re.compile(r'^#include "((?:server|agent|oplib)/[^"]+)"', re.M)


def common_upward_includes(name, text):
    """The includes of `name` (common/...) that reach a side above it."""
    if not name.startswith("common/"):
        return []
    return [f"{name} includes {h} (common/ is below both sides)"
            for h in COMPONENT_INCLUDE.findall(text)]


class CommonFloorTest(unittest.TestCase):
    def test_finds_an_include_of_a_side(self):
        self.assertEqual(
            common_upward_includes("common/config/config.h",
                                   '#include "server/service/service_options.h"\n'),
            ["common/config/config.h includes server/service/service_options.h (common/ is below "
             "both sides)"])

    def test_common_includes_neither_side(self):
        found = every_product_file(common_upward_includes)
        self.assertEqual(found, [], "\n" + "\n".join(found))


# The agent's two halves, a folder each (issue 53): agent/torch/ (libparity_agent.so, built with
# the training's torch) and agent/transport/ (libparity_transport.so: gRPC, protobuf, TLS). Neither
# includes the other's headers; agent/include/ (parity/agent.h, transport.h, counters.h,
# counter_fields.h) is the only bridge.
AGENT_INCLUDE = re.compile(r'^#include "agent/(torch|transport)/', re.M)


def crossing_includes(name, text):
    """The includes of `name` (agent/<half>/...) that reach into the other half."""
    parts = name.split("/")
    if len(parts) < 3 or parts[0] != "agent" or parts[1] not in ("torch", "transport"):
        return []
    return [f"{name} includes agent/{d}/ (the other half: only agent/include/ bridges them)"
            for d in AGENT_INCLUDE.findall(text) if d != parts[1]]


class AgentHalvesTest(unittest.TestCase):
    def test_finds_a_crossing_include(self):
        self.assertEqual(
            crossing_includes("agent/torch/torch_agent.cc", '#include "agent/transport/sender.h"\n'),
            ["agent/torch/torch_agent.cc includes agent/transport/ (the other half: only "
             "agent/include/ bridges them)"])
        self.assertEqual(
            crossing_includes("agent/torch/agent.cc", '#include "agent/torch/agent_hook.h"\n'), [])

    def test_every_agent_source_is_in_one_half(self):
        loose = [n for n in os.listdir(os.path.join(ROOT, "agent"))
                 if n.endswith((".cc", ".h", ".lds"))]
        self.assertEqual(loose, [], "agent/ holds its halves' folders, include/ and CMakeLists.txt")

    def test_no_agent_file_includes_the_other_half(self):
        found = every_product_file(crossing_includes)
        self.assertEqual(found, [], "\n" + "\n".join(found))


class PythonDefinitionsTest(unittest.TestCase):
    def test_no_module_of_the_python_package_defines_a_name_twice(self):
        # A second top-level def silently replaces the first (a dead `def counters(): return
        # counters()` came back once after being removed).
        import ast  # pylint: disable=import-outside-toplevel
        folder = os.path.join(ROOT, "python", "parity")
        found = []
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            seen = set()
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    if node.name in seen:
                        found.append(f"python/parity/{name}:{node.lineno}: {node.name} again")
                    seen.add(node.name)
        self.assertEqual(found, [], "\n".join(found))


if __name__ == "__main__":
    unittest.main()
