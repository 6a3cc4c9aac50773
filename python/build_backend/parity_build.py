"""Parity's build backend (pyproject.toml): setuptools' own, after checking the things that make
pip fail with a message that does not say what to do (docs/install.md#troubleshooting):

- pip's build isolation (no --no-build-isolation): the agent is compiled against the torch
  installed in the training's environment, which an isolated build cannot see. pyproject.toml
  asks for no build requirements, so pip reaches this check even on a host with no index;
- no torch in this interpreter;
- no setuptools (a venv of Python 3.12 or later has none);
- no bdist_wheel (setuptools before 70.1 takes it from the `wheel` package, which a plain venv of
  Python 3.11 lacks: pip said "invalid command 'bdist_wheel'").

Each is one line naming the command that fixes it, and the build stops before anything is
compiled. The checks use the standard library only: this module runs wherever pip runs it.
"""
import os
import sys

_INSTALL = "python -m pip install --no-build-isolation <checkout>/python"


def _stop(problem, fix):
    raise SystemExit(f"parity: {problem}.\nparity: {fix}\n(docs/install.md#troubleshooting)")


def _isolated():
    return any("pip-build-env-" in p for p in sys.path) or bool(os.environ.get("PEP517_ISOLATED"))


def _check():
    if _isolated():
        _stop("pip is building in an isolated environment, where the torch that the agent must be "
              "compiled against is not visible",
              f"run pip with --no-build-isolation, in the training's environment: {_INSTALL}")
    try:
        import setuptools  # pylint: disable=import-outside-toplevel
    except ImportError:
        _stop(f"setuptools is not installed in {sys.prefix} (venvs of Python 3.12 and later have "
              "none)", "python -m pip install setuptools wheel, then: " + _INSTALL)
    version = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
    if version < (61, 0):
        _stop(f"setuptools {setuptools.__version__} is too old (61 or later reads pyproject.toml)",
              "python -m pip install -U setuptools wheel, then: " + _INSTALL)
    if version < (70, 1):  # bdist_wheel moved into setuptools in 70.1
        try:
            import wheel  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
        except ImportError:
            _stop(f"setuptools {setuptools.__version__} needs the 'wheel' package to build a "
                  f"wheel, and {sys.prefix} has none",
                  "python -m pip install wheel (or setuptools>=70.1), then: " + _INSTALL)
    try:
        import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        _stop(f"torch is not importable by {sys.executable}",
              "install the training's torch into this environment first, then: " + _INSTALL)


def _backend():
    _check()
    from setuptools import build_meta  # pylint: disable=import-outside-toplevel
    return build_meta


# PEP 517 hooks. pyproject.toml lists no build requirements: everything is checked above.
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _backend().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _backend().build_wheel(wheel_directory, config_settings, metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    backend = _backend()
    if not hasattr(backend, "prepare_metadata_for_build_editable"):
        _stop("this setuptools cannot make an editable install (64 or later can)",
              "python -m pip install -U setuptools wheel, or install without -e")
    return backend.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    backend = _backend()
    if not hasattr(backend, "build_editable"):
        _stop("this setuptools cannot make an editable install (64 or later can)",
              "python -m pip install -U setuptools wheel, or install without -e")
    return backend.build_editable(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    return _backend().build_sdist(sdist_directory, config_settings)
