"""msprobe 8.1.1's own PyTorch examples (its 05.data_dump_PyTorch.md, as PyPI's
mindstudio-probe 8.1.1 ships it), run against a real server: each file of tests/e2e/msprobe_docs
is the doc's code block verbatim, with only `from msprobe.pytorch import` made `from parity
import`. Each runs in a folder holding msprobe's documented online config as ./config.json (08's
NPU-side example, host and port set to the test server), and each asserts what msprobe's docs say
of it, or, where Parity deliberately differs, Parity's behaviour as docs/migration.md gives it:

- quick start ("快速上手": PrecisionDebugger() with no config path, start(model=...), stop()):
  the forward and backward of both linears and the relu are checked, all pass;
- §2.1 (the loop: start, forward, loss.backward(), stop, step): every step checked, forward and
  backward;
- §2.2 (forward_backward_dump_end() after the forward; no stop()): each step's forward before it
  and the backward of those calls checked (msprobe collects the backward of what it captured);
- §2.3 (module_dump / module_dump_end): msprobe dumps the module as one unit and none of its
  child APIs; Parity checks operators, so the calls inside are checked, named by the module
  path "MyModuleOP" (docs/migration.md, module_dump);
- §2.4 (across files: PrecisionDebugger.start() / stop() as class calls inside the model's
  forward): linear_1's call is checked, linear_2's and the relu's are not;
- its 03.config_examples.md §1's six PyTorch configs (msprobe_docs/config_examples): the agent
  refuses each but an online "tensor" one by name, without stopping the training; the run_ut one
  is the server's, which names the certificate it lacks.

§2.1 and §2.2 are fragments ("模型、损失函数的定义及初始化等操作 ..."): the runner supplies what
their "..." stands for, a `model`, a `data_loader` of two batches, and the `loss` the elided lines
compute (set by the model's forward), and runs the fragment's text unchanged.
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "msprobe_docs")
# msprobe's 08 NPU-side online config, as tests/e2e/test_msprobe_examples.py writes it out.
NPU_CONFIG = {"task": "tensor", "dump_path": "./dump_path", "rank": [0], "step": [0, 1],
              "level": "L1", "tensor": {"scope": [], "list": [], "online_run_ut": True,
                                        "nfs_path": "", "host": "127.0.0.1", "port": 0,
                                        "tls_path": ""}}
RUNNER = r'''
import os, runpy, sys
folder, example, fragment = sys.argv[1], sys.argv[2], sys.argv[3] == "fragment"
os.chdir(folder)
sys.path.insert(0, os.path.dirname(example))  # §2.4's train.py imports module.py beside it
if not fragment:
    runpy.run_path(example, run_name="__main__")
    sys.exit(0)
import torch
torch.manual_seed(0)
scope = {"__name__": "__main__"}


class Model(torch.nn.Module):
    """What the fragment's "..." defines: a model whose forward also computes the loss."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, data):
        output = torch.nn.functional.gelu(self.linear(data))
        scope["loss"] = output.pow(2).mean()
        return output


scope["model"] = Model()
scope["data_loader"] = [(torch.randn(6, 8), torch.randn(6, 4)) for _ in range(2)]
with open(example, encoding="utf-8") as f:
    exec(compile(f.read(), example, "exec"), scope)  # pylint: disable=exec-used
'''


def run_example(name, fragment=False):
    """Runs one example against a fresh server; (the process, the server's records)."""
    work = tempfile.mkdtemp(prefix="parity-msprobe-doc-")
    server = harness.Server(work)
    try:
        config = json.loads(json.dumps(NPU_CONFIG))
        config["tensor"]["port"] = server.port
        with open(os.path.join(work, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        env = {"PYTHONPATH": os.path.join(harness.ROOT, "python"),
               "PARITY_CONFIG": os.path.join(work, "config.json")}
        proc = harness.run([harness.PYTHON, "-c", RUNNER, work, os.path.join(DOCS, name),
                            "fragment" if fragment else "script"], env=env)
    finally:
        server.stop()
    return proc, server.records()


def ops(records, phase=None):
    return sorted(r["op"] for r in records if phase is None or r["phase"] == phase)


class MsprobeDocsCorpusTest(unittest.TestCase):
    def check_ran(self, proc, records):
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertTrue(records, proc.stderr[-3000:])
        self.assertEqual([r["api"] for r in records if r["status"] == "error"], [])

    def test_quick_start(self):
        proc, records = run_example("quick_start.py")
        self.check_ran(proc, records)
        forward = ops(records, "forward")
        self.assertEqual(forward.count("aten::linear"), 2, forward)
        self.assertEqual(forward.count("aten::relu"), 1, forward)
        backward = {r.get("forward_op") for r in records if r["phase"] == "backward"}
        self.assertTrue({"aten::linear", "aten::relu"} <= backward, backward)

    def check_both_steps(self, records, op):
        """Each of the two steps checked `op` forward, and the backward linked to it."""
        for step in (0, 1):
            mine = [r for r in records if r["step"] == step]
            self.assertIn(op, ops(mine, "forward"), step)
            self.assertIn(op, {r.get("forward_op") for r in mine if r["phase"] == "backward"},
                          step)

    def test_2_1_the_loop_checks_every_step(self):
        proc, records = run_example("dump_loop.py", fragment=True)
        self.check_ran(proc, records)
        self.check_both_steps(records, "aten::linear")

    def test_2_2_forward_backward_dump_end_keeps_the_backward(self):
        proc, records = run_example("code_block.py", fragment=True)
        self.check_ran(proc, records)
        # The forward before forward_backward_dump_end(), and the backward of those calls.
        self.check_both_steps(records, "aten::gelu")

    def test_2_3_module_dump_names_the_calls_inside_after_the_module(self):
        proc, records = run_example("module_dump.py")
        self.check_ran(proc, records)
        inside = [r for r in records if r["phase"] == "forward" and r["op"] in
                  ("aten::linear", "aten::relu")]
        self.assertEqual(len(inside), 3, ops(records, "forward"))
        for r in inside:
            self.assertTrue(r["module_path"].startswith("MyModuleOP"), r["module_path"])
        self.assertIn("aten::sum", ops(records, "forward"))  # after module_dump_end()

    def test_2_4_start_and_stop_as_class_calls_in_another_file(self):
        proc, records = run_example("cross_file/train.py")
        self.check_ran(proc, records)
        forward = ops(records, "forward")
        self.assertEqual(forward.count("aten::linear"), 1, forward)  # linear_1 only
        self.assertNotIn("aten::relu", forward)


# msprobe's 03.config_examples.md §1 (PyTorch), each block verbatim in msprobe_docs/config_examples:
# what Parity's agent says when a training is started with it. Only "tensor" with online_run_ut
# is an agent's task; 03's "tensor" example is an offline dump (no host, no port).
AGENT_SAYS = {
    "statistics": 'runs msprobe\'s "tensor" task with online_run_ut; got "statistics"',
    "overflow_check": 'got "overflow_check"',
    "free_benchmark": 'got "free_benchmark"',
    "structure": 'got "structure"',
    "run_ut": '"run_ut" is the benchmark server\'s task',
    "tensor": "tensor.host: the benchmark server's address is required",
}
# Refused where msprobe refuses a config: at PrecisionDebugger(config_path=...), before the
# training's first step (issue 66: it was at the first start()).
START = r"""
import sys, torch, parity
try:
    parity.PrecisionDebugger(config_path=sys.argv[1])
except ValueError as e:
    print("REFUSED " + str(e))
torch.ones(2).add(1)  # the training goes on
print("TRAINED")
"""


class MsprobeConfigExamplesTest(unittest.TestCase):
    def test_each_pytorch_config_example_is_answered_by_name(self):
        folder = os.path.join(DOCS, "config_examples")
        self.assertEqual(sorted(f[:-5] for f in os.listdir(folder)), sorted(AGENT_SAYS))
        for task, said in AGENT_SAYS.items():
            with self.subTest(task):
                proc = harness.run([harness.PYTHON, "-c", START,
                                    os.path.join(folder, task + ".json")],
                                   env={"PYTHONPATH": os.path.join(harness.ROOT, "python")})
                self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
                self.assertIn("TRAINED", proc.stdout)
                self.assertIn("REFUSED", proc.stdout)
                self.assertIn(said, proc.stdout)

    def test_the_run_ut_example_is_a_servers_config_that_names_what_it_lacks(self):
        # 03's run_ut example is msprobe's offline run_ut: no is_online, host, port or tls_path.
        # The server reads it (the task is its own) and stops at the certificate its default
        # (TLS) needs, naming the file.
        import subprocess  # pylint: disable=import-outside-toplevel
        proc = subprocess.run([os.path.join(harness.BUILD, "server", "parity-server"), "--config",
                               os.path.join(DOCS, "config_examples", "run_ut.json"),
                               "--check_config"], capture_output=True, text=True, check=False,
                              cwd=tempfile.mkdtemp(prefix="parity-msprobe-doc-"), timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("server.crt", proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
