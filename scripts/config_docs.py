#!/usr/bin/env python3
"""docs/configuration.md's key tables are made from the key tables themselves
(common/config/config_keys.cc and server/config/server_keys.cc, printed by
`parity-server --config_docs`): each key is described once, in its table row there. This
rewrites the four tables in the docs (--write), or says how they differ (--check, as ctest
config_docs does; exit 1).

    scripts/config_docs.py --write [--server build/server/parity-server]
"""
import argparse
import difflib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs", "configuration.md")
HEADER = "| key | type | default | meaning |"
MARKER = "<!-- parity-server --config_docs:"


def generated_blocks(server):
    """Each table `parity-server --config_docs` prints: its marker line, a blank line, the table."""
    out = subprocess.run([server, "--config_docs"], capture_output=True, text=True,
                         check=True).stdout
    blocks = []
    for line in out.split("\n"):
        if line.startswith(MARKER):
            blocks.append([])
        if blocks and (line or len(blocks[-1]) == 1):
            blocks[-1].append(line)
    return blocks


def rewritten(lines, blocks):
    """The docs' lines with each key table (and its marker) replaced by the generated one, in
    order; the number of tables replaced."""
    out, i, n = [], 0, 0
    while i < len(lines):
        if lines[i].startswith(MARKER):  # written again with its table
            i += 1
            while i < len(lines) and not lines[i]:
                i += 1
            continue
        if lines[i].startswith(HEADER):
            while i < len(lines) and lines[i].startswith("|"):
                i += 1
            out.extend(blocks[n] if n < len(blocks) else [])
            n += 1
            continue
        out.append(lines[i])
        i += 1
    return out, n


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default=os.path.join(ROOT, "build", "server", "parity-server"))
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args()
    with open(DOCS, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = generated_blocks(args.server)
    new, n = rewritten(lines, blocks)
    if n != len(blocks):
        print(f"{DOCS}: {n} key tables, the key tables make {len(blocks)}", file=sys.stderr)
        return 1
    if args.write:
        with open(DOCS, "w", encoding="utf-8") as f:
            f.write("\n".join(new))
        return 0
    if new == lines:
        return 0
    sys.stdout.writelines(difflib.unified_diff([l + "\n" for l in lines], [l + "\n" for l in new],
                                               "docs/configuration.md", "made from the key tables"))
    print("docs/configuration.md's key tables differ from the key tables: change the key's row "
          "in common/config/config_keys.cc or server/config/server_keys.cc, then "
          "scripts/config_docs.py --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
