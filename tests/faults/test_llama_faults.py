"""The LLM fault suite: the Llama-style workload (docs/examples/train_llama.py: RMSNorm, RoPE,
grouped-query causal attention, SwiGLU, tied embeddings, cross-entropy, AdamW, clipping) through
the real agent, mutual TLS and the real parity-server, in float32 and under bf16 CPU autocast.

Asserts, and prints as a table:
- clean runs over 3 seeds in both precisions, and with AdamW's per-tensor implementation: no
  `error`;
- every harmful fault of tests/faults/llama_faults.py, in each precision it applies to: reported
  as `error`, the run's first error on the faulty op, in the right phase, at step 0, and errors
  only on the ops it may touch;
- every benign fault in both precisions: no `error`;
- two ranks for real (torch.distributed.run, gloo DDP): each rank's rows in its own files with
  its rank, communication ops never sent, parity.report summarising both ranks, and a fault on
  both ranks reported on each.
Single-process runs use their own rank (RANK=i, no process group) so that one server keeps them
apart.
"""
import glob
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import llama_faults  # noqa: E402

TRAIN = os.path.join(harness.ROOT, "docs", "examples", "train_llama.py")
STEPS = 2
SEEDS = (0, 1, 2)
PRECISIONS = ("fp32", "bf16")


def _api_op(record):
    return record.get("forward_op") or record["op"]


class LlamaFaultSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = harness.tempdir("parity_llama_faults_")
        cls.server_tls, cls.client_tls = harness.make_certs(os.path.join(cls.dir, "certs"))
        runs = [(None, p, s, "yes") for p in PRECISIONS for s in SEEDS]
        runs += [(None, p, 0, "no") for p in PRECISIONS]  # AdamW's per-tensor implementation
        for name, fault in sorted(llama_faults.FAULTS.items()):
            runs += [(name, p, 0, "yes") for p in fault.precisions]
        cls.runs = runs
        server = harness.Server(cls.dir, cls.server_tls)
        cls.failures = {}
        cls.summaries = []  # each run's agent summary line, for messages
        try:
            # Every call delivered: the session's end waits for the queue to drain.
            config = harness.agent_config(os.path.join(cls.dir, "config.json"), server.port,
                                          cls.client_tls, policy="block",
                                          flush_timeout_ms=300000)
            for rank, (name, precision, seed, foreach) in enumerate(runs):
                args = [harness.PYTHON, TRAIN, "--config", config, "--steps", str(STEPS),
                        "--seed", str(seed), "--foreach", foreach,
                        "--autocast", "bf16" if precision == "bf16" else "none"]
                if name:
                    args += ["--fault", name]
                r = harness.run(args, env={"RANK": str(rank)})
                cls.summaries.append([line for line in r.stderr.splitlines()
                                      if "session ended" in line or "WARNING" in line])
                if r.returncode != 0:
                    cls.failures[(name, precision, seed, foreach)] = r.stderr[-2000:]
        finally:
            server.stop()
        cls.by_rank = {}
        for record in server.records():
            cls.by_rank.setdefault(record["rank"], []).append(record)
        cls.table = cls._score()
        print("\n" + cls._render(), file=sys.stderr)
        harmful = [r for r in cls.table if r["kind"] == "harmful"]
        harness.report(recall=f"{sum(bool(r['caught']) for r in harmful)}/{len(harmful)}",
                       false_errors=sum(r["false"] for r in cls.table))

    @classmethod
    def _score(cls):
        rows = []
        for rank, (name, precision, seed, foreach) in enumerate(cls.runs):
            records = cls.by_rank.get(rank, [])
            errors = [r for r in records if r["status"] == "error"]
            fault = llama_faults.FAULTS.get(name)
            first = harness.first_error(records)
            clean = f"clean (seed {seed})" + ("" if foreach == "yes" else ", per-tensor AdamW")
            row = {"name": name or clean, "precision": precision, "foreach": foreach,
                   "kind": fault.kind if fault else "clean", "calls": len(records),
                   "errors": len(errors), "first": first}
            if fault and fault.kind == "harmful":
                row["caught"] = bool(first) and _api_op(first) == fault.op and \
                    first["phase"] == fault.phase and first["step"] == 0
                row["false"] = len([r for r in errors if _api_op(r) not in fault.allowed_ops])
            else:
                row["caught"] = None
                row["false"] = len(errors)
            rows.append(row)
        return rows

    @classmethod
    def _render(cls):
        lines = ["LLM fault suite (Llama-style workload, 2 steps per run)",
                 f"{'run':44} {'prec':5} {'kind':8} {'calls':>6} {'errors':>6}  first error"]
        for row in cls.table:
            first = row["first"]
            where = f"{first['api']} {first['phase']} step {first['step']}" if first else "-"
            lines.append(f"{row['name']:44} {row['precision']:5} {row['kind']:8} "
                         f"{row['calls']:6} {row['errors']:6}  {where}")
        harmful = [r for r in cls.table if r["kind"] == "harmful"]
        clean = [r for r in cls.table if r["kind"] != "harmful"]
        lines.append(f"recall {sum(bool(r['caught']) for r in harmful)}/{len(harmful)}; "
                     f"false errors {sum(r['false'] for r in cls.table)} "
                     f"(clean and benign runs: {sum(r['errors'] for r in clean)} errors in "
                     f"{sum(r['calls'] for r in clean)} calls)")
        return "\n".join(lines)

    def test_every_run_trained(self):
        self.assertEqual(self.failures, {})

    def test_every_call_is_checked(self):
        calls = {}
        for rank, run in enumerate(self.runs):
            records = self.by_rank.get(rank, [])
            calls.setdefault((run[1], run[3]), set()).add(len(records))
            self.assertGreater(len(records), 1000, (run, self.summaries[rank]))
            unjudged = {r["op"] for r in records
                        if r["status"] not in ("pass", "warning", "error")} - {"aten::empty"}
            self.assertEqual(unjudged, set(), run)
        # Every run of a precision makes the same calls: none was lost on the way.
        for key, counts in calls.items():
            runs = [(run, len(self.by_rank.get(rank, [])), self.summaries[rank])
                    for rank, run in enumerate(self.runs) if (run[1], run[3]) == key]
            self.assertEqual(len(counts), 1, runs)

    def test_no_false_error(self):
        for row in self.table:
            self.assertEqual(row["false"], 0, row)

    def test_every_harmful_fault_is_caught_on_its_op_phase_and_step(self):
        for row in self.table:
            if row["kind"] == "harmful":
                self.assertTrue(row["caught"], row)

    def test_a_kernel_writing_its_input_is_reported_by_the_argument_it_wrote(self):
        # silu_overwrites_input: silu's output is right (its comparison passes); the call is an
        # error for the read-only argument it wrote, in fp32 and under bf16 autocast alike.
        runs = [rank for rank, run in enumerate(self.runs) if run[0] == "silu_overwrites_input"]
        self.assertEqual(len(runs), 2)
        for rank in runs:
            first = harness.first_error(self.by_rank.get(rank, []))
            self.assertEqual([w["name"] for w in first["inputs_written"]], ["self"], first)
            self.assertEqual({o["status"] for o in first["outputs"]}, {"pass"}, first)
            self.assertIn("(self) changed during the call", first["message"])

    def test_bf16_runs_are_checked_under_autocast(self):
        for rank, (_, precision, _, _) in enumerate(self.runs):
            autocast = {r.get("autocast") for r in self.by_rank.get(rank, [])
                        if r["op"] == "aten::linear" and r["phase"] == "forward"}
            self.assertEqual(autocast, {"torch.bfloat16"} if precision == "bf16" else {None})


class TwoRanksTest(unittest.TestCase):
    def launch(self, *extra):
        workdir = harness.tempdir("parity_llama_ddp_")
        server_tls, client_tls = harness.make_certs(os.path.join(workdir, "certs"))
        server = harness.Server(workdir, server_tls)
        try:
            config = harness.agent_config(os.path.join(workdir, "config.json"), server.port,
                                          client_tls, policy="block", flush_timeout_ms=300000)
            # Debian's torch 1.13 under Python 3.11: the launcher's default --redirects=0 fails
            # to parse (IntFlag iteration changed); 1 with --tee=1 keeps the output on stdout.
            r = harness.run([harness.PYTHON, "-m", "torch.distributed.run", "--nproc_per_node=2",
                             f"--master_port={harness.free_port()}", "--redirects=1", "--tee=1",
                             f"--log_dir={workdir}/launch", TRAIN, "--config", config,
                             "--steps", str(STEPS), *extra])
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            # The agents' last stats, with the communication drops, reach the metrics.
            self.communication_drops = server.metric("parity_server_agent_dropped_calls_total",
                                                     reason="communication")
        finally:
            server.stop()
        return server, r

    def test_two_ranks_each_in_their_own_files_without_communication_ops(self):
        server, r = self.launch()
        records = server.records()
        self.assertEqual({x["rank"] for x in records}, {0, 1})
        for rank in (0, 1):
            files = glob.glob(os.path.join(server.out, f"*_rank{rank}.*"))
            self.assertEqual(len(files), 5, files)  # four CSVs and the JSON-lines record
        self.assertEqual([x for x in records if x["status"] == "error"], [])
        self.assertEqual([x["op"] for x in records if x["op"].startswith("c10d::")], [])
        # Each rank logs each communication op once, and counts its calls.
        for op in ("c10d::allreduce_", "c10d::broadcast_"):
            self.assertEqual(r.stderr.count(f"not checked: {op} is a communication op"), 2, op)
        self.assertGreaterEqual(r.stderr.count("dropped (communication"), 2)
        self.assertGreater(self.communication_drops, 0)
        report = subprocess.run([harness.PYTHON, "-m", "parity.report", server.out],
                                env=dict(os.environ, PYTHONPATH=os.path.join(harness.ROOT,
                                                                             "python")),
                                capture_output=True, text=True, check=False)
        self.assertEqual(report.returncode, 0, report.stdout + report.stderr)
        self.assertIn("2 rank(s)", report.stdout)
        self.assertRegex(report.stdout, r"rank 0 +: \d+ checked, \d+ pass")
        self.assertRegex(report.stdout, r"rank 1 +: \d+ checked, \d+ pass")

    def test_a_fault_on_both_ranks_is_reported_on_each(self):
        server, _ = self.launch("--fault", "rmsnorm_rsqrt_eps", "--autocast", "bf16")
        records = server.records()
        for rank in (0, 1):
            first = harness.first_error([x for x in records if x["rank"] == rank])
            self.assertIsNotNone(first, rank)
            self.assertEqual((_api_op(first), first["phase"], first["step"]),
                             ("aten::rsqrt", "forward", 0))
        report = subprocess.run([harness.PYTHON, "-m", "parity.report", server.out],
                                env=dict(os.environ, PYTHONPATH=os.path.join(harness.ROOT,
                                                                             "python")),
                                capture_output=True, text=True, check=False)
        self.assertEqual(report.returncode, 1)
        self.assertRegex(report.stdout, r"rank 1 +: .*first error: aten::rsqrt\.\d+ forward")


if __name__ == "__main__":
    unittest.main()
