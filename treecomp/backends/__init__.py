"""The backend registry: every backend turns a Forest into a kernel honouring treecomp.h.

A backend module exposes ``NAME``, ``DEFAULTS`` (its options) and
``build(forest, progress=None, **options) -> kernel`` (see treecomp.loader for the kernel
interface). Backends that write non-.so artifacts also expose ``MAGIC`` (the first bytes of their
artifact files) and ``load_bytes(data) -> kernel``; a backend whose .so can be checked beyond its
seal exposes ``check_library(library)`` (library_checker: the arrays backend's tables).
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


def loads_mapped(kind: str) -> bool:
    """Does the load_bytes of artifacts of `kind` take a read-only mmap.mmap of the file (the
    backend's LOADS_MAPPED), so that treecomp.load(path, mmap=True) can map the file instead of
    reading it? (Kinds that cannot are read whatever mmap says.)"""
    for name in _BACKENDS:
        mod = get(name)
        if getattr(mod, "KIND", None) == kind:
            return bool(getattr(mod, "LOADS_MAPPED", False))
    return False


def library_checker(backend: str) -> Callable[[Any], None] | None:
    """`backend`'s check of a loaded shared library it wrote, beyond the seal every library
    carries (``check_library(library)``, a native.SharedLibrary: the arrays backend validates
    the tables its library runs), or None."""
    if backend not in _BACKENDS:
        return None
    return getattr(get(backend), "check_library", None)


def kind_of_artifact(data: bytes) -> str | None:
    for name in _BACKENDS:
        mod = get(name)
        magic = getattr(mod, "MAGIC", None)
        if magic and data.startswith(magic):
            return mod.KIND
    return None


#: above this many nodes, backend="auto" prefers tables to code generation (see choose)
CODEGEN_MAX_NODES = 20_000
#: float64-input models (LightGBM, HistGradientBoosting) keep generated code up to this size:
#: the arrays kernel's float64 walks are scalar (lgbm-binary, 62k nodes: c 14.3 vs arrays 17.5
#: us/row), and the C build stays in seconds
CODEGEN_MAX_NODES_F64 = 100_000
#: without a C compiler, the LLVM JIT is used up to this many nodes (its build time grows too)
LLVM_MAX_NODES = 200_000

#: the longest build backend="auto" may start with the c or llvm backend, in seconds
CODEGEN_MAX_SECONDS = 30.0
#: build seconds a node costs c / llvm (cold cache), an upper bound for one core of the 2-core
#: dev box, linear in the nodes, rounded up: bench/huge_models.py codegen, 2026-11-28, three
#: shapes at 25k / 100k / 400k nodes: c 0.8 / 1.7-2.7 / 6.3-9.2 s of CPU (compiler processes
#: included; wall on the loaded box up to 38 s at 400k), llvm up to 16 s wall at 400k; and the
#: 2026-11-27 runs on 1.3M-3.8M nodes (c 17-34 s, llvm 110 s)
CODEGEN_SECONDS_PER_NODE = {"c": 2.5e-5, "llvm": 4.5e-5}


def codegen_fits(backend: str, n_nodes: int) -> bool:
    """Whether backend="auto" may build `n_nodes` nodes with `backend` (c / llvm): its build
    is estimated (CODEGEN_SECONDS_PER_NODE) to take at most CODEGEN_MAX_SECONDS. Other
    backends (tables) always fit."""
    per_node = CODEGEN_SECONDS_PER_NODE.get(backend)
    return per_node is None or n_nodes * per_node <= CODEGEN_MAX_SECONDS


def byte_walk_pays(forest) -> bool:
    """Does the arrays backend, on the path it picks itself (a byte walk, the interval walk,
    the float heap or deep walk), beat generated code on `forest` per row? By the cost model of
    treecomp.backends.cost (cost.arrays_pays: a few terms of the forest times constants fitted
    on timings by bench/calibrate_auto.py; its docstring has the fit and its validation)."""
    from . import cost
    return cost.arrays_pays(forest)


def choose(forest, artifact: str | None = None) -> str:
    """backend='auto': which backend compiles `forest` on this machine.

    artifact="so": the caller needs a shared library (the CLI writing ``-o model.so``). With a
    C compiler: "arrays" where the in-process choice below is "arrays" (its .so is the same
    kernel on the same tables, linked from the package's kernel archive: backends/arrays/so.py),
    else "c" up to CODEGEN_MAX_NODES_F64 nodes, else "llvm" (faster to build on big models).
    Without one: "llvm" where its build fits CODEGEN_MAX_SECONDS (codegen_fits), else "arrays"
    (whose .so needs a compiler: its error says so; a .tc table file needs none).

    Rule (measured on the 2-core dev box, 1 thread, us/row):
    - a C compiler is available (toolchain.have_compiler()):
        up to CODEGEN_MAX_NODES_F64 (100k) nodes where the arrays backend would run a byte walk
          (arrays.tables.quant_eligible) or the input is float64, else up to CODEGEN_MAX_NODES
          (20k; the C build grows to tens of seconds beyond): the per-row cost model
          (treecomp.backends.cost: the path the arrays backend would take, its estimate against
          generated code's, from the forest's columns, levels, heap slots, nodes, expected node
          steps and row width) -> "arrays" where its estimate is no dearer, else "c".
          The byte walks beat generated code 2-9x on most forests (500 XGBoost trees of depth
          6: 0.8 vs 3.7; 500 LightGBM trees of 63 leaves: 1.6 vs 14; 100 trees of depth 8 over
          2,000 features: arrays, where the previous rule's c ran 2.7x slower); generated code
          wins on a few trees over many columns (2 XGBoost trees of depth 6 over 100 features:
          28 vs 110 ns/row), and on deep trees over wide rows
        larger -> "arrays" (deep forests: rf-deep c 2.5 vs arrays 0.95; the C build grows to
          tens of seconds)
    - no C compiler but the package's prebuilt arrays kernel (a wheel or a built install):
        the same rule, with "llvm" in place of "c"
    - neither:
        "arrays" where the byte walks pay (the rule above) and llvmlite builds them as LLVM
        vector code (arrays isa "llvm-vec": on the 500-tree XGBoost / LightGBM bench models
        0.38x / 0.66x the C kernel's AVX-512 speed, 0.78x its AVX2 speed, 3.1x / 10.4x the
        llvm backend's: docs/benchmarks.md);
        else "llvm" when that backend is registered and the model has <= LLVM_MAX_NODES nodes
        (in-process JIT, no compiler needed), else "arrays" (whose kernel then falls back to a
        numpy walk of the same tables: exact, but slower).
    """
    from .. import toolchain
    n_nodes = sum(t.n_nodes for t in forest.trees)
    if artifact == "so":
        if toolchain.have_compiler() and choose(forest) == "arrays":
            return "arrays"  # linking its .so needs the compiler too (arrays/so.py)
        if toolchain.have_compiler() and (n_nodes <= CODEGEN_MAX_NODES_F64 or "llvm" not in names()):
            return "c"
        # (without a compiler no other backend writes a .so: the arrays one then says so)
        return "llvm" if "llvm" in names() and codegen_fits("llvm", n_nodes) else "arrays"
    cc = toolchain.have_compiler()
    if cc or _prebuilt_arrays_kernel():
        # the arrays kernel runs natively (built here, or shipped in the package); the code
        # generator it is weighed against is c, or llvm on a host without a compiler (its
        # code ran 0.93x-1.23x c's time on the nine bench cases of 2026-11-22)
        gen = "c" if cc else "llvm" if "llvm" in names() else "arrays"
        gen = gen if codegen_fits(gen, n_nodes) else "arrays"
        from .arrays.tables import quant_eligible
        from . import cost
        limit = CODEGEN_MAX_NODES_F64 if quant_eligible(forest) or forest.input_dtype == "float64" \
            else CODEGEN_MAX_NODES
        if gen == "arrays" or n_nodes > limit:
            return "arrays"
        return "arrays" if cost.arrays_pays(forest, gen) else gen
    from .. import platform
    if not ("llvm" in names() and n_nodes <= LLVM_MAX_NODES and codegen_fits("llvm", n_nodes)
            and platform.native_ok()):
        return "arrays"  # nothing else runs it (and no cost to weigh on a huge forest)
    if _vec_byte_walk(forest):
        return "arrays"  # its kernel runs the byte walks as LLVM vector code (isa "llvm-vec")
    return "llvm"


def _vec_byte_walk(forest) -> bool:
    """Without any native arrays kernel: do the byte walks pay (byte_walk_pays, the C kernel's
    cost model: the llvm-vec kernel keeps its ratio to generated code, see docs/benchmarks.md)
    and can llvmlite build them here (arrays.vec, isa "llvm-vec")?"""
    from .arrays.tables import quant_eligible
    if not (quant_eligible(forest) and byte_walk_pays(forest)):
        return False
    from .arrays import vec
    return vec.available()


def _prebuilt_arrays_kernel() -> bool:
    """Whether the package ships an arrays kernel that loads here (no compiler needed)."""
    from .arrays import native as arrays_native
    try:
        arrays_native.native_library()
    except Exception:  # no kernel: the compiler-free paths decide
        return False
    return arrays_native.KERNEL_ORIGIN == "prebuilt"
