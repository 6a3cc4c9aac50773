"""Planted faults in random operators (issue 23), for tests/faults/random_train.py. As in
faults.py, the training process plays a faulty accelerator by overriding one aten kernel before
the agent starts; the server never loads these. An override must not call its own op (it would
recurse), so each computes through others.

FAULTS maps a name to (plant, op, metric): the op the first error must name and the
random_property metric that must see it when the server judges by properties.
"""
import math

import torch

from override import override


def _override(op, kernel, key="CPU"):
    override(op, kernel, key)


def _dropout(keep, scale):
    # aten::dropout is a composite op: its autograd kernel is the one to replace (the ops inside
    # record the backward as usual).
    def bad(x, p, train):
        if not train or p == 0:
            return x
        mask = torch.empty_like(x).bernoulli_(keep(p))
        return x * mask * scale(p)
    _override("dropout", bad, "AutogradCPU")


def dropout_scaled_by_inverse_p():
    """Kept elements scaled by 1/p instead of 1/(1-p): at p = 0.1 nine times too large."""
    _dropout(lambda p: 1 - p, lambda p: 1 / p)


def dropout_keeps_too_few():
    """5% fewer elements kept than 1 - p (a keep probability computed wrongly)."""
    _dropout(lambda p: (1 - p) * 0.95, lambda p: 1 / (1 - p))


def randn_variance():
    """randn with variance 1.1 (a Box-Muller radius off by 5%)."""
    def bad(size, dtype=None, layout=None, device=None, pin_memory=None):
        return torch.empty(size, dtype=dtype or torch.float32).normal_(0, math.sqrt(1.1))
    _override("randn", bad)


def uniform_shifted():
    """uniform_ shifted by 0.05 of its range."""
    def bad(self, from_=0.0, to=1.0, generator=None):
        u = torch.special.ndtr(torch.randn(self.shape, dtype=torch.float64))
        return self.copy_(from_ + (to - from_) * (u + 0.05))
    # The schema names the bound `from`, a Python keyword: positional only.
    _override("uniform_", lambda self, *args, **kwargs: bad(self, *args))


def randperm_duplicate():
    """randperm whose second element repeats the first (one index never drawn)."""
    def bad(n, dtype=torch.int64, layout=None, device=None, pin_memory=None):
        perm = torch.argsort(torch.randn(n))
        perm[1] = perm[0]
        return perm.to(dtype or torch.int64)
    _override("randperm", bad)


FAULTS = {
    "dropout_scaled_by_inverse_p": (dropout_scaled_by_inverse_p, "aten::dropout", "kept_scale"),
    "dropout_keeps_too_few": (dropout_keeps_too_few, "aten::dropout", "rate"),
    "randn_variance": (randn_variance, "aten::randn", "variance"),
    "uniform_shifted": (uniform_shifted, "aten::uniform_", "support"),
    "randperm_duplicate": (randperm_duplicate, "aten::randperm", "permutation"),
}


def plant(name):
    FAULTS[name][0]()
