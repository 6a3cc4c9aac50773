"""parity-server under an address-space limit (a container's memory cap, `ulimit -v`): SIGTERM
ends it cleanly however little room is left. Its shutdown watchdog used to be a thread started
after the signal: with no room for a thread's stack, std::thread threw and the server aborted
(SIGABRT, "terminate called after throwing an instance of 'std::system_error'") instead of
finishing its streams; it is an alarm now, which needs no memory."""
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def start(work):
    ports = os.path.join(work, "ports")
    proc = subprocess.Popen([harness.SERVER, "--plaintext", "--port=0", f"--port_file={ports}",
                             f"--output_dir={work}", "--metrics_port=-1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if os.path.exists(ports) and open(ports, encoding="utf-8").read().strip():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("parity-server did not start: " + proc.communicate()[0][-2000:])


class ServerLimitsTest(unittest.TestCase):
    def test_sigterm_with_no_address_space_left_ends_cleanly(self):
        for headroom_mib in (0, 4, 64):
            with self.subTest(headroom_mib=headroom_mib), \
                    tempfile.TemporaryDirectory() as work:
                proc = start(work)
                with open(f"/proc/{proc.pid}/status", encoding="utf-8") as f:
                    vm = int(re.search(r"VmSize:\s+(\d+) kB", f.read()).group(1)) * 1024
                limit = vm + headroom_mib * 2**20
                resource.prlimit(proc.pid, resource.RLIMIT_AS, (limit, limit))
                proc.send_signal(signal.SIGTERM)
                out = proc.communicate(timeout=60)[0]
                self.assertEqual(proc.returncode, 0, out[-3000:])
                self.assertNotIn("terminate called", out)
                self.assertIn("signal 15: finishing open streams", out)


if __name__ == "__main__":
    unittest.main()
