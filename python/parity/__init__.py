"""Parity: online precision checking for PyTorch training.

A drop-in for msprobe's online run_ut front-end; msprobe's loop works unchanged::

    from parity import PrecisionDebugger          # was: from msprobe.pytorch import ...
    debugger = PrecisionDebugger(config_path="config.json")
    for batch in loader:
        debugger.start(model)  # begins the session, then resumes it; model gives module paths
        loss = model(batch).sum(); loss.backward(); optimizer.step()
        debugger.stop()        # pauses, returns at once
        debugger.step()

The capture, queue and transport run in C++ (libparity_agent.so), loaded into this process
with ``torch.ops.load_library``. Nothing here raises into the training loop except
``step()`` under ``parity.fail_fast``.
"""

import atexit
import copy
import difflib
import json
import os
import random
import sys

import torch

from . import _call_site
from . import _replicas

__all__ = ["PrecisionDebugger", "PrecisionError", "seed_all", "counters", "load_agent",
           "module_dump", "module_dump_end"]



class PrecisionError(RuntimeError):
    """Raised by ``step()`` when ``parity.fail_fast`` is set and the server reported an error."""


def _check_build():
    """A pip-installed agent is built for one torch (its C++ API and ABI): refuse another,
    naming both, rather than fail to load or crash later."""
    info_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_build_info.json")
    if os.environ.get("PARITY_AGENT_LIB") or not os.path.exists(info_path):
        return  # a checkout's build (the tests), or an explicit library
    with open(info_path, encoding="utf-8") as f:
        info = json.load(f)
    abi = bool(torch._C._GLIBCXX_USE_CXX11_ABI)  # pylint: disable=protected-access
    if info.get("torch") != torch.__version__ or info.get("cxx11_abi", abi) != abi:
        raise ImportError(
            f"parity's agent was built for torch {info.get('torch')} (C++11 ABI "
            f"{int(info.get('cxx11_abi', abi))}); this interpreter runs torch {torch.__version__} "
            f"(C++11 ABI {int(abi)}). Rebuild it for this torch: "
            "pip install --no-build-isolation --force-reinstall <checkout>/python")


def _running_doctor():
    """Whether this interpreter was started as `python -m parity.doctor` (which reports a wrong
    build as its `[FAIL] agent` line instead of dying on the import)."""
    argv = getattr(sys, "orig_argv", None) or []
    return any(a == "-m" and b == "parity.doctor" for a, b in zip(argv, argv[1:]))


_BUILD_ERROR = None  # a wrong build, kept for load_agent() to raise under the doctor
try:
    _check_build()
except ImportError as _e:
    if not _running_doctor():
        raise
    _BUILD_ERROR = _e


def _library_path():
    env = os.environ.get("PARITY_AGENT_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "libparity_agent.so"),
                      os.path.join(here, "..", "..", "build", "agent", "libparity_agent.so")):
        if os.path.exists(candidate):
            return os.path.abspath(candidate)
    raise FileNotFoundError(
        "libparity_agent.so not found: set PARITY_AGENT_LIB, or build Parity (scripts/test.sh)")


_loaded = False


def load_agent():
    """Loads the agent library once (a no-op when it came in with LD_PRELOAD)."""
    global _loaded
    if _BUILD_ERROR is not None:
        raise _BUILD_ERROR
    if not _loaded:
        if not hasattr(torch.ops, "parity") or not _has_op("start"):
            torch.ops.load_library(_library_path())
        _loaded = True
    return torch.ops.parity


def _has_op(name):
    try:
        getattr(torch.ops.parity, name)
        return True
    except (AttributeError, RuntimeError):
        return False


def _key_paths():
    """Every agent configuration key's path ("tensor.host"), from the agent's own key table."""
    return [k["path"] for k in json.loads(load_agent().config_keys())]


def _merge(config, overrides):
    """Puts keyword overrides where the key table says they live: `host=` in the tensor
    section, `policy=` in the parity section, `step=` at the top. An unknown keyword is an
    error naming the closest keys."""
    paths = _key_paths()
    by_name = {p.rsplit(".", 1)[-1]: p for p in paths}
    for key, value in overrides.items():
        path = key if key in paths else by_name.get(key)
        if path is None:
            close = difflib.get_close_matches(key, list(by_name), n=3)
            raise TypeError(f"unknown configuration key {key!r}"
                            + (f" (did you mean {', '.join(close)}?)" if close else ""))
        section = config
        *parents, name = path.split(".")
        for part in parents:
            section = section.setdefault(part, {})
        section[name] = value
    return config


def _distributed_rank():
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # pylint: disable=broad-except
        pass
    return None


def seed_all(seed=1234, mode=False, rm_dropout=True):
    """msprobe's seed_all: the same seed for every generator there is, and deterministic
    algorithms when `mode` is true.

    Seeds Python's ``random``, numpy (when installed), torch's CPU generator, every CUDA device
    (when torch has CUDA) and every NPU (when torch_npu is imported); sets ``PYTHONHASHSEED``
    (for subprocesses: this interpreter's hash seed is fixed at its start), and, as msprobe
    does, ``HCCL_DETERMINISTIC`` to ``"True"``/``"False"`` and ``CUBLAS_WORKSPACE_CONFIG`` to
    ``:4096:8`` when torch has CUDA; cuDNN deterministic and not benchmarking; and
    ``torch.use_deterministic_algorithms(mode)``. ``rm_dropout=True`` (the default, as
    msprobe's) makes the functional dropouts identities (p=0), as msprobe's ``remove_dropout``;
    pass ``rm_dropout=False`` to keep them."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= 2 ** 32 - 1:
        raise ValueError(f"seed_all: seed must be an integer in [0, 2**32-1], got {seed!r}")
    if not isinstance(mode, bool):
        raise ValueError(f"seed_all: mode must be True or False, got {mode!r}")
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import numpy  # pylint: disable=import-outside-toplevel
        numpy.random.seed(seed)
    except ImportError:
        pass
    torch.manual_seed(seed)  # also seeds every CUDA device when torch has CUDA
    if torch.version.cuda is not None:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.cuda.manual_seed_all(seed)
    npu = getattr(torch, "npu", None)  # registered by torch_npu
    if npu is not None and hasattr(npu, "manual_seed_all"):
        npu.manual_seed_all(seed)
    os.environ["HCCL_DETERMINISTIC"] = str(mode)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(mode)
    if rm_dropout:
        _remove_dropout()


def _remove_dropout():
    functional = torch.nn.functional
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                 "feature_alpha_dropout"):
        original = getattr(functional, name, None)
        if original is None or getattr(original, "_parity_no_dropout", False):
            continue

        def no_dropout(input, p=0.5, training=True, inplace=False, _original=original):  # noqa: A002
            return _original(input, 0.0, training, inplace)
        no_dropout._parity_no_dropout = True  # pylint: disable=protected-access
        setattr(functional, name, no_dropout)


_NOTED = set()


def _note_once(key, text):
    """An msprobe call that has no meaning for online checking: said once, never raised."""
    if key not in _NOTED:
        _NOTED.add(key)
        print(f"[parity] {text}", file=sys.stderr, flush=True)


def _drive_from_dataloader():
    """msprobe's enable_dataloader (its _iter_tracer, msprobe 8.1.1
    pytorch/debugger/precision_debugger.py): every DataLoader iterator's __next__ ends the step
    begun by the previous batch (stop, step) and starts the next once the batch is fetched, so
    that the DataLoader's own work (collation, pinning) is never captured. The script's own
    start() and stop() are skipped meanwhile; after the last batch (StopIteration) they work
    again, as in msprobe."""
    from torch.utils.data import dataloader  # pylint: disable=import-outside-toplevel
    original = dataloader._BaseDataLoaderIter.__next__  # pylint: disable=protected-access
    if getattr(original, "_parity_drives", False):
        return

    def __next__(iterator, *args, **kwargs):
        debugger = PrecisionDebugger._instance  # pylint: disable=protected-access
        if debugger is None or not debugger._initialized:  # pylint: disable=protected-access
            return original(iterator, *args, **kwargs)
        debugger._dataloader_driving = False  # pylint: disable=protected-access
        if debugger._started:  # pylint: disable=protected-access
            debugger.stop()
            debugger.step()
        batch = original(iterator, *args, **kwargs)
        debugger.start()
        debugger._dataloader_driving = True  # pylint: disable=protected-access
        return batch

    __next__._parity_drives = True
    dataloader._BaseDataLoaderIter.__next__ = __next__  # pylint: disable=protected-access


class PrecisionDebugger:
    """msprobe's PrecisionDebugger API on Parity's agent: one checking session per process.

    As in msprobe, it is a singleton (constructing it again returns the first instance, whose
    configuration stays) and every call is a classmethod (``PrecisionDebugger.step()`` works
    as ``debugger.step()``). ``config_path`` is an msprobe config.json (task "tensor" with
    ``online_run_ut``); keyword arguments override its keys (``step=[0, 1]``, ``host="..."``,
    ``fail_fast=True``, ...). msprobe's loop works as written: ``start()`` begins the session or
    resumes it, ``stop()`` pauses capture and returns at once, ``step()`` ends a step whether
    capturing or not, counting from the construction (so ``step: [2, 3]`` means the training's
    iterations 2 and 3 even when ``start()`` is first called later). The session ends at
    ``close()``, at process exit, or once the step passes the last step the config's ``step``
    lists.
    """

    _instance = None

    def __new__(cls, *args, **kwargs):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._initialized = False
        return cls._instance

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None,
                 step=None, **overrides):
        if self._initialized:
            return  # msprobe's singleton: the first construction's configuration stays
        config, text = {}, None
        if config_path is None:
            config_path = os.environ.get("PARITY_CONFIG")
        if config_path is not None:
            try:
                with open(config_path, encoding="utf-8") as f:
                    text = f.read()
                config = json.loads(text)
            except OSError as e:
                raise ValueError(f"Parity configuration: {config_path}: {e.strerror}") from e
            except ValueError:
                config = None  # the agent's reader names the file, line and column below
        for key, value in (("task", task), ("dump_path", dump_path), ("level", level),
                           ("step", step)):
            if value is not None:
                overrides[key] = value
        self._ops = load_agent()
        # The configuration is checked here, by the agent's own reader, as start() will read it:
        # every problem at once, with the file and its lines (a keyword argument has no line).
        if config is None or not overrides:
            error = self._ops.check_config(text or "{}", config_path or "config")
        else:
            error = self._ops.check_config(json.dumps(_merge(copy.deepcopy(config), overrides)),
                                           f"{config_path or 'config'} with the keyword arguments")
        if error:
            raise ValueError("Parity configuration: " + error)
        self._config = _merge(config, overrides)
        # `seed` / `is_deterministic`: Parity's keys (msprobe 8.1.1's PrecisionDebugger reads
        # neither and seeds nothing; its run_ut seeds), applied when the config names either,
        # dropout left as it is.
        if "seed" in self._config or "is_deterministic" in self._config:
            seed_all(self._config.get("seed", 1234), self._config.get("is_deterministic", False),
                     rm_dropout=False)
        self._config.setdefault("tensor", {}).setdefault("online_run_ut", True)
        self._model = model
        self._hooks = []
        self._started = False
        self._capturing = False  # between start() and stop()
        self._module_dump = None  # the module_dump() region that started capturing, if any
        self._call_site = None  # the mode naming torch calls (parity.api_names "call_site")
        self._step = 0  # the training's step, counted from here as msprobe counts it
        self._dataloader_driving = False  # enable_dataloader: the DataLoader starts and stops
        # parity.replicas: the digests of what every data-parallel replica must hold alike
        # (docs/replicas.md), hooked at the first start().
        kinds = (self._config.get("parity") or {}).get("replicas") or []
        self._replicas = _replicas.Replicas(self._ops, kinds) if kinds else None
        self._initialized = True
        if self._config.get("enable_dataloader"):
            _drive_from_dataloader()

    @classmethod
    def _get(cls):
        if cls._instance is None or not cls._instance._initialized:
            raise RuntimeError("PrecisionDebugger is not created: construct it with the "
                               "configuration first, e.g. PrecisionDebugger(config_path=...)")
        return cls._instance

    @classmethod
    def start(cls, model=None, token_range=None):
        """Starts capturing, or resumes after stop(). With a model (a module, or a list of
        modules: Megatron's model chunks), results name module paths."""
        self = cls._get()
        if self._dataloader_driving:
            _note_once("dataloader_start", "start(): enable_dataloader is on, so the DataLoader "
                       "starts and stops the session: this call is skipped, as msprobe skips it")
            return
        if token_range is not None:
            _note_once("token_range", "start(token_range=...): msprobe's token window for "
                       "inference dumps has no meaning for online checking: every call of the "
                       "selected steps is checked")
        model = model if model is not None else self._model
        if not self._started:
            ranks = _distributed_rank()
            if ranks is not None:
                os.environ["RANK"], os.environ["WORLD_SIZE"] = str(ranks[0]), str(ranks[1])
        if not self._started and self._replicas is not None and \
                not (self._config.get("parity") or {}).get("run_id"):
            # Replica reports meet on the server by run: every rank must name the same one.
            run_id = _replicas.shared_run_id()
            if run_id:
                self._config.setdefault("parity", {})["run_id"] = run_id
        error = self._ops.start(json.dumps(self._config))
        if error:
            raise ValueError("Parity configuration: " + error)
        self._capturing = True
        parity = self._config.get("parity", {})
        # The call-site names cost every torch call a Python dispatch: only when calls are checked.
        if not self._call_site and parity.get("check_calls", True) and \
                parity.get("api_names", "call_site") == "call_site":
            try:
                path = _library_path()
            except FileNotFoundError:
                path = None  # LD_PRELOAD brought the agent in: its symbols are the process's
            self._call_site = _call_site.enter(path)
        if not self._started:
            self._started = True
            self._ops.use_explicit_steps()  # msprobe's API: step() marks the steps
            if self._step:
                self._ops.set_step(self._step)  # steps ended before the first start
            atexit.register(self.close)
        if model is not None and not self._hooks:
            self._hook_modules(model)
        if self._replicas is not None:
            if model is not None:
                self._replicas.name_parameters(model)
            self._replicas.install()

    def _hook_modules(self, model):
        ops = self._ops

        def pre(name):
            def hook(module, args):
                ops.push_module(name)
            return hook

        def post(module, args, output):
            ops.pop_module()

        # A list of modules (model chunks): each one's paths start with its index, as msprobe
        # names them.
        chunks = [("", model)] if isinstance(model, torch.nn.Module) else \
            [(f"{i}.", m) for i, m in enumerate(model)]
        for prefix, chunk in chunks:
            if not isinstance(chunk, torch.nn.Module):
                raise TypeError("start(model): a torch.nn.Module or a list of them, got "
                                f"{type(chunk).__name__}")
            for name, module in chunk.named_modules():
                path = prefix + name if name else (prefix.rstrip(".") or "model")
                self._hooks.append(module.register_forward_pre_hook(pre(path)))
                self._hooks.append(module.register_forward_hook(post))

    @classmethod
    def stop(cls):
        """Pauses capturing and returns at once: nothing waits for the server."""
        self = cls._get()
        if self._dataloader_driving:
            _note_once("dataloader_stop", "stop(): enable_dataloader is on, so the DataLoader "
                       "starts and stops the session: this call is skipped, as msprobe skips it")
            return
        self._ops.stop()
        self._capturing = False
        self._leave_call_site()

    def _leave_call_site(self):
        # The naming mode costs every torch call a Python dispatch: not while nothing is
        # captured. It stays when the training entered a mode of its own after it.
        if self._call_site and _call_site.leave(self._call_site):
            self._call_site = None

    @classmethod
    def forward_backward_dump_end(cls):
        """msprobe's end of the forward to check: forward calls after it are not captured (the
        optimizer's, in its documented loop), while the backward of what was captured still is,
        wherever it is called (msprobe's docs, 05 §2.2, put it before loss.backward(); msprobe 8.1.1
        collects that backward), until stop() or start()."""
        self = cls._get()
        self._ops.end_forward()

    @classmethod
    def step(cls):
        """Ends a training step; raises PrecisionError under fail_fast after an error verdict."""
        self = cls._get()
        self._step += 1
        if self._replicas is not None:
            self._replicas.new_step()
        if not self._started:
            return  # counted here; the session takes the count at its first start()
        error = self._ops.step()
        if error:
            raise PrecisionError(error)

    @classmethod
    def set_init_step(cls, step):
        """msprobe's resumed run: the current step becomes `step` (an int >= 0)."""
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ValueError(f"set_init_step: step must be an integer >= 0, got {step!r}")
        self = cls._get()
        self._step = step
        if self._started:
            self._ops.set_step(step)

    @classmethod
    def register_custom_api(cls, module, api, api_prefix=None):
        """msprobe wraps a Python function to dump it as an API. Parity checks the operators
        any function calls (aten, npu, custom ops alike), so there is nothing to wrap."""
        cls._get()
        if not hasattr(module, api):
            raise ValueError(f"register_custom_api: {module!r} has no {api!r}")
        _note_once("register_custom_api", "register_custom_api: nothing to wrap: Parity checks "
                   "every operator a custom API calls (docs/migration.md)")

    @classmethod
    def restore_custom_api(cls, module, api):
        cls._get()
        if not hasattr(module, api):
            raise ValueError(f"restore_custom_api: {module!r} has no {api!r}")

    @classmethod
    def save(cls, variable, name, save_backward=True):
        """msprobe's save() dumps a variable at level "debug"; Parity writes no dump."""
        cls._get()
        _note_once("save", "save(): msprobe's variable dump has no online equivalent: Parity "
                   "writes no dump (error data of failing calls is saved by the server)")

    @classmethod
    def flush(cls, timeout_s=30.0):
        """Waits until every captured call has its verdict; False on timeout."""
        return bool(cls._get()._ops.flush(int(timeout_s * 1000)))

    @classmethod
    def close(cls):
        """Ends the session: delivers what is queued (at most parity.flush_timeout_ms), logs the
        counters. Runs by itself at exit. Idempotent."""
        self = cls._get()
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._replicas is not None:
            self._replicas.uninstall()
        self._leave_call_site()
        self._ops.close()

    @classmethod
    def set_replica_group(cls, group):
        """The data-parallel group whose replicas the optimizer's gradients and parameters are
        (parity.replicas "gradients", "parameters"): a process group or a list of global ranks;
        None (the default) is the whole world. With tensor or pipeline parallelism, give the
        data-parallel group: ranks of other groups hold other shards by design."""
        self = cls._get()
        if self._replicas is None:
            raise ValueError("set_replica_group: parity.replicas is not set in the configuration")
        self._replicas.set_group(group)

    @staticmethod
    def counters():
        """The agent's counters, as `debugger.counters()` (the same dict as parity.counters())."""
        return _agent_counters()


def module_dump(module, dump_name):
    """msprobe's module_dump: the calls between it and module_dump_end() are checked, named after
    `dump_name` (their module path). Outside start()/stop() it starts capturing, and
    module_dump_end() stops it again; inside, the capture goes on as it was."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"module_dump: module must be a torch.nn.Module, got "
                        f"{type(module).__name__}")
    if not isinstance(dump_name, str) or not dump_name:
        raise TypeError(f"module_dump: dump_name must be a non-empty str, got {dump_name!r}")
    debugger = PrecisionDebugger._get()  # pylint: disable=protected-access
    if debugger._module_dump is not None:  # pylint: disable=protected-access
        raise RuntimeError(f"module_dump({dump_name!r}): module_dump("
                           f"{debugger._module_dump[0]!r}) has not ended: call "  # pylint: disable=protected-access
                           "module_dump_end() first")
    started = not debugger._capturing  # pylint: disable=protected-access
    if started:
        PrecisionDebugger.start()
    debugger._ops.push_module(dump_name)  # pylint: disable=protected-access
    debugger._module_dump = (dump_name, started)  # pylint: disable=protected-access


def module_dump_end():
    """Ends the region module_dump() began (stops capturing if module_dump started it)."""
    debugger = PrecisionDebugger._get()  # pylint: disable=protected-access
    region = debugger._module_dump  # pylint: disable=protected-access
    if region is None:
        raise RuntimeError("module_dump_end(): no module_dump() region is open")
    debugger._module_dump = None  # pylint: disable=protected-access
    debugger._ops.pop_module()  # pylint: disable=protected-access
    if region[1]:
        PrecisionDebugger.stop()


def _agent_counters():
    return json.loads(load_agent().counters())


def counters():
    """The agent's counters: captured, sent, dropped (by reason), verdicts, ..."""
    return _agent_counters()
