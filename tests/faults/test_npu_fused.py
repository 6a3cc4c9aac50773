"""torch_npu's fused operators, end to end: the Llama-style workload with --fused
(docs/examples/train_llama.py: npu_rms_norm, npu_rotary_mul, npu_fusion_attention in BSND with
grouped-query K/V and causal sparse_mode 2, npu_swiglu, forward and backward) on the simulated
NPU (tests/npu_sim: torch_npu's schemas with independent CPU kernels), through the real agent
and parity-server, which replays every npu:: call through the reference library it loads by
default (oplib/npu).

Asserts, and prints as a table:
- the schemas both libraries register are torch_npu's, verbatim (oplib/npu/torch_npu_schemas.json);
- clean runs (float32, two seeds; bf16 autocast): every fused call and its backward judged,
  no error, and the RNG bookkeeping outputs of npu_fusion_attention reported as not compared;
- each planted fault (tests/faults/npu_fused_faults.py): the run's first error is on the faulty
  op, phase and output at step 0, and errors land only on that kernel's own calls.
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import npu_fused_faults  # noqa: E402

TRAIN = os.path.join(harness.ROOT, "docs", "examples", "train_llama.py")
SIM = os.path.join(harness.TRAINING_LIBS, "libparity_npu_sim.so")
REFERENCE = os.path.join(harness.BUILD, "server", "libparity_npu_reference.so")
SCHEMAS = os.path.join(harness.ROOT, "oplib", "npu", "torch_npu_schemas.json")
FUSED_OPS = {"npu::npu_rms_norm": "npu::npu_rms_norm_backward",
             "npu::npu_rotary_mul": "npu::npu_rotary_mul_backward",
             "npu::npu_swiglu": "npu::npu_swiglu_backward",
             "npu::npu_fusion_attention": "npu::npu_fusion_attention_grad"}
STEPS = 2

_SCHEMA_PROBE = """
import json, sys, torch
torch.ops.load_library(sys.argv[1])
out = {}
for entry in json.load(open(sys.argv[2]))["schemas"]:
    name, _, rest = entry["schema"].partition("(")
    op, _, overload = name.partition(".")
    recorded = torch._C.parse_schema("npu::" + entry["schema"])
    packet = getattr(torch.ops.npu, op)
    if overload.startswith("release_") and not hasattr(packet, overload):
        continue  # an older release's form: the reference library's own, no device declares it
    registered = getattr(packet, overload or "default")._schema
    out[entry["schema"]] = [str(registered), str(recorded)]
print(json.dumps(out))
"""


def _error_output(record):
    for o in record["outputs"]:
        if o["status"] == "error":
            return o["index"]
    return None


class SchemaFidelityTest(unittest.TestCase):
    def probe(self, library):
        # Each library is loaded by the python of the torch it was built for: the reference
        # library is the server's, the simulated NPU the training's.
        python = harness.SERVER_PYTHON if library == REFERENCE else harness.PYTHON
        r = subprocess.run([python, "-c", _SCHEMA_PROBE, library, SCHEMAS],
                           capture_output=True, text=True, check=False)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return json.loads(r.stdout)

    def test_both_libraries_register_torch_npus_schemas_verbatim(self):
        with open(SCHEMAS, encoding="utf-8") as f:
            recorded = [e["schema"] for e in json.load(f)["schemas"]]
        self.assertGreaterEqual(len(recorded), 29)
        # The release_* forms (an older torch_npu's form of an operator, for the server to
        # replay such calls) are the reference library's alone.
        device = [s for s in recorded if ".release_" not in s.partition("(")[0]]
        self.assertLess(len(device), len(recorded))
        for library, expected in ((REFERENCE, recorded), (SIM, device)):
            found = self.probe(library)
            self.assertEqual(sorted(found), sorted(expected), library)
            for schema, (registered, parsed) in found.items():
                self.assertEqual(registered, parsed, (library, schema))


class NpuFusedSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = [(None, "fp32", 0), (None, "fp32", 1), (None, "bf16", 0)]
        cls.runs += [(name, "fp32", 0) for name in sorted(npu_fused_faults.FAULTS)]
        cls.dir, cls.by_rank, cls.server_log, cls.failures = harness.train_as_ranks(
            "parity_npu_fused_", cls.runs,
            lambda config, run: [harness.PYTHON, TRAIN, "--config", config, "--fused",
                                 "--npu-sim", SIM, "--steps", str(STEPS), "--seed", str(run[2]),
                                 "--autocast", "bf16" if run[1] == "bf16" else "none"],
            lambda run: run[0])
        print("\n" + cls._render(), file=sys.stderr)
        cls._report()

    @classmethod
    def _report(cls):
        caught, false = 0, 0
        for rank, (fault, _, _) in enumerate(cls.runs):
            records = cls.by_rank.get(rank, [])
            errors = {r["op"] for r in records if r["status"] == "error"}
            if not fault:
                false += len([r for r in records if r["status"] == "error"])
                continue
            spec = npu_fused_faults.FAULTS[fault]
            first = harness.first_error(records)
            caught += bool(first) and (first["op"], first["phase"], first["step"],
                                       _error_output(first)) == (spec.op, spec.phase, 0,
                                                                 spec.output)
            false += len(errors - set(spec.allowed_ops))
        harness.report(recall=f"{caught}/{len([r for r in cls.runs if r[0]])}",
                       false_errors=false)

    @classmethod
    def _render(cls):
        lines = ["Fused NPU operators (Llama block on the simulated NPU, 2 steps per run)",
                 f"{'run':18} {'prec':5} {'npu calls':>9} {'errors':>6}  first error"]
        for rank, (fault, precision, seed) in enumerate(cls.runs):
            records = cls.by_rank.get(rank, [])
            npu = [r for r in records if r["op"].startswith("npu::")]
            errors = [r for r in records if r["status"] == "error"]
            first = harness.first_error(records)
            where = (f"{first['op']} {first['phase']} step {first['step']} output "
                     f"{_error_output(first)}") if first else "-"
            lines.append(f"{fault or f'clean (seed {seed})':18} {precision:5} {len(npu):9} "
                         f"{len(errors):6}  {where}")
        return "\n".join(lines)

    def records(self, rank):
        return self.by_rank.get(rank, [])

    def test_every_run_trained(self):
        self.assertEqual(self.failures, {})

    def test_the_server_loaded_the_reference_library(self):
        self.assertRegex(self.server_log, r"operator library .*libparity_npu_reference\.so: "
                                          r"\d+ operators")

    def test_clean_runs_judge_every_fused_call_without_error(self):
        for rank, (fault, precision, _) in enumerate(self.runs):
            if fault:
                continue
            records = self.records(rank)
            self.assertEqual([(r["op"], r["phase"], r["message"]) for r in records
                              if r["status"] == "error"], [], (precision, rank))
            for forward, backward in FUSED_OPS.items():
                calls = [r for r in records if r["op"] == forward and r["phase"] == "forward"]
                grads = [r for r in records if r["op"] == backward and r["phase"] == "backward"]
                self.assertGreater(len(calls), 0, forward)
                self.assertEqual(len(grads), len(calls), backward)
                for r in calls + grads:
                    self.assertEqual(r["status"], "pass", (r["api"], r["message"]))
                    # Backward calls are linked to their forward.
                    if r in grads:
                        self.assertEqual(r["forward_op"], forward)

    def test_rng_bookkeeping_is_not_compared_and_says_so(self):
        fa = [r for r in self.records(0) if r["op"] == "npu::npu_fusion_attention"]
        self.assertTrue(fa)
        for r in fa:
            statuses = [o["status"] for o in r["outputs"]]
            self.assertEqual(statuses[:4], ["pass"] * 4)
            self.assertEqual(statuses[4:], ["SKIP"] * 3)
            for o in r["outputs"][4:]:
                self.assertIn("not compared: seed, offset and numels", o["message"])

    def test_each_fault_is_caught_on_its_op_phase_and_output(self):
        for rank, (fault, _, _) in enumerate(self.runs):
            if not fault:
                continue
            spec = npu_fused_faults.FAULTS[fault]
            records = self.records(rank)
            first = harness.first_error(records)
            self.assertIsNotNone(first, fault)
            self.assertEqual((first["op"], first["phase"], first["step"], _error_output(first)),
                             (spec.op, spec.phase, 0, spec.output), fault)
            wrong = {r["op"] for r in records if r["status"] == "error"} - set(spec.allowed_ops)
            self.assertEqual(wrong, set(), fault)


if __name__ == "__main__":
    unittest.main()
