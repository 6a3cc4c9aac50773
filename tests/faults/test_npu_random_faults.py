"""torch_npu's fused kernels wrong in ways a random generator picks: the Llama-style workload with
--fused (train_llama.py) on the simulated NPU, each run with PARITY_NPU_SIM_FAULT=random:SEED, which
makes one of the eight fused kernels (npu_rms_norm, npu_rotary_mul, npu_swiglu,
npu_fusion_attention, forward or backward) wrong in one of: every 7th element's sign, a 1%
scale, the last dimension's halves swapped, a term of its formula missing, or (attention's
forward) the causal mask one token late. The simulator prints its draw; nobody chose the faults
for the reference to pass.

Asserts, and prints as a table: every run trains (2 steps: a fault can be invisible at step 0,
such as RMSNorm without its gamma while gamma is still all ones); each run's first error is the
faulty kernel's own call (op and phase); no call of any other op is an error (downstream ops are
replayed with the device's own inputs, and a correct backward with the statistics its faulty
forward handed over). Runs alternate float32 and bf16 autocast. PARITY_RANDOM_FAULTS sets how
many seeds (default 24).
"""
import collections
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

TRAIN = os.path.join(harness.ROOT, "docs", "examples", "train_llama.py")
SIM = os.path.join(harness.TRAINING_LIBS, "libparity_npu_sim.so")
SEEDS = range(1, 1 + int(os.environ.get("PARITY_RANDOM_FAULTS", "24")))
DRAW = re.compile(r"npu_sim fault: (\S+) (forward|backward) (\S+)")


class NpuRandomFaultsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = harness.tempdir("parity_npu_random_faults_")
        server = harness.Server(cls.dir, None)
        cls.draws, cls.failures = {}, {}
        try:
            config = harness.agent_config(os.path.join(cls.dir, "config.json"), server.port,
                                          policy="block", flush_timeout_ms=300000)
            for rank, seed in enumerate(SEEDS):
                precision = "bf16" if seed % 2 else "none"
                r = harness.run([harness.PYTHON, TRAIN, "--config", config, "--fused",
                                 "--npu-sim", SIM, "--steps", "2", "--seed", str(seed % 3),
                                 "--autocast", precision],
                                env={"RANK": str(rank), "PARITY_NPU_SIM_FAULT": f"random:{seed}"})
                drawn = DRAW.search(r.stderr)
                if r.returncode != 0 or drawn is None:
                    cls.failures[seed] = r.stderr[-2000:]
                    continue
                cls.draws[rank] = (seed, precision, drawn.group(1), drawn.group(2),
                                   drawn.group(3))
        finally:
            server.stop()
        cls.by_rank = collections.defaultdict(list)
        for record in server.records():
            cls.by_rank[record["rank"]].append(record)
        rows = []
        for rank, (seed, precision, op, phase, kind) in sorted(cls.draws.items()):
            records = cls.by_rank[rank]
            first = harness.first_error(records)
            elsewhere = sorted({r["op"] for r in records if r["status"] == "error"} - {op})
            rows.append((seed, precision, f"{op} {phase}", kind, len(records),
                         sum(r["status"] == "error" for r in records),
                         f"{first['op']} {first['phase']}" if first else "-",
                         ",".join(elsewhere) or "-"))
        cls.rows = rows
        print(f"\n{'seed':>4} {'prec':5} {'faulty kernel':44} {'fault':12} {'calls':>5} "
              f"{'errors':>6}  first error / errors elsewhere", file=sys.stderr)
        for seed, precision, kernel, kind, calls, errors, first, elsewhere in rows:
            print(f"{seed:>4} {precision:5} {kernel:44} {kind:12} {calls:>5} {errors:>6}  "
                  f"{first} / {elsewhere}", file=sys.stderr)
        caught = sum(1 for r in rows if r[6] == r[2])
        false = sum(1 for r in rows if r[7] != "-")
        print(f"recall: {caught}/{len(rows)} first on the faulty kernel; runs with an error "
              f"elsewhere: {false}", file=sys.stderr)

    def test_every_run_trained_and_drew_a_fault(self):
        self.assertEqual(self.failures, {})
        self.assertEqual(len(self.draws), len(SEEDS))

    def test_the_draws_cover_every_kernel_and_kind(self):
        kernels = {(op, phase) for _, _, op, phase, _ in self.draws.values()}
        kinds = {kind for *_, kind in self.draws.values()}
        self.assertGreaterEqual(len(kernels), 6, kernels)
        self.assertGreaterEqual(len(kinds), 4, kinds)

    def test_each_fault_is_reported_first_on_its_kernel_and_nowhere_else(self):
        for seed, precision, kernel, kind, _, errors, first, elsewhere in self.rows:
            with self.subTest(seed=seed, kernel=kernel, kind=kind, precision=precision):
                self.assertGreater(errors, 0)
                self.assertEqual(first, kernel)
                self.assertEqual(elsewhere, "-")


if __name__ == "__main__":
    unittest.main()
