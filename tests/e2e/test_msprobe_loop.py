"""msprobe's own training loop, unchanged but for the import: every iteration start(model),
forward, backward, optimizer step, stop(), step(). Against the real server over mutual TLS, with
msprobe's `step` and `rank` filters: the same rows as the start-once loop (same steps, call
indices, counts), only the configured steps, and the counters cover the whole run."""
import collections
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402


def names(records, rank):
    """(step, api, phase) of every call of one rank, sorted: what the result files are keyed by."""
    return sorted((x["step"], x["api"], x["phase"]) for x in records if x["rank"] == rank)


class MsprobeLoopTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = harness.tempdir("parity_loop_")
        server_tls, client_tls = harness.make_certs(os.path.join(cls.dir, "certs"))
        server = harness.Server(cls.dir, server_tls)
        cls.runs = {}
        try:
            config = os.path.join(cls.dir, "config.json")
            harness.agent_config(config, server.port, client_tls, policy="block")
            with open(config, encoding="utf-8") as f:
                doc = json.load(f)
            doc["step"] = [2, 3]
            doc["rank"] = [0, 1]  # rank 2 is not checked
            with open(config, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            for rank, loop in ((0, "once"), (1, "msprobe"), (2, "msprobe")):
                r = harness.run([harness.PYTHON, harness.TRAIN, "--config", config, "--steps", "6",
                                 "--loop", loop], env={"RANK": str(rank), "WORLD_SIZE": "3"})
                cls.runs[rank] = r
        finally:
            server.stop()
        cls.records = server.records()

    def counters(self, rank):
        m = re.search(r"parity counters: (\{.*\})", self.runs[rank].stdout)
        self.assertIsNotNone(m, self.runs[rank].stdout + self.runs[rank].stderr)
        return json.loads(m.group(1))

    def test_every_run_finished(self):
        for rank, r in self.runs.items():
            self.assertEqual(r.returncode, 0, f"rank {rank}: {r.stderr[-2000:]}")

    def test_both_loops_give_the_same_rows_in_the_configured_steps(self):
        once, msprobe = names(self.records, 0), names(self.records, 1)
        self.assertGreater(len(once), 50)
        self.assertEqual(once, msprobe)
        self.assertEqual({step for step, _, _ in once}, {2, 3})
        # Call indices restart at each step: each step has its own aten::linear.0.
        per_step = collections.Counter(step for step, api, _ in once if api == "aten::linear.0")
        self.assertEqual(per_step, {2: 1, 3: 1})

    def test_counters_cover_the_whole_run(self):
        once, msprobe = self.counters(0), self.counters(1)
        self.assertEqual(once["captured"], msprobe["captured"])
        self.assertEqual(msprobe["captured"], len(names(self.records, 1)))
        self.assertEqual(msprobe["verdicts"], msprobe["captured"])
        self.assertEqual(msprobe["step"], 6)
        self.assertEqual(msprobe["reconnects"], 0, "one stream for the whole run")

    def test_a_rank_outside_the_rank_list_sends_nothing(self):
        self.assertEqual(names(self.records, 2), [])
        self.assertEqual(self.counters(2)["captured"], 0)
        self.assertIn("rank 2 is not in the config's rank list", self.runs[2].stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
