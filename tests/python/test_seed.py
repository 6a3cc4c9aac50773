"""parity.seed_all does what msprobe's does, and a config's seed / is_deterministic take effect
when PrecisionDebugger reads it. Each case runs in a fresh interpreter: seeds, environment
variables and torch's deterministic mode are process-wide."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def run(code):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    for var in ("PYTHONHASHSEED", "HCCL_DETERMINISTIC", "CUBLAS_WORKSPACE_CONFIG"):
        env.pop(var, None)
    build = os.environ.get("PARITY_BUILD_DIR")
    if build:
        env["PARITY_AGENT_LIB"] = os.path.join(build, "agent", "libparity_agent.so")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


STATE = """
import json, os, random, torch
try:
    import numpy
    n = float(numpy.random.rand())
except ImportError:
    n = None
print(json.dumps({"random": random.random(), "torch": torch.rand(1).item(), "numpy": n,
                  "initial_seed": torch.initial_seed(),
                  "deterministic": torch.are_deterministic_algorithms_enabled(),
                  "cudnn_deterministic": torch.backends.cudnn.deterministic,
                  "cudnn_benchmark": torch.backends.cudnn.benchmark,
                  "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED"),
                  "HCCL_DETERMINISTIC": os.environ.get("HCCL_DETERMINISTIC"),
                  "dropped": int((torch.nn.functional.dropout(torch.ones(1000), 0.5) == 0).sum())}))
"""


class SeedAllTest(unittest.TestCase):
    def test_seeds_every_generator_and_sets_msprobes_flags(self):
        a = run("import parity; parity.seed_all(7, True)" + STATE)
        b = run("import parity; parity.seed_all(7, True)" + STATE)
        c = run("import parity; parity.seed_all(8)" + STATE)
        for key in ("random", "torch", "numpy"):
            self.assertEqual(a[key], b[key], key)
            if a[key] is not None:
                self.assertNotEqual(a[key], c[key], key)
        self.assertEqual(a["initial_seed"], 7)
        self.assertTrue(a["deterministic"])
        self.assertFalse(c["deterministic"])
        self.assertTrue(a["cudnn_deterministic"])
        self.assertFalse(a["cudnn_benchmark"])
        self.assertEqual((a["PYTHONHASHSEED"], a["HCCL_DETERMINISTIC"]), ("7", "True"))
        self.assertEqual(c["HCCL_DETERMINISTIC"], "False")
        # msprobe 8.1.1's default, rm_dropout=True: the functional dropouts become identities.
        self.assertEqual(a["dropped"], 0, "dropout is removed by default, as msprobe does")

    def test_rm_dropout_false_keeps_dropout(self):
        r = run("import parity; parity.seed_all(1, rm_dropout=False)" + STATE)
        self.assertGreater(r["dropped"], 0)

    def test_bad_arguments_are_refused(self):
        for args in ("-1", "2**32", "'x'", "1, mode=1"):
            with self.assertRaises(AssertionError) as e:
                run(f"import parity; parity.seed_all({args})")
            self.assertIn("seed_all:", str(e.exception))

    def test_the_configs_seed_and_is_deterministic_take_effect(self):
        folder = tempfile.mkdtemp(prefix="parity_seed_")

        def with_config(extra):
            path = os.path.join(folder, f"config{len(extra)}.json")
            config = {"task": "tensor", "level": "L1", "step": [],
                      "tensor": {"online_run_ut": True, "host": "127.0.0.1", "port": 1},
                      "parity": {"plaintext": True},  # checked at construction, as start() would
                      **extra}
            with open(path, "w", encoding="utf-8") as f:
                json.dump(config, f)
            return run(f"import torch; torch.manual_seed(99); import parity; "
                       f"parity.PrecisionDebugger({path!r})" + STATE)

        seeded = with_config({"seed": 5, "is_deterministic": True})
        self.assertEqual(seeded["initial_seed"], 5)
        self.assertTrue(seeded["deterministic"])
        self.assertEqual(seeded["HCCL_DETERMINISTIC"], "True")
        self.assertGreater(seeded["dropped"], 0, "the config's seed leaves dropout as it is")
        untouched = with_config({})
        self.assertEqual(untouched["initial_seed"], 99, "no seed in the config: none applied")
        self.assertFalse(untouched["deterministic"])


if __name__ == "__main__":
    unittest.main()
