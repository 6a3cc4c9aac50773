"""docs/operators.md's worked example, run as written: custom operators (myops::scaled_tanh, and
the random myops::fused_dropout_add) called by a training process, replayed by parity-server
through the reference library built from docs/examples/custom_op/my_ops.cc and loaded with
--reference_libraries; the random one listed in the example's operator catalogue, given to the
agent and the server."""
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

EXAMPLE = os.path.join(harness.ROOT, "docs", "examples", "custom_op", "train_custom_op.py")
LIBRARY = os.path.join(harness.BUILD, "tests", "libmy_ops.so")
OP = "myops::scaled_tanh"
RANDOM_OP = "myops::fused_dropout_add"
CATALOGUE = os.path.join(harness.ROOT, "docs", "examples", "custom_op", "catalogue.json")


def run_example(server_args, *extra, agent_options=None):
    server, r = harness.train_against_server("parity_custom_op_", EXAMPLE, ["--steps", "2", *extra],
                                             server_args=server_args, agent_options=agent_options)
    server.stop()
    return server, r


class CustomOperatorTest(unittest.TestCase):
    def test_the_library_replays_the_operator_and_passes_a_right_kernel(self):
        server, r = run_example([f"--reference_libraries={LIBRARY}"])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertRegex(server.read_log(), r"operator library .*libmy_ops\.so: 2 operators")
        calls = [x for x in server.records() if x["op"] == OP]
        self.assertEqual(len(calls), 2)
        self.assertEqual({x["status"] for x in calls}, {"pass"}, calls)

    def test_a_wrong_device_kernel_is_an_error_on_the_operator(self):
        server, r = run_example([f"--reference_libraries={LIBRARY}"], "--wrong-kernel")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        calls = [x for x in server.records() if x["op"] == OP]
        self.assertEqual(len(calls), 2)
        self.assertEqual({x["status"] for x in calls}, {"error"})
        self.assertEqual([x["status"] for x in server.records() if x["op"] != OP
                          and x["status"] == "error"], [])

    def test_a_random_operator_in_both_catalogues_is_replayed_from_the_trainings_draws(self):
        # The user's catalogue file, given to the server and the agent as operators.md says: the
        # agent sends the generator's state with each call, the server replays the same draws.
        both = {"server_args": [f"--reference_libraries={LIBRARY}",
                                f"--operator_catalogue={CATALOGUE}"],
                "agent_options": {"operator_catalogue": CATALOGUE}}
        server, r = run_example(both["server_args"], "--random",
                                agent_options=both["agent_options"])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        calls = [x for x in server.records() if x["op"] == RANDOM_OP]
        self.assertEqual(len(calls), 2)
        for call in calls:
            self.assertEqual(call["status"], "pass", call)
            output = call["outputs"][0]
            self.assertEqual((output["standard"], output["metrics"]["mismatch_rate"]),
                             ("binary", 0), call)
            self.assertIn("replayed from the training's cpu generator state", output["message"])
        self.assertEqual([x for x in server.records() if x["status"] == "error"], [])
        # A faulty fused kernel (its kept values not rescaled by 1/(1-p)) is an error there alone.
        server, r = run_example(both["server_args"], "--random", "--wrong-dropout",
                                agent_options=both["agent_options"])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        calls = [x for x in server.records() if x["op"] == RANDOM_OP]
        self.assertEqual({x["status"] for x in calls}, {"error"}, calls)
        self.assertGreater(calls[0]["outputs"][0]["metrics"]["mismatch_rate"], 0.5)
        self.assertEqual([x["op"] for x in server.records()
                          if x["status"] == "error" and x["op"] != RANDOM_OP], [])

    def test_a_random_operator_left_out_of_the_catalogues_is_noticed_and_replayed(self):
        # Neither side is told it draws. The agent sees its generator move across each call
        # (parity.detect_random, on by default) and sends it as a random call with the state
        # read at its entry, so the server replays the same draws: the faulty kernel is an error.
        for wrong, status in ((False, "pass"), (True, "error")):
            server, r = run_example([f"--reference_libraries={LIBRARY}"], "--random",
                                    *(["--wrong-dropout"] if wrong else []))
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            self.assertIn(f"{RANDOM_OP} drew random numbers (its generator moved across the "
                          "call) but no operator catalogue lists it as random", r.stderr)
            calls = sorted((x for x in server.records() if x["op"] == RANDOM_OP),
                           key=lambda x: x["sequence"])
            self.assertEqual(len(calls), 2)
            for call in calls:
                self.assertEqual(call["status"], status, call)
                output = call["outputs"][0]
                self.assertEqual(output["standard"], "binary", call)
                self.assertIn("replayed from the training's cpu generator state",
                              output["message"])
                self.assertEqual(output["metrics"]["mismatch_rate"] > 0.5, wrong, call)
            self.assertEqual([x["op"] for x in server.records()
                              if x["status"] == "error" and x["op"] != RANDOM_OP], [])

    def test_with_detection_off_a_random_operator_left_out_is_judged_by_chance(self):
        # parity.detect_random false and no catalogue: the bench and the golden replay it with
        # draws of their own, so the three-way standard compares three different masks (the
        # bench disagrees with the golden on about half the elements) and its verdict on a
        # faulty kernel is pass or error by chance (both were seen). What the detection and the
        # catalogue are for.
        off = {"detect_random": False}
        server, r = run_example([f"--reference_libraries={LIBRARY}"], "--random", "--wrong-dropout",
                                agent_options=off)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        calls = [x for x in server.records() if x["op"] == RANDOM_OP]
        self.assertEqual(len(calls), 2)
        for call in calls:
            output = call["outputs"][0]
            self.assertEqual(output["standard"], "benchmark", call)
            self.assertGreater(output["metrics"]["bench_mismatch_rate"], 0.3, call)
            self.assertNotIn("generator state", output["message"])
        # Only the server's catalogue lists it: the server knows it draws, finds no generator
        # state (the agent was not told, and does not watch), and says so.
        server, r = run_example(
            [f"--reference_libraries={LIBRARY}", f"--operator_catalogue={CATALOGUE}"], "--random",
            agent_options=off)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        calls = [x for x in server.records() if x["op"] == RANDOM_OP]
        self.assertEqual(len(calls), 2)
        self.assertEqual({x["status"] for x in calls}, {"SKIP"}, calls)
        self.assertIn("the agent sent no generator state", calls[0]["message"])

    def test_without_the_library_the_calls_are_skipped_as_unknown(self):
        server, r = run_example([])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        calls = [x for x in server.records() if x["op"] == OP]
        self.assertEqual(len(calls), 2)
        self.assertEqual({x["status"] for x in calls}, {"SKIP"})
        self.assertIn("unknown operator", calls[0]["message"])

    def test_a_library_that_cannot_load_stops_the_server_with_its_path(self):
        workdir = harness.tempdir("parity_custom_op_bad_")
        missing = os.path.join(workdir, "libmissing.so")
        not_a_library = os.path.join(workdir, "not_a_library.so")
        with open(not_a_library, "w", encoding="utf-8") as f:
            f.write("not ELF\n")
        # A second library defining the namespace myops again: its registration throws while
        # it loads; the server must say so, not abort.
        clash = os.path.join(workdir, "libmy_ops_again.so")
        shutil.copy(LIBRARY, clash)
        for paths, named, why in (
                ([missing], missing, "No such file"),
                ([not_a_library], not_a_library, "not_a_library.so: "),
                ([LIBRARY, clash], clash, "Only a single TORCH_LIBRARY can be used to register "
                                          "the namespace myops")):
            r = subprocess.run([harness.SERVER, "--plaintext", "--port=0", "--metrics_port=-1",
                                f"--output_dir={workdir}",
                                "--reference_libraries=" + ",".join(paths)],
                               capture_output=True, text=True, timeout=60, check=False)
            self.assertEqual(r.returncode, 1, r.stderr[-2000:])  # an error, not an abort
            self.assertIn(f"operator library {named}", r.stderr + r.stdout)
            self.assertIn(why, r.stderr + r.stdout)


if __name__ == "__main__":
    unittest.main()
