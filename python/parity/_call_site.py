"""msprobe's API names from the Python call site (parity.api_names "call_site", the default).

msprobe names a call after the Python function the training called: ``x.add(y)`` is
``Tensor.add``, ``torch.add(x, y)`` ``Torch.add``, ``F.linear`` ``Functional.linear``,
``torch_npu.npu_rms_norm`` ``NPU.npu_rms_norm``, each counted apart. The dispatcher, where the
agent's hook sees operators, cannot tell them apart (both adds are ``aten::add``). So, while
capturing, a TorchFunctionMode sees each torch call the training makes (torch hands every call
with tensor arguments to the innermost mode; calls made inside the mode's own handling do not come
back to it, so a composite such as ``F.cross_entropy`` is one call) and tells the agent's hook
its name through one C function (``parity_agent_set_api``, by ctypes): the first top-level
operator that call runs carries it (ApiCall.api). Functions it does not know (``Tensor.shape``,
``Tensor.backward``) pass straight through.

Its cost is one Python-level dispatch per torch call (a dictionary lookup and two foreign calls
for a named one): a few microseconds, which a training of millisecond operators does not notice
and a training of tiny ones does (docs/benchmarks/2026-11-26.md#call-site-names-2026-11-26). parity.api_names
"operator" turns it off.

Under torch.compile the mode stays on, and steps aside while Dynamo traces: its
``__torch_function__`` returns the call at once when Dynamo is compiling (a check Dynamo folds to a
constant), so Dynamo never traces the name table (torch 2.15's Dynamo failed on it with
``NameError: ___get_torch_function_mode_stack_at``) and compiled code calls no foreign function.
"""
import ctypes
import os

import torch
from torch.overrides import TorchFunctionMode


# The dunder methods msprobe wraps on Tensor: operators. The others (__repr__, __len__, ...)
# are not named.
_OPERATOR_DUNDERS = {
    f"__{op}__" for base in ("add", "sub", "mul", "matmul", "truediv", "div", "floordiv", "mod",
                             "pow", "and", "or", "xor", "lshift", "rshift")
    for op in (base, "r" + base, "i" + base)} | {
    "__neg__", "__pos__", "__abs__", "__invert__", "__eq__", "__ne__", "__lt__", "__le__",
    "__gt__", "__ge__", "__getitem__", "__setitem__"}


def _name_table():
    """{function: b"Prefix.name"} for msprobe's wrapped namespaces, in msprobe's prefixes. A
    function reachable under several names keeps one: a namespace's plain names before its dunder
    ones (``Tensor.__add__`` is ``Tensor.add``'s function in torch 1.13), a name that is its own
    ``__name__`` before another, and the shortest of those (``torch.mm``, which compares equal to
    ``torch.dsmm`` and ``torch.spmm``)."""
    table = {}

    def add(prefix, owner):
        found = []
        for name in dir(owner):
            if name.startswith("__"):
                if name not in _OPERATOR_DUNDERS:
                    continue
            elif name.startswith("_") and not name.startswith("_foreach"):
                continue
            try:
                func = getattr(owner, name)
                if callable(func) and not isinstance(func, type):
                    hash(func)
                    found.append((name.startswith("__"), getattr(func, "__name__", name) != name,
                                  len(name), name, func))
            except (AttributeError, TypeError, RuntimeError):
                continue  # unhashable, or an attribute that fails on access
        for _, _, _, name, func in sorted(found, key=lambda f: f[:4]):
            table.setdefault(func, (prefix + "." + name).encode())

    add("Functional", torch.nn.functional)
    add("Tensor", torch.Tensor)
    add("Torch", torch)
    add("VF", torch._VF)  # pylint: disable=protected-access
    try:
        import torch_npu  # pylint: disable=import-outside-toplevel
        add("NPU", torch_npu)
    except ImportError:
        pass
    for func in (torch.Tensor.backward, torch.autograd.backward, torch.Tensor.register_hook):
        table.pop(func, None)  # not operators: the backward pass is named by its forward calls
    return table


def _setter(library_path):
    """parity_agent_set_api of the agent already in the process: the one LD_PRELOAD put in its
    global scope, else the library torch.ops loaded from `library_path`. Never loads a library:
    a second copy of the agent would register its torch ops again, and names set in its thread
    state would reach no hook."""
    candidates = [(None, ctypes.DEFAULT_MODE)]  # the process's global scope
    if library_path:
        candidates.append((os.path.realpath(library_path), os.RTLD_NOLOAD | ctypes.DEFAULT_MODE))
    for path, mode in candidates:
        try:
            lib = ctypes.CDLL(path, mode=mode)
            f = lib.parity_agent_set_api
            f.argtypes = [ctypes.c_char_p]
            f.restype = None
            return f
        except (OSError, AttributeError, TypeError):
            continue
    return None


def _dynamo_compiling():
    """torch's own "is Dynamo tracing this" check, which Dynamo folds to True while it traces
    (torch.compiler.is_dynamo_compiling from 2.3 on, torch._utils.is_compiling in 2.1 and 2.2);
    None on a torch without Dynamo (nothing to ask at every call)."""
    compiler = getattr(torch, "compiler", None)
    for check in (getattr(compiler, "is_dynamo_compiling", None),
                  getattr(getattr(torch, "_utils", None), "is_compiling", None)):
        if check is not None:
            return check
    return None


_compiling = _dynamo_compiling()


class CallSiteNames(TorchFunctionMode):
    """Names each torch call for the agent's hook while it runs."""

    def __init__(self, table, set_api):
        super().__init__()
        self._table = table
        self._set_api = set_api

    # Every torch call of the training passes here: locals, not attributes, and no dict made for
    # absent keyword arguments (tests/bench/call_site_bench.py times it).
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _compiling is not None and _compiling():  # Dynamo tracing: the compiled code names nothing
            return func(*args, **kwargs) if kwargs else func(*args)
        try:
            name = self._table.get(func)
        except TypeError:  # an unhashable callable
            name = None
        if name is None:
            return func(*args, **kwargs) if kwargs else func(*args)
        set_api = self._set_api
        set_api(name)
        try:
            return func(*args, **kwargs) if kwargs else func(*args)
        finally:
            set_api(None)


_table = None
_set_api = None


def enter(library_path):
    """Enters the mode, the innermost, until leave(); None when the agent has no
    parity_agent_set_api. The name table is made once per process."""
    global _table, _set_api  # pylint: disable=global-statement
    if _set_api is None:
        _set_api = _setter(library_path)
        if _set_api is None:
            return None
    if _table is None:
        _table = _name_table()
    mode = CallSiteNames(_table, _set_api)
    mode.__enter__()
    return mode


def leave(mode):
    """Leaves the mode entered by enter() when it is still the innermost (a mode the training
    entered after it is never popped in its place); False when it could not be left."""
    if mode is None:
        return True
    try:
        current = torch.overrides._get_current_function_mode()  # pylint: disable=protected-access
    except AttributeError:
        current = mode  # a torch without the query: trust the stack's order
    if current is not mode:
        return False
    mode.__exit__(None, None, None)
    return True
