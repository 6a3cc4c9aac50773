"""Runs docs/quickstart.md: every ```sh block, in order, in one bash script (`set -e`), with
each ```python block whose first line is `# file: PATH` written to PATH where it appears. The
quickstart folder becomes a temporary one and its fixed ports free ones, so the test runs
beside others. The demo output quoted in the ```text block must match what the demo printed.
"""
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

QUICKSTART = os.path.join(harness.ROOT, "docs", "quickstart.md")


def blocks(text):
    return re.findall(r"^```(\w+)\n(.*?)^```", text, re.M | re.S)


class QuickstartTest(unittest.TestCase):
    def test_every_command_runs(self):
        with open(QUICKSTART, encoding="utf-8") as f:
            doc = f.read()
        work = tempfile.mkdtemp(prefix="parity_quickstart_")
        subs = {"/tmp/parity-quickstart": work, "59208": str(harness.free_port()),
                "9464": str(harness.free_port())}
        build = os.path.relpath(harness.BUILD, harness.ROOT)
        if build != "build":
            subs["build/server/"] = harness.BUILD + "/server/"
            subs["build/agent/"] = harness.BUILD + "/agent/"
        script = ["set -euo pipefail", f"cd {harness.ROOT}"]
        quoted = None
        ran = 0
        for lang, body in blocks(doc):
            for old, new in subs.items():
                body = body.replace(old, new)
            if lang == "sh":
                script.append(body)
                ran += 1
            elif lang == "python" and body.startswith("# file: "):
                path = body.splitlines()[0][len("# file: "):].strip()
                script.append(f"cat > {path} <<'PARITY_PY'\n{body}PARITY_PY")
                ran += 1
            elif lang == "text" and quoted is None:
                quoted = body
        self.assertGreaterEqual(ran, 6)
        env = dict(os.environ, PARITY_BUILD_DIR=harness.BUILD,
                   PARITY_DEMO_DIR=os.path.join(work, "demo"))
        r = subprocess.run(["bash", "-c", "\n".join(script)], env=env, capture_output=True,
                           text=True, timeout=900, check=False)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-4000:])
        # The demo's summary as the quickstart quotes it (all but the temporary folder).
        for line in quoted.splitlines():
            if not line.startswith("Parity results in"):
                self.assertIn(line, r.stdout)
        # The clean training under the Python API and under LD_PRELOAD: checked, no errors.
        self.assertIn("server stopped cleanly", r.stdout)
        self.assertRegex(r.stdout, r"verdicts      : \d+ pass, \d+ warning, 0 error")
        self.assertRegex(r.stdout, r"parity_server_calls_checked_total\{phase=\"backward\","
                                   r"verdict=\"pass\"\} [1-9]")


if __name__ == "__main__":
    unittest.main(verbosity=2)
