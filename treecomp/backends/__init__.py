"""The backend registry: every backend turns a Forest into a kernel honouring treecomp.h.

A backend module exposes ``NAME``, ``DEFAULTS`` (its options) and
``build(forest, progress=None, **options) -> kernel`` (see treecomp.loader for the kernel
interface). Backends that write non-.so artifacts also expose ``MAGIC`` (the first bytes of their
artifact files) and ``load_bytes(data) -> kernel``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

_BACKENDS = {"c": "treecomp.backends.c"}


def names() -> list[str]:
    return list(_BACKENDS)


def get(name: str) -> ModuleType:
    if name not in _BACKENDS:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(_BACKENDS)} (or 'auto')")
    return importlib.import_module(_BACKENDS[name])


def kernel_loader(kind: str) -> Callable[[bytes], Any]:
    for name in _BACKENDS:
        mod = get(name)
        if getattr(mod, "KIND", None) == kind and hasattr(mod, "load_bytes"):
            return mod.load_bytes
    raise ValueError(f"no backend loads artifacts of kind {kind!r}")


def kind_of_artifact(data: bytes) -> str | None:
    for name in _BACKENDS:
        mod = get(name)
        magic = getattr(mod, "MAGIC", None)
        if magic and data.startswith(magic):
            return mod.KIND
    return None


def choose(forest) -> str:
    """backend='auto': the C backend when a compiler exists (other rules arrive with backends)."""
    return "c"
