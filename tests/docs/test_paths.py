"""Every repository path a doc or a comment names exists (issue 40): a file moved or renamed
leaves no reference behind. Paths are recognised by their top-level folder (agent/, common/,
docs/, ...); a path is found from the repository's root, or from the naming file's own folder
(CMakeLists.txt and Markdown links are relative to it); a built program (tests/bench/replay_bench)
counts when its source exists. Globs and templates (*, {, $, <) are not paths.

A short path (compare/metrics.cc, as a comment in server/ names it) is checked too (issue 67: a
doc named the compare pool's file where it no longer was): a source file's path whose first folder is
one of the repository's own folders must exist under the root, the naming file's folder, or some
folder of the repository. Headers of libraries (torch/, absl/, grpcpp/, ...) are not its own."""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOP = r"(?:agent|common|server|tests|docs|deploy|scripts|python|proto|oplib|cmake|\.ci)"
PATH = re.compile(r"(?<![\w./-])(" + TOP + r"/[A-Za-z0-9_./-]*[A-Za-z0-9_])")
SHORT = re.compile(r"(?<![\w./-])((?:[A-Za-z0-9_]+/)+[A-Za-z0-9_]+\.(?:cc|h|cu|inc|proto))\b")
# Folders of libraries that a product header is included from (torch/ is also the agent's own
# folder: a torch/*.cc path is the agent's, a torch/*.h one may be libtorch's).
EXTERNAL = {"ATen", "c10", "torch", "absl", "grpcpp", "grpc", "google", "gtest", "gmock",
            "prometheus", "openssl", "nlohmann", "sys", "linux", "caffe2", "pybind11", "cuda",
            "parity"}
SCANNED = re.compile(r"(\.(cc|h|c|py|md|sh|txt|yml|yaml|json|proto|lds|cmake|toml)|"
                     r"CMakeLists\.txt|/run)$")


def exists(path, naming_file):
    here = os.path.dirname(os.path.join(ROOT, naming_file))
    for base in (ROOT, here):
        candidate = os.path.normpath(os.path.join(base, path))
        if os.path.exists(candidate) or os.path.exists(candidate + ".cc"):
            return True
    return False


def short_path_exists(path, naming_file, folders):
    first = path.split("/")[0]
    if first in EXTERNAL and (path.endswith(".h") or first != "torch"):
        return True
    if first not in {os.path.basename(d) for d in folders}:
        return True  # not a path of this repository
    here = os.path.dirname(naming_file)
    return any(os.path.exists(os.path.join(ROOT, base, path))
               for base in ["", here, *sorted(folders)])


def repository_files():
    return subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.split()


def scanned_texts(files):
    """(name, text) of each file of the repository the lints read."""
    for name in files:
        if not SCANNED.search(name) or name.startswith("build"):
            continue
        try:
            with open(os.path.join(ROOT, name), encoding="utf-8") as f:
                yield name, f.read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue


def broken_references():
    files = repository_files()
    folders = set()
    for f in files:
        while not f.startswith("build") and (f := os.path.dirname(f)):
            folders.add(f)
    broken = []
    for name, text in scanned_texts(files):
        for match in PATH.finditer(text):
            path = match.group(1).rstrip(".")
            if any(c in path for c in "*{}$<>") or exists(path, name):
                continue
            line = text.count("\n", 0, match.start()) + 1
            broken.append(f"{name}:{line}: {path}")
        for match in SHORT.finditer(text):
            if not short_path_exists(match.group(1), name, folders):
                line = text.count("\n", 0, match.start()) + 1
                broken.append(f"{name}:{line}: {match.group(1)}")
    return broken


def slug(heading):
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(path):
    found, seen, in_code = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            m = None if in_code else re.match(r"^#{1,6} (.*)", line)
            if m:
                s = slug(m.group(1))
                found.add(s if s not in seen else f"{s}-{seen[s]}")
                seen[s] = seen.get(s, 0) + 1
    return found


ANCHORED = re.compile(r"((?:[\w./-]*/)?[\w-]+\.md)#([\w-]+)|\]\(#([\w-]+)\)")


def broken_anchors():
    """Every 'page.md#section' (and a Markdown page's own '(#section)') names a heading of that
    page: a section renamed or moved to another page leaves no link behind (issue 67)."""
    broken, cache = [], {}
    for name, text in scanned_texts(repository_files()):
        for m in ANCHORED.finditer(text):
            page, anchor = (m.group(1), m.group(2)) if m.group(1) else (None, m.group(3))
            if page is None:
                if not name.endswith(".md"):
                    continue
                target = os.path.join(ROOT, name)
            else:  # from the naming file's folder, the root, or docs/ (the key tables' docs)
                here = os.path.dirname(os.path.join(ROOT, name))
                target = next((c for c in (os.path.normpath(os.path.join(here, page)),
                                           os.path.join(ROOT, page), os.path.join(ROOT, "docs", page))
                               if os.path.exists(c)), None)
                if target is None:
                    continue  # a missing page is the path check's to report
            if target not in cache:
                cache[target] = anchors_of(target)
            if anchor not in cache[target]:
                line = text.count("\n", 0, m.start()) + 1
                broken.append(f"{name}:{line}: {page or ''}#{anchor}")
    return broken


class PathsTest(unittest.TestCase):
    def test_every_named_section_exists(self):
        broken = broken_anchors()
        self.assertEqual(broken, [], "\n".join(broken))

    def test_anchors_are_githubs(self):
        self.assertEqual(slug("The H200 runs of 2026-11-27, evening: the pool's crash"),
                         "the-h200-runs-of-2026-11-27-evening-the-pools-crash")
        self.assertEqual(slug("`parity.policy`: block or drop"), "paritypolicy-block-or-drop")

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
        folders = {"server", "server/compare", "common", "common/base", "agent", "agent/torch"}
        self.assertFalse(short_path_exists("compare/" + "parallel.cc", "docs/design.md", folders))
        self.assertTrue(short_path_exists("base/parallel.cc", "docs/design.md", folders))
        self.assertTrue(short_path_exists("torch/library.h", "agent/torch/agent.cc", folders))
        self.assertFalse(short_path_exists("torch/" + "nowhere.cc", "docs/design.md", folders))


if __name__ == "__main__":
    sys.exit(unittest.main(verbosity=2))
