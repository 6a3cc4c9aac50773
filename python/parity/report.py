"""A readable summary of a Parity server's results (and, optionally, its live metrics).

    python3 -m parity.report RESULTS_DIR [RESULTS_DIR ...] [--metrics URL] [--errors N]

Several folders (one per server of a run spread over several servers) are merged into one
summary. Reads the servers' parity_results_*.jsonl (every call, with the metric that failed) and lists the
CSV files a user opens next. Exit status: 0 when no call was judged error, 1 when some were, 2
when there are no results to read. It reads files only: the agent is not loaded.
"""
import argparse
import collections
import glob
import json
import os
import sys
import urllib.request


def _dirs(results_dirs):
    return [results_dirs] if isinstance(results_dirs, str) else list(results_dirs)


def load_records(results_dirs, malformed=None):
    """Every record of one or several servers' result folders. Lines that are not a JSON record
    (cut by a crash or a full disk) are skipped, the rest of the file still counts; when
    `malformed` is a list, each skipped line's "path:line" is appended to it."""
    records = []
    paths = []
    for d in _dirs(results_dirs):
        paths += sorted(glob.glob(os.path.join(d, "parity_results_*.jsonl")))
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if line:
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        record = None
                    if isinstance(record, dict):
                        records.append(record)
                    elif malformed is not None:
                        malformed.append(f"{path}:{number}")
    return records


def failed_metric(record):
    """'output 0: rmse ratio 3.53 (benchmark standard)' for the first failing output."""
    for out in record.get("outputs", []):
        if out.get("status") != "error":
            continue
        name = out.get("failed_metric") or "?"
        metrics = out.get("metrics", {})
        value = metrics.get(f"ratio_{name}", metrics.get(name))
        shown = f"{name} {'ratio ' if f'ratio_{name}' in metrics else ''}{value:.4g}" \
            if isinstance(value, (int, float)) else name
        worst = max(((k[len("ratio_"):], v) for k, v in metrics.items()
                     if k.startswith("ratio_") and isinstance(v, (int, float))),
                    key=lambda kv: kv[1], default=None)
        if worst and worst[0] != name:
            shown += f"; worst ratio {worst[0]} {worst[1]:.4g}"
        return f"output {out.get('index', 0)}: {shown} ({out.get('standard', '?')} standard)"
    return record.get("message") or "?"


def describe(record):
    where = f"{record.get('api', record.get('op'))} {record.get('phase')}, step {record.get('step')}"
    if record.get("rank"):
        where += f", rank {record['rank']}"
    if record.get("module_path"):
        where += f", module {record['module_path']}"
    if record.get("phase") == "backward" and record.get("op") != record.get("forward_op"):
        where += f" (backward op {record.get('op')})"
    return f"{where}: {failed_metric(record)}"


def scrape(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode("utf-8")
    except OSError as e:
        return None, str(e)
    return [line for line in text.splitlines()
            if line.startswith(("parity_server_calls_checked_total", "parity_server_op_errors"))
            and not line.rstrip().endswith(" 0")], None


def summarise(results_dir, metrics_url=None, max_errors=5, out=sys.stdout):
    malformed = []
    records = load_records(results_dir, malformed)
    dirs = _dirs(results_dir)
    results_dir = ", ".join(dirs)
    if not records:
        print(f"no results in {results_dir} (parity_results_*.jsonl)", file=out)
        return 2
    verdicts = collections.Counter(r.get("status", "?").lower() for r in records)
    ops = {r.get("op") for r in records}
    errors = sorted((r for r in records if r.get("status") == "error"),
                    key=lambda r: (r.get("step", 0), r.get("rank", 0), r.get("sequence", 0)))
    by_op = collections.Counter((r.get("forward_op") or r.get("op"), r.get("phase"))
                                for r in errors)
    print(f"Parity results in {results_dir}", file=out)
    print(f"  calls checked : {len(records)} ({len(ops)} distinct ops, "
          f"{len({r.get('rank') for r in records})} rank(s), "
          f"steps {min(r.get('step', 0) for r in records)}-"
          f"{max(r.get('step', 0) for r in records)})", file=out)
    print("  verdicts      : " + ", ".join(f"{verdicts.get(v, 0)} {v}" for v in
                                           ("pass", "warning", "error", "skip")), file=out)
    if malformed:
        print(f"  skipped       : {len(malformed)} malformed line(s), not counted above "
              f"(first: {malformed[0]})", file=out)
    if errors:
        print(f"  first error   : {describe(errors[0])}", file=out)
        # The next ones in the order they happened, under a label of their own (printed below
        # the op counts, they read as part of them).
        rest = errors[1:max_errors]
        if rest:
            print(f"  next errors   : {describe(rest[0])}", file=out)
            for r in rest[1:]:
                print(f"                  {describe(r)}", file=out)
        print("  errors by op  : " + ", ".join(f"{op} {phase} x{n}" for (op, phase), n in
                                               by_op.most_common()), file=out)
    else:
        print("  errors        : none", file=out)
    ranks = sorted({r.get("rank", 0) for r in records})
    if len(ranks) > 1:  # each rank's counts and its own first error
        for rank in ranks:
            mine = [r for r in records if r.get("rank", 0) == rank]
            counts = collections.Counter(r.get("status", "?").lower() for r in mine)
            first = next((r for r in errors if r.get("rank", 0) == rank), None)
            print(f"  rank {rank:<9}: {len(mine)} checked, " +
                  ", ".join(f"{counts.get(v, 0)} {v}" for v in ("pass", "warning", "error", "skip")) +
                  (f"; first error: {describe(first)}" if first else ""), file=out)
    print("  result files  :", file=out)
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.csv")) +
                           glob.glob(os.path.join(d, "*.jsonl"))):
            print(f"    {path}", file=out)
    if metrics_url:
        lines, err = scrape(metrics_url)
        print(f"  metrics       : {metrics_url}", file=out)
        if err:
            print(f"    (not reachable: {err})", file=out)
        for line in lines or []:
            print(f"    {line}", file=out)
    return 1 if errors else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m parity.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", nargs="+",
                        help="the server's --output_dir (several: one per server of the run)")
    parser.add_argument("--metrics", help="the server's /metrics URL, to print its verdict counters")
    parser.add_argument("--errors", type=int, default=5, help="errors to list (default 5)")
    args = parser.parse_args(argv)
    return summarise(args.results_dir, args.metrics, args.errors)


if __name__ == "__main__":
    sys.exit(main())
