"""Silent data corruption across data-parallel replicas (issue 69, docs/replicas.md): a Llama
training on 2 and 4 gloo ranks (DDP, AdamW, an all_gather a step; tests/e2e/replica_ranks.py)
with parity.replicas on and operator checking off, against a real parity-server.

- clean runs, float32 and bf16 autocast: every comparison passes (0 mismatches);
- a bit flipped on one rank inside DDP's gradient all-reduce, inside the optimizer's update and
  inside an all_gather, each at a chosen step: the first error row is at that step, on that
  kind and operation, names the tensor and the rank (by a majority of 3 to 1 on 4 ranks; both
  ranks on 2), and that rank's agent logs it;
- a rank that dies mid-step: counted missing (parity_server_replica_missing_total), nobody
  blamed;
- with operator checking and the reference replay on as well: both report;
- with two servers (tensor.host listing both), the ranks' call streams spread over them and
  every report of the group meets on the one server the group picks: nobody missing, the flipped
  bit reported 3 to 1."""
import os
import re
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

def rendezvous():
    """A file path that does not exist yet, for the ranks of one training to meet at."""
    return os.path.join(harness.tempdir("parity_rendezvous_"), "store")


SCRIPT = os.path.join(HERE, "replica_ranks.py")
STEPS = 4


def run_ranks(work, server, world, fault="", bf16=False, processes=False, servers=(), meet=None,
              **parity):
    """`servers`: all the servers tensor.host lists (else `server` alone); `meet`: the
    rendezvous file to use (else a new one)."""
    parity.setdefault("check_calls", False)
    config = harness.agent_config(os.path.join(work, "config.json"), server.port,
                                  replicas=["gradients", "parameters", "collectives"], **parity)
    if servers:
        with open(config, encoding="utf-8") as f:
            text = f.read()
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in servers)
        with open(config, "w", encoding="utf-8") as f:
            f.write(text.replace('"host": "127.0.0.1"', f'"host": "{hosts}"'))
    args = [harness.PYTHON, SCRIPT, config, str(world), meet or rendezvous(), str(STEPS)]
    if fault:
        args.append(fault)
    if bf16:
        args.append("--bf16")
    if processes:
        args.append("--processes")
    return harness.run(args, timeout=600)


def rows(server):
    return server.rows("replica_checking_result_")


class ReplicaTest(unittest.TestCase):
    def serve(self, prefix, wait_ms=60000):
        work = harness.tempdir(prefix)
        server = harness.Server(work, extra=["--replay=false", f"--replica_wait_ms={wait_ms}"])
        self.addCleanup(server.stop)
        return work, server

    def test_clean_runs_agree_on_every_replica(self):
        for world, bf16 in ((2, False), (4, False), (4, True)):
            with self.subTest(world=world, bf16=bf16):
                work, server = self.serve("parity_replicas_clean_")
                r = run_ranks(work, server, world, bf16=bf16)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                for rank in range(world):
                    self.assertIn(f"rank {rank} done", r.stdout)
                got = rows(server)
                # Per step: one gradients and one parameters report (the optimizer) and one
                # collective (the all_gather), each compared once across the group.
                self.assertEqual(len(got), 3 * STEPS, got)
                self.assertEqual({row["Status"] for row in got}, {"pass"}, got)
                self.assertEqual({row["Kind"] for row in got},
                                 {"gradients", "parameters", "collective"})
                self.assertEqual({row["Group"] for row in got},
                                 {" ".join(str(r) for r in range(world))})
                self.assertEqual(server.metric("parity_server_replica_mismatches_total",
                                               kind="parameters"), 0)
                self.assertEqual(server.metric("parity_server_replica_checks_total",
                                               kind="gradients", verdict="pass"), STEPS)
                self.assertIn("replicas: ", r.stderr)  # the agents' exit line counts them

    def first_error(self, server):
        errors = [row for row in rows(server) if row["Status"] == "error"]
        self.assertTrue(errors, rows(server))
        return min(errors, key=lambda row: (int(row["Step"]),
                                            ["gradients", "parameters", "collective"].index(
                                                row["Kind"])))

    def test_a_flipped_bit_on_one_rank_is_reported_on_that_rank_op_tensor_and_step(self):
        cases = [
            ("grad:2:1", 4, ("1", "gradients", "AdamW.step"), "2", "0 1 3", ".grad"),
            ("update:1:2", 4, ("2", "parameters", "AdamW.step"), "1", "0 2 3",
             "module.tok_embeddings.weight"),
            ("gather:3:1", 4, ("1", "collective", "all_gather"), "3", "0 1 2", "output[1]"),
            ("grad:1:2", 2, ("2", "gradients", "AdamW.step"), "0 1", "", ".grad"),
        ]
        for fault, world, (step, kind, op), differing, agreeing, tensor in cases:
            with self.subTest(fault=fault, world=world):
                work, server = self.serve("parity_replicas_fault_")
                r = run_ranks(work, server, world, fault=fault)
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                first = self.first_error(server)
                self.assertEqual((first["Step"], first["Kind"], first["Operation"]),
                                 (step, kind, op), first)
                self.assertEqual(first["Differing Ranks"], differing, first)
                self.assertEqual(first["Agreeing Ranks"].strip(), agreeing, first)
                self.assertIn(tensor, first["First Mismatch"], first)
                self.assertEqual(first["Mismatches"], "1", "one tensor flipped, one named")
                # Nothing before the fault's step and kind differs.
                for row in rows(server):
                    if int(row["Step"]) < int(step):
                        self.assertEqual(row["Status"], "pass", row)
                # The agents say so: the faulty rank's (and every rank's) log line.
                self.assertIn(f"replica mismatch: step {step}, {kind} of {op}", r.stderr)
                self.assertGreater(server.metric("parity_server_replica_mismatches_total",
                                                 kind=kind), 0)

    def test_replicas_and_the_reference_replay_run_together(self):
        # Operator checking on (one call per signature, replayed against the bench and the
        # golden) beside the replicas: both report, neither disturbs the other.
        work = harness.tempdir("parity_replicas_replay_")
        server = harness.Server(work, extra=["--replica_wait_ms=60000"])
        self.addCleanup(server.stop)
        r = run_ranks(work, server, 2, fault="update:1:1", check_calls=True,
                      max_checks_per_signature=1, policy="block")
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        first = self.first_error(server)
        self.assertEqual((first["Step"], first["Kind"], first["Differing Ranks"]),
                         ("1", "parameters", "0 1"), first)
        details = server.rows("accuracy_checking_details_")
        self.assertGreater(len(details), 100, "the calls were checked too")
        judged = {row["Forward Test Success"] for row in server.rows("accuracy_checking_result_")}
        self.assertIn("pass", judged)
        self.assertNotIn("error", judged, "the flipped parameter is no operator's error")

    def test_a_rank_that_dies_mid_step_is_counted_missing_not_blamed(self):
        work, server = self.serve("parity_replicas_die_", wait_ms=2000)
        r = run_ranks(work, server, 4, fault="die:3:1", processes=True)
        self.assertNotEqual(r.returncode, 0, "the dead rank ends the training")
        got = rows(server)
        step1 = [row for row in got if row["Step"] == "1" and row["Kind"] == "gradients"]
        self.assertEqual(len(step1), 1, got)
        self.assertEqual(step1[0]["Missing Ranks"], "3", step1[0])
        self.assertEqual(step1[0]["Status"], "pass", "the three that reported agree")
        self.assertNotIn("error", {row["Status"] for row in got}, got)
        self.assertGreaterEqual(server.metric("parity_server_replica_missing_total"), 1)

    def test_with_two_servers_a_groups_reports_meet_on_one(self):
        # 4 ranks, tensor.host listing 2 servers: ranks 0 and 2 stream to one, 1 and 3 to the
        # other (docs/deploy.md#many-servers); the group's reports all go to the server the
        # group's identity picks, on a replicas-only stream of each rank.
        _, a = self.serve("parity_replicas_two_a_")
        _, b = self.serve("parity_replicas_two_b_")
        work = harness.tempdir("parity_replicas_two_")
        r = run_ranks(work, a, 4, fault="update:2:2", servers=(a, b), check_calls=True,
                      max_checks_per_signature=1)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        call_ranks = {}
        for server in (a, b):
            log = server.read_log()
            call_ranks[server.port] = sorted(
                int(m) for m in re.findall(r"agent connected: rank (\d+) ", log))
        self.assertEqual(sorted(call_ranks.values()), [[0, 2], [1, 3]], call_ranks)
        with_rows = [s for s in (a, b) if rows(s)]
        self.assertEqual(len(with_rows), 1, "one server compares the group")
        owner = with_rows[0]
        self.assertEqual(sorted(int(m) for m in re.findall(
            r"agent's replica stream connected: rank (\d+) ", owner.read_log())), [0, 1, 2, 3])
        got = rows(owner)
        self.assertEqual(len(got), 3 * STEPS, got)
        self.assertEqual({row["Missing Ranks"].strip() for row in got}, {""}, "every rank met there")
        first = self.first_error(owner)
        self.assertEqual((first["Step"], first["Kind"], first["Differing Ranks"],
                          first["Agreeing Ranks"].strip()), ("2", "parameters", "2", "0 1 3"),
                         first)
        self.assertIn("replica mismatch: step 2, parameters of AdamW.step", r.stderr)
        # The calls went to both servers, each its own ranks' (replay off: received, not
        # replayed).
        for server in (a, b):
            self.assertGreater(server.metric("parity_server_calls_received_total",
                                             phase="forward"), 0, server.port)

    def test_when_the_groups_server_dies_its_ranks_fail_over_together(self):
        # The group's server is SIGKILLed between steps 1 and 2 (rank 0 waits at step 2 for the
        # test; the others wait in their collectives): every rank's replica stream goes on to the
        # next server of the group's order, the same one, so steps 2 and 3 meet there whole.
        _, a = self.serve("parity_replicas_failover_a_")
        _, b = self.serve("parity_replicas_failover_b_")
        work = harness.tempdir("parity_replicas_failover_")
        meet = rendezvous()
        result = []
        trainer = threading.Thread(target=lambda: result.append(run_ranks(
            work, a, 4, fault="pause:0:2", servers=(a, b), meet=meet)))
        trainer.start()
        deadline = time.monotonic() + 300
        owner = None
        while owner is None and time.monotonic() < deadline and trainer.is_alive():
            done = [s for s in (a, b) if len(rows(s)) >= 6]  # steps 0 and 1, three kinds each
            owner = done[0] if done else None
            time.sleep(0.1)
        self.assertIsNotNone(owner, "steps 0 and 1 compared before rank 0 waits")
        survivor = b if owner is a else a
        self.assertEqual(rows(survivor), [], "one server compares the group")
        owner.proc.kill()
        owner.proc.wait()
        with open(meet + ".resume", "w", encoding="utf-8"):
            pass
        trainer.join(600)
        self.assertFalse(trainer.is_alive())
        r = result[0]
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        got = rows(survivor)
        self.assertEqual(sorted({row["Step"] for row in got}), ["2", "3"], got)
        self.assertEqual(len(got), 6, got)
        self.assertEqual({row["Missing Ranks"].strip() for row in got}, {""}, "all 4 met there")
        self.assertEqual({row["Status"] for row in got}, {"pass"}, got)
        self.assertEqual(sorted(int(m) for m in re.findall(
            r"agent's replica stream connected: rank (\d+) ", survivor.read_log())), [0, 1, 2, 3])


if __name__ == "__main__":
    unittest.main(verbosity=2)
