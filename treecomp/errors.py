"""The exceptions treecomp raises: one hierarchy, so callers can catch what they mean."""

from __future__ import annotations


class TreecompError(Exception):
    """Base class of every error treecomp raises on purpose."""


class UnsupportedModelError(TreecompError):
    """The model uses a feature treecomp does not handle (named in the message)."""


class InvalidModelError(TreecompError, ValueError):
    """The model (or IR, or model file) is malformed or inconsistent."""


class NotFittedError(InvalidModelError):
    """The estimator has not been fitted."""


class CompileError(TreecompError):
    """A backend or the system toolchain failed to build the model."""


class PlatformError(CompileError):
    """treecomp has not verified its native paths (building, loading, JIT-compiling code) on
    this operating system / CPU architecture (treecomp.platform.check_platform): the message
    names it and what still works. A CompileError too, so backend="auto" falls back to the
    pure-Python paths."""


class ArtifactError(TreecompError, ValueError):
    """A compiled artifact (.so, .tc) is missing, corrupt, or built for another ABI."""


class WriteError(TreecompError, OSError):
    """An artifact or cache file could not be written (full disk, unwritable or missing
    directory). The message names the path; the OSError that caused it is ``__cause__``. It is
    an OSError too, so code that caught the bare OSError before keeps working."""


class KernelError(TreecompError, RuntimeError):
    """A compiled kernel failed a call: the message names its runtime/treecomp.h return code
    (``code``) and what it means (invalid arguments, out of memory, ...). A RuntimeError too,
    as the bare RuntimeError raised before was."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class TreecompWarning(UserWarning):
    """A warning treecomp issues on purpose (filter it with
    ``warnings.filterwarnings("ignore", category=treecomp.errors.TreecompWarning)``)."""


class SlowPathWarning(TreecompWarning):
    """treecomp runs a slower path than this install could have (no native kernel, a requested
    instruction set the CPU lacks, no C compiler): the message names the cause and what to do.
    Issued once per process per cause (warn_slow_path)."""


#: the causes warn_slow_path has warned about in this process
_SLOW_WARNED: set[str] = set()


def warn_slow_path(cause: str, message: str) -> bool:
    """Issue one SlowPathWarning per process for `cause` (a short key naming why: "no-kernel",
    "isa-avx512", ...); later calls with the same cause are silent. Returns whether it warned.
    The warning points at the first caller outside treecomp (the user's line), so warning
    filters by module and the printed location name the user's code."""
    if cause in _SLOW_WARNED:
        return False
    _SLOW_WARNED.add(cause)
    import os
    import sys
    import warnings
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2  # level 2: warn_slow_path's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, SlowPathWarning, stacklevel=level if frame is not None else 2)
    return True


def reset_slow_path_warnings() -> None:
    """Forget which slow-path causes were warned about (tests: warn again)."""
    _SLOW_WARNED.clear()
