"""Random operators end to end (issue 23): a training that draws every step
(tests/faults/random_train.py: dropout, randperm, uniform_, randn, multinomial) and the example
trainings with dropout on, through the real agent and parity-server.

- Clean, with the server replaying from the training's generator state (parity.random_checks
  auto, the default): every random call passes by the binary standard (bit-exact).
- Clean, judged by properties (random_checks statistical, what an NPU's training gets on a GPU
  or CPU bench): every random call passes by random_property; also under bf16 autocast.
- Each planted fault (tests/faults/random_faults.py) in both modes: the run's first error is on
  the faulty op (by its property metric when judged statistically), and errors land only there.
- docs/examples/train_mlp.py and train_llama.py with --dropout 0.1: dropout rows in the result
  CSVs with real verdicts.
Prints one line per run.
"""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import random_faults  # noqa: E402

TRAIN = os.path.join(HERE, "random_train.py")
RANDOM_OPS = {"aten::dropout", "aten::randperm", "aten::uniform_", "aten::randn",
              "aten::multinomial"}


def run(mode, args=()):
    server, proc = harness.train_against_server(
        "parity-random-", TRAIN, ["--steps", "2", *args], [f"--random_checks={mode}"])
    server.stop()
    if proc.returncode != 0:
        raise AssertionError(proc.stdout + proc.stderr + server.read_log())
    return server.records(), server


def failed_metric(record):
    for o in record["outputs"]:
        if o["status"] == "error":
            return o["failed_metric"]
    return None


class CleanRunsTest(unittest.TestCase):
    def check_clean(self, mode, standard, args=()):
        records, _ = run(mode, args)
        errors = [r for r in records if r["status"] == "error"]
        self.assertEqual(errors, [], errors[:1])
        random = [r for r in records if r["op"] in RANDOM_OPS]
        self.assertEqual({r["op"] for r in random}, RANDOM_OPS)
        for r in random:
            self.assertEqual(r["status"], "pass", r)
            for o in r["outputs"]:
                self.assertEqual(o["standard"], standard, r)
            if standard == "binary":
                self.assertEqual(r["outputs"][0]["metrics"]["mismatch_rate"], 0, r)
                self.assertIn("replayed from the training's cpu generator state",
                              r["outputs"][0]["message"])
            elif mode == "auto":  # a training on another torch: the server says why not
                self.assertIn("may draw differently", r["outputs"][0]["message"], r)
        harness.report(false_errors=len(errors))
        print(f"clean {mode} {' '.join(args) or 'fp32'}: {len(random)} random calls, all pass "
              f"by {standard}; {len(records)} calls, 0 errors", flush=True)

    # Replayed bit for bit when the training runs the server's libtorch; a training on another
    # torch (the torch matrix) is judged by properties, as the server says its draws may differ.
    def test_replayed_bit_exact(self):
        self.check_clean("auto", "binary" if harness.same_torch() else "random_property")

    def test_replayed_bit_exact_under_bf16_autocast(self):
        self.check_clean("auto", "binary" if harness.same_torch() else "random_property",
                         ["--autocast", "bf16"])

    def test_judged_by_properties(self):
        self.check_clean("statistical", "random_property")

    def test_judged_by_properties_under_bf16_autocast(self):
        self.check_clean("statistical", "random_property", ["--autocast", "bf16"])


class PlantedFaultsTest(unittest.TestCase):
    def test_each_fault_is_the_first_error_in_both_modes(self):
        caught, planted = 0, 0
        for name, (_, op, metric) in random_faults.FAULTS.items():
            for mode in ("statistical", "auto"):
                with self.subTest(fault=name, mode=mode):
                    records, _ = run(mode, ["--fault", name])
                    first = harness.first_error(records)
                    planted += 1
                    replays = mode == "auto" and harness.same_torch()
                    caught += bool(first) and first["op"] == op and failed_metric(first) == \
                        (metric if not replays else "mismatch_rate")
                    harness.report(false_errors=len([r for r in records if r["status"] == "error"
                                                     and r["op"] != op]))
                    self.assertIsNotNone(first, f"{name} not reported ({mode})")
                    self.assertEqual(first["op"], op)
                    self.assertEqual(failed_metric(first),
                                     metric if not replays else "mismatch_rate")
                    others = {r["op"] for r in records if r["status"] == "error"} - {op}
                    self.assertEqual(others, set(), f"{name}: errors elsewhere")
                    print(f"fault {name} ({mode}): first error {first['api']} "
                          f"{failed_metric(first)}; no error on any other op", flush=True)
        harness.report(recall=f"{caught}/{planted}")


class ExampleTrainingsTest(unittest.TestCase):
    def test_dropout_has_real_verdicts_in_the_result_files(self):
        examples = os.path.join(harness.ROOT, "docs", "examples")
        for script, steps in (("train_mlp.py", "3"), ("train_llama.py", "2")):
            with self.subTest(script=script):
                server, proc = harness.train_against_server(
                    "parity-random-ex-", os.path.join(examples, script),
                    ["--steps", steps, "--dropout", "0.1"])
                server.stop()
                self.assertEqual(proc.returncode, 0, proc.stderr)
                rows = [r for r in server.rows("accuracy_checking_details")
                        if r["API Name"].startswith("Functional.dropout.")
                        and ".forward." in r["API Name"]]
                self.assertGreater(len(rows), 0)
                how = "replayed from the training's cpu generator state" \
                    if harness.same_torch() else "judged by the properties of its draws"
                for row in rows:
                    self.assertEqual(row["Status"], "pass", row)
                    self.assertIn(how, row["Message"])
                errors = [r for r in server.records() if r["status"] == "error"]
                self.assertEqual(errors, [])
                print(f"{script} --dropout 0.1: {len(rows)} dropout rows, all pass", flush=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
