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
