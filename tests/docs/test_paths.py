"""Every repository path a doc or a comment names exists (issue 40): a file moved or renamed
leaves no reference behind. Paths are recognised by their top-level folder (agent/, common/,
docs/, ...); a path is found from the repository's root, or from the naming file's own folder
(CMakeLists.txt and Markdown links are relative to it); a built program (tests/bench/replay_bench)
counts when its source exists. Globs and templates (*, {, $, <) are not paths."""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOP = r"(?:agent|common|server|tests|docs|deploy|scripts|python|proto|oplib|cmake|\.ci)"
PATH = re.compile(r"(?<![\w./-])(" + TOP + r"/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
SCANNED = re.compile(r"(\.(cc|h|c|py|md|sh|txt|yml|yaml|json|proto|lds|cmake|toml)|"
                     r"CMakeLists\.txt|/run)$")


def exists(path, naming_file):
    here = os.path.dirname(os.path.join(ROOT, naming_file))
    for base in (ROOT, here):
        candidate = os.path.normpath(os.path.join(base, path))
        if os.path.exists(candidate) or os.path.exists(candidate + ".cc"):
            return True
    return False


def broken_references():
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    broken = []
    for name in files:
        if not SCANNED.search(name) or name.startswith("build"):
            continue
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for match in PATH.finditer(text):
            path = match.group(1).rstrip(".")
            if any(c in path for c in "*{}$<>") or exists(path, name):
                continue
            line = text.count("\n", 0, match.start()) + 1
            broken.append(f"{name}:{line}: {path}")
    return broken


class PathsTest(unittest.TestCase):
    def test_every_named_repository_path_exists(self):
        broken = broken_references()
        self.assertEqual(broken, [], "\n".join(broken))

    def test_the_lint_sees_a_broken_reference(self):
        # The lint itself: a path that does not exist is found, one that exists is not.
        # (Built from parts, or the lint would read this very file as naming them.)
        self.assertFalse(exists("server/" + "verdict.h", "docs/design.md"))
        self.assertTrue(exists("server/call/verdict_encoder.h", "docs/design.md"))
        self.assertTrue(exists("agent/" + "session_test.cc", "tests/CMakeLists.txt"))
        self.assertTrue(exists("tests/bench/replay_bench", "docs/deploy.md"))


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2))
