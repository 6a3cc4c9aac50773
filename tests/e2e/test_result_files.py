"""Result files deleted while the server writes them (a cleanup job, logrotate, a user's rm): the
server notices before the next row, reopens them as new files, logs what vanished, and counts
the calls whose rows went to the vanished files (parity_server_result_rows_lost_total{reason=
"vanished"}). Before (issue 65), every later row went to the unlinked files: 8,507 calls checked
after the unlink, no record in the folder, nothing counted or logged.

The training deletes the files itself, after its first steps' verdicts came back (flush: the
server writes a call's rows before its verdict), so nothing here depends on timing."""
import glob
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

TRAIN = r'''
import glob, os, sys
import torch
sys.path.append(sys.argv[3])
import parity
out = sys.argv[2]
torch.manual_seed(0)
w = torch.randn(32, 32, requires_grad=True)
debugger = parity.PrecisionDebugger(sys.argv[1])
for step in range(6):
    debugger.start()
    loss = torch.nn.functional.gelu(torch.randn(8, 32) @ w).sum()
    loss.backward()
    debugger.stop()
    debugger.step()
    if step == 2:
        assert debugger.flush(120)
        for path in glob.glob(os.path.join(out, "*")):
            os.remove(path)
        print("DELETED", flush=True)
debugger.close()
'''


class ResultFilesTest(unittest.TestCase):
    def test_deleted_result_files_are_reopened_and_the_loss_counted(self):
        work = harness.tempdir("parity_result_files_")
        server = harness.Server(work)
        try:
            script, config = harness.script_against(work, server, TRAIN)
            r = harness.run([harness.PYTHON, script, config, server.out,
                             os.path.join(harness.ROOT, "python")])
            lost = server.metric("parity_server_result_rows_lost_total", reason="vanished")
            checked = server.metric("parity_server_calls_checked_total", phase="forward",
                                    verdict="pass")
        finally:
            server.stop()
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr[-4000:])
        self.assertIn("DELETED", r.stdout)
        records = server.records()
        # The new files hold the calls of steps 3-5, whole; none of steps 0-2 (deleted).
        steps = sorted({rec["step"] for rec in records})
        self.assertEqual(steps, [3, 4, 5], steps)
        per_step = len([rec for rec in records if rec["step"] == 3])
        self.assertGreater(per_step, 2)
        self.assertGreater(checked, 0)
        # The calls of steps 0-2 whose rows were in the deleted files: counted, and logged once.
        self.assertEqual(lost, 3 * per_step)
        log = server.read_log()
        self.assertEqual(log.count("were deleted or replaced while the server wrote them"), 1, log)
        for name in ("accuracy_checking_result", "accuracy_checking_details",
                     "api_precision_compare_result", "api_precision_compare_details"):
            paths = glob.glob(os.path.join(server.out, f"{name}_*_rank0.csv"))
            self.assertEqual(len(paths), 1, name)
            with open(paths[0], encoding="utf-8-sig") as f:
                first = f.readline()
            self.assertTrue(first.startswith(("API name", "API Name")), (name, first))


if __name__ == "__main__":
    unittest.main()
