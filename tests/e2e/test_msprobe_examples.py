"""msprobe 8.1.1's documented online run_ut examples, against Parity (issue 38): the GPU-side
config for the server and the NPU-side config for the agent, written out from msprobe's docs
(shared/reference/msprobe-run-ut.md), with two substitutions only: the NPU example's host
placeholder "xx.xx.xx.x" becomes 127.0.0.1, and its port 59208 a free port (tests run side by
side). Their `"tls_path": ""` is msprobe's plaintext: both sides run in plaintext, each saying
loudly at start that the tensors cross the network unencrypted, and the training's rank 0, step
0 is checked end to end."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

GPU_EXAMPLE = ('{"task":"run_ut","run_ut":{"white_list":[],"black_list":[],'
               '"error_data_path":"./","is_online":true,"nfs_path":"","host":"127.0.0.1",'
               '"port":59208,"rank_list":[0],"tls_path":""}}')
NPU_EXAMPLE = ('{"task":"tensor","dump_path":"./dump_path","rank":[0],"step":[0],"level":"L1",'
               '"tensor":{"scope":[],"list":[],"online_run_ut":true,"nfs_path":"",'
               '"host":"xx.xx.xx.x","port":59208,"tls_path":""}}')


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MsprobeExamplesTest(unittest.TestCase):
    def test_msprobes_documented_plaintext_configs_check_a_training(self):
        port = free_port()
        with tempfile.TemporaryDirectory() as work:
            gpu = os.path.join(work, "gpu_config.json")
            with open(gpu, "w", encoding="utf-8") as f:
                f.write(GPU_EXAMPLE.replace("59208", str(port)))
            npu = os.path.join(work, "npu_config.json")
            with open(npu, "w", encoding="utf-8") as f:
                f.write(NPU_EXAMPLE.replace("xx.xx.xx.x", "127.0.0.1")
                        .replace("59208", str(port)))
            out = os.path.join(work, "results")
            log_path = os.path.join(work, "server.log")
            with open(log_path, "w", encoding="utf-8") as log:
                server = subprocess.Popen(
                    [harness.SERVER, f"--config={gpu}", f"--output_dir={out}",
                     "--metrics_port=0", f"--bench_device={harness.BENCH_DEVICE}"],
                    stdout=log, stderr=subprocess.STDOUT, cwd=work)
            try:
                deadline = time.monotonic() + 60
                while True:  # until it listens (the config's port, as msprobe's server)
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        self.assertIsNone(server.poll(), read(log_path))
                        self.assertLess(time.monotonic(), deadline, read(log_path))
                        time.sleep(0.1)
                run = harness.run([harness.PYTHON, harness.TRAIN, "--config", npu,
                                   "--steps", "2"])
            finally:
                server.terminate()
                server.wait(timeout=60)
            server_log = read(log_path)
            self.assertEqual(run.returncode, 0, run.stderr[-3000:])
            # Plaintext, as msprobe means it, and said loudly on both sides.
            self.assertIn("run_ut.tls_path: empty: plaintext", server_log)
            self.assertIn("tensor.tls_path: empty: plaintext", run.stderr)
            self.assertIn("unencrypted", run.stderr)
            self.assertIn("(plaintext)", run.stderr)
            rows = []
            import csv  # pylint: disable=import-outside-toplevel
            import glob  # pylint: disable=import-outside-toplevel
            for path in glob.glob(os.path.join(out, "accuracy_checking_details_*.csv")):
                with open(path, encoding="utf-8-sig", newline="") as f:
                    rows.extend(csv.DictReader(f))
            self.assertGreater(len(rows), 10)
            records = []
            for path in glob.glob(os.path.join(out, "parity_results_*.jsonl")):
                with open(path, encoding="utf-8") as f:
                    records.extend(json.loads(l) for l in f if l.strip())
            self.assertEqual({r["step"] for r in records}, {0})  # "step": [0]
            self.assertEqual({r["rank"] for r in records}, {0})  # "rank": [0], rank_list [0]
            self.assertNotIn("error", {r["status"] for r in records})


    def test_certificates_made_with_msprobes_recipe_are_diagnosed_and_kept_with_one_setting(self):
        # msprobe's recipe: the OpenSSL command line, RSA 3072, a subject whose CN is
        # *example.com and no subjectAltName, server and client certificates signed by one CA.
        with tempfile.TemporaryDirectory() as work:
            def sh(*args):
                subprocess.run(args, cwd=work, check=True, capture_output=True)
            sh("openssl", "genrsa", "-out", "ca.key", "3072")
            sh("openssl", "req", "-new", "-x509", "-key", "ca.key", "-out", "ca.crt", "-days",
               "365", "-subj", "/C=CN/O=Example CA/CN=Example Root CA")
            for who in ("server", "client"):
                os.makedirs(os.path.join(work, who))
                sh("openssl", "genrsa", "-out", f"{who}.key", "3072")
                sh("openssl", "req", "-new", "-key", f"{who}.key", "-out", f"{who}.csr", "-subj",
                   "/C=CN/O=Example/CN=*example.com")
                sh("openssl", "x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey",
                   "ca.key", "-CAcreateserial", "-out", f"{who}.crt", "-days", "180")
                for f in (f"{who}.key", f"{who}.crt", "ca.crt"):
                    sh("cp", f, who)
            server = harness.Server(work, tls_dir=os.path.join(work, "server"))
            try:
                client = os.path.join(work, "client")
                plain = harness.agent_config(os.path.join(work, "plain.json"), server.port,
                                             client_tls=client, connect_timeout_ms=3000)
                refused = harness.run([harness.PYTHON, harness.TRAIN, "--config", plain,
                                       "--steps", "1"])
                named = harness.agent_config(os.path.join(work, "named.json"), server.port,
                                             client_tls=client, server_name="*example.com")
                kept = harness.run([harness.PYTHON, harness.TRAIN, "--config", named,
                                    "--steps", "1"])
            finally:
                server.stop()
            self.assertIn('the server\'s certificate names "*example.com", not "127.0.0.1": '
                          'set parity.server_name to "*example.com"', refused.stderr)
            self.assertEqual(kept.returncode, 0, kept.stderr[-3000:])
            self.assertIn("connected to", kept.stderr)
            self.assertTrue(server.rows("accuracy_checking_details"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
