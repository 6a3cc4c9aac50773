"""The agent's torch half built as against a torch with the pre-C++11 ABI (pip wheels 2.1-2.6,
torch_npu's bases): every symbol of Parity's own that libparity_agent.so needs must be inside it
or be the transport's C API, never a C++ symbol of Parity's left for another library to supply.

Debian's libtorch has the C++11 ABI only, so the torch half is compiled here with the build's
test probe PARITY_PROBE_TORCH_CXX11_ABI=0 (CMakeLists.txt): torch's headers and Parity's sources
with -D_GLIBCXX_USE_CXX11_ABI=0, linked against the transport this build made
(PARITY_TRANSPORT_LIB, the torch-half-only route of docs/install.md) without checking torch's own
symbols, which this torch cannot supply with that ABI. Before the fix, the two parity_wire
sources were compiled without torch's flags and `parity::wire::Message::AppendTo(std::string*)`
came out undefined (issue 49); tests/e2e's torch matrix (scripts/torch-matrix.sh) loads the real
thing on pip's torch 2.1.0.
"""
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

TRANSPORT = os.path.join(harness.BUILD, "agent", "libparity_transport.so")
PROBE_BUILD = os.path.join(harness.BUILD, "abi0-torch-half")


def nm(path, *flags):
    """[(symbol, demangled)] of the dynamic symbol table."""
    raw = subprocess.run(["nm", "-D", "--format=posix", *flags, path], capture_output=True,
                         text=True, check=True).stdout.split("\n")
    names = [line.split()[0] for line in raw if line.strip()]
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                               text=True, check=True).stdout.split("\n")
    return list(zip(names, demangled))


def parity_cxx_symbols(undefined):
    """The undefined symbols that are Parity's own C++ (namespace parity), i.e. code of Parity's
    that some other library would have to supply with this ABI."""
    return [d for _, d in undefined if "parity::" in d.split("(")[0]]


class ParityCxxSymbolsTest(unittest.TestCase):
    """The filter itself: it must see the symbol the old build left undefined."""

    def test_it_finds_the_symbol_that_broke_the_pre_cxx11_build(self):
        found = parity_cxx_symbols([
            ("_ZNK6parity4wire7Message8AppendToEPSs",
             "parity::wire::Message::AppendTo(std::string*) const"),
            ("parity_transport_abi", "parity_transport_abi"),
            ("_ZN3c105ErrorC1ENS_14SourceLocationESs",
             "c10::Error::Error(c10::SourceLocation, std::string)"),
            ("_ZTVN6parity4wire7MessageE", "vtable for parity::wire::Message")])
        self.assertEqual(found, ["parity::wire::Message::AppendTo(std::string*) const",
                                 "vtable for parity::wire::Message"])


class Abi0TorchHalfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        configure = ["cmake", "-S", harness.ROOT, "-B", PROBE_BUILD, "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPARITY_TRANSPORT_LIB={TRANSPORT}", "-DPARITY_PROBE_TORCH_CXX11_ABI=0"]
        if not os.path.exists(os.path.join(PROBE_BUILD, "CMakeCache.txt")):
            configure += ["-G", "Ninja"]
        cls.configure = subprocess.run(configure, capture_output=True, text=True, check=False)
        cls.build = subprocess.run(["cmake", "--build", PROBE_BUILD, "--target", "parity_agent"],
                                   capture_output=True, text=True, check=False) \
            if cls.configure.returncode == 0 else None
        cls.agent = os.path.join(PROBE_BUILD, "agent", "libparity_agent.so")

    def setUp(self):
        self.assertEqual(self.configure.returncode, 0,
                         self.configure.stdout[-3000:] + self.configure.stderr[-3000:])
        self.assertIn("-D_GLIBCXX_USE_CXX11_ABI=0", self.configure.stdout)
        self.assertEqual(self.build.returncode, 0,
                         self.build.stdout[-4000:] + self.build.stderr[-3000:])

    def test_it_was_compiled_with_the_pre_cxx11_abi(self):
        # With ABI 0 std::string is the old COW string: no symbol names std::__cxx11, and the
        # torch API that takes strings is imported in its old-ABI form.
        every = nm(self.agent)
        self.assertEqual([d for _, d in every if "__cxx11" in d or "cxx11" in _], [])
        undefined = nm(self.agent, "--undefined-only")
        old_string = ("std::string", "std::basic_string<char, std::char_traits<char>")
        self.assertTrue(any(d.startswith("c10::") and any(s in d for s in old_string)
                            for _, d in undefined),
                        [d for _, d in undefined if d.startswith("c10::")][:20])

    def test_no_symbol_of_parity_is_left_undefined(self):
        undefined = nm(self.agent, "--undefined-only")
        self.assertEqual(parity_cxx_symbols(undefined), [])

    def test_what_it_takes_from_the_transport_is_the_c_api_that_the_transport_exports(self):
        exported = {name for name, _ in nm(TRANSPORT, "--defined-only")}
        wanted = [name for name, _ in nm(self.agent, "--undefined-only")
                  if name.startswith("parity")]
        self.assertTrue(wanted)
        self.assertEqual([name for name in wanted if name not in exported], [])
        self.assertTrue(all(name.startswith("parity_") for name in wanted), wanted)


class ConfigureErrorsTest(unittest.TestCase):
    """The build's ABI and torch options, given wrong, stop the configure saying what to give."""

    def configure(self, *options):
        work = harness.tempdir("parity-configure-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        r = subprocess.run(["cmake", "-S", harness.ROOT, "-B", work, *options],
                           capture_output=True, text=True, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout[-2000:])
        return " ".join((r.stdout + r.stderr).split())  # CMake wraps its messages

    def test_a_probe_abi_other_than_0_or_1(self):
        self.assertIn("PARITY_PROBE_TORCH_CXX11_ABI is 0 or 1, not '2'",
                      self.configure("-DPARITY_PROBE_TORCH_CXX11_ABI=2"))

    def test_a_python_torch_without_its_abi(self):
        torch_dir = os.path.dirname(subprocess.run(
            [harness.PYTHON, "-c", "import torch; print(torch.__file__)"], capture_output=True,
            text=True, check=True).stdout.strip())
        self.assertIn("PARITY_PYTHON_TORCH needs PARITY_PYTHON_TORCH_CXX11_ABI, 0 or 1",
                      self.configure("-DPARITY_AGENT_ONLY=ON", f"-DPARITY_PYTHON_TORCH={torch_dir}"))

    def test_a_python_torch_folder_that_is_not_a_torch_package(self):
        out = self.configure("-DPARITY_AGENT_ONLY=ON", f"-DPARITY_PYTHON_TORCH={harness.ROOT}",
                             "-DPARITY_PYTHON_TORCH_CXX11_ABI=1")
        self.assertIn(f"PARITY_PYTHON_TORCH={harness.ROOT}: no libtorch.so in its lib/ folder: is "
                      "it the folder of an installed torch package?", out)

    def test_a_python_torch_for_the_server(self):
        self.assertIn("PARITY_PYTHON_TORCH is for the agent only (PARITY_AGENT_ONLY)",
                      self.configure(f"-DPARITY_PYTHON_TORCH={harness.ROOT}",
                                     "-DPARITY_PYTHON_TORCH_CXX11_ABI=1"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
