"""parity.report on result files written here: counts, the first error with its failing metric,
exit status, and a line cut by a crash."""
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from parity import report  # noqa: E402


def record(op, phase, status, step, seq, **extra):
    r = {"op": op, "api": f"{op}.0", "phase": phase, "status": status, "step": step, "rank": 0,
         "sequence": seq, "call_index": 0, "module_path": "", "outputs": []}
    r.update(extra)
    return r


class ReportTest(unittest.TestCase):
    def write(self, records, tail=""):
        d = tempfile.mkdtemp(prefix="parity_report_")
        with open(os.path.join(d, "parity_results_20260101000000_rank0.jsonl"), "w",
                  encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records) + tail)
        return d

    def run_report(self, d):
        out = io.StringIO()
        status = report.summarise(d, out=out)
        return status, out.getvalue()

    def test_counts_and_first_error_with_its_metric(self):
        bad = {"index": 0, "status": "error", "standard": "benchmark", "failed_metric": "rmse",
               "metrics": {"ratio_rmse": 3.5, "ratio_max_rel_error": 40.0}}
        d = self.write([
            record("aten::add", "forward", "pass", 0, 1),
            record("aten::gelu", "forward", "error", 1, 7, module_path="act", outputs=[bad]),
            record("aten::gelu", "forward", "error", 0, 3, module_path="act", outputs=[bad]),
            record("aten::gelu_backward", "backward", "warning", 0, 9, forward_op="aten::gelu"),
            record("aten::empty", "forward", "SKIP", 0, 2),
        ], tail='{"op": "aten::cut-by-a-cra')
        status, text = self.run_report(d)
        self.assertEqual(status, 1)
        self.assertIn("calls checked : 5 (4 distinct ops, 1 rank(s), steps 0-1)", text)
        self.assertIn("1 pass, 1 warning, 2 error, 1 skip", text)
        self.assertIn("first error   : aten::gelu.0 forward, step 0, module act: output 0: rmse "
                      "ratio 3.5; worst ratio max_rel_error 40 (benchmark standard)", text)
        self.assertIn("errors by op  : aten::gelu forward x2", text)
        # The second error is listed under its own label, after the first and before the op
        # counts, never as a continuation of the counts.
        lines = text.splitlines()
        first = next(i for i, l in enumerate(lines) if l.startswith("  first error"))
        self.assertTrue(lines[first + 1].startswith("  next errors   : aten::gelu.0 forward, "
                                                    "step 1"), lines[first + 1])
        self.assertTrue(lines[first + 2].startswith("  errors by op  :"), lines[first + 2])
        # The cut line is skipped and said so, with where it is.
        self.assertRegex(text, r"skipped       : 1 malformed line\(s\), not counted above "
                               r"\(first: .*parity_results_20260101000000_rank0\.jsonl:6\)")

    def test_a_row_glued_onto_a_cut_one_is_skipped_and_counted(self):
        # What a full disk left before result rows were truncated back: a cut row with the next
        # one appended onto it (one line), then whole rows again.
        glued = json.dumps(record("aten::zeros", "forward", "pass", 0, 2))[:40] + \
            json.dumps(record("aten::zeros", "forward", "pass", 0, 3))
        d = self.write([record("aten::add", "forward", "pass", 0, 1)],
                       tail=glued + "\n" + json.dumps(record("aten::add", "forward", "pass", 0, 4))
                       + "\n")
        status, text = self.run_report(d)
        self.assertEqual(status, 0)
        self.assertIn("calls checked : 2 ", text)
        self.assertIn("skipped       : 1 malformed line(s)", text)

    def test_clean_results_exit_zero_and_missing_results_exit_two(self):
        status, text = self.run_report(self.write([record("aten::mm", "forward", "pass", 0, 1)]))
        self.assertEqual(status, 0)
        self.assertIn("errors        : none", text)
        status, text = self.run_report(tempfile.mkdtemp())
        self.assertEqual(status, 2)
        self.assertIn("no results", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
