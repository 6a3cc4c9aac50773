#!/usr/bin/env bash
# Clang's thread-safety analysis over Parity's own sources: every member annotated
# ABSL_GUARDED_BY and every function annotated ABSL_EXCLUSIVE_LOCKS_REQUIRED is checked against
# the absl::Mutex that guards it (GCC ignores these annotations). Reads the compile commands of a
# configured build (default: build) and runs clang++ -fsyntax-only on each server/, common/ and
# agent/ source that takes a lock. ctest runs it (thread_safety_analysis, label unit).
#   scripts/thread-safety.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
command -v clang++ >/dev/null || { echo "thread-safety.sh: clang++ is needed (deploy/install-deps.sh)"; exit 1; }
[[ -f "$build_dir/compile_commands.json" ]] || { echo "thread-safety.sh: no $build_dir/compile_commands.json"; exit 1; }
/usr/bin/python3 - "$build_dir" <<'PY'
import json, os, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

root = os.getcwd()
db = json.load(open(os.path.join(sys.argv[1], "compile_commands.json")))
locks = re.compile(r"absl::Mutex|ABSL_GUARDED_BY|ABSL_EXCLUSIVE_LOCKS_REQUIRED")
drop = {"-Werror", "-Winvalid-pch", "-Wshadow=local"}
jobs = []
for entry in db:
    path = os.path.relpath(entry["file"], root)
    if not re.match(r"(server|common|agent)/.*\.cc$", path):
        continue
    header = os.path.splitext(entry["file"])[0] + ".h"
    text = open(entry["file"]).read() + (open(header).read() if os.path.exists(header) else "")
    if not locks.search(text):
        continue
    args = shlex.split(entry["command"])
    out, i = ["clang++"], 1
    while i < len(args):
        a = args[i]
        if a == "-o":  # no object: syntax only
            i += 2
            continue
        if a == "-include" and args[i + 1].endswith("cmake_pch.hxx"):
            out += ["-include", os.path.join(root, "common", "torch", "torch_pch.h")]
            i += 2
            continue
        if a not in drop:
            out.append(a)
        i += 1
    out += ["-fsyntax-only", "-Wno-unknown-warning-option", "-Wthread-safety",
            "-Werror=thread-safety-analysis", "-Werror=thread-safety-attributes"]
    jobs.append((path, out, entry["directory"]))

def run(job):
    path, cmd, cwd = job
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return path, r.returncode, r.stderr

failed = 0
with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    for path, rc, err in pool.map(run, jobs):
        findings = [l for l in err.splitlines() if "thread-safety" in l or "error:" in l]
        if rc != 0:
            failed += 1
            print(f"thread-safety.sh: {path}:\n" + "\n".join(findings[:20]), file=sys.stderr)
print(f"thread-safety.sh: {len(jobs)} sources that take locks analysed, {failed} with findings")
sys.exit(1 if failed else 0)
PY
