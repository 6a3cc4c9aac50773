"""The arm64 agent end to end (run by scripts/aarch64-check.sh, which builds what it needs): a tiny
real training, arm64 Python and torch from Debian's archive running under qemu-user with the
cross-built agent (both halves), checked over mutual TLS by this machine's x86 parity-server.

Environment: PARITY_AARCH64_WORK (the root in rootfs/, the cross build in build/), and the x86
build as for every e2e test (PARITY_BUILD_DIR).
"""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

WORK = os.environ.get("PARITY_AARCH64_WORK", os.path.join(harness.ROOT, "build-aarch64"))
SYSROOT = os.path.join(WORK, "rootfs")
XBUILD = os.path.join(WORK, "build")


def machine(path):
    """The ELF machine readelf reports for `path` ("AArch64", "Advanced Micro Devices X86-64")."""
    out = subprocess.run(["readelf", "-h", path], capture_output=True, text=True, check=True)
    return re.search(r"Machine:\s+(.*)", out.stdout).group(1).strip()


class Aarch64TrainingTest(unittest.TestCase):
    def test_a_tiny_training_on_arm64_is_checked_by_the_x86_server(self):
        agent = os.path.join(XBUILD, "agent", "libparity_agent.so")
        transport = os.path.join(XBUILD, "agent", "libparity_transport.so")
        self.assertEqual(machine(agent), "AArch64")
        self.assertEqual(machine(transport), "AArch64")
        self.assertIn("X86-64", machine(harness.SERVER))
        workdir = harness.tempdir("parity-aarch64-")
        server_tls, client_tls = harness.make_certs(os.path.join(workdir, "certs"))
        server = harness.Server(workdir, server_tls)
        try:
            config = harness.agent_config(os.path.join(workdir, "config.json"), server.port,
                                          client_tls, policy="block")
            env = dict(os.environ, PARITY_AGENT_LIB=agent,
                       PYTHONPATH=os.path.join(harness.ROOT, "python"))
            env.pop("PARITY_TEST_FLOAT32_GEMMS", None)  # an x86 library; not loaded here
            r = subprocess.run(
                ["qemu-aarch64-static", "-L", SYSROOT, os.path.join(SYSROOT, "usr/bin/python3"),
                 "-c", "import platform; print('machine:', platform.machine())"],
                env=env, capture_output=True, text=True, timeout=300, check=False)
            self.assertIn("machine: aarch64", r.stdout, r.stderr)
            r = subprocess.run(
                ["qemu-aarch64-static", "-L", SYSROOT, os.path.join(SYSROOT, "usr/bin/python3"),
                 os.path.join(harness.ROOT, "docs", "examples", "train_mlp.py"),
                 "--config", config, "--steps", "2"],
                env=env, capture_output=True, text=True, timeout=1800, check=False)
            print(r.stderr[-3000:], flush=True)
        finally:
            server.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        summary = re.search(r"session ended at step \d+: (\d+) captured, (\d+) sent .*?verdicts: "
                            r"(\d+) pass, (\d+) warning, (\d+) error", r.stderr)
        self.assertIsNotNone(summary, r.stderr[-3000:])
        captured, sent, passed, _, errors = (int(g) for g in summary.groups())
        self.assertGreater(captured, 20)
        self.assertEqual(sent, captured)  # policy block: nothing dropped
        self.assertGreater(passed, 0)
        self.assertEqual(errors, 0)
        records = server.records()
        self.assertEqual(len(records), captured)
        self.assertTrue(any(x["op"] == "aten::linear" and x["phase"] == "forward"
                            for x in records))
        self.assertTrue(any(x["phase"] == "backward" for x in records))
        print(f"arm64 training: {captured} calls captured and sent, {passed} pass, "
              f"{errors} error; the server wrote {len(records)} records", flush=True)


if __name__ == "__main__":
    unittest.main()
