#!/usr/bin/env bash
# msprobe 8.1.1's own code (PyPI's mindstudio-probe, the release whose docs still have online
# run_ut) in a virtual environment beside Debian's torch, for the tests that run msprobe's readers
# on Parity's result files (tests/e2e/test_msprobe_own_code.py; skipped without it). Downloads
# from PyPI, so not part of .ci/run: run it once on a machine that reaches PyPI.
#   scripts/msprobe-venv.sh            creates $PARITY_MSPROBE_VENV (default
#                                      /var/cache/parity-msprobe/venv) and prints its python
set -euo pipefail
venv=${PARITY_MSPROBE_VENV:-/var/cache/parity-msprobe/venv}
if [[ ! -x "$venv/bin/python" ]]; then
  mkdir -p "$(dirname "$venv")"
  # Debian's torch 1.13 and numpy come from the system (msprobe imports torch).
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# msprobe's runtime requirements for its readers (its wheel's own pins where it has them); the
# online run_ut's (twisted, pyopenssl) and the visualisation's are not needed for them.
"$venv/bin/python" -m pip install --quiet "pandas>=1.3.5,<2.1" pyyaml rich tqdm "openpyxl>=3.0.6" \
  einops tabulate psutil matplotlib "numpy>=1.23,<2"
"$venv/bin/python" -m pip install --quiet --no-deps mindstudio-probe==8.1.1
"$venv/bin/python" -c 'import msprobe, os; print(os.path.dirname(msprobe.__file__))' >&2
echo "$venv/bin/python"
