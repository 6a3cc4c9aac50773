"""The agent's two halves (docs/design.md#two-halves), checked from the outside:

- libparity_transport.so exports its C API (parity_*) and nothing else;
- libparity_agent.so, the torch half, imports no gRPC, protobuf, abseil or OpenSSL symbol and
  needs none of their libraries, and none of its translation units includes their headers (the
  build's dependency records, or the compiler's .d files);
- a client in plain C, and one in C++ compiled with each C++ ABI (_GLIBCXX_USE_CXX11_ABI=0 and
  =1), drive the same transport binary against a real parity-server: pass, error and skip come
  back as the server judged them.

Debian's libtorch is built with the C++11 ABI, so the torch half itself is built here with =1
only; the =0 client shows that the transport does not care which ABI its caller has.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

TRANSPORT = os.path.join(harness.BUILD, "agent", "libparity_transport.so")
FOREIGN = re.compile(r"absl|grpc|google[0-9]*protobuf|protobuf|\bSSL_|\bEVP_|\bX509|OPENSSL|"
                     r"\bBIO_|\bCRYPTO_")
FOREIGN_HEADER = re.compile(r"/(absl|grpc|grpcpp|openssl)/|google/protobuf/|\.pb\.h$")
# The torch half's targets (agent/CMakeLists.txt, common/CMakeLists.txt).
TORCH_HALF_TARGETS = ("parity_agent_torch", "parity_agent", "parity_torch_wire", "parity_wire")


def symbols(path, *flags):
    out = subprocess.run(["nm", "-D", *flags, path], capture_output=True, text=True, check=True)
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True)
    return re.findall(r"Shared library: \[([^\]]+)\]", out.stdout)


def torch_half_headers():
    """{object: [headers]} for the torch half's objects, from ninja's dependency log or the
    compiler's .d files; None when neither is there."""
    deps = {}
    if os.path.exists(os.path.join(harness.BUILD, ".ninja_deps")) and shutil.which("ninja"):
        out = subprocess.run(["ninja", "-C", harness.BUILD, "-t", "deps"], capture_output=True,
                             text=True, check=True).stdout
        current = None
        for line in out.splitlines():
            if line and not line.startswith(" "):
                current = line.split(":")[0]
                deps[current] = []
            elif current and line.strip():
                deps[current].append(line.strip())
    else:
        for d in glob.glob(os.path.join(harness.BUILD, "**", "*.o.d"), recursive=True):
            with open(d, encoding="utf-8") as f:
                text = f.read().replace("\\\n", " ")
            target, _, rest = text.partition(":")
            deps[target.strip()] = rest.split()
    if not deps:
        return None
    return {obj: headers for obj, headers in deps.items()
            if any(f"/{t}.dir/" in obj for t in TORCH_HALF_TARGETS)}


class HalvesTest(unittest.TestCase):
    def test_the_transport_exports_only_its_c_api(self):
        exported = [s for s in symbols(TRANSPORT, "--defined-only") if s not in ("_init", "_fini")]
        self.assertIn("parity_session_create", exported)
        self.assertIn("parity_call_capture", exported)
        others = [s for s in exported if not s.startswith("parity_")]
        self.assertEqual(others, [], "libparity_transport.so exports more than its C API")

    def test_the_transports_grpc_and_openssl_are_inside_it(self):
        # Linked from the distribution's archives where it has them (agent/CMakeLists.txt):
        # a training host needs no gRPC or OpenSSL of its own, and none can meet the agent's.
        archives = [a for a in ("libgrpc.a", "libgrpc++.a", "libssl.a", "libcrypto.a")
                    if glob.glob(f"/usr/lib/*/{a}") or glob.glob(f"/usr/lib/{a}")]
        if len(archives) < 4:
            self.skipTest("the distribution ships no gRPC/OpenSSL archives here")
        libs = needed(TRANSPORT)
        self.assertEqual([l for l in libs if re.match(r"lib(grpc|gpr|ssl|crypto|cares|z)\b", l)],
                         [], libs)
        self.assertTrue(any(l.startswith("libprotobuf") for l in libs), libs)  # stays shared

    def test_the_torch_half_imports_nothing_of_the_transports_libraries(self):
        undefined = symbols(harness.AGENT_LIB, "--undefined-only")
        self.assertIn("parity_session_create", undefined)  # it does use the C API
        foreign = [s for s in undefined if FOREIGN.search(s)]
        self.assertEqual(foreign, [], "the torch half imports gRPC/protobuf/absl/OpenSSL symbols")
        libs = needed(harness.AGENT_LIB)
        self.assertIn("libparity_transport.so", libs)
        self.assertEqual([l for l in libs if FOREIGN.search(l) or "ssl" in l or "crypto" in l], [],
                         libs)

    def test_the_torch_half_includes_no_header_of_them(self):
        objects = torch_half_headers()
        if objects is None:
            self.skipTest("no dependency records in the build directory")
        self.assertTrue(any("agent_hook.cc.o" in o for o in objects), sorted(objects)[:5])
        self.assertTrue(any("wire_encoder.cc.o" in o for o in objects), sorted(objects)[:5])
        bad = {o: [h for h in hs if FOREIGN_HEADER.search(h)] for o, hs in objects.items()}
        bad = {o: hs[:3] for o, hs in bad.items() if hs}
        self.assertEqual(bad, {}, "torch-half translation units include transport headers")

    def _run_client(self, name):
        with tempfile.TemporaryDirectory() as work:
            server = harness.Server(work)
            try:
                result = subprocess.run([os.path.join(harness.BUILD, "tests", name),
                                         str(server.port)], capture_output=True, text=True,
                                        timeout=120, check=False)
            finally:
                server.stop()
            output = result.stdout + result.stderr
            self.assertEqual(result.returncode, 0, output)
            self.assertIn("every check held", output)
            results = glob.glob(os.path.join(server.out, "**", "*.csv"), recursive=True)
            self.assertTrue(results, "the server wrote no result file")
            return output

    def test_a_plain_c_client_drives_the_transport(self):
        output = self._run_client("transport_c_client")
        self.assertIn("pass 1 error 1 skip 1", output)

    def test_cxx_clients_of_both_abis_use_the_same_transport_binary(self):
        old = self._run_client("transport_cxx_client_abi0")
        new = self._run_client("transport_cxx_client_abi1")
        self.assertIn("_GLIBCXX_USE_CXX11_ABI=0, sizeof(std::string)=8", old)
        self.assertIn("_GLIBCXX_USE_CXX11_ABI=1, sizeof(std::string)=32", new)
        for out in (old, new):
            self.assertIn("pass 1 error 1 skip 1", out)
        for name in ("transport_cxx_client_abi0", "transport_cxx_client_abi1"):
            ldd = subprocess.run(["ldd", os.path.join(harness.BUILD, "tests", name)],
                                 capture_output=True, text=True, check=True).stdout
            self.assertIn(TRANSPORT, ldd)  # the one binary, not a copy


if __name__ == "__main__":
    unittest.main(verbosity=2)
