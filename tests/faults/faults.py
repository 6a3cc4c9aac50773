"""Planted faults: this process plays a faulty accelerator by overriding one aten kernel for the
CPU dispatch key before the agent starts (../shared/faults/README.md). The server never loads
these, so its replay is the correct reference. Each fault says why it is harmful or benign.
"""
import torch

_LIBS = []  # keep the override libraries alive


def _override(op, kernel):
    lib = torch.library.Library("aten", "IMPL")
    lib.impl(op, kernel, "CPU")
    _LIBS.append(lib)


def gelu_tanh():
    """Harmful: gelu evaluated with the tanh approximation when the exact form was asked for
    (errors ~1e-3 relative: far beyond float32 rounding)."""
    def bad(x, approximate="none"):
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + torch.tanh(inner))
    _override("gelu", bad)


FAULTS = {
    "gelu_tanh": (gelu_tanh, "harmful", "aten::gelu", "forward"),
}


def plant(name):
    FAULTS[name][0]()
