"""`parity-server --check_config` as docs/configuration.md documents it: exit 0 with the effective
settings, or name every problem and exit 2, whatever the problem (issue 66: a missing --config
file exited 1, and --metrics_port equal to --port passed the check and failed at start). Every
problem at once: a mistyped key is named alongside the error it explains, with its line."""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def check(*flags, config_text=None):
    folder = tempfile.mkdtemp(prefix="parity_check_config_")
    args = [harness.SERVER, "--check_config", *flags]
    if config_text is not None:
        path = os.path.join(folder, "server.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(config_text)
        args.append(f"--config={path}")
    r = subprocess.run(args, capture_output=True, text=True, check=False, cwd=folder, timeout=60)
    return r.returncode, r.stdout + r.stderr


class CheckConfigTest(unittest.TestCase):
    def test_a_valid_config_exits_0(self):
        code, out = check("--plaintext", "--port=0")
        self.assertEqual(code, 0, out)
        self.assertIn("configuration OK", out)

    def test_a_missing_config_file_exits_2_naming_it(self):
        code, out = check("--config=/nonexistent/parity/server.json")
        self.assertEqual(code, 2, out)
        self.assertIn("/nonexistent/parity/server.json", out)

    def test_the_metrics_port_on_the_servers_port_exits_2(self):
        code, out = check("--plaintext", "--port=59208", "--metrics_port=59208")
        self.assertEqual(code, 2, out)
        self.assertIn("parity.metrics_port: the same port as run_ut.port (59208)", out)

    def test_every_problem_at_once_with_lines(self):
        code, out = check(config_text='{\n  "task": "run_ut",\n  "run_ut": {\n'
                                      '    "prot": 59208,\n    "port": "x"\n  },\n'
                                      '  "parity": {"plaintext": true, "workers": -3}\n}\n')
        self.assertEqual(code, 2, out)
        self.assertIn('run_ut.port: expected an integer, got "x" (line 5)', out)
        self.assertIn("parity.workers", out)
        self.assertIn("(line 7)", out)
        self.assertIn("also: run_ut.prot: unknown key, ignored (line 4)", out)


if __name__ == "__main__":
    unittest.main()
