"""Replica digests (docs/replicas.md): what every rank of a data-parallel group must hold bit for
bit, digested on each rank (``torch.ops.parity.replica_report``: CRC-32C of host tensors, poly64
computed on the device for device tensors) and compared across the group by the server, with
nothing replayed.

- ``gradients``: each optimizer step's gradients as the step reads them (after DDP's all-reduce),
  from a hook run before every ``Optimizer.step``;
- ``parameters``: the parameters it wrote, from a hook run after it;
- ``collectives``: the outputs of ``torch.distributed.all_reduce``, ``all_gather``, ``broadcast``,
  ``all_gather_into_tensor`` (``_all_gather_base``), ``all_reduce_coalesced`` and
  ``all_gather_coalesced``, called through the ``torch.distributed`` module (a name imported
  from it before ``start()`` is not wrapped), after the collective is done (``async_op``: at
  ``wait()``).

Reports of one group are keyed alike on every rank: the group's global ranks, the step (the
session's, which ``step()`` advances), the kind, the operation and its sequence number among the
group's reports of that kind in the step (every rank runs its collectives and optimizer steps in
the same order)."""
import functools
import inspect
import os
import time

import torch

KINDS = ("gradients", "parameters", "collectives")

# The collectives whose output every rank of the group holds alike, and where their outputs are:
# (function name, {argument: how its value holds the outputs}).
_COLLECTIVES = {
    "all_reduce": ("tensor", "one"),
    "broadcast": ("tensor", "one"),
    "all_gather": ("tensor_list", "list"),
    "all_gather_into_tensor": ("output_tensor", "one"),
    "_all_gather_base": ("output_tensor", "one"),
    "all_reduce_coalesced": ("tensors", "list"),
    "all_gather_coalesced": ("output_tensor_lists", "lists"),
}


def shared_run_id():
    """One run id for every rank of the default process group, for replica reports to meet on
    the server (it keys them by run): rank 0's, passed through the group's store (no collective:
    the ranks read it whenever they start). None when torch.distributed is not initialized."""
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel
    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        store = dist.distributed_c10d._get_default_store()  # pylint: disable=protected-access
    except (AttributeError, RuntimeError, ValueError):
        return None
    key = "parity_replicas_run_id"
    if dist.get_rank() == 0:
        store.set(key, f"run-{int(time.time())}-{os.getpid()}")
    return store.get(key).decode()


def _outputs(value, form):
    if form == "one":
        return ["output"], [value]
    if form == "list":
        return [f"output[{i}]" for i in range(len(value))], list(value)
    names, tensors = [], []
    for i, inner in enumerate(value):
        for j, t in enumerate(inner):
            names.append(f"output[{i}][{j}]")
            tensors.append(t)
    return names, tensors


class _DigestAtWait:
    """An async collective's Work: its outputs are digested once waited for."""

    def __init__(self, work, report):
        self._work = work
        self._report = report

    def wait(self, *args, **kwargs):
        result = self._work.wait(*args, **kwargs)
        if self._report is not None:
            report, self._report = self._report, None
            report()
        return result

    def __getattr__(self, name):
        return getattr(self._work, name)


class Replicas:
    """The hooks of one session: installed at start(), removed at close()."""

    def __init__(self, ops, kinds):
        self._ops = ops
        self._kinds = set(kinds)
        self._names = {}  # id(parameter) -> its path, from the model given to start()
        self._sequence = {}  # (kind, group) -> reports so far in this step
        self._group = None  # the data-parallel group's ranks; None: the world
        self._undo = []
        self._installed = False

    # -- configuration ---------------------------------------------------------------------

    def name_parameters(self, model):
        modules = [model] if isinstance(model, torch.nn.Module) else list(model)
        prefix = len(modules) > 1
        for i, m in enumerate(modules):
            for name, p in m.named_parameters():
                self._names.setdefault(id(p), f"{i}.{name}" if prefix else name)

    def set_group(self, group):
        """The data-parallel group whose replicas the optimizer's tensors are: a process group
        or a list of global ranks (None: the world)."""
        self._group = None if group is None else self._ranks_of(group)

    def new_step(self):
        self._sequence.clear()

    # -- reports ---------------------------------------------------------------------------

    @staticmethod
    def _ranks_of(group):
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        if isinstance(group, (list, tuple)):
            return sorted(int(r) for r in group)
        if not dist.is_available() or not dist.is_initialized():
            return [0]
        if group is None or group is dist.group.WORLD:
            return list(range(dist.get_world_size()))
        return sorted(dist.get_process_group_ranks(group))

    def _report(self, kind, op, group, names, tensors):
        if len(group) < 2 or not tensors:
            return  # nothing to compare with
        key = (kind, tuple(group))
        sequence = self._sequence.get(key, 0)
        self._sequence[key] = sequence + 1
        self._ops.replica_report(list(group), -1, sequence, kind, op, names, tensors)

    def _optimizer_tensors(self, optimizer, grads):
        names, tensors = [], []
        for g, group in enumerate(optimizer.param_groups):
            for i, p in enumerate(group["params"]):
                t = p.grad if grads else p
                if t is None:
                    continue
                name = self._names.get(id(p), f"param_groups[{g}][{i}]")
                names.append(name + ".grad" if grads else name)
                tensors.append(t.detach())
        return names, tensors

    def _before_step(self, optimizer):
        if "gradients" in self._kinds:
            group = self._group if self._group is not None else self._ranks_of(None)
            names, tensors = self._optimizer_tensors(optimizer, grads=True)
            self._report("gradients", type(optimizer).__name__ + ".step", group, names, tensors)

    def _after_step(self, optimizer):
        if "parameters" in self._kinds:
            group = self._group if self._group is not None else self._ranks_of(None)
            names, tensors = self._optimizer_tensors(optimizer, grads=False)
            self._report("parameters", type(optimizer).__name__ + ".step", group, names, tensors)

    # -- hooks -----------------------------------------------------------------------------

    def install(self):
        if self._installed:
            return
        self._installed = True
        if self._kinds & {"gradients", "parameters"}:
            self._hook_optimizers()
        if "collectives" in self._kinds:
            self._wrap_collectives()

    def uninstall(self):
        for undo in reversed(self._undo):
            undo()
        self._undo = []
        self._installed = False

    def _hook_optimizers(self):
        import torch.optim.optimizer as optim  # pylint: disable=import-outside-toplevel
        if hasattr(optim, "register_optimizer_step_pre_hook"):  # torch 2.0 and later
            pre = optim.register_optimizer_step_pre_hook(
                lambda opt, args, kwargs: self._before_step(opt))
            post = optim.register_optimizer_step_post_hook(
                lambda opt, args, kwargs: self._after_step(opt))
            self._undo += [pre.remove, post.remove]
            return
        # torch 1.13: every optimizer class's own step(), wrapped (and unwrapped at close()):
        # the classes there are now, and each class an optimizer is made of later (a subclass the
        # training defines after start()).
        seen, classes = set(), [torch.optim.Optimizer]
        while classes:
            cls = classes.pop()
            if cls in seen:
                continue
            seen.add(cls)
            classes.extend(cls.__subclasses__())
            self._wrap_step(cls)
        init = torch.optim.Optimizer.__init__
        replicas = self

        @functools.wraps(init)
        def optimizer_init(optimizer, *args, **kwargs):
            init(optimizer, *args, **kwargs)
            for cls in type(optimizer).__mro__:
                replicas._wrap_step(cls)

        torch.optim.Optimizer.__init__ = optimizer_init
        self._undo.append(lambda: setattr(torch.optim.Optimizer, "__init__", init))

    def _wrap_step(self, cls):
        if cls is torch.optim.Optimizer or "step" not in cls.__dict__ or \
                getattr(cls.__dict__["step"], "_parity_replicas", False):
            return
        original = cls.__dict__["step"]
        replicas = self

        @functools.wraps(original)
        def step(optimizer, *args, **kwargs):
            # A subclass whose step() calls its parent's: only the outermost reports.
            outer = not getattr(optimizer, "_parity_in_step", False)
            if outer:
                optimizer._parity_in_step = True
                replicas._before_step(optimizer)
            try:
                return original(optimizer, *args, **kwargs)
            finally:
                if outer:
                    optimizer._parity_in_step = False
                    replicas._after_step(optimizer)

        step._parity_replicas = True
        setattr(cls, "step", step)
        self._undo.append(lambda: setattr(cls, "step", original))

    def _wrap_collectives(self):
        import torch.distributed as dist  # pylint: disable=import-outside-toplevel
        for name, (argument, form) in _COLLECTIVES.items():
            fn = getattr(dist, name, None)
            if fn is None:
                continue
            wrapped = self._wrap_collective(name, fn, argument, form)
            setattr(dist, name, wrapped)
            self._undo.append(functools.partial(setattr, dist, name, fn))

    def _wrap_collective(self, name, fn, argument, form):
        signature = inspect.signature(fn)
        replicas = self

        @functools.wraps(fn)
        def collective(*args, **kwargs):
            result = fn(*args, **kwargs)
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return result  # a call the collective took but its signature does not describe
            values = bound.arguments
            group = replicas._ranks_of(values.get("group"))
            names, tensors = _outputs(values[argument], form)

            def report():
                replicas._report("collective", name, group, names,
                                 [t.detach() for t in tensors])

            if values.get("async_op"):
                return _DigestAtWait(result, report)
            report()
            return result

        return collective
