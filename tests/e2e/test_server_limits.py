"""parity-server under an address-space limit (a container's memory cap, `ulimit -v`): SIGTERM
ends it cleanly however little room is left. Its shutdown watchdog used to be a thread started
after the signal: with no room for a thread's stack, std::thread threw and the server aborted
(SIGABRT, "terminate called after throwing an instance of 'std::system_error'") instead of
finishing its streams; it is an alarm now, which needs no memory."""
import os
import re
import resource
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


class ServerLimitsTest(unittest.TestCase):
    def test_sigterm_with_no_address_space_left_ends_cleanly(self):
        for headroom_mib in (0, 4, 64):
            with self.subTest(headroom_mib=headroom_mib), \
                    tempfile.TemporaryDirectory() as work:
                server = harness.Server(work)
                with open(f"/proc/{server.proc.pid}/status", encoding="utf-8") as f:
                    vm = int(re.search(r"VmSize:\s+(\d+) kB", f.read()).group(1)) * 1024
                limit = vm + headroom_mib * 2**20
                resource.prlimit(server.proc.pid, resource.RLIMIT_AS, (limit, limit))
                server.stop()  # SIGTERM, then the wait
                out = server.read_log()
                self.assertEqual(server.proc.returncode, 0, out[-3000:])
                self.assertNotIn("terminate called", out)
                self.assertIn("signal 15: finishing open streams", out)

if __name__ == "__main__":
    unittest.main()
