"""npu_fusion_attention with pse and without a mask, and AdamW through npu_apply_adam_w, end to end:
tests/faults/fused_variants.py on the simulated NPU (whose kernels follow the owners' goldens:
tests/oplib/test_upstream_goldens.py), through the real agent and parity-server.

Clean runs (float32, two seeds; bfloat16) give no error and every fused call is judged pass; each
planted fault, the other reading of the operator (pse added after the scale, as the API doc's
example writes it; a causal mask applied though no atten_mask is given; AdamW's bias correction
from the powers as passed), is first reported on its op and phase at step 0 and on no other op.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

TRAIN = os.path.join(HERE, "fused_variants.py")
SIM = os.path.join(harness.TRAINING_LIBS, "libparity_npu_sim.so")
FA, ADAMW = "npu::npu_fusion_attention", "npu::npu_apply_adam_w"
EXPECTED = {  # fault -> (op, phase) of its first error, and the ops its errors may land on
    "fa_pse_after_scale": ((FA, "forward"), {FA, "npu::npu_fusion_attention_grad"}),
    "fa_nomask_causal": ((FA, "forward"), {FA, "npu::npu_fusion_attention_grad"}),
    "adamw_powers_as_passed": ((ADAMW, "forward"), {ADAMW}),
}
FUSED = {FA, "npu::npu_fusion_attention_grad", ADAMW}
STEPS = 2


class FusedVariantsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = [(None, 0, "float32"), (None, 1, "float32"), (None, 0, "bfloat16")]
        cls.runs += [(fault, 0, "float32") for fault in sorted(EXPECTED)]
        cls.dir, cls.by_rank, _, cls.failures = harness.train_as_ranks(
            "parity_fused_variants_", cls.runs,
            lambda config, run: [harness.PYTHON, TRAIN, "--config", config, "--npu-sim", SIM,
                                 "--steps", str(STEPS), "--seed", str(run[1]), "--dtype", run[2]],
            lambda run: run[0])
        print("\n" + cls._render(), file=sys.stderr)

    @classmethod
    def _first(cls, rank):
        return harness.first_error_key(cls.by_rank.get(rank, []))

    @classmethod
    def _render(cls):
        lines = ["pse, no mask and npu_apply_adam_w (fused_variants.py, simulated NPU, 2 steps)",
                 f"{'run':28} {'fused calls':>11} {'errors':>6}  first error"]
        for rank, (fault, seed, dtype) in enumerate(cls.runs):
            records = cls.by_rank.get(rank, [])
            fused = sum(1 for r in records if r["op"] in FUSED)
            name = fault or f"clean ({dtype}, seed {seed})"
            lines.append(harness.suite_row(name, 28, fused, records, 11))
        return "\n".join(lines)

    def test_every_run_trained(self):
        self.assertEqual(self.failures, {})

    def test_clean_runs_judge_every_fused_call_pass(self):
        for rank, (fault, _, _) in enumerate(self.runs):
            if fault:
                continue
            records = self.by_rank.get(rank, [])
            fused = [r for r in records if r["op"] in FUSED]
            self.assertEqual({r["op"] for r in fused}, FUSED, rank)
            # Two attention calls and their grads, four AdamW calls a step.
            self.assertEqual(len(fused), (2 + 2 + 4) * STEPS, rank)
            self.assertEqual([(r["api"], r["status"], r["message"]) for r in fused
                              if r["status"] != "pass"], [], rank)
            self.assertEqual([r["api"] for r in records if r["status"] == "error"], [], rank)

    def test_each_fault_is_first_reported_on_its_op(self):
        for rank, (fault, _, _) in enumerate(self.runs):
            if not fault:
                continue
            (op, phase), allowed = EXPECTED[fault]
            self.assertEqual(self._first(rank), (op, phase, 0), fault)
            # Within the fault's step, only its op. (AdamW's other reading divides by
            # 1 - beta1 ** 0 = 0 on the first step: the NaN parameters reach the next step's ops,
            # which are then judged on NaN inputs.)
            wrong = {r["op"] for r in self.by_rank.get(rank, [])
                     if r["status"] == "error" and r["step"] == 0} - allowed
            self.assertEqual(wrong, set(), fault)


if __name__ == "__main__":
    unittest.main()
