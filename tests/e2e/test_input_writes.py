"""A kernel that writes into an argument it must only read (parity.detect_input_writes, issue 50):
its output is right, so no comparison of outputs sees it, but what autograd saved is gone. The
agent compares each read-only tensor argument of a call it sends, after the call, with its copy
at entry; the server makes the call an error naming the argument (the CSVs, the JSON record, the
verdict stream, parity_server_inputs_written_total). Arguments the op may write are never
flagged: in-place ops, `out=` arguments and what shares their memory, views, the batch norm's
running statistics and rrelu's noise, which torch's kernels update without a schema annotation.
Tensor lists are compared member by member (an optimizer's _foreach_ `other`), and a call that
may write a view is checked for writes outside it (issue 64).
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
if case == "foreach_scratch":
    # An optimizer's _foreach_add_ that uses its read-only `other` list as scratch: the update is
    # right, each gradient's element 1 is left halved, behind every version counter (.data).
    lib = torch.library.Library("aten", "IMPL")
    def bad_foreach_add_(self, other, alpha=1):
        for s, o in zip(self, other):
            s.add_(o, alpha=alpha)
            o.data.view(-1)[1] *= 0.5
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        lib.impl("_foreach_add_.List", bad_foreach_add_, "CPU")
if case == "view_overrun":
    # q = qkv[:, :64]; q.mul_(s) whose kernel also scales the 8 elements after each of q's rows:
    # k's first columns, outside the view it was given. Its own elements are right.
    lib = torch.library.Library("aten", "IMPL")
    def bad_mul_(self, other):
        rows, cols = self.shape
        past = torch.as_strided(self.data, (rows, cols + 8), self.stride(), self.storage_offset())
        past.copy_(past * other)  # not mul_: that is this kernel
        return self
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        lib.impl("mul_.Tensor", bad_mul_, "CPU")  # x.mul_(0.125) wraps the number: .Tensor
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
# An optimizer's multi-tensor update: exp_avg += grad, exp_avg_sq += grad * grad (the list
# `other` read-only), then the gradients read again by the next op.
grads = [torch.randn(64, 64) for _ in range(3)]
avgs = [torch.zeros(64, 64) for _ in range(3)]
sqs = [torch.zeros(64, 64) for _ in range(3)]
torch._foreach_add_(avgs, grads, alpha=0.1)           # the faulty op in case "foreach_scratch"
torch._foreach_addcmul_(sqs, grads, grads, value=0.1)
qkv = torch.randn(32, 192)
q = qkv[:, :64]
q.mul_(0.125)                                         # the faulty op in case "view_overrun"
qkv[:, 64:128].add_(1.0)                              # in place inside its view: legal
big = torch.zeros(4096, 2048)                         # 32 MiB
big[:, :8].add_(1.0)                                  # a view spanning more than the budget
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
            self.unchecked_metric = server.metric("parity_server_unchecked_writes_total")
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
                   "aten::rrelu", "aten::_foreach_add_", "aten::_foreach_addcmul_", "aten::mul_"):
            self.assertIn(op, ops)
        self.assertEqual([(r["op"], r["message"]) for r in records if r["status"] == "error"], [])
        self.assertEqual([r for r in records if "inputs_written" in r], [])
        self.assertEqual(written_metric, 0)

    def test_a_tensor_list_used_as_scratch_is_reported_on_its_writer_alone(self):
        # The innocent op after it (_foreach_addcmul_, which reads the gradients again) is not
        # blamed: its inputs are the gradients as they are, not a snapshot from before the
        # write (the snapshot cache proves a tensor unchanged before giving it again).
        for pool in (None, 0):
            keys = {} if pool is None else {"snapshot_pool_bytes": pool}
            server, written_metric = self.train("foreach_scratch", **keys)
            records = server.records()
            errors = [r for r in records if r["status"] == "error"]
            self.assertEqual([r["op"] for r in errors], ["aten::_foreach_add_"], (pool, errors))
            self.assertEqual(errors[0]["inputs_written"],
                             [{"index": 1, "name": "other", "changed_elements": 3,
                               "elements": 3 * 64 * 64, "status": "error",
                               "failed_metric": "input_written"}], pool)
            addcmul = [r for r in records if r["op"] == "aten::_foreach_addcmul_"]
            self.assertEqual([r["status"] for r in addcmul], ["pass"], (pool, addcmul))
            self.assertEqual(written_metric, 1)
            verdicts = [(r["op"], r["status"], r.get("inputs_written")) for r in records]
            if pool is None:
                with_cache = verdicts
        # The cache changes no verdict: the same records with it off.
        self.assertEqual(verdicts, with_cache)

    def test_a_write_past_the_view_is_reported_on_the_writer(self):
        server, written_metric = self.train("view_overrun")
        records = server.records()
        errors = [r for r in records if r["status"] == "error"]
        self.assertEqual([r["op"] for r in errors], ["aten::mul_"], errors)
        written = errors[0]["inputs_written"]
        # 32 rows of 64 in a storage of 32 x 192: the 4096 elements outside the view, of which
        # the kernel changed 8 after each row.
        self.assertEqual([(w["index"], w["name"], w["changed_elements"], w["elements"])
                          for w in written], [(0, "self (outside its view)", 32 * 8, 32 * 128)])
        self.assertEqual([o["status"] for o in errors[0]["outputs"]], ["pass"], errors[0])
        self.assertEqual(written_metric, 1)

    def test_a_view_over_the_budget_is_said_not_compared(self):
        server, _ = self.train("clean")
        noted = [r for r in server.records() if "unchecked_writes" in r]
        self.assertEqual([r["op"] for r in noted], ["aten::add_"], noted)
        self.assertRegex(noted[0]["unchecked_writes"][0],
                         r"^self: 32 MiB of storage around the view it may write, over the "
                         r"16 MiB a call's view check compares$")
        self.assertEqual(noted[0]["status"], "pass")
        self.assertEqual(self.unchecked_metric, 1)

    def test_the_check_turns_off_by_its_key(self):
        server, written_metric = self.train("overwrite", detect_input_writes=False)
        self.assertEqual([r["op"] for r in server.records() if r["status"] == "error"], [])
        self.assertEqual(written_metric, 0)


if __name__ == "__main__":
    unittest.main()
