"""docs/operators.md's worked example, run as written: a custom operator (myops::scaled_tanh)
called by a training process, replayed by parity-server through the reference library built
from docs/examples/custom_op/my_ops.cc and loaded with --reference_libraries."""
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


def run_example(server_args, *extra):
    server, r = harness.train_against_server("parity_custom_op_", EXAMPLE, ["--steps", "2", *extra],
                                             server_args=server_args)
    server.stop()
    return server, r


class CustomOperatorTest(unittest.TestCase):
    def test_the_library_replays_the_operator_and_passes_a_right_kernel(self):
        server, r = run_example([f"--reference_libraries={LIBRARY}"])
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertRegex(server.read_log(), r"operator library .*libmy_ops\.so: 1 operators")
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
