"""What torch 2.x trainings do that torch 1.13's never did, met by the agent and a server
(issue 49): tensors that stand for data while a program is traced (torch.compile's fake tensors,
meta tensors: both exist in 1.13 too, and crashed the agent there), a torch.compile'd model,
scaled_dot_product_attention with and without dropout. Run by ctest on Debian's torch 1.13 (the
torch-2-only cases say they need torch 2.x) and by scripts/torch-matrix.sh on pip's 2.x wheels,
whose trainings a server of Debian's torch checks."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TRAIN = r'''
import json, sys
import torch
sys.path.append(sys.argv[3])
import parity
from parity import PrecisionDebugger
case = sys.argv[2]
torch.manual_seed(0)
debugger = PrecisionDebugger(sys.argv[1])
if case == "traced":
    from torch._subclasses.fake_tensor import FakeTensorMode
    debugger.start()
    real = torch.ones(8) * 3
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.ones(64, 64))
        y = (x @ x).relu() + 1
    m = torch.empty(16, 16, device="meta")
    z = (m @ m).sum()
    w = torch.tanh(real)
    debugger.stop()
elif case == "compiled":
    block = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.SiLU(), torch.nn.Linear(64, 32))
    model = torch.compile(block)
    opt = torch.optim.AdamW(block.parameters(), lr=1e-3)
    for step in range(2):
        debugger.start()
        loss = model(torch.randn(4, 32)).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        debugger.stop()
        debugger.step()
elif case == "aot_function":
    # What AOT autograd runs for a compiled graph, by its own name: an autograd.Function called
    # CompiledFunction whose backward node is CompiledFunctionBackward (torch 1.13 has both
    # records, not torch.compile).
    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return torch.mm(x, w).tanh()

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            g = grad * (1 - torch.mm(x, w).tanh() ** 2)
            return torch.mm(g, w.t()), torch.mm(x.t(), g)

    w = torch.randn(32, 16, requires_grad=True)
    for step in range(3):
        debugger.start()
        x = torch.randn(8, 32)
        loss = CompiledFunction.apply(x, w).sum() + torch.sigmoid(w).sum()
        loss.backward()
        debugger.stop()
        debugger.step()
elif case.startswith("sdpa_llm"):
    # An LLM layer's attention as torch 2.x trains it on the CPU: bfloat16, causal, grouped-query
    # heads (repeated), forward and backward (SDPA's backward runs the CPU flash kernel's backward, which a
    # torch 1.13 bench lacks: the server replays it by decomposition). ":fault" replaces that
    # backward with one whose query gradient is 1% off.
    name = "_scaled_dot_product_flash_attention_for_cpu_backward"
    if case.endswith(":fault"):
        def bad_backward(grad_out, q, k, v, out, lse, dropout_p, is_causal, attn_mask=None,
                         scale=None):
            f = lambda t: t.float()
            group = q.shape[1] // k.shape[1]
            kk, vv = f(k).repeat_interleave(group, 1), f(v).repeat_interleave(group, 1)
            s = f(q) @ kk.transpose(-1, -2) * (scale or q.shape[-1] ** -0.5)
            if is_causal:
                s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
            p = torch.exp(s - lse.unsqueeze(-1))
            ds = p * (f(grad_out) @ vv.transpose(-1, -2) - (f(grad_out) * f(out)).sum(-1, True))
            sc = scale or q.shape[-1] ** -0.5
            dq = ds @ kk * sc * 1.01
            dk = (ds.transpose(-1, -2) @ f(q) * sc).unflatten(1, (k.shape[1], group)).sum(2)
            dv = (p.transpose(-1, -2) @ f(grad_out)).unflatten(1, (k.shape[1], group)).sum(2)
            return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
        lib = torch.library.Library("aten", "IMPL")
        import warnings
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore")
            lib.impl(name, bad_backward, "CPU")
    for step in range(2):
        debugger.start()
        q = torch.randn(2, 4, 64, 32, dtype=torch.bfloat16, requires_grad=True)
        k, v = (torch.randn(2, 2, 64, 32, dtype=torch.bfloat16, requires_grad=True)
                for _ in range(2))
        # Grouped-query heads repeated as Hugging Face's Llama does (repeat_kv): SDPA's
        # enable_gqa takes the math path on the CPU (torch 2.6), whose backward is plain aten.
        k, v = (t.repeat_interleave(2, dim=1) for t in (k, v))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out.float() * torch.randn(out.shape)).sum().backward()
        debugger.stop()
        debugger.step()
elif case.startswith("sdpa"):
    p = float(case.split(":")[1])
    q, k, v = (torch.randn(2, 4, 16, 8, requires_grad=True) for _ in range(3))
    debugger.start()
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    out.sum().backward()
    debugger.stop()
debugger.flush(120)
print("COUNTERS " + json.dumps(parity.counters()), flush=True)
'''

def torch2():
    """Whether the trainings' torch is 2.x (torch.compile, SDPA)."""
    return int(harness.torch_version(harness.PYTHON).split(".")[0]) >= 2


class Torch2FeaturesTest(unittest.TestCase):
    def train(self, case):
        work = harness.tempdir("parity_torch2_")
        server = harness.Server(work)
        try:
            script, config = harness.script_against(work, server, TRAIN)
            r = harness.run([harness.PYTHON, script, config, case,
                             os.path.join(harness.ROOT, "python")], timeout=900)
        finally:
            server.stop()
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-4000:])
        counters = json.loads(r.stdout.split("COUNTERS ", 1)[1].splitlines()[0])
        return server.records(), counters, r.stderr

    def test_calls_on_fake_and_meta_tensors_are_not_captured_and_crash_nothing(self):
        # FakeTensorMode (what torch.compile traces with) and meta tensors: no data to copy. The
        # agent read their data pointer and crashed the training (SIGSEGV) on 1.13 and 2.x alike.
        records, counters, _ = self.train("traced")
        ops = {r["op"] for r in records}
        self.assertIn("aten::tanh", ops)  # the real computation is checked
        self.assertNotIn("aten::mm", ops)  # the matmuls ran on fake and meta tensors only
        self.assertNotIn("aten::relu", ops)
        self.assertEqual(counters["error"], 0)
        self.assertEqual(counters["captured"], counters["verdicts"])

    def test_a_compiled_model_trains_and_what_runs_eagerly_is_checked(self):
        if not torch2():
            self.skipTest("torch.compile needs torch 2.x: scripts/torch-matrix.sh runs this")
        records, counters, stderr = self.train("compiled")
        ops = {r["op"] for r in records}
        judged = [r for r in records if r["status"] in ("pass", "warning", "error")]
        self.assertEqual(counters["error"], 0, [r for r in records if r["status"] == "error"])
        # The optimizer runs eagerly and is checked (per tensor, or by foreach ops that replay
        # through the server's decomposition where the bench's torch lacks them); inside the
        # compiled block, the GEMMs inductor leaves to aten (extern kernels) are checked, and its
        # fused kernels, which do not pass the dispatcher, are not seen
        # (docs/operators.md#torchcompile).
        self.assertTrue(ops & {"aten::addcdiv_", "aten::_foreach_addcdiv_"}, sorted(ops))
        self.assertTrue(ops & {"aten::mm", "aten::addmm"}, sorted(ops))
        self.assertNotIn("aten::silu", ops)  # fused by inductor: not seen
        self.assertGreater(len(judged), 10)
        # The exit line and the counters say how many compiled regions ran (one forward and one
        # backward a step) and how many calls inside them were captured.
        self.assertEqual((counters["compiled_forward"], counters["compiled_backward"]), (2, 2))
        self.assertGreater(counters["compiled_calls"], 0)
        self.assertLess(counters["compiled_calls"], counters["captured"])
        self.assertIn("torch.compile: 2 forward and 2 backward compiled-region runs, "
                      f"{counters['compiled_calls']} calls captured inside them", stderr)
        print(stderr[stderr.index("torch.compile: "):].splitlines()[0], flush=True)

    def test_compiled_regions_are_counted_and_what_runs_inside_them_checked(self):
        # AOT autograd's records by name on any torch (1.13 included): three steps, each one
        # forward and one backward region; the mm calls inside them and the sigmoid outside.
        records, counters, stderr = self.train("aot_function")
        self.assertEqual((counters["compiled_forward"], counters["compiled_backward"]), (3, 3))
        forward_mm = [r for r in records if r["op"] == "aten::mm" and r["phase"] == "forward"]
        backward_mm = [r for r in records if r["op"] == "aten::mm" and r["phase"] == "backward"]
        self.assertEqual(len(forward_mm), 3)
        self.assertEqual(len(backward_mm), 9)  # two for the gradients, one recomputing tanh's
        # Inside: at least the mm calls and the forward tanh; outside: sigmoid and its backward.
        outside = [r for r in records if r["op"] in ("aten::sigmoid", "aten::sigmoid_backward")]
        self.assertEqual(len(outside), 6)
        self.assertGreaterEqual(counters["compiled_calls"], len(forward_mm) + len(backward_mm) + 3)
        self.assertLessEqual(counters["compiled_calls"], counters["captured"] - len(outside))
        self.assertTrue(any(r["op"] == "aten::sigmoid" for r in records))
        # The calls its backward runs are named after the function (issue 50), not after the
        # forward op that ran before it (aten::randn, whose sequence number the node took).
        self.assertEqual({r["forward_op"] for r in backward_mm}, {"autograd::CompiledFunction"})
        self.assertEqual({r["csv_api"] for r in backward_mm},
                         {"Function.CompiledFunction.0"})  # call indices count per step
        self.assertFalse([r for r in records if r.get("forward_op") == "aten::randn"])
        self.assertEqual(counters["error"], 0)
        self.assertIn("torch.compile: 3 forward and 3 backward compiled-region runs, "
                      f"{counters['compiled_calls']} calls captured inside them", stderr)

    def test_sdpa_without_dropout_is_replayed(self):
        if not torch2():
            self.skipTest("scaled_dot_product_attention needs torch 2.x")
        records, _, stderr = self.train("sdpa:0.0")
        sdpa = [r for r in records if r["op"] == "aten::scaled_dot_product_attention"]
        self.assertEqual(len(sdpa), 1, sorted({r["op"] for r in records}))
        self.assertEqual(sdpa[0]["status"], "pass", sdpa[0])
        self.assertNotIn("drew random numbers", stderr)

    def sdpa_backward(self, records):
        """The calls of SDPA's CPU kernel's backward (torch 2.2 on; 2.1's is the flash kernel's)."""
        return [r for r in records if r["op"] in (
            "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
            "aten::_scaled_dot_product_flash_attention_backward")]

    def test_an_llms_attention_backward_is_checked_by_an_older_server(self):
        # The real kernels of the training's torch 2.x against the server's decomposition (on
        # Debian's torch 1.13 the kernels do not exist): bfloat16, causal, grouped-query heads.
        if not torch2():
            self.skipTest("SDPA needs torch 2.x: the torch matrix runs this")
        records, counters, _ = self.train("sdpa_llm")
        backward = self.sdpa_backward(records)
        self.assertEqual(len(backward), 2, sorted({r["op"] for r in records}))
        self.assertEqual([(r["status"], r["message"]) for r in backward], [("pass", "")] * 2)
        sdpa = [r for r in records if r["op"] == "aten::scaled_dot_product_attention"]
        self.assertEqual([r["status"] for r in sdpa], ["pass"] * 2, sdpa)
        self.assertEqual(counters["error"], 0, [r for r in records if r["status"] == "error"])
        self.assertEqual([r["op"] for r in records if r["status"] == "SKIP"
                          and "unknown operator" in r["message"]], [])

    def test_a_wrong_attention_backward_is_found(self):
        if not torch2():
            self.skipTest("SDPA needs torch 2.x: the torch matrix runs this")
        if harness.torch_version(harness.PYTHON).startswith("2.1."):
            self.skipTest("torch 2.1 runs the flash kernel's backward, not the CPU one planted")
        records, _, _ = self.train("sdpa_llm:fault")
        backward = self.sdpa_backward(records)
        self.assertEqual([r["status"] for r in backward], ["error"] * 2, backward)
        self.assertEqual([o["status"] for o in backward[0]["outputs"]][:3],
                         ["error", "pass", "pass"], backward[0])
        self.assertEqual({r["op"] for r in records if r["status"] == "error"},
                         {backward[0]["op"]})

    def test_sdpa_with_dropout_is_a_random_call_never_a_verdict_by_chance(self):
        if not torch2():
            self.skipTest("scaled_dot_product_attention needs torch 2.x")
        records, _, stderr = self.train("sdpa:0.2")
        self.assertIn("aten::scaled_dot_product_attention drew random numbers", stderr)
        sdpa = [r for r in records if r["op"] == "aten::scaled_dot_product_attention"]
        self.assertEqual(len(sdpa), 1)
        if harness.same_torch():  # the same draws replayed: judged bit for bit
            self.assertEqual(sdpa[0]["status"], "pass", sdpa[0])
            self.assertEqual(sdpa[0]["outputs"][0]["standard"], "binary", sdpa[0])
        else:  # another torch's draws cannot be replayed: SKIP saying why
            self.assertEqual(sdpa[0]["status"], "SKIP", sdpa[0])
            self.assertIn("drew random numbers in the training", sdpa[0]["message"])
            self.assertIn("may draw differently", sdpa[0]["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
