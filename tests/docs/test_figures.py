"""The docs are a manual, and its figures are stated once (issue 67):
- every figure the README's headline table quotes (a ratio such as 1.05x or 2.6-14.1x, a rate
  in GB/s, a count such as 10,001) is the one docs/performance.md's current-figures table
  states;
- the manual's pages hold no run logs: no section of docs/performance.md or docs/deploy.md is
  a dated run (those are kept, a file per day, in docs/benchmarks/, which lists each);
- the current-figures table dates each row, or names the ctest that states it again on every CI
  run."""
import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIGURE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x(?!\w)|"
                    r"\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? GB/s|\d{1,3}(?:,\d{3})+)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def section(markdown, heading):
    """The text under `## heading` up to the next heading of level 2 or above."""
    m = re.search(r"^## " + re.escape(heading) + r"\s*$(.*?)(?=^#{1,2} |\Z)", markdown, re.M | re.S)
    return m.group(1) if m else None


def readme_headline_rows(readme):
    start = readme.index("Headline numbers")
    rows = []
    for line in readme[start:].split("\n")[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return rows[2:]  # past the header and its rule


def figures(text):
    return [m.group(1) for m in FIGURE.finditer(text)]


def unquoted_figures(readme, performance):
    table = section(performance, "Current figures")
    missing = []
    for row in readme_headline_rows(readme):
        measured = row.split("|")[2]
        missing += [f for f in figures(measured) if f not in table]
    return missing


class FiguresTest(unittest.TestCase):
    def test_the_readme_quotes_the_current_figures(self):
        missing = unquoted_figures(read("README.md"), read("docs/performance.md"))
        self.assertEqual(missing, [], "figures in the README's headline table that "
                         "docs/performance.md#current-figures does not state: " + ", ".join(missing))

    def test_a_figure_the_performance_page_does_not_state_is_found(self):
        readme = "Headline numbers\n\n| what | measured |\n|---|---|\n| x | 1.05x / 1.40x, 2.1-3.0 GB/s, 10,001 |\n"
        performance = "## Current figures\n\n| a | 1.05x, 2.1-3.0 GB/s |\n\n## History\n\n1.40x 10,001\n"
        self.assertEqual(unquoted_figures(readme, performance), ["1.40x", "10,001"])

    def test_the_manual_pages_hold_no_run_logs(self):
        for page in ("docs/performance.md", "docs/deploy.md"):
            dated = [h for h in re.findall(r"^#+ .*$", read(page), re.M) if DATE.search(h)]
            self.assertEqual(dated, [], f"{page}: dated sections belong in docs/benchmarks/")

    def test_every_current_figure_is_dated(self):
        table = section(read("docs/performance.md"), "Current figures")
        rows = [r for r in table.split("\n") if r.startswith("| ") and not r.startswith("| what")]
        self.assertGreater(len(rows), 10)
        undated = [r[:80] for r in rows if not DATE.search(r) and "ctest -R" not in r]
        self.assertEqual(undated, [])

    def test_the_history_lists_every_run_file(self):
        folder = os.path.join(ROOT, "docs", "benchmarks")
        index = read("docs/benchmarks/README.md")
        for name in sorted(os.listdir(folder)):
            if name != "README.md":
                self.assertIn(f"]({name})", index, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
