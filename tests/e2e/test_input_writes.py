"""A kernel that writes into an argument it must only read (parity.detect_input_writes, issue 50):
its output is right, so no comparison of outputs sees it, but what autograd saved is gone. The
agent compares each read-only tensor argument of a call it sends, after the call, with its copy
at entry; the server makes the call an error naming the argument (the CSVs, the JSON record, the
verdict stream, parity_server_inputs_written_total). Arguments the op may write are never
flagged: in-place ops, `out=` arguments and what shares their memory, views, the batch norm's
running statistics and rrelu's noise, which torch's kernels update without a schema annotation.
The Llama suite (tests/faults/test_llama_faults.py) plants the same fault in SwiGLU's silu, and
tests/e2e/test_npu_device.py on the test NPU's own kernel."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TRAIN = r'''
import json, sys, warnings
import torch
sys.path.append(sys.argv[3])
import parity
case = sys.argv[2]
if case == "overwrite":
    # The faulty accelerator: gelu's kernel leaves its input holding the result, written past
    # autograd's version counter as a device kernel's write is.
    lib = torch.library.Library("aten", "IMPL")
    def bad_gelu(x, approximate="none"):
        y = 0.5 * x * (1 + torch.erf(x / 2 ** 0.5))
        x.data[: x.shape[0] // 4].copy_(y[: x.shape[0] // 4])
        return y
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        lib.impl("gelu", bad_gelu, "CPU")
torch.manual_seed(0)
debugger = parity.PrecisionDebugger(sys.argv[1])
debugger.start()
x = torch.randn(64, 32, requires_grad=True)
h = torch.nn.functional.gelu(x)                       # the faulty op in case "overwrite"
g = torch.nn.functional.gelu(torch.randn(32, 64).t())  # again, on a transposed argument
a = torch.randn(64, 32)
b = torch.randn(64, 32)
a.add_(b)                                             # in place: self is written
torch.add(a, b, out=a)                                # out=: self shares out's memory
torch.mul(a, b, out=b)                                # other shares out's memory
v = a.view(-1)                                        # views
t = a.t()
w = a.transpose(0, 1).contiguous()
bn = torch.nn.BatchNorm1d(32).train()
y = bn(a)                                             # running stats updated, unannotated
r = torch.nn.functional.rrelu(a, training=True)       # rrelu_with_noise fills its noise
loss = (h.sum() + y.sum() + r.sum() + w.sum())
loss.backward()
debugger.stop()
debugger.flush(120)
print("COUNTERS " + json.dumps(parity.counters()), flush=True)
'''


class InputWritesTest(unittest.TestCase):
    def train(self, case, **parity_keys):
        work = harness.tempdir("parity_input_writes_")
        server = harness.Server(work)
        try:
            script, config = harness.script_against(work, server, TRAIN, **parity_keys)
            r = harness.run([harness.PYTHON, script, config, case,
                             os.path.join(harness.ROOT, "python")])
            written_metric = server.metric("parity_server_inputs_written_total")
        finally:
            server.stop()
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-4000:])
        return server, written_metric

    def test_a_kernel_writing_its_input_is_an_error_naming_the_argument(self):
        server, written_metric = self.train("overwrite")
        records = server.records()
        errors = [r for r in records if r["status"] == "error"]
        self.assertEqual([r["op"] for r in errors], ["aten::gelu", "aten::gelu"], errors)
        gelu = errors[0]
        # The transposed argument (strides (1, 64)): its first 16 rows are 16 of its columns.
        self.assertEqual([(w["changed_elements"], w["elements"])
                          for w in errors[1]["inputs_written"]], [(16 * 32, 64 * 32)])
        # Its output is right: the comparison passes; the written input alone makes it an error.
        self.assertEqual([o["status"] for o in gelu["outputs"]], ["pass"], gelu)
        self.assertEqual(gelu["inputs_written"],
                         [{"index": 0, "name": "self", "changed_elements": 16 * 32,
                           "elements": 64 * 32, "status": "error",
                           "failed_metric": "input_written"}], gelu)
        self.assertEqual(gelu["failed_metric"], "input_written", gelu)
        self.assertRegex(gelu["message"], r"^inputs\[0\] \(self\) changed during the call: 512 "
                                          r"of 2048 elements \(25%\), an argument aten::gelu "
                                          r"must only read")
        self.assertEqual(written_metric, 2)
        details = [row for row in server.rows("accuracy_checking_details")
                   if row["API Name"].startswith("Functional.gelu")]
        inputs = [row for row in details if ".input." in row["API Name"]]
        self.assertEqual(len(inputs), 2, details)
        self.assertEqual(inputs[0]["API Name"].rsplit(".", 2)[-2:], ["input", "0"])
        self.assertEqual(inputs[0]["Status"], "error")
        self.assertRegex(inputs[0]["Message"], r"^input_written: self changed during the call")
        results = [row for row in server.rows("accuracy_checking_result")
                   if row["API name"].startswith("Functional.gelu")]
        self.assertEqual(results[0]["Forward Test Success"], "error", results)

    def test_in_place_ops_out_arguments_views_and_running_statistics_are_not_flagged(self):
        server, written_metric = self.train("clean")
        records = server.records()
        ops = {r["op"] for r in records}
        # The calls that write or alias were checked, and none is an error.
        for op in ("aten::add_", "aten::add", "aten::mul", "aten::transpose", "aten::batch_norm",
                   "aten::rrelu"):
            self.assertIn(op, ops)
        self.assertEqual([(r["op"], r["message"]) for r in records if r["status"] == "error"], [])
        self.assertEqual([r for r in records if "inputs_written" in r], [])
        self.assertEqual(written_metric, 0)

    def test_the_check_turns_off_by_its_key(self):
        server, written_metric = self.train("overwrite", detect_input_writes=False)
        self.assertEqual([r["op"] for r in server.records() if r["status"] == "error"], [])
        self.assertEqual(written_metric, 0)


if __name__ == "__main__":
    unittest.main()
