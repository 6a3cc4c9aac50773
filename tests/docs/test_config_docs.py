"""docs/configuration.md's tables against the configuration key tables themselves (issue 53):
each documented key's type and default must be the table's, as the agent's transport
(parity_config_keys_json) and `parity-server --list_config` report them. Names alone were
checked before (ConfigurationDocsTest); a default changed in code and not in the docs, or a type
written differently, passed.

The docs write defaults for a reader ("`2GiB`", "`\\"./\\"`", "`0` = auto"); the comparison reads
the first backticked value of the default cell, unquoted, sizes in bytes."""
import ctypes
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import harness  # noqa: E402

DOCS = os.path.join(harness.ROOT, "docs", "configuration.md")
UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
TYPE_WORDS = {"list of strings": "list", "list of indices": "list"}


def agent_table():
    lib = ctypes.CDLL(os.path.join(harness.BUILD, "agent", "libparity_transport.so"))
    lib.parity_config_keys_json.restype = ctypes.c_char_p
    return {k["path"]: (k["kind"], k["default"]) for k in
            json.loads(lib.parity_config_keys_json().decode())}


def server_table():
    out = subprocess.run([harness.SERVER, "--list_config"], capture_output=True, text=True,
                         check=True).stdout
    rows = [line.split("\t") for line in out.splitlines()]
    return {r[0]: (r[2], r[3]) for r in rows if len(r) >= 4}


def documented(heading):
    """{key: (type cell, default cell)} of the tables under `heading` up to the next '## '."""
    rows, inside = {}, False
    with open(DOCS, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.startswith(heading)
            m = re.match(r"^\| `([^`]+)` \| ([^|]*) \| ([^|]*) \|", line)
            if inside and m:
                rows[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return rows


def value_of(cell):
    """The default a docs cell states: its first backticked value, unquoted; None if it states
    none ("—", "built in")."""
    m = re.search(r"`([^`]*)`", cell)
    if not m:
        return None
    v = m.group(1)
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v


def same_value(kind, table, docs):
    table = re.sub(r"\s*\(.*\)$", "", table)  # "[] (all)", "(default)": a value and its gloss
    if kind == "size":
        m = re.fullmatch(r"(\d+)\s*([KMGT]?i?B?)", docs)
        return m is not None and int(m.group(1)) * UNITS.get(m.group(2), 0) == int(table)
    if kind == "integer" and re.fullmatch(r"2\^\d+", docs):
        return 2 ** int(docs[2:]) == int(table)
    if kind.startswith("list") and table.startswith("[]"):
        return docs == "[]"
    return docs == table


def same_type(kind, cell):
    """The docs' type cell names the table's kind, in its words or shorter ("list"), possibly
    followed by a range or a shape ("integer 0-19", "list of strings, `[start, end]`")."""
    if kind == "choice":  # the docs list the choices: `"drop"`, `"block"`
        return cell == "choice" or cell.startswith('`"')
    return any(re.fullmatch(re.escape(word) + r"([ ,].*)?", cell)
               for word in (kind, TYPE_WORDS.get(kind, kind)))


class GeneratedTablesTest(unittest.TestCase):
    """The docs' four key tables are exactly what the key tables make (`parity-server
    --config_docs`): a key's name, type, default or meaning changed on one side only fails."""

    SCRIPT = os.path.join(harness.ROOT, "scripts", "config_docs.py")

    def test_the_docs_tables_are_made_from_the_key_tables(self):
        r = subprocess.run([sys.executable, self.SCRIPT, "--check", "--server", harness.SERVER],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr)

    def test_a_changed_meaning_is_caught(self):
        sys.path.insert(0, os.path.dirname(self.SCRIPT))
        import config_docs  # noqa: E402
        blocks = config_docs.generated_blocks(harness.SERVER)
        with open(DOCS, encoding="utf-8") as f:
            lines = f.read().split("\n")
        same, n = config_docs.rewritten(lines, blocks)
        self.assertEqual((same, n), (lines, 4))
        row = next(i for i, line in enumerate(lines) if line.startswith("| `parity.workers` |"))
        edited = list(lines)
        edited[row] = edited[row].replace("| `parity.workers` |", "| `parity.worker` |")
        self.assertNotEqual(config_docs.rewritten(edited, blocks)[0], edited)
        self.assertIn("parity.workers", "\n".join(blocks[3]))


class ConfigurationDocsTest(unittest.TestCase):
    def check(self, heading, table):
        docs = documented(heading)
        wrong = []
        for key, (type_cell, default_cell) in sorted(docs.items()):
            if key not in table:
                continue  # names: ConfigurationDocsTest.ListExactlyTheTablesKeys
            kind, default = table[key]
            if kind in ("accepted", "ignored"):
                continue
            if not same_type(kind, type_cell):
                wrong.append(f"{key}: type {type_cell!r} in the docs, {kind!r} in the table")
            stated = value_of(default_cell)
            # A key whose table shows no default (one read for its side effect) is not compared.
            if stated is not None and default != "" and not same_value(kind, default, stated):
                wrong.append(f"{key}: default {stated!r} in the docs, {default!r} in the table")
        self.assertGreater(len(docs), 20)
        self.assertEqual(wrong, [], "\n" + "\n".join(wrong))

    def test_the_agents_keys(self):
        self.check("## Agent", agent_table())

    def test_the_servers_keys(self):
        self.check("## Server", server_table())

    def test_a_changed_default_is_caught(self):
        self.assertFalse(same_value("size", str(128 << 20), "256MiB"))
        self.assertTrue(same_value("size", str(128 << 20), "128MiB"))
        self.assertTrue(same_value("string", "./", value_of('`"./"` (msprobe\'s default)')))
        self.assertIsNone(value_of("built in"))
        self.assertTrue(same_type("integer", "integer 0-19"))
        self.assertFalse(same_type("integer", "string"))
        self.assertFalse(same_type("bool", "boolean"))


if __name__ == "__main__":
    unittest.main()
