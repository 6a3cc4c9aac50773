"""One timeout per congestion across the ranks of a host (issue 65): four ranks (gloo,
torch.multiprocessing.spawn) stream to one server, which the test freezes with SIGSTOP once they
are connected. Rank 0's wait for room runs out after parity.block_timeout_ms; the others, which
waited for it in a barrier as ranks wait in their collectives, then find their queues full too.
Before, each of them waited out a timeout of its own (a frozen server cost a DDP training one
timeout per rank, measured 2 x 10 s back to back with 4 ranks on 2 servers); now the trip of
rank 0 is shared through the host's shared memory (agent/transport/host_breaker.h), and they
drop at once. The test counts the ranks whose own wait ran out (the log line each writes when it
does): one. No wall-clock assertion: who waited is read from what each rank logs."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frozen_server_ranks.py")
WORLD = 4


def segment_name(server):
    """The shared segment of `server` for this user, as agent/transport/host_breaker.cc names it
    (FNV-1a of the stream's peer address)."""
    h = 1469598103934665603
    for c in server.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"parity-breaker-v1-{os.getuid()}-{h:016x}"


class RankBreakerTest(unittest.TestCase):
    def setUp(self):
        self.dir = harness.tempdir("parity_rank_breaker_")

    def wait_for(self, path, proc):
        deadline = time.monotonic() + 300
        while not os.path.exists(path):
            if proc.poll() is not None:
                self.fail("the training ended early:\n" + proc.communicate()[1][-5000:])
            self.assertLess(time.monotonic(), deadline, f"no {os.path.basename(path)}")
            time.sleep(0.05)  # the training writes it

    def test_a_frozen_server_costs_the_ranks_of_a_host_one_timeout(self):
        server = harness.Server(self.dir, None)
        stopped = False
        try:
            config = harness.agent_config(
                os.path.join(self.dir, "config.json"), server.port, policy="block",
                block_timeout_ms=2000, queue_max_calls=4, reuse_bytes=0, flush_timeout_ms=5000)
            env = dict(os.environ, PYTHONPATH=os.path.join(harness.ROOT, "python"),
                       PARITY_AGENT_LIB=harness.AGENT_LIB)
            for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LD_PRELOAD", "PARITY_CONFIG"):
                env.pop(key, None)
            proc = subprocess.Popen([harness.PYTHON, SCRIPT, config, self.dir,
                                     str(harness.free_port())], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.wait_for(os.path.join(self.dir, "ready"), proc)
                os.kill(server.proc.pid, signal.SIGSTOP)
                stopped = True
                open(os.path.join(self.dir, "frozen"), "w").close()
                self.wait_for(os.path.join(self.dir, "shed"), proc)
                segment = segment_name(f"ipv4:127.0.0.1:{server.port}")
                seen_segment = os.path.exists(os.path.join("/dev/shm", segment))
                os.kill(server.proc.pid, signal.SIGCONT)
                stopped = False
                open(os.path.join(self.dir, "thawed"), "w").close()
                _, stderr = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    proc.kill()
        finally:
            if stopped:
                os.kill(server.proc.pid, signal.SIGCONT)
            server.stop()
        self.assertEqual(proc.returncode, 0, stderr[-5000:])
        own = stderr.count("policy block: the server took no call for 2000 ms")
        shared = stderr.count("policy block: another rank on this host waited 2000 ms")
        self.assertEqual(own, 1, "ranks that waited out a timeout of their own:\n" + stderr[-5000:])
        self.assertEqual(shared, WORLD - 1, stderr[-5000:])
        for rank in range(WORLD):
            with open(os.path.join(self.dir, f"rank{rank}.json")) as f:
                counters = json.load(f)
            self.assertGreater(counters["dropped"]["queue_full"], 0, (rank, counters))
        self.assertTrue(seen_segment, f"no /dev/shm/{segment} while the ranks shed")
        self.assertFalse(os.path.exists(os.path.join("/dev/shm", segment)),
                         "the segment outlived the training")


if __name__ == "__main__":
    unittest.main()
