"""`python3 -m parity.doctor` against each wrong setup a user meets, each answered in under
10 s with a line naming the cause (issue 52, item 7): the server's metrics port given as its
port, a client certificate from another CA, the wrong ca.crt, a plaintext config against a TLS
server; and the right setup, every check passing. Before, its server line checked TCP only (the
metrics port passed, and the agent then blamed the client certificate) and its TLS line said
"load and match" for certificates the server would refuse."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class DoctorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="parity-doctor-")
        server_tls, cls.client_tls = harness.make_certs(os.path.join(cls.dir, "a"))
        _, other_client = harness.make_certs(os.path.join(cls.dir, "b"))
        # A client certificate of another CA (the right ca.crt), and the wrong ca.crt.
        cls.mixed = os.path.join(cls.dir, "mixed")
        cls.wrong_ca = os.path.join(cls.dir, "wrong_ca")
        for folder, ca_from, cert_from in ((cls.mixed, cls.client_tls, other_client),
                                           (cls.wrong_ca, other_client, cls.client_tls)):
            os.makedirs(folder)
            shutil.copy(os.path.join(ca_from, "ca.crt"), folder)
            for f in ("client.crt", "client.key"):
                shutil.copy(os.path.join(cert_from, f), folder)
        cls.server = harness.Server(cls.dir, server_tls)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def doctor(self, name, port, tls_path, **parity):
        path = os.path.join(self.dir, name + ".json")
        harness.agent_config(path, port, tls_path, **parity)
        started = time.monotonic()
        r = harness.run([harness.PYTHON, "-m", "parity.doctor", "--config", path,
                         "--timeout", "30"],
                        env={"PYTHONPATH": os.path.join(harness.ROOT, "python")})
        return r, time.monotonic() - started

    def test_the_right_setup_passes_every_check(self):
        r, _ = self.doctor("ok", self.server.port, self.client_tls)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("answers as a gRPC server over mutual TLS", r.stdout)
        self.assertIn("every check passed", r.stdout)

    def test_each_wrong_setup_is_named_within_ten_seconds(self):
        # The server refuses a client certificate on the stream, with the reason (issue 66): the
        # doctor's TLS probe gets through, and its one real call is refused, saying why.
        cases = {
            "metrics port": (self.server.metrics_port, self.client_tls, {},
                             "does not speak TLS (the server's metrics port", "server"),
            "client certificate of another CA": (
                self.server.port, self.mixed, {},
                "it is not signed by the CA this server trusts (its ca.crt)", "one call judged"),
            "wrong ca.crt": (self.server.port, self.wrong_ca, {},
                             "the server's certificate does not verify against ca.crt", "server"),
            "plaintext against TLS": (self.server.port, None, {"plaintext": True},
                                      "a server run with TLS, while this config has "
                                      "parity.plaintext", "server"),
        }
        for name, (port, tls_path, parity, said, check) in cases.items():
            with self.subTest(name):
                r, seconds = self.doctor(name.replace(" ", "_"), port, tls_path, **parity)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(f"[FAIL] {check}:", r.stdout)
                self.assertIn(said, r.stdout)
                self.assertLess(seconds, 10, r.stdout)
                # Named once, by the doctor: no agent connection runs into the same wall and
                # repeats it in gRPC's own words.
                self.assertNotIn("Handshake failed", r.stdout + r.stderr)
                self.assertEqual(r.stdout.count("[FAIL]"), 1, r.stdout)

    def test_the_doctor_fails_exactly_where_the_agent_fails(self):
        # Every config the agent refuses (tests/data/bad_agent_configs, also read by the C++
        # config tests): the doctor fails on it with the agent's own words and no traceback, and
        # PrecisionDebugger(config_path=...) raises the same words at construction (issue 66:
        # the doctor passed `"rank": "0"` and scope with list, and crashed on four others).
        corpus = os.path.join(harness.ROOT, "tests", "data", "bad_agent_configs")
        with open(os.path.join(corpus, "expected.json")) as f:
            expected = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
        env = {"PYTHONPATH": os.path.join(harness.ROOT, "python")}
        raised = harness.run([harness.PYTHON, "-c", CONSTRUCT_EACH, corpus, *sorted(expected)],
                             env=env)
        self.assertEqual(raised.returncode, 0, raised.stderr)
        raised = json.loads(raised.stdout.splitlines()[-1])
        for name, want in sorted(expected.items()):
            with self.subTest(name):
                r = harness.run([harness.PYTHON, "-m", "parity.doctor", "--config",
                                 os.path.join(corpus, name)], env=env)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertNotIn("Traceback", r.stdout + r.stderr)
                self.assertIn("[FAIL] config: ", r.stdout)
                self.assertIn("check(s) failed", r.stdout)
                for words in want["says"]:
                    self.assertIn(words, r.stdout)
                    self.assertIn(words, raised[name] or "(constructed without an error)")

    def test_a_config_the_agent_takes_passes_the_doctors_config_line(self):
        # msprobe's empty tls_path (plaintext, with the agent's warning) and a tls_path holding
        # only ca.crt (TLS without a client certificate) are the agent's to take: so the doctor's.
        only_ca = os.path.join(self.dir, "only_ca")
        os.makedirs(only_ca, exist_ok=True)
        shutil.copy(os.path.join(self.client_tls, "ca.crt"), only_ca)
        for name, tls_path in (("empty", ""), ("only_ca", only_ca)):
            with self.subTest(name):
                path = os.path.join(self.dir, f"takes_{name}.json")
                with open(path, "w") as f:
                    json.dump({"task": "tensor", "tensor": {
                        "online_run_ut": True, "host": "127.0.0.1", "port": self.server.port,
                        "tls_path": tls_path}}, f)
                r = harness.run([harness.PYTHON, "-m", "parity.doctor", "--config", path,
                                 "--timeout", "30"],
                                env={"PYTHONPATH": os.path.join(harness.ROOT, "python")})
                self.assertIn("[ok  ] config:", r.stdout, r.stdout + r.stderr)
                self.assertNotIn("[FAIL] TLS", r.stdout)
                self.assertNotIn("Traceback", r.stdout + r.stderr)


# Constructs PrecisionDebugger on each config named in argv[2:] (in argv[1]) and prints, as one
# JSON line, what each construction raised (null: nothing).
CONSTRUCT_EACH = r"""
import json, os, sys
import parity
out = {}
for name in sys.argv[2:]:
    parity.PrecisionDebugger._instance = None
    try:
        parity.PrecisionDebugger(config_path=os.path.join(sys.argv[1], name))
        out[name] = None
    except ValueError as e:
        out[name] = str(e)
print(json.dumps(out))
"""

if __name__ == "__main__":
    unittest.main()
