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


#: the per-row cost model that decides between the byte walks and generated code (see
#: byte_walk_pays): ns per quantised column, ns per tree level of a byte walk, of generated code;
#: float32 input (XGBoost) / float64 input (LightGBM, HistGradientBoosting). Least squares over
#: a grid of models (5-80 trees, depth 3-14, 10-200 features) timed on the 2-core dev box, 1
#: thread, by bench/calibrate_auto.py (float32 refit 2026-11-21 after the lane quantiser and
#: the byte mux; float64's refit, (5.1, 0.39, 3.1), makes the same 36 choices as these).
BYTE_WALK_COST = {"float32": (2.11, 0.198, 1.87), "float64": (2.7, 0.26, 1.8)}


def byte_walk_pays(forest) -> bool:
    """Do the arrays backend's byte walks beat generated code on `forest` (per row)?

    A byte walk first quantises each row: one column per feature and chunk of up to 255
    distinct thresholds (a search over them), then every tree costs a fraction of a compare per
    level. Generated code pays a compare and branch per level and nothing up front. So with few
    trees and many used features (5 trees of depth 6 over 37 columns: 55 vs 35 ns/row) code
    wins; the estimate is  cols * a + levels * b  against  levels * c  (BYTE_WALK_COST), where
    levels sums the trees' depths. In sample (bench/calibrate_auto.py, 2026-11-21: the
    constants were fitted on these timings) it picks within 10% of the faster of the two for 17
    of the 18 byte-walk-eligible XGBoost models of the grid (worst 1.77x: 20 trees of depth 6
    over 177 columns, c 717 vs arrays 405 ns/row) and for 34 of 36 LightGBM ones (worst 1.41x:
    5 trees of depth 3 over 200 features, arrays 64 vs c 45). The previous float32 constants,
    fitted before the lane quantiser, were within 10% on 14 of 18 there (worst 3.35x).
    """
    cols, levels = byte_walk_terms(forest)
    if not cols:
        return False
    a, b, c = BYTE_WALK_COST["float64" if str(forest.input_dtype) == "float64" else "float32"]
    return cols * a + levels * b <= levels * c


def byte_walk_terms(forest) -> tuple[int, int]:
    """(cols, levels) of byte_walk_pays' estimate: the columns a row is quantised into (one per
    feature and chunk of distinct thresholds, arrays.derived.quant_chunk_size; 0 without splits), the
    trees' depths summed."""
    from .arrays.derived import quant_chunk_size
    import numpy as np
    feats, thrs, levels = [], [], 0
    for t in forest.trees:
        inner = t.feature >= 0
        feats.append(t.feature[inner])
        thrs.append(t.threshold[inner])
        levels += t.max_depth
    f, th = np.concatenate(feats), np.concatenate(thrs)
    if not len(f):
        return 0, levels
    pairs = np.unique(np.stack([f.astype(np.float64), th]), axis=1)
    _, per_feature = np.unique(pairs[0], return_counts=True)
    return int(np.ceil(per_feature / quant_chunk_size(per_feature)).sum()), levels


def choose(forest, artifact: str | None = None) -> str:
    """backend='auto': which backend compiles `forest` on this machine.

    artifact="so": the caller needs a shared library (the CLI writing ``-o model.so``). With a
    C compiler: "arrays" where the in-process choice below is "arrays" (its .so is the same
    kernel on the same tables, linked from the package's kernel archive: backends/arrays/so.py),
    else "c" up to CODEGEN_MAX_NODES_F64 nodes, else "llvm" (faster to build on big models).
    Without one: "llvm" where its build fits CODEGEN_MAX_SECONDS (codegen_fits), else "arrays"
    (whose .so needs a compiler: its error says so; a .tc table file needs none).

    Rule (measured on the 2-core dev box with bench/, 1 thread, us/row):
    - a C compiler is available (toolchain.have_compiler()):
        all trees of <= 128 leaves, or all numeric heaps of depth <= 8 (arrays.tables.quant_eligible),
          and the per-row cost model says quantising pays (byte_walk_pays: enough trees for
          the columns the rows must be quantised into)
          -> "arrays": its byte walks beat generated code 2-9x (500 XGBoost trees of depth 6:
          0.8 vs 3.7; GB 300x depth 4: 0.43 vs 1.2; depth 8: 1.6 vs 3.9; 500 LightGBM trees of
          63 leaves: 1.6 vs 14; HGB with categories: 0.55 vs 5.0) and flatten in milliseconds
        otherwise total nodes <= CODEGEN_MAX_NODES (20k), or <= CODEGEN_MAX_NODES_F64 (100k)
          for float64 input -> "c" (the arrays kernel's float64 walks are scalar)
        larger -> "arrays" (deep forests: rf-deep c 2.5 vs arrays 0.95; the C build grows to
          tens of seconds)
    - no C compiler but the package's prebuilt arrays kernel (a wheel or a built install):
        the same rule, with "llvm" in place of "c"
    - neither:
        "llvm" when that backend is registered and the model has <= LLVM_MAX_NODES nodes
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
        if quant_eligible(forest):
            if byte_walk_pays(forest):
                return "arrays"
            return gen if n_nodes <= CODEGEN_MAX_NODES_F64 else "arrays"
        limit = CODEGEN_MAX_NODES_F64 if forest.input_dtype == "float64" else CODEGEN_MAX_NODES
        return gen if n_nodes <= limit else "arrays"
    if "llvm" in names() and n_nodes <= LLVM_MAX_NODES and codegen_fits("llvm", n_nodes):
        return "llvm"
    return "arrays"


def _prebuilt_arrays_kernel() -> bool:
    """Whether the package ships an arrays kernel that loads here (no compiler needed)."""
    from .arrays import native as arrays_native
    try:
        arrays_native.native_library()
    except Exception:  # no kernel: the compiler-free paths decide
        return False
    return arrays_native.KERNEL_ORIGIN == "prebuilt"
