"""msprobe's PrecisionDebugger API surface, as msprobe 8.x has it, in a Megatron-style loop:
a singleton whose calls are classmethods; start() given the list of model chunks (an interleaved
pipeline's shape: each micro-batch through chunk 0 then chunk 1, then its backward);
forward_backward_dump_end() after the backward, before the optimizer; step() counting from the
construction, also before the first start(); set_init_step() for a resumed run;
register_custom_api() and save() accepted with a note, never raising into the training."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TRAIN = r'''
import json, sys
import torch
import parity
from parity import PrecisionDebugger
config, mode = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
chunks = [torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU()),
          torch.nn.Sequential(torch.nn.Linear(32, 16))]
opt = torch.optim.AdamW([p for c in chunks for p in c.parameters()], lr=1e-3)
debugger = PrecisionDebugger(config_path=config)
assert PrecisionDebugger(config_path="/nonexistent/config.json") is debugger  # the singleton
if mode == "resume":
    PrecisionDebugger.set_init_step(10)
captured_when_refused = None
for iteration in range(4):
    started = mode != "late" or iteration >= 2  # "late": the debugger is started at iteration 2
    if started:
        PrecisionDebugger.start(chunks)
    for micro_batch in range(2):
        out = chunks[1](chunks[0](torch.randn(4, 16)))
        loss = out.pow(2).mean()
        if started and mode == "end_first" and micro_batch == 1:
            # msprobe's docs, 05 §2.2: the end of the forward before loss.backward()
            PrecisionDebugger.forward_backward_dump_end()
            torch.tanh(loss.detach())  # a forward call after it: not checked
        loss.backward()
    if started and mode != "end_first":
        PrecisionDebugger.forward_backward_dump_end()
    opt.step()
    opt.zero_grad()
    if started:
        PrecisionDebugger.stop()
    PrecisionDebugger.step()
    if mode == "refused" and iteration == 0:
        debugger.flush(60)  # returns once the server has answered the first connection
        captured_when_refused = parity.counters()["captured"]
print("CAPTURED_WHEN_REFUSED " + json.dumps(captured_when_refused), flush=True)
PrecisionDebugger.register_custom_api(torch, "add")
PrecisionDebugger.restore_custom_api(torch, "add")
PrecisionDebugger.save(torch.ones(2), "activation")
PrecisionDebugger.start(chunks, token_range=[0, 4])
PrecisionDebugger.stop()
debugger.flush(120)
print("COUNTERS " + json.dumps(parity.counters()), flush=True)
'''

# msprobe's docs, 05 §2.3: module_dump / module_dump_end, with its import changed: a module's calls
# checked between the two, outside start()/stop() and inside it.
MODULE_DUMP = r'''
import json, sys
import torch
import parity
from parity import PrecisionDebugger, module_dump, module_dump_end
debugger = PrecisionDebugger(config_path=sys.argv[1])
torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
other = torch.nn.Linear(8, 8)
x = torch.randn(4, 8)
y = other(x)                       # before the region: not checked
module_dump(module, "MyModuleOP1")
out = module(x)
module_dump_end()
z = other(out)                     # after it: not checked
refused = []
for bad in (lambda: module_dump(1, "x"), lambda: module_dump(module, ""), module_dump_end):
    try:
        bad()
    except (TypeError, RuntimeError) as e:
        refused.append(type(e).__name__)
debugger.start()
module_dump(module, "MyModuleOP1")  # inside start()/stop(): the capture goes on after it
out = module(x)
module_dump_end()
w = torch.tanh(out)
debugger.stop()
debugger.flush(120)
print("REFUSED " + json.dumps(refused), flush=True)
'''


LIST_BY_API = r'''
import sys
import torch
from parity import PrecisionDebugger
debugger = PrecisionDebugger(config_path=sys.argv[1])
a, b = torch.randn(4, 4), torch.randn(4, 4)
for step in range(2):
    debugger.start()
    torch.matmul(a, b)   # Torch.matmul.0
    a.matmul(b)          # Tensor.matmul.0: the one tensor.list names
    a.matmul(b)          # Tensor.matmul.1
    debugger.stop()
    debugger.step()
debugger.close()
'''


# msprobe's enable_dataloader (its doc 02, config_introduction.md: "start, stop and step may be
# left out"; the training must load its data through torch.utils.data.DataLoader): the script
# calls none of them.
DATALOADER = r'''
import sys
import torch
from parity import PrecisionDebugger
class Numbers(torch.utils.data.Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.full((4,), float(i))
debugger = PrecisionDebugger(config_path=sys.argv[1])
torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, batch in enumerate(torch.utils.data.DataLoader(Numbers(), batch_size=2)):
    loss = torch.tanh(model(batch)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    if i == 0:
        debugger.start()  # skipped while the DataLoader drives, as msprobe skips it
        debugger.stop()
debugger.flush(120)
print("TRAINED", flush=True)
'''


class MsprobeApiTest(unittest.TestCase):
    def train(self, mode, steps, env=None, server_args=()):
        with tempfile.TemporaryDirectory() as work:
            server = harness.Server(work, extra=server_args)
            try:
                config = harness.agent_config(os.path.join(work, "config.json"), server.port,
                                              policy="block")
                with open(config, encoding="utf-8") as f:
                    c = json.load(f)
                c["step"] = steps
                with open(config, "w", encoding="utf-8") as f:
                    json.dump(c, f)
                script = os.path.join(work, "train.py")
                with open(script, "w", encoding="utf-8") as f:
                    f.write(TRAIN)
                run = harness.run([harness.PYTHON, script, config, mode],
                                  env=dict(env or {},
                                           PYTHONPATH=os.path.join(harness.ROOT, "python")))
            finally:
                server.stop()
            self.assertEqual(run.returncode, 0, run.stdout[-2000:] + run.stderr[-4000:])
            return run, server.records()

    def test_a_megatron_style_loop_started_late_checks_the_configured_iterations(self):
        run, records = self.train("late", [2, 3])
        self.assertEqual({r["step"] for r in records}, {2, 3})
        paths = {r["module_path"] for r in records}
        self.assertTrue({"0.0", "0.1", "1.0"} <= paths, paths)  # both chunks, by index
        phases = {r["phase"] for r in records}
        self.assertEqual(phases, {"forward", "backward"})
        # forward_backward_dump_end() before the optimizer: its calls are not checked.
        self.assertFalse([r["api"] for r in records if r["in_optimizer"]])
        self.assertNotIn("error", {r["status"] for r in records})
        for note in ("register_custom_api: nothing to wrap", "save(): msprobe's variable dump",
                     "start(token_range=...)"):
            self.assertIn(note, run.stderr)

    def run_script(self, text, tensor=None, top=None):
        """`text` against a fresh server (the agent config's tensor section updated with
        `tensor`, its top level with `top`); (the finished process, the server's records)."""
        with tempfile.TemporaryDirectory() as work:
            server = harness.Server(work)
            try:
                script, config = harness.script_against(work, server, text)
                if tensor:
                    with open(config, encoding="utf-8") as f:
                        c = json.load(f)
                    c["tensor"].update(tensor)
                    with open(config, "w", encoding="utf-8") as f:
                        json.dump(c, f)
                if top:
                    with open(config, encoding="utf-8") as f:
                        c = json.load(f)
                    c.update(top)
                    with open(config, "w", encoding="utf-8") as f:
                        json.dump(c, f)
                run = harness.run([harness.PYTHON, script, config],
                                  env={"PYTHONPATH": os.path.join(harness.ROOT, "python")})
            finally:
                server.stop()
            self.assertEqual(run.returncode, 0, run.stdout[-2000:] + run.stderr[-4000:])
            return run, server.records()

    def test_enable_dataloader_drives_start_stop_and_step(self):
        # Batch i is step i; the config's step list [1, 2] selects batches 1 and 2 (issue 66:
        # Parity listed the key as an ignored dump option and checked nothing). The DataLoader's
        # own collation runs between stop() and start(): never captured.
        run, records = self.run_script(DATALOADER, top={"enable_dataloader": True,
                                                        "step": [1, 2]})
        self.assertIn("TRAINED", run.stdout)
        self.assertEqual({r["step"] for r in records}, {1, 2}, run.stderr[-3000:])
        for step in (1, 2):
            forward = [r["op"] for r in records if r["step"] == step and r["phase"] == "forward"]
            self.assertEqual(forward.count("aten::tanh"), 1, forward)
        self.assertNotIn("aten::stack", [r["op"] for r in records])
        self.assertIn("start(): enable_dataloader is on", run.stderr)
        self.assertIn("stop(): enable_dataloader is on", run.stderr)

    def test_tensor_list_selects_by_msprobes_api_and_its_own_counter(self):
        # msprobe counts each API name apart: "Tensor.matmul.0.forward" is the first
        # x.matmul(y) of the step, even after a torch.matmul, which is Torch.matmul.0.
        _, records = self.run_script(LIST_BY_API, {"list": ["Tensor.matmul.0.forward"]})
        self.assertEqual([(r["op"], r["csv_api"], r["step"]) for r in records],
                         [("aten::matmul", "Tensor.matmul.0", 0),
                          ("aten::matmul", "Tensor.matmul.0", 1)])

    def test_module_dump_checks_the_calls_of_its_region_named_after_it(self):
        run, records = self.run_script(MODULE_DUMP)
        calls = sorted((r["op"], r["module_path"]) for r in records)
        self.assertEqual(calls, [("aten::gelu", "MyModuleOP1"), ("aten::gelu", "MyModuleOP1"),
                                 ("aten::linear", "MyModuleOP1"), ("aten::linear", "MyModuleOP1"),
                                 ("aten::tanh", "")], calls)
        self.assertIn('REFUSED ["TypeError", "TypeError", "RuntimeError"]', run.stdout)

    def test_forward_backward_dump_end_before_the_backward_still_checks_the_backward(self):
        # As msprobe 8.1.1 collects it: forward calls after it are not captured, the backward of
        # the loss still is (as many backward calls as with the call after the backward, where
        # stopping there lost the last micro-batch's); the optimizer's calls are not.
        _, records = self.train("end_first", [0])
        _, after = self.train("normal", [0])
        backward = [r for r in records if r["phase"] == "backward"]
        self.assertEqual(len(backward), len([r for r in after if r["phase"] == "backward"]))
        self.assertGreater(len(backward), 4)
        self.assertIn("aten::linear", {r.get("forward_op") for r in backward})
        self.assertNotIn("aten::tanh", {r["op"] for r in records})
        self.assertFalse([r["api"] for r in records if r["in_optimizer"]])

    def test_set_init_step_resumes_the_step_count(self):
        _, records = self.train("resume", [10])
        self.assertEqual({r["step"] for r in records}, {10})
        self.assertGreater(len(records), 10)


    def test_a_rank_the_server_refuses_stops_capturing_and_says_so_once(self):
        # msprobe's rank_list on the server: rank 1 is not checked there. Its agent stops
        # copying calls once refused, instead of capturing every call to drop it.
        run, records = self.train("refused", [], env={"RANK": "1", "WORLD_SIZE": "2"},
                                  server_args=["--rank_list=0"])
        self.assertEqual(records, [])
        self.assertEqual(run.stderr.count("the server refused rank 1"), 1, run.stderr[-3000:])
        self.assertIn("rank_list", run.stderr)
        counters = json.loads(run.stdout.split("COUNTERS ", 1)[1].splitlines()[0])
        # Once refused (known by the end of the first iteration's flush), nothing more is
        # copied in the three iterations after it.
        when_refused = json.loads(run.stdout.split("CAPTURED_WHEN_REFUSED ", 1)[1].splitlines()[0])
        self.assertGreater(when_refused, 0)
        self.assertEqual(counters["captured"], when_refused, counters)
        self.assertEqual(counters["verdicts"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
