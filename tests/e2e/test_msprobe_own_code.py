"""msprobe 8.1.1's own code on Parity's result files: api_precision_compare (msprobe's judge of
an NPU run against a GPU run, both as accuracy_checking_details files) imported from PyPI's
mindstudio-probe 8.1.1, not restated. Its NPU file is Parity's accuracy_checking_details (the
device against the golden); its GPU file the same rows with the bench's metrics against the same
golden (every metric Parity's JSON record holds as bench_*). msprobe then judges every API as it
would have from two offline runs, and its verdicts are compared with Parity's own
(api_precision_compare_result): the same for every API whose standard both apply alike, and
each difference one that docs/migration.md names. One step: api_precision_compare refuses a file
holding an API name twice ("has multiple records"), and names repeat from step to step, in
msprobe's files as in Parity's.

Needs msprobe's environment (scripts/msprobe-venv.sh: PyPI, so not part of .ci/run); skipped
without it, saying so. PARITY_MSPROBE_PYTHON names another interpreter with msprobe 8.1.1.
"""
import collections
import csv
import glob
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from test_msprobe_readers import checker_result  # noqa: E402  (msprobe's get_api_checker_result)

MSPROBE_PYTHON = os.environ.get("PARITY_MSPROBE_PYTHON",
                                "/var/cache/parity-msprobe/venv/bin/python")
# The details file's metric columns and the JSON record's bench metrics they hold in the GPU file.
BENCH_COLUMNS = {
    "余弦相似度": "bench_cosine", "最大绝对误差": "bench_max_abs_error",
    "双百指标": "bench_hundredth_ratio", "双千指标": "bench_thousandth_ratio",
    "双万指标": "bench_ten_thousandth_ratio", "二进制一致错误率": "bench_mismatch_rate",
    "误差均衡性": "bench_error_balance", "均方根误差": "bench_rmse",
    "小值域错误占比": "bench_small_value_error_ratio", "相对误差最大值": "bench_max_rel_error",
    "相对误差平均值": "bench_mean_rel_error", "inf/nan错误率": "bench_inf_nan_error_rate",
    "相对误差错误率": "bench_rel_error_rate", "绝对误差错误率": "bench_abs_error_rate",
    "ULP误差最大值": "bench_ulp_max", "ULP误差平均值": "bench_ulp_mean",
    "ULP误差大于阈值占比": "bench_ulp_over_threshold_ratio",
}
RUN = """
import sys
from msprobe.pytorch.api_accuracy_checker.compare.api_precision_compare import (
    CompareConfig, api_precision_compare)
api_precision_compare(CompareConfig(*sys.argv[1:5]))
"""


def msprobe_available():
    if not os.path.exists(MSPROBE_PYTHON):
        return False
    r = subprocess.run([MSPROBE_PYTHON, "-c", "import msprobe.pytorch.api_accuracy_checker"],
                       capture_output=True, check=False)
    return r.returncode == 0


def read_csv(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path, rows, columns):
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        w.writerows(rows)


def gpu_rows(details, records):
    """The details rows with the bench's metrics: the rows follow the records' outputs in order."""
    outputs = [o for r in records for o in r["outputs"]]
    assert len(outputs) == len(details), (len(outputs), len(details))
    rows = []
    for row, output in zip(details, outputs):
        assert row["DEVICE Dtype"] == output.get("value_type", output["dtype"]), (row, output)
        gpu = dict(row)
        for column, metric in BENCH_COLUMNS.items():
            value = output["metrics"].get(metric)
            gpu[column] = " " if value is None else repr(value)
        rows.append(gpu)
    return rows


# The trainings judged: a clean MLP, the same with a planted gelu fault (errors for both to
# agree on), and the example Llama under bf16 autocast (the ULP standard's GEMMs): one step each.
WORKLOADS = {
    "mlp": ("train_mlp.py", []),
    "mlp, gelu fault": ("train_mlp.py", ["--fault", "gelu_tanh"]),
    "llama bf16": ("train_llama.py", ["--autocast", "bf16"]),
}


class Judged:
    """One training's result files, judged again by msprobe's api_precision_compare."""

    def __init__(self, script, args):
        server, self.proc = harness.train_against_server(
            "parity-msprobe-code-", os.path.join(harness.ROOT, "docs", "examples", script),
            ["--steps", "1"] + args)
        server.stop()
        out = server.out
        details_path = glob.glob(os.path.join(out, "accuracy_checking_details_*_rank0.csv"))[0]
        records = sorted(server.records(), key=lambda r: (r["step"], r["sequence"]))
        gpu_path = os.path.join(out, "gpu_details.csv")
        with open(details_path, encoding="utf-8-sig") as f:
            columns = next(csv.reader(f))
        self.npu = {r["API Name"]: r for r in read_csv(details_path)}
        self.gpu = {r["API Name"]: r for r in gpu_rows(read_csv(details_path), records)}
        write_csv(gpu_path, list(self.gpu.values()), columns)
        self.msprobe_details = os.path.join(out, "msprobe_details.csv")
        self.msprobe_result = os.path.join(out, "msprobe_result.csv")
        self.compare = subprocess.run([MSPROBE_PYTHON, "-c", RUN, details_path, gpu_path,
                                       self.msprobe_result, self.msprobe_details],
                                      capture_output=True, text=True, check=False, cwd=out)
        self.parity = read_csv(glob.glob(os.path.join(
            out, "api_precision_compare_result_*_rank0.csv"))[0])

    def documented(self, api, column):
        """Why msprobe's verdict of one API's direction differs from Parity's, when the reason is
        one docs/standard.md gives ("Where Parity decides differently"), else None. Each output
        row msprobe judged error must be one of them."""
        direction = "forward" if column.startswith("Forward") else "backward"
        prefix = f"{api}.{direction}.output."
        reasons = set()
        for row in read_csv(self.msprobe_details):
            if not row["API Name"].startswith(prefix) or row["比对结果"] != "error":
                continue
            npu, gpu = self.npu[row["API Name"]], self.gpu[row["API Name"]]
            rates = ("inf/nan错误率", "相对误差错误率", "绝对误差错误率")
            if row["比对算法"] == "绝对阈值法" and all(
                    # (the details file rounds to 14 digits; the bench's are written in full)
                    float(npu[r] or 0) <= float(gpu[r] or 0) + 1e-13 for r in rates):
                # msprobe asks the device's rates to be 0; Parity passes a device no worse than
                # the bench (a bfloat16 output's rounding alone puts every small element over
                # the absolute-threshold standard's atol of 1e-16, on the bench as on the device).
                reasons.add("no worse than the bench passes (docs/standard.md, 2)")
            else:
                return None
        return "; ".join(sorted(reasons)) or None

    def msprobe_verdicts(self):
        """msprobe's result rows, each direction's cells combined per API.

        msprobe writes a row each time its details turn to another API and direction (a forward
        row, then a backward row, and again where backward calls interleave); Parity one row per
        API and step. The cells combine as msprobe's get_api_checker_result combines statuses."""
        cells = collections.defaultdict(lambda: collections.defaultdict(list))
        for row in read_csv(self.msprobe_result):
            for column in ("Forward Test Success", "Backward Test Success"):
                if row[column].strip():
                    cells[row["API Name"]][column].append(row[column].strip())
        return {name: {column: checker_result(statuses) for column, statuses in by_column.items()}
                for name, by_column in cells.items()}


@unittest.skipUnless(msprobe_available(), "msprobe 8.1.1 not installed: run "
                     "scripts/msprobe-venv.sh (PyPI) or set PARITY_MSPROBE_PYTHON")
class MsprobeOwnCodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.judged = {name: Judged(*workload) for name, workload in WORKLOADS.items()}

    def test_msprobe_read_every_row(self):
        for name, j in self.judged.items():
            with self.subTest(name):
                self.assertEqual(j.proc.returncode, 0, j.proc.stderr[-2000:])
                self.assertEqual(j.compare.returncode, 0, j.compare.stderr[-3000:])
                self.assertNotIn("Error", j.compare.stdout + j.compare.stderr)
                ours = {r["API Name"]: r for r in j.parity}
                theirs = set(j.msprobe_verdicts())
                self.assertLessEqual(theirs, set(ours))
                # An API with no output row (aten::empty: nothing to compare) is in Parity's
                # result as SKIP; msprobe's compare sees no row of it.
                for api in set(ours) - theirs:
                    self.assertEqual(ours[api]["Forward Test Success"], "SKIP", api)

    def test_msprobes_verdicts_are_paritys(self):
        for name, j in self.judged.items():
            theirs = j.msprobe_verdicts()
            agree, explained, differ = collections.Counter(), collections.Counter(), []
            for ours in j.parity:
                mine = theirs.get(ours["API Name"])
                if mine is None:
                    continue  # no output row: SKIP in Parity's file (test_msprobe_read_every_row)
                for column in ("Forward Test Success", "Backward Test Success"):
                    a, b = ours[column].strip(), mine.get(column, "").strip()
                    if a == b:
                        agree[a or "none"] += 1
                    elif a == "pass" and b == "error" and j.documented(ours["API Name"], column):
                        explained[j.documented(ours["API Name"], column)] += 1
                    else:
                        differ.append((ours["API Name"], column, a, b))
            print(f"\n{name}: msprobe's api_precision_compare on Parity's files: agree "
                  f"{dict(agree)}, differ as documented {dict(explained)}, otherwise "
                  f"{len(differ)}", file=sys.stderr)
            for d in differ:
                print("  ", d, file=sys.stderr)
            with self.subTest(name):
                self.assertGreater(sum(agree.values()), 20)
                self.assertEqual(differ, [])
                if "fault" in name:
                    self.assertGreater(agree["error"], 0)


# docs/migration.md's claims about msprobe, read from msprobe 8.1.1's own source files (parsed,
# not imported: its run_ut needs twisted): each quoted function or class as its file has it.
SOURCES = r"""
import ast, json, os, sys
import msprobe
root = os.path.dirname(msprobe.__file__)
def source(relative, *names):
    path = os.path.join(root, *relative.split("/"))
    text = open(path, encoding="utf-8").read()
    node = ast.parse(text)
    for name in names:
        node = next(n for n in ast.walk(node) if getattr(n, "name", None) == name)
    return ast.get_source_segment(text, node)
print(json.dumps({
    "RunUTConfig": source("pytorch/pt_config.py", "RunUTConfig", "__init__"),
    "_iter_tracer": source("pytorch/debugger/precision_debugger.py", "_iter_tracer"),
    "_param_warning": source("pytorch/debugger/precision_debugger.py", "_param_warning"),
    "do_save_error_data": source("pytorch/api_accuracy_checker/run_ut/run_ut.py",
                                 "do_save_error_data"),
    "UT_ERROR_DATA_DIR": open(os.path.join(root, "pytorch", "api_accuracy_checker", "run_ut",
                                           "run_ut.py"), encoding="utf-8").read(),
    "config_yaml": open(os.path.join(root, "pytorch", "api_accuracy_checker", "config.yaml"),
                        encoding="utf-8").read(),
    "docs_08": open(os.path.join(root, "docs", "08.accuracy_checker_online_PyTorch.md"),
                    encoding="utf-8").read(),
}))
"""


@unittest.skipUnless(msprobe_available(), "msprobe 8.1.1 not installed: scripts/msprobe-venv.sh")
class MigrationClaimsTest(unittest.TestCase):
    """What docs/migration.md says msprobe does, against msprobe's code (issue 66, item 8)."""

    @classmethod
    def setUpClass(cls):
        r = subprocess.run([MSPROBE_PYTHON, "-c", SOURCES], capture_output=True, text=True,
                           check=True)
        cls.src = json.loads(r.stdout)

    def test_run_ut_has_no_precision_key_its_decimals_are_its_config_yaml(self):
        self.assertNotIn("precision", self.src["RunUTConfig"])
        self.assertIn("precision: 14", self.src["config_yaml"])

    def test_enable_dataloader_drives_start_stop_and_step_from_next(self):
        self.assertIn("enable_dataloader", self.src["_param_warning"])
        self.assertIn("_BaseDataLoaderIter.__next__", self.src["_param_warning"])
        tracer = self.src["_iter_tracer"]
        for call in ("debugger_instance.stop()", "debugger_instance.step()",
                     "debugger_instance.start()", "first_start"):
            self.assertIn(call, tracer)
        # stop() and step() before the batch is fetched, start() after: as Parity does.
        self.assertLess(tracer.index("stop()"), tracer.index("func(*args, **kwargs)"))
        self.assertLess(tracer.index("func(*args, **kwargs)"), tracer.index("start()"))

    def test_online_error_data_path_has_no_effect_and_offline_names_are_not_paritys(self):
        self.assertIn("在线预检模式下该参数不生效", self.src["docs_08"])
        saved = self.src["do_save_error_data"]
        for name in (".forward.input", ".forward.output.bench", ".forward.output.device",
                     ".backward.output.bench"):
            self.assertIn(name, saved)
        self.assertIn("UT_ERROR_DATA_DIR = 'ut_error_data'", self.src["UT_ERROR_DATA_DIR"])
        with open(os.path.join(harness.ROOT, "docs", "migration.md"), encoding="utf-8") as f:
            migration = f.read()
        self.assertIn("{api}.forward.input.{i}.pt", migration)
        self.assertNotIn("msprobe-style error data", migration)


if __name__ == "__main__":
    unittest.main()
