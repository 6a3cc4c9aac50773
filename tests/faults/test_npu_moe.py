"""torch_npu's MoE operators, end to end: docs/examples/train_moe.py (two MoE layers: token
permutation, npu_grouped_matmul in MindSpeed's custom autograd.Function, whose backward calls it
again for dx and, over the inner dimension, for dW; the routing family once a step without
gradients) on the simulated NPU (tests/npu_sim with tests/npu_sim/moe_sim.py: torch_npu's schemas
with CPU kernels of their own), through the real agent and parity-server, which replays every
npu:: call through the reference library (oplib/npu/moe.cc).

Asserts, and prints as a table:
- clean runs (float32, two seeds; bfloat16): every MoE operator called, replayed and judged pass (none SKIP); the
  grouped matmuls the custom backward calls are backward rows of that autograd.Function;
- each planted fault (moe_sim.MOE_FAULTS): the run's first error is on the faulty op and phase at
  step 0, and errors land on no other op.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "npu_sim"))
import harness  # noqa: E402
from moe_sim import MOE_FAULTS  # noqa: E402  (the descriptions only: nothing registered here)

TRAIN = os.path.join(harness.ROOT, "docs", "examples", "train_moe.py")
SIM = os.path.join(harness.TRAINING_LIBS, "libparity_npu_sim.so")
STEPS = 2
GMM = "npu::npu_grouped_matmul"
# Where each fault must be reported first: (op, phase).
EXPECTED = {
    "gmm_wrong_expert": (GMM, "forward"),
    "gmm_dw_drop_token": (GMM, "backward"),
    "unpermute_no_probs": ("npu::npu_moe_token_unpermute", "forward"),
    "gmm_dx_wrong_expert": (GMM, "backward"),
    "permute_reverse_ties": ("npu::npu_moe_token_permute", "forward"),
    "permute_grad_half": ("npu::npu_moe_token_permute_grad", "backward"),
    "unpermute_grad_no_probs": ("npu::npu_moe_token_unpermute_grad", "backward"),
    "init_routing_reverse_ties": ("npu::npu_moe_init_routing", "forward"),
    "expert_tokens_off_by_one": ("npu::npu_moe_compute_expert_tokens", "forward"),
    "finalize_no_skip": ("npu::npu_moe_finalize_routing", "forward"),
}
MOE_OPS = {GMM, "npu::npu_moe_token_permute", "npu::npu_moe_token_unpermute",
           "npu::npu_moe_token_permute_grad", "npu::npu_moe_token_unpermute_grad",
           "npu::npu_moe_init_routing", "npu::npu_moe_compute_expert_tokens",
           "npu::npu_moe_finalize_routing"}


class NpuMoeSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = [(None, 0), (None, 1), ("bfloat16", 0)]
        cls.runs += [(name, 0) for name in sorted(EXPECTED)]
        cls.dir, cls.by_rank, _, cls.failures = harness.train_as_ranks(
            "parity_npu_moe_", cls.runs,
            lambda config, run: [harness.PYTHON, TRAIN, "--config", config, "--npu-sim", SIM,
                                 "--steps", str(STEPS), "--seed", str(run[1]), "--dtype",
                                 "bfloat16" if run[0] == "bfloat16" else "float32"],
            lambda run: run[0] if run[0] in EXPECTED else "")
        print("\n" + cls._render(), file=sys.stderr)
        caught = sum(cls._caught(rank) for rank in range(len(cls.runs))
                     if cls.runs[rank][0] in EXPECTED)
        harness.report(recall=f"{caught}/{len(EXPECTED)}", false_errors=cls._false_errors())

    @classmethod
    def _first(cls, rank):
        return harness.first_error_key(cls.by_rank.get(rank, []))

    @classmethod
    def _caught(cls, rank):
        fault = cls.runs[rank][0]
        return cls._first(rank) == EXPECTED[fault] + (0,)

    @classmethod
    def _false_errors(cls):
        false = 0
        for rank, (fault, _) in enumerate(cls.runs):
            allowed = {EXPECTED[fault][0]} if fault in EXPECTED else set()
            false += len([r for r in cls.by_rank.get(rank, [])
                          if r["status"] == "error" and r["op"] not in allowed])
        return false

    @classmethod
    def _render(cls):
        lines = ["MoE operators (train_moe.py on the simulated NPU, 2 steps per run)",
                 f"{'run':24} {'npu calls':>9} {'errors':>6}  first error"]
        for rank, (fault, seed) in enumerate(cls.runs):
            records = cls.by_rank.get(rank, [])
            npu = sum(1 for r in records if r["op"].startswith("npu::"))
            name = fault if fault in EXPECTED else f"clean ({fault or 'float32'}, seed {seed})"
            lines.append(harness.suite_row(name, 24, npu, records, 9))
        return "\n".join(lines)

    def test_every_run_trained(self):
        self.assertEqual(self.failures, {})

    def test_the_faults_are_the_simulators(self):
        self.assertEqual(set(EXPECTED), set(MOE_FAULTS))

    def test_clean_runs_replay_and_pass_every_moe_call(self):
        for rank, (fault, _) in enumerate(self.runs):
            if fault in EXPECTED:
                continue
            records = self.by_rank.get(rank, [])
            moe = [r for r in records if r["op"] in MOE_OPS]
            self.assertEqual({r["op"] for r in moe}, MOE_OPS, rank)
            self.assertEqual([(r["api"], r["status"], r["message"]) for r in moe
                              if r["status"] != "pass"], [], rank)
            # Nothing else is an error (aten::empty is SKIP: nothing to compare).
            self.assertEqual([r["api"] for r in records if r["status"] == "error"], [], rank)

    def test_grouped_matmuls_of_the_custom_backward_are_its_backward_rows(self):
        records = self.by_rank.get(0, [])
        backward = [r for r in records if r["op"] == GMM and r["phase"] == "backward"]
        # Two layers, two GEMMs each, dx and dW of each: 8 a step.
        self.assertEqual(len(backward), 8 * STEPS)
        for r in backward:
            self.assertEqual(r["forward_op"], "autograd::GroupedMatmul", r["api"])
            self.assertEqual(r["status"], "pass", r["api"])

    def test_each_fault_is_first_reported_on_its_op_and_phase(self):
        for rank, (fault, _) in enumerate(self.runs):
            if fault not in EXPECTED:
                continue
            self.assertEqual(self._first(rank), EXPECTED[fault] + (0,), fault)
            wrong = {r["op"] for r in self.by_rank.get(rank, [])
                     if r["status"] == "error"} - {EXPECTED[fault][0]}
            self.assertEqual(wrong, set(), fault)


if __name__ == "__main__":
    unittest.main()
