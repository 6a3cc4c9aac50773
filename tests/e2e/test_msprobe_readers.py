"""msprobe's own readers of the result files, applied to the files of a clean bf16 training (the
example Llama under bf16 autocast, checked exhaustively by the real server); and msprobe's API
names taken from the Python call site.

The readers are msprobe's (mstt, debug/accuracy_tools/msprobe/pytorch/api_accuracy_checker),
restated here from their code, not imported (msprobe is not installable on this machine):
- api_precision_compare reads accuracy_checking_details_*: it requires its columns, and splits
  each `API Name` on dots into Type.api.order.direction.output.i (6 parts) or
  Type.prefix.api.order.direction.output.i (7 parts: `Torch.linalg.norm`); any other name is
  "invalid" and its row skipped;
- the run_ut summary reads accuracy_checking_result_*: at least 3 cells a row, the 2nd and 3rd
  one of pass, error, Warning, SKIP, skip or a single space, else it raises; it counts an API
  as passed, forward/backward failed, or warning;
- the API name of a result row splits into Type.api.order (3) or Type.prefix.api.order (4);
- a direction's status over its output rows is get_api_checker_result: none " ", all SKIP
  "SKIP", any error "error", else any Warning "Warning", else "pass". Parity's differs in one
  case: a direction with a call that was not checked (SKIP) and no error or Warning reads SKIP,
  never pass (parity_direction).
"""
import collections
import csv
import glob
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

# api_precision_compare's required columns of a details file (ApiPrecisionCompareColumn).
REQUIRED_DETAIL_COLUMNS = [
    "API Name", "DEVICE Dtype", "小值域错误占比", "均方根误差", "相对误差最大值", "相对误差平均值",
    "误差均衡性", "二进制一致错误率", "inf/nan错误率", "相对误差错误率", "绝对误差错误率", "ULP误差平均值",
    "ULP误差大于阈值占比", "双千指标", "Shape", "Message"]
SUMMARY_CELLS = {"pass", "error", "Warning", " ", "SKIP", "skip"}


def detailed_segments(name):
    """(api, full name, direction) as msprobe's extract_detailed_api_segments splits a details
    row's name; None for a name it calls invalid."""
    parts = name.split(".")
    if len(parts) == 6:
        kind, api, order, direction = parts[:4]
    elif len(parts) == 7:
        kind, prefix, api, order, direction = parts[:5]
        api = prefix + "." + api
    else:
        return None
    return api, ".".join(parts[:-3]), direction


def basic_segments(full_name):
    """msprobe's extract_basic_api_segments: the API of "Torch.matmul.0" / "Torch.linalg.norm.0"."""
    parts = full_name.split(".")
    if len(parts) == 3:
        return parts[1]
    if len(parts) == 4:
        return parts[1] + "." + parts[2]
    return None


def checker_result(statuses):
    """msprobe's get_api_checker_result."""
    if not statuses:
        return " "
    if all(s == "SKIP" for s in statuses):
        return "SKIP"
    for s in ("error", "Warning"):
        if s in statuses:
            return s
    return "pass"


def parity_direction(statuses):
    """Parity's direction cell: msprobe's, except that an unchecked call makes it SKIP, not pass."""
    result = checker_result(statuses)
    return "SKIP" if result == "pass" and "SKIP" in statuses else result


def summary_counts(rows):
    """The run_ut summary's statistics of a result file; raises where msprobe raises."""
    counts = collections.Counter()
    for row in rows:
        if len(row) < 3:
            raise ValueError(f"the number of columns is incorrect: {row}")
        if not all(row[i] and row[i] in SUMMARY_CELLS for i in (1, 2)):
            raise ValueError(f"the 2nd or 3rd column is wrong: {row}")
        forward, backward = row[1], row[2]
        if forward.upper() == "SKIP":
            counts["skip"] += 1
            continue
        counts["total"] += 1
        if forward == "pass" and backward in ("pass", " "):
            counts["success"] += 1
        elif "error" in (forward, backward):
            counts["error"] += 1
        elif "Warning" in (forward, backward):
            counts["warning"] += 1
    return counts


def read_rows(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))


class MsprobeReadersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        server, cls.proc = harness.train_against_server(
            "parity-readers-", os.path.join(harness.ROOT, "docs", "examples", "train_llama.py"),
            ["--steps", "2", "--autocast", "bf16"])
        server.stop()  # the stream's end and the server's exit write every result row
        cls.out = server.out
        cls.records = server.records()

    def files(self, prefix):
        paths = sorted(glob.glob(os.path.join(self.out, prefix + "_*_rank0.csv")))
        self.assertEqual(len(paths), 1, paths)
        return read_rows(paths[0])

    def test_the_training_ran_and_was_checked(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertGreater(len(self.records), 200)
        self.assertEqual({r.get("autocast") for r in self.records if r["phase"] == "forward"
                          and r["op"] == "aten::linear"}, {"torch.bfloat16"})

    def test_api_precision_compare_parses_every_details_row(self):
        for prefix in ("accuracy_checking_details", "api_precision_compare_details"):
            with self.subTest(prefix):
                header, *rows = self.files(prefix)
                if prefix == "accuracy_checking_details":
                    missing = [c for c in REQUIRED_DETAIL_COLUMNS if c not in header]
                    self.assertEqual(missing, [])
                self.assertGreater(len(rows), 200)
                for row in rows:
                    seg = detailed_segments(row[0])
                    self.assertIsNotNone(seg, f"msprobe calls {row[0]!r} invalid")
                    self.assertIn(seg[2], ("forward", "backward"), row[0])
                    self.assertIsNotNone(basic_segments(seg[1]), row[0])
                    self.assertTrue(row[0].split(".")[0][0].isupper(), row[0])  # Functional, ...

    def test_the_summary_reads_the_result_files_and_finds_no_error_in_a_clean_run(self):
        for prefix in ("accuracy_checking_result", "api_precision_compare_result"):
            with self.subTest(prefix):
                header, *rows = self.files(prefix)
                counts = summary_counts(rows)  # raises where msprobe's summary raises
                self.assertGreater(counts["success"], 50, counts)
                self.assertEqual(counts["error"], 0, [r for r in rows if "error" in r[1:3]])
                for row in rows:
                    self.assertIsNotNone(basic_segments(row[0]), row[0])
        # No output row of a call whose verdict is pass says error or Warning.
        header, *rows = self.files("accuracy_checking_details")
        status = header.index("Status")
        self.assertEqual([r for r in rows if r[status] in ("error", "Warning")], [])

    def test_one_result_row_per_api_and_step_with_both_directions(self):
        # What the rows must be, from the JSON lines (one per call, with Parity's names and the
        # CSV's): per step and API, msprobe's aggregation of each direction.
        by_api = collections.OrderedDict()
        for r in self.records:
            key = (r["step"], r["csv_api"])
            entry = by_api.setdefault(key, {"forward": [], "backward": []})
            entry[r["phase"]].append(r["status"])
        expected = collections.Counter(
            (api, parity_direction(e["forward"]), parity_direction(e["backward"]))
            for (_, api), e in by_api.items())
        _, *rows = self.files("accuracy_checking_result")
        self.assertEqual(collections.Counter((r[0], r[1], r[2]) for r in rows), expected)
        # Linear layers: forward and backward on one row, under msprobe's API name
        # (Functional.linear), not the aten operator's.
        linear = [r for r in rows if r[0].startswith("Functional.linear.")]
        self.assertTrue(linear)
        self.assertTrue(all(r[1] == "pass" and r[2] == "pass" for r in linear), linear[:3])
        self.assertFalse([r for r in rows if r[0].startswith("aten::")])

    def test_bench_dtype_is_what_the_device_output_was_compared_against(self):
        # The two details files have a row each per output, in the same order; the precision
        # file's 比对算法 names the standard that judged it.
        header, *rows = self.files("accuracy_checking_details")
        p_header, *p_rows = self.files("api_precision_compare_details")
        self.assertEqual([r[0] for r in rows], [r[0] for r in p_rows])
        bench, device = header.index("Bench Dtype"), header.index("DEVICE Dtype")
        algorithm = p_header.index("比对算法")
        pairs = collections.Counter((p[algorithm], r[device], r[bench]) for r, p in zip(rows, p_rows)
                                    if r[device] == "torch.bfloat16")
        for (alg, _, reference), n in pairs.items():
            if alg == "二进制一致法":  # exact ops: against the bench, at the device's dtype
                self.assertEqual(reference, "torch.bfloat16", (alg, n))
            elif alg in ("标杆比对法", "ULP误差比对法", "绝对阈值法"):  # against the upcast golden
                self.assertIn(reference, ("torch.float32", "torch.float64"), (alg, n))
        self.assertTrue(any(alg == "标杆比对法" and ref in ("torch.float32", "torch.float64")
                            for (alg, _, ref) in pairs), pairs)


CALL_SITE_TRAINING = """
import sys
import torch
import torch.nn.functional as F
from parity import PrecisionDebugger

debugger = PrecisionDebugger(sys.argv[1])
x = torch.randn(4, 8, requires_grad=True)
w = torch.randn(3, 8, requires_grad=True)
for _ in range(2):
    debugger.start()
    y = F.linear(x, w)
    a = y.add(1.0)          # Tensor.add
    b = torch.add(a, 2.0)   # Torch.add
    c = b.add(3.0)          # Tensor.add, the second
    m = torch.mm(c, w)      # Torch.mm (torch.dsmm and torch.spmm are the same function)
    loss = c.view(-1).sum().mul(m.sum())
    loss.backward()
    debugger.stop()
    debugger.step()
debugger.close()
"""


class CallSiteNamesTest(unittest.TestCase):
    """msprobe names a call after the Python function called (x.add: Tensor.add; torch.add:
    Torch.add), counting each apart; the dispatcher sees aten::add for both. With
    parity.api_names "call_site" (the default) the rows say what msprobe's say; "operator"
    names them from the operator."""

    def rows(self, api_names):
        workdir = harness.tempdir("parity-call-site-")
        script = os.path.join(workdir, "train.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(CALL_SITE_TRAINING)
        server = harness.Server(workdir)
        try:
            config = harness.agent_config(os.path.join(workdir, "config.json"), server.port,
                                          policy="block", api_names=api_names)
            r = harness.run([harness.PYTHON, script, config],
                            env={"PYTHONPATH": os.path.join(harness.ROOT, "python")})
        finally:
            server.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        paths = glob.glob(os.path.join(server.out, "accuracy_checking_result_*_rank0.csv"))
        self.assertEqual(len(paths), 1)
        return [tuple(row[:3]) for row in read_rows(paths[0])[1:]], server.records()

    def test_the_call_site_names_each_call_as_msprobe_does(self):
        rows, records = self.rows("call_site")
        # Each step the same rows (call indices restart), but for the engine's gradient
        # accumulation: detach in the first step, add_ after it.
        rows = [r for r in rows if not r[0].startswith("Aten.")]
        step = rows[:len(rows) // 2]
        self.assertEqual(rows[len(rows) // 2:], step)
        names = [name for name, _, _ in step]
        for name in ("Functional.linear.0", "Tensor.add.0", "Torch.add.0", "Tensor.add.1",
                     "Tensor.view.0", "Tensor.sum.0", "Torch.mm.0"):
            self.assertIn(name, names)
        self.assertFalse([n for n in names if "dsmm" in n or "spmm" in n], names)
        # Linked backward calls carry their forward call's API: view's reshape, linear's mm.
        self.assertIn(("Tensor.view.0", "pass", "pass"), step)
        self.assertIn(("Functional.linear.0", "pass", "pass"), step)
        adds = [r for r in records if r["op"] == "aten::add" and r["phase"] == "forward"]
        self.assertEqual(sorted((r["step"], r["csv_api"]) for r in adds),
                         [(s, n) for s in (0, 1)
                          for n in ("Tensor.add.0", "Tensor.add.1", "Torch.add.0")])
        self.assertTrue(all(r["api"].startswith("aten::add.") for r in adds))  # Parity's own

    def test_operator_names_come_from_the_operator(self):
        rows, _ = self.rows("operator")
        names = [name for name, _, _ in rows[:len(rows) // 2]]
        for name in ("Functional.linear.0", "Torch.add.0", "Torch.add.1", "Torch.add.2",
                     "Torch.view.0", "Torch.sum.0", "Torch.mm.0"):
            self.assertIn(name, names)
        self.assertFalse([n for n in names if n.startswith("Tensor.")])


if __name__ == "__main__":
    unittest.main()
