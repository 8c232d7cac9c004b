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

_BACKENDS = {"c": "treecomp.backends.c", "arrays": "treecomp.backends.arrays",
             "llvm": "treecomp.backends.llvm"}


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


#: above this many nodes, backend="auto" prefers tables to code generation (see choose)
CODEGEN_MAX_NODES = 20_000
#: without a C compiler, the LLVM JIT is used up to this many nodes (its build time grows too)
LLVM_MAX_NODES = 200_000


def choose(forest) -> str:
    """backend='auto': which backend compiles `forest` on this machine.

    Rule (measured on the 2-core dev box, see the arrays backend report):
    - a C compiler is available (toolchain.have_compiler()):
        total nodes <= CODEGEN_MAX_NODES (20k) -> "c"   (generated code; builds in ~1 s or less)
        larger                                  -> "arrays" (flattening takes milliseconds; the
          generic kernel is as fast as generated code on shallow boosted trees (AVX2: 3.0 vs
          5.4 us/row on 500 depth-6 trees) while the C build grows to seconds or minutes)
    - no C compiler:
        "llvm" when that backend is registered and the model has <= LLVM_MAX_NODES nodes
        (in-process JIT, no compiler needed), else "arrays" (whose kernel then falls back to a
        numpy walk of the same tables: exact, but slower).
    """
    from .. import toolchain
    n_nodes = sum(t.n_nodes for t in forest.trees)
    if toolchain.have_compiler():
        return "c" if n_nodes <= CODEGEN_MAX_NODES else "arrays"
    if "llvm" in names() and n_nodes <= LLVM_MAX_NODES:
        return "llvm"
    return "arrays"
