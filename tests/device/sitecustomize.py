"""The simulated accelerator's GEMMs in the trainings the test suites run: tests/e2e/harness.py
puts this folder first on PYTHONPATH and names the library in PARITY_TEST_FLOAT32_GEMMS, which
is loaded here, before the training starts (why: float32_gemms.cc).

Loaded on every host, without probing this host's kernels first: a probe would run GEMMs, and
an agent preloaded into the process (LD_PRELOAD) would capture and check them. Where libtorch's
own kernels already accumulate in float32 (oneDNN's, on AVX-512 hosts) the results differ from
theirs only in the order of float32 additions.
"""
import os
import runpy

_SYSTEM = "/usr/lib/python3.11/sitecustomize.py"  # this module shadows the system's: run it too
if os.path.exists(_SYSTEM):
    runpy.run_path(_SYSTEM)

LOADED = False  # whether this process runs the float32-accumulating GEMMs


def _load(library):
    global LOADED  # pylint: disable=global-statement
    import torch  # pylint: disable=import-outside-toplevel
    # libtorch warns on stderr (its own log, not Python's warnings) that the kernels are
    # replaced: that is the point here, and the trainings' stderr stays theirs.
    saved = os.dup(2)
    try:
        with open(os.devnull, "w", encoding="utf-8") as null:
            os.dup2(null.fileno(), 2)
            torch.ops.load_library(library)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    LOADED = True


if os.environ.get("PARITY_TEST_FLOAT32_GEMMS"):
    _load(os.environ["PARITY_TEST_FLOAT32_GEMMS"])
