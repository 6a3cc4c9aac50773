"""The example Llama trained on a test accelerator registered on PrivateUse1 the way torch_npu
registers the NPU (tests/npu_device/npu_device.cc: its own allocator, whose memory the host
cannot read, device guard, events, copy kernels), with the agent:

- it is checked end to end and judged exactly as the same training on the CPU (every verdict's
  status, standard and metrics equal, call by call), with the same losses;
- the agent took its snapshots on the device and copied them out through the device's copy after
  an event recorded on the training's stream, never synchronising the device (its memory cannot
  be read from the host: a direct read would have killed the training);
- random ops on the device, whose generator the agent cannot read, are judged by the properties
  of their draws, the row saying why;
- a kernel of the device's own that writes into its input is reported on its call, the
  comparison of the read-only argument made on the device (parity.detect_input_writes).
"""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

LLAMA = os.path.join(harness.ROOT, "docs", "examples", "train_llama.py")
DEVICE_LIB = os.path.join(harness.TRAINING_LIBS, "libparity_test_npu_device.so")
# Runs train_llama.py as its __main__ and prints the device's counters at exit.
RUNNER = ("import atexit, runpy, sys, torch\n"
          "def stats():\n"
          "    if hasattr(torch.ops, 'parity_test_npu'):\n"
          "        print('DEVICE_STATS', list(torch.ops.parity_test_npu.stats()), flush=True)\n"
          "atexit.register(stats)\n"
          "sys.argv = sys.argv[1:]\n"
          "runpy.run_path(sys.argv[0], run_name='__main__')\n")
STAT_NAMES = ("allocations", "fallback_calls", "copies_to_host", "events_recorded",
              "events_blocked", "stream_syncs", "bytes_to_host")


def train(work, device, *extra, **parity):
    """Trains on `device` against a server of its own; (stdout, verdict records, device stats).
    `parity`: more keys of the agent config's "parity" section."""
    os.makedirs(work)
    server = harness.Server(work)
    try:
        config = harness.agent_config(os.path.join(work, "config.json"), server.port,
                                      policy="block", **parity)
        args = [harness.PYTHON, "-c", RUNNER, LLAMA, "--config", config, "--steps", "2",
                "--device", device, *extra]
        if device != "cpu":
            args += ["--device-lib", DEVICE_LIB]
        run = harness.run(args)
    finally:
        server.stop()
    if run.returncode != 0:
        raise AssertionError(f"training on {device} failed:\n{run.stdout[-2000:]}\n"
                             f"{run.stderr[-4000:]}")
    stats = {}
    for line in run.stdout.splitlines():
        if line.startswith("DEVICE_STATS "):
            stats = dict(zip(STAT_NAMES, json.loads(line.split(" ", 1)[1])))
    return run.stdout, server.records(), stats


def verdicts(records):
    """Each call's verdict: its status, and each output's status, standard, failed metric and
    shape. (Not the metrics' values: an op without a kernel of the device's own, silu_backward
    say, runs libtorch's composite of other ops there, as on a real NPU, so the device's
    outputs, and the training after them, differ from the CPU's in the last bits.)"""
    out = {}
    for r in records:
        outputs = [(o["index"], o["status"], o["standard"], o.get("failed_metric"),
                    tuple(o["shape"])) for o in r["outputs"]]
        out[(r["step"], r["api"], r["phase"])] = (r["status"], r["message"], outputs)
    return out


class NpuDeviceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cpu = train(os.path.join(cls.tmp.name, "cpu"), "cpu")
        cls.npu = train(os.path.join(cls.tmp.name, "npu"), "privateuseone")
        # The same with every snapshot a fresh copy (no snapshot cache, no buffer pool).
        cls.npu_copy_all = train(os.path.join(cls.tmp.name, "npu_copy_all"), "privateuseone",
                                 snapshot_pool_bytes=0)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_device_training_is_judged_as_the_same_training_on_the_cpu(self):
        cpu_out, cpu_records, _ = self.cpu
        npu_out, npu_records, _ = self.npu
        losses = lambda out: [float(l.split()[-1]) for l in out.splitlines()
                              if l.startswith("rank 0 loss")]
        self.assertEqual(len(losses(npu_out)), 2)
        for npu_loss, cpu_loss in zip(losses(npu_out), losses(cpu_out)):
            self.assertAlmostEqual(npu_loss, cpu_loss, delta=1e-5 * abs(cpu_loss))
        cpu, npu = verdicts(cpu_records), verdicts(npu_records)
        self.assertGreater(len(npu), 500)
        self.assertEqual(sorted(npu), sorted(cpu))
        # Random ops (dropout, even at p=0) draw from the device's generator, which the agent
        # cannot read there: judged by their properties, not replayed (the last test).
        random_ops = {k for k in npu if any(o[2] == "random_property" for o in npu[k][2])}
        differing = [k for k in cpu if k not in random_ops and cpu[k] != npu[k]]
        self.assertEqual(differing, [], [(k, cpu[k], npu[k]) for k in differing[:3]])
        self.assertEqual({k[1].rsplit(".", 1)[0] for k in random_ops}, {"aten::dropout"})
        statuses = {r["status"] for r in npu_records}
        self.assertNotIn("error", statuses)
        # The device names itself in the rows' tensors? It travels in Tensor.device: the server
        # judged privateuseone:0 tensors.
        self.assertTrue(any(r["op"] == "aten::linear" for r in npu_records))

    def test_an_unchanged_tensor_leaves_the_device_once(self):
        # A weight read by the forward and by the backward, an activation the next op reads:
        # before the snapshot cache, each call copied it on the device and then out of it. Now
        # the second call gets the first's snapshot and its host copy; the verdicts are the same.
        _, records, stats = self.npu
        _, records_all, stats_all = self.npu_copy_all
        self.assertEqual(verdicts(records), verdicts(records_all))
        per_call = stats["bytes_to_host"] / len(records)
        per_call_all = stats_all["bytes_to_host"] / len(records_all)
        print(f"bytes copied out of the device per checked call: {per_call:.0f} with the "
              f"snapshot cache, {per_call_all:.0f} without ({len(records)} calls)")
        self.assertLess(per_call, 0.8 * per_call_all, (stats, stats_all))
        self.assertLess(stats["copies_to_host"], stats_all["copies_to_host"])

    def test_snapshots_left_the_device_through_its_copy_after_an_event(self):
        _, _, stats = self.npu
        self.assertGreater(stats["allocations"], 0)
        self.assertGreater(stats["events_recorded"], 1000, stats)  # one per captured call
        self.assertGreater(stats["events_blocked"], 1000, stats)   # the sender waits on each
        self.assertGreater(stats["copies_to_host"], 1000, stats)   # every snapshot, copied out
        self.assertEqual(stats["stream_syncs"], 0, stats)          # never a device-wide wait

    def test_the_devices_memory_cannot_be_read_from_the_host(self):
        # What makes the snapshot test mean something: reading a device tensor's address from
        # the host, as an agent that skipped the device's copy would, kills the process.
        code = ("import ctypes, types, torch\n"
                f"torch.ops.load_library({DEVICE_LIB!r})\n"
                # torch 2.x moves tensors to a backend only with a Python device module
                # (train_llama.py registers the same empty one)
                "if hasattr(torch, '_register_device_module'):\n"
                "    torch._register_device_module('privateuseone', "
                "types.ModuleType('torch.privateuseone'))\n"
                "x = torch.ones(4).to('privateuseone')\n"
                "print(x.cpu().tolist(), flush=True)\n"
                "ctypes.string_at(x.data_ptr(), 4)\n"
                "print('read it', flush=True)\n")
        run = harness.run([harness.PYTHON, "-c", code])
        self.assertIn("[1.0, 1.0, 1.0, 1.0]", run.stdout)
        self.assertNotIn("read it", run.stdout)
        self.assertEqual(run.returncode, -11, run.stderr[-2000:])  # SIGSEGV

    def test_a_device_kernel_writing_its_input_is_reported_on_its_call(self):
        # SwiGLU's silu with a kernel of the device's own that leaves its input holding the
        # sigmoid (tests/faults/llama_faults.py): its output is right. The agent compares the
        # read-only argument on the device, on the training's stream, and never synchronises it.
        _, records, stats = train(os.path.join(self.tmp.name, "overwrite"), "privateuseone",
                                  "--fault", "silu_overwrites_input")
        errors = [r for r in records if r["status"] == "error"]
        self.assertTrue(errors)
        self.assertEqual({r["op"] for r in errors}, {"aten::silu"}, errors[:3])
        for r in errors:
            self.assertEqual([(w["index"], w["name"]) for w in r["inputs_written"]],
                             [(0, "self")], r)
            self.assertGreater(r["inputs_written"][0]["changed_elements"], 0)
            self.assertEqual({o["status"] for o in r["outputs"]}, {"pass"}, r)
        self.assertEqual(stats["stream_syncs"], 0, stats)

    def test_random_ops_on_the_device_fall_back_to_their_properties_saying_why(self):
        _, records, _ = train(os.path.join(self.tmp.name, "dropout"), "privateuseone",
                              "--dropout", "0.1")
        dropouts = [r for r in records if r["op"] == "aten::dropout"]
        self.assertTrue(dropouts)
        for r in dropouts:
            out = r["outputs"][0]
            self.assertEqual(out["standard"], "random_property", r)
            self.assertIn("the agent sent no generator state", out["message"])
            self.assertEqual(r["status"], "pass", r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
