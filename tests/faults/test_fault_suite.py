"""The fault suite: every planted fault of tests/faults/faults.py, and a clean run, through the
real agent, mutual TLS and the real parity-server, on tests/faults/train_faults.py.

Asserts, and prints as a table:
- recall: every harmful fault is reported as `error` on the faulty op, in the right phase, and
  the first error of the run names that op and call (attribution, not an op downstream);
- false errors: no `error` on any other op, and none at all for the benign faults and the
  clean run.
Each run uses its own rank (RANK=i), so one server serves them all and keeps their results
apart.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import faults  # noqa: E402
import harness  # noqa: E402

TRAIN = os.path.join(HERE, "train_faults.py")
STEPS = 2


def _api_op(record):
    """The op a result row is named after: a backward call is named after its forward call."""
    return record.get("forward_op") or record["op"]


class FaultSuiteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = harness.tempdir("parity_faults_")
        server_tls, client_tls = harness.make_certs(os.path.join(cls.dir, "certs"))
        cls.runs = [None] + sorted(faults.FAULTS)  # rank 0 is the clean run
        server = harness.Server(cls.dir, server_tls)
        try:
            config = harness.agent_config(os.path.join(cls.dir, "config.json"), server.port,
                                          client_tls, policy="block")
            cls.failures = {}
            for rank, name in enumerate(cls.runs):
                args = [harness.PYTHON, TRAIN, "--config", config, "--steps", str(STEPS)]
                if name:
                    args += ["--fault", name]
                r = harness.run(args, env={"RANK": str(rank)})
                if r.returncode != 0:
                    cls.failures[name] = r.stderr[-2000:]
        finally:
            server.stop()
        cls.by_rank = {}
        for record in server.records():
            cls.by_rank.setdefault(record["rank"], []).append(record)
        cls.table = cls._score()
        print("\n" + cls._render(), file=sys.stderr)

    @classmethod
    def _score(cls):
        rows = []
        for rank, name in enumerate(cls.runs):
            records = cls.by_rank.get(rank, [])
            fault = faults.FAULTS[name] if name else None
            errors = [x for x in records if x["status"] == "error"]
            if fault is not None and fault.kind == "harmful":
                on_op = [x for x in errors if _api_op(x) == fault.op and x["phase"] == fault.phase]
                detected = any(x["call_index"] == fault.call_index for x in on_op)
                false_errors = [x for x in errors if _api_op(x) not in fault.allowed_ops]
            else:
                detected = None
                false_errors = errors
            first = min(errors, key=lambda x: (x["step"], x["sequence"])) if errors else None
            rows.append({"name": name or "(clean run)", "kind": fault.kind if fault else "clean",
                         "calls": len(records), "errors": len(errors), "detected": detected,
                         "false_errors": false_errors, "first": first, "fault": fault})
        return rows

    @classmethod
    def _render(cls):
        lines = [f"{'fault':26} {'kind':8} {'calls':>5} {'errors':>6} {'false':>5}  first error"]
        for row in cls.table:
            first = row["first"]
            where = (f"{first['api']} {first['phase']} ({first['message']})" if first else "-")
            lines.append(f"{row['name']:26} {row['kind']:8} {row['calls']:5d} {row['errors']:6d} "
                         f"{len(row['false_errors']):5d}  {where}")
        harmful = [r for r in cls.table if r["kind"] == "harmful"]
        recall = sum(1 for r in harmful if r["detected"])
        false_total = sum(len(r["false_errors"]) for r in cls.table)
        checked = sum(r["calls"] for r in cls.table if r["kind"] != "harmful")
        lines.append(f"recall {recall}/{len(harmful)} harmful faults reported on the faulty op; "
                     f"false errors {false_total} (over {checked} calls of the clean run and the "
                     f"benign faults, plus every harmful run's other ops)")
        return "\n".join(lines)

    def test_every_run_finished(self):
        self.assertEqual(self.failures, {})
        for row in self.table:
            self.assertGreater(row["calls"], 100, row["name"])

    def test_suite_covers_what_the_standard_asks(self):
        kinds = [f.kind for f in faults.FAULTS.values()]
        self.assertGreaterEqual(kinds.count("harmful"), 6)
        self.assertGreaterEqual(kinds.count("benign"), 4)
        phases = {f.phase for f in faults.FAULTS.values() if f.kind == "harmful"}
        self.assertEqual(phases, {"forward", "backward"})

    def test_every_harmful_fault_is_reported_on_its_op(self):
        for row in self.table:
            if row["kind"] != "harmful":
                continue
            with self.subTest(fault=row["name"]):
                fault = row["fault"]
                self.assertTrue(row["detected"], f"{row['name']}: not reported as error on "
                                f"{fault.op}.{fault.call_index} {fault.phase}")
                first = row["first"]
                self.assertEqual((_api_op(first), first["phase"], first["call_index"]),
                                 (fault.op, fault.phase, fault.call_index),
                                 "the first error must name the faulty call")

    def test_backward_calls_carry_their_forward_calls_name(self):
        # A backward call is named after the forward call whose autograd node ran it
        # ("aten::softmax.int.0.backward.0"): the overload survives the link, and the several
        # backward calls of one forward call (linear: t, mm, mm, sum) get names of their own.
        clean = self.by_rank.get(0, [])
        forward = {(x["step"], x["api"]) for x in clean if x["phase"] == "forward"}
        linked = [x for x in clean if x["phase"] == "backward" and x.get("forward_op")]
        self.assertGreater(len(linked), 10)
        self.assertIn((0, "aten::softmax.int.0.backward.0"),
                      {(x["step"], x["api"]) for x in linked})
        for x in linked:
            self.assertIn((x["step"], x["forward_api"]), forward, x["op"])
            self.assertEqual(x["api"], f"{x['forward_api']}.backward.{x['backward_index']}")
        names = [(x["step"], x["api"]) for x in clean]
        self.assertEqual(len(names), len(set(names)), "API names are unique within a step")

    def test_no_false_errors(self):
        for row in self.table:
            with self.subTest(run=row["name"]):
                self.assertEqual([(x["api"], x["phase"], x["message"])
                                  for x in row["false_errors"]], [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
