"""Every reference of oplib/npu, and every kernel of the simulated NPU the test trainings use,
against the goldens of the operators' owners (tests/oplib/upstream_goldens.py: op-plugin's own
test goldens and torch_npu's documented equivalents, restated there with the upstream file named).

The reference library must pass every case: a reference that agreed only with Parity's own reading
of an operator (the token permutation's index convention, AdamW's bias correction, attention
without a mask) fails here. The simulated NPU (tests/npu_sim, and its MoE kernels in moe_sim.py)
must pass every case it has a kernel for, so that a "clean" simulated training means what a clean
torch_npu training means, and must implement every operator its trainings call.
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

PROBE = os.path.join(HERE, "upstream_goldens.py")
REFERENCE = os.path.join(harness.BUILD, "server", "libparity_npu_reference.so")
SIM = os.path.join(harness.TRAINING_LIBS, "libparity_npu_sim.so")
NPU_SIM_DIR = os.path.join(HERE, "..", "npu_sim")
# What the simulated trainings call (docs/examples/train_llama.py --fused, train_moe.py,
# tests/faults/fused_variants.py): the simulated NPU must have these.
SIMULATED = {"rms_norm", "rms_norm_backward", "rotary_mul", "rotary_mul_backward", "swiglu",
             "fusion_attention_sparse_modes", "fusion_attention_without_mask",
             "fusion_attention_pse", "fusion_attention_grad", "grouped_matmul",
             "moe_token_permute", "moe_token_unpermute", "moe_token_permute_round_trip",
             "moe_token_permute_grad", "moe_token_unpermute_grad", "moe_init_routing",
             "moe_compute_expert_tokens", "moe_finalize_routing", "apply_adam_w"}


def probe(python, library, *extra):
    r = subprocess.run([python, PROBE, library, *extra], capture_output=True, text=True,
                       check=False, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"{library}: the probe failed\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def table(title, results):
    print(f"\n{title}")
    for name, r in sorted(results.items()):
        print(f"  {r['status']:9} {name}" + (f"  ({r['detail'][:160]})" if r.get("detail") else ""))


class UpstreamGoldensTest(unittest.TestCase):
    def test_every_reference_agrees_with_its_owners_golden(self):
        results = probe(harness.SERVER_PYTHON, REFERENCE)
        table("reference library (oplib/npu) against the owners' goldens", results)
        self.assertGreaterEqual(len(results), 25)
        failed = {n: r for n, r in results.items() if r["status"] != "pass"}
        self.assertEqual(failed, {})

    def test_the_simulated_npu_agrees_with_the_same_goldens(self):
        results = probe(harness.PYTHON, SIM, "--moe-sim", NPU_SIM_DIR)
        table("simulated NPU (tests/npu_sim) against the owners' goldens", results)
        failed = {n: r for n, r in results.items() if r["status"] == "fail"}
        self.assertEqual(failed, {})
        missing = sorted(n for n in SIMULATED if results[n]["status"] != "pass")
        self.assertEqual(missing, [], "the simulated trainings call these")


if __name__ == "__main__":
    unittest.main()
