"""Backward ops whose optional arguments are absent (undefined tensors in libtorch's hands) are
replayed and judged: a clean training gets a verdict on every call, none skipped or rejected,
and a fault in such an op (nll_loss's backward with weight=None) is an error on that op."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

TRAIN = os.path.join(os.path.dirname(__file__), "optional_args_train.py")

# The backward kernels this training runs with an optional argument absent.
EXPECTED = {
    "aten::nll_loss_backward",         # weight=None (cross_entropy and nll_loss)
    "aten::native_layer_norm_backward",  # weight=None, bias=None
    "aten::native_group_norm_backward",  # weight=None
    "aten::convolution_backward",      # bias_sizes=None
    "aten::embedding_backward",        # padding_idx=0
}


class OptionalArgumentsTest(unittest.TestCase):
    def run_training(self, fault=None):
        server, r = harness.train_against_server("parity_optional_", TRAIN,
                                                 ["--fault", fault] if fault else [])
        server.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        return server.records()

    def test_every_call_gets_a_verdict_with_optional_arguments_absent(self):
        records = self.run_training()
        # Only aten::empty (the optimizer's uninitialised buffers) has nothing to compare.
        not_judged = [(x["api"], x["status"], x.get("message")) for x in records
                      if x["status"] not in ("pass", "warning", "error") and x["op"] != "aten::empty"]
        self.assertEqual(not_judged, [])
        judged = {x["op"] for x in records if x["phase"] == "backward"}
        self.assertLessEqual(EXPECTED, judged, f"missing: {EXPECTED - judged}")
        # Two steps, each with nll_loss_backward twice (cross_entropy's and nll_loss's).
        nll = [x for x in records if x["op"] == "aten::nll_loss_backward"]
        self.assertEqual(sorted((x["step"], x["status"]) for x in nll),
                         [(0, "pass"), (0, "pass"), (1, "pass"), (1, "pass")])
        self.assertEqual([x for x in records if x["status"] == "error"], [])

    def test_a_fault_in_an_op_with_weight_none_is_reported_on_that_op(self):
        records = self.run_training("nll_loss_backward_counts_ignored")
        errors = {(x["op"], x["forward_op"], x["step"]) for x in records if x["status"] == "error"}
        self.assertEqual(errors, {
            ("aten::nll_loss_backward", "aten::cross_entropy_loss", 0),
            ("aten::nll_loss_backward", "aten::nll_loss_nd", 0),
            ("aten::nll_loss_backward", "aten::cross_entropy_loss", 1),
            ("aten::nll_loss_backward", "aten::nll_loss_nd", 1),
        })


if __name__ == "__main__":
    unittest.main()
