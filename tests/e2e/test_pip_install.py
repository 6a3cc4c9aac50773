"""The agent installed the way a training host gets it (docs/install.md): `pip install
--no-build-isolation <checkout>/python` into a fresh virtual environment (with the system's site
packages, for Debian's torch), the torch half built there against that interpreter's torch and the
transport this build made given with PARITY_TRANSPORT_LIB. Then, from a folder outside the
checkout and with no PARITY_* variable, a training imports `parity` from the environment and is
checked end to end; an installed agent refuses a torch it was not built for, naming both."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TRAIN = r'''
import json, sys
import torch
import parity
from parity import PrecisionDebugger
print("parity from", parity.__file__, flush=True)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(), torch.nn.Linear(128, 64))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
debugger = PrecisionDebugger(sys.argv[1])
for step in range(3):
    debugger.start(model)
    loss = model(torch.randn(8, 64)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    debugger.stop()
    debugger.step()
debugger.flush(120)
print("COUNTERS " + json.dumps(parity.counters()), flush=True)
'''


class PipInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        if os.environ.get("PARITY_TEST_AGENT_LIB"):
            # The torch matrix installed the agent into PARITY_PYTHON's environment by the
            # README's command already (scripts/torch-matrix.sh): these tests check that install.
            cls.python = harness.PYTHON
            cls.install = subprocess.CompletedProcess([], 0, "", "")
            cls.site = [os.path.dirname(harness.AGENT_LIB)]
            return
        cls.venv = os.path.join(cls.tmp.name, "venv")
        subprocess.run([harness.PYTHON, "-m", "venv", "--system-site-packages", cls.venv],
                       check=True)
        cls.python = os.path.join(cls.venv, "bin", "python")
        env = cls.clean_env()
        env["PARITY_TRANSPORT_LIB"] = os.path.join(harness.BUILD, "agent",
                                                   "libparity_transport.so")
        env["PARITY_PIP_BUILD_DIR"] = os.path.join(harness.BUILD, "pip-torch-half")
        cls.install = subprocess.run(
            [cls.python, "-m", "pip", "install", "-v", "--no-build-isolation", "--no-index",
             os.path.join(harness.ROOT, "python")], env=env, capture_output=True, text=True,
            timeout=1200, check=False, cwd=cls.tmp.name)
        cls.site = glob.glob(os.path.join(cls.venv, "lib", "python*", "site-packages", "parity"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @staticmethod
    def clean_env():
        return {k: v for k, v in os.environ.items()
                if not k.startswith("PARITY_") and k not in ("PYTHONPATH", "LD_PRELOAD",
                                                            "LD_LIBRARY_PATH")}

    def setUp(self):
        self.assertEqual(self.install.returncode, 0,
                         self.install.stdout[-3000:] + self.install.stderr[-3000:])
        self.assertEqual(len(self.site), 1)

    def test_the_build_says_how_far_it_is_and_where_to_follow_it(self):
        # Issue 66: pip printed "Building wheel ... still running" for minutes, and the agent's
        # lines went to /dev/tty only. Now pip -v shows them, with the build's counters, and a
        # file beside the build holds them for a pip whose output goes nowhere.
        if os.environ.get("PARITY_TEST_AGENT_LIB"):
            self.skipTest("installed by the torch matrix")
        out = self.install.stdout + self.install.stderr
        self.assertIn("parity: building the agent against torch", out)
        self.assertRegex(out, r"parity: building the agent: (\d+/\d+ steps, \d+ s|up to date)")
        self.assertRegex(out, r"parity: built in \d+ s")
        log = os.path.join(harness.BUILD, "pip-torch-half", "progress.log")
        self.assertIn(f"in {log}", out)
        with open(log, encoding="utf-8") as f:
            logged = f.read()
        self.assertRegex(logged, r"building the agent: (\d+/\d+ steps|up to date)")
        self.assertIn("built in", logged)

    def test_the_package_holds_both_halves_and_the_agent_finds_its_transport(self):
        files = sorted(os.listdir(self.site[0]))
        for name in ("__init__.py", "libparity_agent.so", "libparity_transport.so",
                     "_build_info.json"):
            self.assertIn(name, files)
        ldd = subprocess.run(["ldd", os.path.join(self.site[0], "libparity_agent.so")],
                             capture_output=True, text=True, check=True).stdout
        self.assertIn(os.path.join(self.site[0], "libparity_transport.so"), ldd)
        # Its RUNPATH is the package's: the build folder may be deleted after the install.
        dynamic = subprocess.run(["readelf", "-d", os.path.join(self.site[0],
                                                                "libparity_agent.so")],
                                 capture_output=True, text=True, check=True).stdout
        runpath = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines()
                   if "RUNPATH" in line or "RPATH" in line]
        self.assertEqual(len(runpath), 1, dynamic)
        self.assertTrue(runpath[0].startswith("$ORIGIN:"), runpath)
        for entry in runpath[0].split(":"):
            self.assertNotIn("build", entry, runpath)
        with open(os.path.join(self.site[0], "_build_info.json"), encoding="utf-8") as f:
            info = json.load(f)
        torch_version = subprocess.run([self.python, "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(info["torch"], torch_version)

    def test_a_training_outside_the_checkout_is_checked_with_no_environment(self):
        with tempfile.TemporaryDirectory() as work:
            server = harness.Server(work)
            try:
                script, config = harness.script_against(work, server, TRAIN)
                run = subprocess.run([self.python, script, config], env=self.clean_env(),
                                     cwd=work, capture_output=True, text=True, timeout=600,
                                     check=False)
            finally:
                server.stop()
            self.assertEqual(run.returncode, 0, run.stdout[-2000:] + run.stderr[-3000:])
            self.assertIn("parity from " + os.path.join(self.site[0], "__init__.py"), run.stdout)
            counters = json.loads(run.stdout.split("COUNTERS ", 1)[1].splitlines()[0])
            self.assertGreater(counters["captured"], 30)
            self.assertEqual(counters["verdicts"], counters["captured"])
            self.assertEqual(counters["error"], 0, run.stderr[-3000:])
            rows = server.rows("accuracy_checking_details")
            self.assertTrue(any("linear" in r.get("API Name", "") for r in rows), rows[:3])

    def test_the_doctor_checks_the_install_against_a_server(self):
        with tempfile.TemporaryDirectory() as work:
            server_tls, client_tls = harness.make_certs(os.path.join(work, "certs"))
            server = harness.Server(work, tls_dir=server_tls)
            try:
                config = harness.agent_config(os.path.join(work, "config.json"), server.port,
                                              client_tls=client_tls)
                ok = subprocess.run([self.python, "-m", "parity.doctor", "--config", config],
                                    env=self.clean_env(), cwd=work, capture_output=True,
                                    text=True, timeout=300, check=False)
            finally:
                server.stop()
            # Nothing listens there now.
            dead = subprocess.run([self.python, "-m", "parity.doctor", "--config", config],
                                  env=self.clean_env(), cwd=work, capture_output=True,
                                  text=True, timeout=300, check=False)
        print(ok.stdout)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr[-2000:])
        for line in ("[ok  ] torch: ", "[ok  ] agent: " + os.path.join(self.site[0], ""),
                     "[ok  ] transport: ", "[ok  ] config: ",
                     f"[ok  ] TLS: {client_tls}: ca.crt, client.crt and client.key load and match",
                     "[ok  ] server: ",
                     "[ok  ] one call judged: aten::add: pass", "every check passed"):
            self.assertIn(line, ok.stdout)
        self.assertEqual(dead.returncode, 1, dead.stdout)
        self.assertIn("[FAIL] server: 127.0.0.1:", dead.stdout)
        self.assertIn("unreachable", dead.stdout)
        self.assertIn("1 check(s) failed", dead.stdout)

    def test_another_torch_is_refused_naming_both_versions(self):
        info_path = os.path.join(self.site[0], "_build_info.json")
        with open(info_path, encoding="utf-8") as f:
            saved = f.read()
        try:
            with open(info_path, "w", encoding="utf-8") as f:
                json.dump(dict(json.loads(saved), torch="9.9.9"), f)
            run = subprocess.run([self.python, "-c", "import parity"], env=self.clean_env(),
                                 capture_output=True, text=True, timeout=300, check=False,
                                 cwd=self.tmp.name)
            # The doctor says it as its agent line, not as a traceback (issue 52, item 7).
            doctor = subprocess.run([self.python, "-m", "parity.doctor"], env=self.clean_env(),
                                    capture_output=True, text=True, timeout=300, check=False,
                                    cwd=self.tmp.name)
        finally:
            with open(info_path, "w", encoding="utf-8") as f:
                f.write(saved)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("built for torch 9.9.9", run.stderr)
        self.assertIn("this interpreter runs torch ", run.stderr)
        self.assertIn("pip install --no-build-isolation", run.stderr)
        self.assertEqual(doctor.returncode, 1, doctor.stdout + doctor.stderr)
        self.assertIn("[FAIL] agent: parity's agent was built for torch 9.9.9", doctor.stdout)
        self.assertNotIn("Traceback", doctor.stdout + doctor.stderr)


class InstallMessagesTest(unittest.TestCase):
    """What a plain venv meets before anything is compiled: one line naming the fix
    (python/build_backend/parity_build.py; docs/install.md#troubleshooting)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        venv = os.path.join(cls.tmp.name, "plain")
        # As `python -m venv` makes it: setuptools from ensurepip (66 on Debian's 3.11), no wheel.
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
        cls.python = os.path.join(venv, "bin", "python")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def pip_install(self, *flags):
        # --no-index: as on a host with no package index; the checks must not need one.
        return subprocess.run([self.python, "-m", "pip", "install", "--no-index", *flags,
                               os.path.join(harness.ROOT, "python")], capture_output=True,
                              text=True, timeout=300, check=False, cwd=self.tmp.name,
                              env=PipInstallTest.clean_env())

    def assert_says(self, run, *lines):
        self.assertNotEqual(run.returncode, 0)
        for line in lines:
            self.assertIn(line, run.stdout + run.stderr)

    def test_a_venv_without_wheel_is_told_to_install_it(self):
        has_wheel = subprocess.run([self.python, "-c", "import setuptools, wheel"],
                                   capture_output=True, check=False).returncode == 0
        if has_wheel:
            self.skipTest("this Python's venvs come with wheel")
        self.assert_says(self.pip_install("--no-build-isolation"),
                         "needs the 'wheel' package to build a wheel",
                         "parity: python -m pip install wheel (or setuptools>=70.1), then: "
                         "python -m pip install --no-build-isolation <checkout>/python")

    def test_build_isolation_is_told_to_turn_it_off_even_offline(self):
        self.assert_says(self.pip_install(),
                         "parity: pip is building in an isolated environment",
                         "run pip with --no-build-isolation")

    def test_a_venv_without_setuptools_is_told_to_install_it(self):
        venv = os.path.join(self.tmp.name, "bare")
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        subprocess.run([python, "-m", "pip", "uninstall", "-y", "-q", "setuptools"], check=True,
                       capture_output=True)
        run = subprocess.run([python, "-m", "pip", "install", "--no-index",
                              "--no-build-isolation", os.path.join(harness.ROOT, "python")],
                             capture_output=True, text=True, timeout=300, check=False,
                             cwd=self.tmp.name, env=PipInstallTest.clean_env())
        self.assert_says(run, "parity: setuptools is not installed in " + venv,
                         "parity: python -m pip install setuptools wheel")


if __name__ == "__main__":
    unittest.main(verbosity=2)
