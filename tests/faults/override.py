"""How a planted fault replaces an aten kernel in the training process (faults.py,
llama_faults.py, random_faults.py): the training plays a faulty accelerator. The server never
loads these."""
import warnings

import torch

_LIBS = []  # keep the override libraries alive


def override(op, kernel, key="CPU"):
    """Registers `kernel` for `op` ("mm", "mean.dim") on dispatch key `key`, for the rest of the
    process, in place of libtorch's (or tests/device's) kernel. The kernel must not call its own
    op (it would recurse)."""
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # libtorch warns that the kernel is replaced: that is the point here.
        warnings.filterwarnings("ignore", message="Overriding a previously registered kernel")
        lib.impl(op, kernel, key)
    _LIBS.append(lib)
