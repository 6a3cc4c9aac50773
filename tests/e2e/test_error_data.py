"""Error data and the reproducer: a planted fault (nll_loss's backward, weight=None) makes the
server save the inputs and the device's, bench's and golden's outputs of each call judged error
as files torch.load reads, with a manifest, within the per-op count and the byte budget;
`python3 -m parity.repro` reruns them and gives the server's verdict back, and a rerun of the
calls on a correct device (this process's CPU kernels) passes."""
import glob
import json
import os
import re
import subprocess
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

TRAIN = os.path.join(os.path.dirname(__file__), "optional_args_train.py")
FAULT = "nll_loss_backward_counts_ignored"
PYTHON_DIR = os.path.join(harness.ROOT, "python")


def repro(*args):
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    return subprocess.run([harness.PYTHON, "-m", "parity.repro", *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


class ErrorDataTest(unittest.TestCase):
    def train(self, extra=()):
        server, r = harness.train_against_server("parity_error_data_", TRAIN, ["--fault", FAULT],
                                                 server_args=extra)
        if r.returncode != 0:
            server.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        return server

    def test_errors_are_saved_loadable_and_reproduce(self):
        # Four calls are judged error (two nll_loss_backward calls in each of two steps); two
        # per op are kept.
        server = self.train(extra=["--error_data_per_op=2"])
        try:
            self.assertEqual(server.metric("parity_server_error_data_total", outcome="saved"), 2)
            self.assertEqual(
                server.metric("parity_server_error_data_total", outcome="over_op_count"), 2)
        finally:
            server.stop()
        errors = [x for x in server.records() if x["status"] == "error"]
        self.assertEqual(len(errors), 4)
        folders = glob.glob(os.path.join(server.out, "ut_error_data*"))
        self.assertEqual(len(folders), 1, "error_data_path './' is the output folder")
        with open(os.path.join(folders[0], "manifest.jsonl"), encoding="utf-8") as f:
            lines = [json.loads(x) for x in f if x.strip()]
        self.assertEqual(len(lines), 2)
        for line in lines:
            self.assertEqual((line["op"], line["status"]), ("aten::nll_loss_backward", "error"))
            self.assertIn("Tensor? weight", line["schema"])
            self.assertEqual(line["rank"], 0)
            self.assertIn("rmse", line["message"])
            # msprobe's names: {api}.{phase}.input.{i}.pt and .output.{device|bench|golden}.{i}
            stem = line["api"]  # a linked backward call: "aten::nll_loss_nd.0.backward.0"
            self.assertEqual([os.path.basename(p) for p in line["files"]["inputs"]],
                             [f"{stem}.input.{i}.pt" for i in range(7)])
            for role in ("device", "bench", "golden"):
                self.assertEqual([os.path.basename(p) for p in line["files"][role]],
                                 [f"{stem}.output.{role}.0.pt"])
            path = lambda rel: os.path.join(folders[0], rel)  # noqa: E731
            inputs = [torch.load(path(p)) for p in line["files"]["inputs"]]
            self.assertIsNone(inputs[3], "weight=None is saved as None")
            self.assertEqual(inputs[4:6], [1, -100])  # reduction=mean, ignore_index
            device = torch.load(path(line["files"]["device"][0]))
            bench = torch.load(path(line["files"]["bench"][0]))
            golden = torch.load(path(line["files"]["golden"][0]))
            self.assertEqual((device.dtype, bench.dtype, golden.dtype),
                             (torch.float32, torch.float32, torch.float64))
            self.assertEqual(device.shape, inputs[1].shape)
            # The fault divides by every row (24) instead of the 16 that count: 2/3 of the bench.
            ratio = device.abs().sum() / bench.abs().sum()
            self.assertAlmostEqual(ratio.item(), 16 / 24, places=5)

        r = repro(folders[0])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("2 of 2 calls reproduced the server's verdict", r.stdout)
        # parity.repro benches where the host lets it (auto: the GPU when there is one).
        self.assertEqual(len(re.findall(r"error on (cpu|cuda:\d+) \(server: error\) reproduced",
                                        r.stdout)), 2, r.stdout)
        # Rerun here, on kernels without the fault: the calls pass, unlike on the faulty device.
        r = repro(server.out, "--rerun-on", "cpu")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        # The rerun makes the device's outputs on the CPU; the bench is still where auto puts it.
        self.assertEqual(len(re.findall(r"pass on (cpu|cuda:\d+) \(server: error\) NOT REPRODUCED",
                                        r.stdout)), 2, r.stdout)

    def test_over_the_byte_budget_calls_are_counted_not_saved(self):
        server = self.train(extra=["--error_data_max_bytes=1"])
        try:
            self.assertEqual(
                server.metric("parity_server_error_data_total", outcome="over_budget"), 4)
            self.assertEqual(server.metric("parity_server_error_data_total", outcome="saved"), 0)
        finally:
            server.stop()
        self.assertEqual(len([x for x in server.records() if x["status"] == "error"]), 4)
        self.assertEqual(glob.glob(os.path.join(server.out, "ut_error_data*")), [])
        self.assertIn("parity.error_data_max_bytes", server.read_log())

    def test_save_error_data_false_saves_nothing(self):
        server = self.train(extra=["--save_error_data=false"])
        server.stop()
        self.assertEqual(len([x for x in server.records() if x["status"] == "error"]), 4)
        self.assertEqual(glob.glob(os.path.join(server.out, "ut_error_data*")), [])

    def test_reproducer_refuses_what_it_cannot_read(self):
        empty = harness.tempdir("parity_repro_empty_")
        r = repro(empty)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no manifest.jsonl", r.stderr)
        with open(os.path.join(empty, "manifest.jsonl"), "w", encoding="utf-8") as f:
            f.write('{"api": "x", "op": "aten::nope", "files": {"inputs": [], "device": []}}\n')
            f.write("not json\n")
        r = repro(empty)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown operator \"aten::nope\"", r.stdout)
        self.assertIn("an unreadable line", r.stdout)
        # Files torch.load reads that do not fit the operator's schema (a string where add takes
        # a tensor): that line cannot be loaded, naming the argument; the run is exit 2.
        bad = harness.tempdir("parity_repro_bad_values_")
        torch.save(torch.ones(3), os.path.join(bad, "x.pt"))
        torch.save("two", os.path.join(bad, "other.pt"))
        with open(os.path.join(bad, "manifest.jsonl"), "w", encoding="utf-8") as f:
            f.write(json.dumps({"api": "Torch.add.0", "op": "aten::add", "overload": "Tensor",
                                "phase": "forward", "status": "error",
                                "files": {"inputs": ["x.pt", "other.pt"], "device": ["x.pt"]}})
                    + "\n")
        r = repro(bad)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("Torch.add.0 forward (rank 0, step 0): cannot load: arguments do not match "
                      "aten::add.Tensor", r.stdout)
        self.assertIn("other", r.stdout)

    def test_reproducer_takes_the_servers_configuration_keys(self):
        # parity-repro reads the server's key table: its flags, checked as parity-server checks
        # them, and --config; a mistake is usage (exit 2) naming the key or the file.
        empty = harness.tempdir("parity_repro_flags_")
        with open(os.path.join(empty, "manifest.jsonl"), "w", encoding="utf-8"):
            pass
        binary = os.path.join(harness.BUILD, "server", "parity-repro")
        for flags, expected in [
                (["--no_such_key=1"], "--no_such_key: unknown flag"),
                (["--golden_device=gpu"], 'parity.golden_device): expected one of "auto", "cpu"'),
                (["--port_file=p"], "are parity-server's"),
                (["--config=" + os.path.join(empty, "missing.json")], "missing.json"),
                (["--operator_catalogue=" + os.path.join(empty, "manifest.jsonl")],
                 "manifest.jsonl: not a JSON object")]:
            r = subprocess.run([binary, *flags, empty], capture_output=True, text=True,
                               timeout=120, check=False)
            self.assertEqual(r.returncode, 2, (flags, r.stderr))
            self.assertIn(expected, r.stderr, flags)
        r = subprocess.run([binary, "--bench_device=cpu", "--golden_device=cpu",
                            "--random_checks=statistical", "--npu_reference=false", empty],
                           capture_output=True, text=True, timeout=120, check=False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("0 of 0 calls reproduced", r.stdout)


if __name__ == "__main__":
    unittest.main()
