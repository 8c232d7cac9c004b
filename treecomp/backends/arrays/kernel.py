"""The arrays backend: a forest becomes flat tables, walked by a kernel compiled once per machine.

Code generation pays compile time that grows with the model; this backend instead flattens any
forest into contiguous struct-of-arrays tables in milliseconds (vectorised numpy, no per-node
Python loops) and evaluates them with one generic C kernel (runtime/kernels/arrays.c +
arrays_impl.c + quant_impl.c) that is shipped prebuilt in the package (or, from a source tree,
built once per machine and compiler: see native), never per model. The tables are the
artifact: a ``.tc`` file that ``treecomp.load`` reads back; or, saved as ``.so``, one
self-contained shared library holding the tables and the kernel (so.py).

This module is the backend interface (build / load_bytes / check_library, options) and
ArraysKernel (the loaded tables: their derived tables packed into the kernel's tc_tables, run);
the package's __init__ lists the other parts.

Exactness (same contract as the C backend): rows are cast to the forest's input dtype (round to
nearest), thresholds are lowered with passes.comparison_thresholds, NaN follows default_left
(folded into a ``nan_right`` bit), categorical nodes follow ir.py, and every row's margins start
at the base score and add the trees' leaf vectors in tree order in the accumulation dtype (leaf
values rounded to it once), then divide by n_trees when averaging: the interpreter's order.

Instruction set (option ``isa``): "auto" picks the best path the CPU has at load time
(``__builtin_cpu_supports``) whose once-per-process self-test (bit-exact agreement with the
baseline path on a fixed forest, ~30 ms) passes; "scalar", "avx2", "avx512" (x86-64), "neon",
"sve" (aarch64) force one (an error if the CPU lacks it). The vector paths cover float32 input (sklearn trees, XGBoost); float64
input (LightGBM, HistGradientBoosting) runs the baseline code on every path. Without the C
kernel (no prebuilt one that matches the sources, and no C compiler to build it), "auto" runs
the byte walks as LLVM vector code JIT-compiled by llvmlite (isa "llvm-vec", vec.py; after a
once-per-process self-test against the numpy walker), tables without a byte walk through a
generic llvmlite walker (isa "llvm"), or, if llvmlite fails too, a vectorised numpy walker (isa
"numpy"), with one SlowPathWarning per process naming the path. All can be forced, all are
exact.

Rows per block (option ``block_rows``, 0 = auto): 64 for shallow (heap) forests walked on
floats, so rows and trees stay in L1; 512 for byte walks over heaps (a tree's setup paid per
block); larger for big compact trees, so a tree's nodes are reused while cached (see
auto_block_rows for the measurements).
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from ...version import __version__
from ... import outputs, platform, toolchain
from ...errors import ArtifactError, CompileError, warn_slow_path
from ...ir import Forest, Head, Tree, head_of
from ...native import PAIRS, kernel_error
from . import native, so, vec, walkers
from .derived import (BV_LANES_MIN_TREES, DEEP_TOP_MAX, HEAP_PAD, QCIX_MAX_COLS, QUANT_ARRAYS,
                      ZLANES_MAX_DEPTH, ZLANES_MIN_TREES, ZREC_DEPTH, ZROW_MAX_COLS,
                      bitvec_tables, interval_lanes,
                      cat_byte_sets, category_rows, deep_tables, interval_masks, leaf_planes,
                      merge_nan_columns,
                      oblivious_heaps, quant_levels, quant_tables, zrow_lanes, zrow_records,
                      zrow_slots)
from .format import BACKEND, MAGIC, tables_from_bytes, tables_to_bytes, written_by  # noqa: F401 (MAGIC: the interface)
from .native import NATIVE_ISAS, NODE32, NODE64, CTables, native_library
from .tables import (CATEGORY_RULES, FF_CAT, LAYOUTS, MAX_HEAP_DEPTH, Tables, bad_table, excl_cumsum,
                     flatten, validate)

NAME = BACKEND
KIND = "arrays"
DEFAULTS: dict[str, Any] = {
    "layout": "auto",        # "auto" | "quant" | "bitvec" | "heap" | "compact" | "naive"
    "heap_max_depth": 8,     # deepest tree the heap layout takes (padding grows as 2^depth)
    "isa": "auto",           # "auto" | "scalar" | "avx2" | "avx512" | "neon" | "sve" | "llvm-vec" | "llvm" | "numpy"
    "block_rows": 0,         # rows per tree-major block; 0 = auto (see auto_block_rows)
    "ir": False,             # saved .tc / .so and pickles carry the model's IR (apply and
                             # contributions once loaded; ir.Forest.to_bytes: ~90 B a node,
                             # and a pickle 300 ms slower for 200 trees: off unless asked)
}
ISAS = ("auto", *NATIVE_ISAS, "llvm-vec", "llvm", "numpy")
#: the compiler-free paths (no C kernel needed): the byte walks as LLVM vector code, the
#: llvmlite walker, the numpy walker
FREE_ISAS = ("llvm-vec", "llvm", "numpy")


def options(**overrides: Any) -> dict[str, Any]:
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown arrays backend option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    opts = {**DEFAULTS, **{k: v for k, v in overrides.items() if v is not None}}
    if opts["layout"] not in LAYOUTS:
        raise ValueError(f"layout={opts['layout']!r}; expected one of {LAYOUTS}")
    if opts["isa"] not in ISAS:
        raise ValueError(f"isa={opts['isa']!r}; expected one of {ISAS}")
    d = int(opts["heap_max_depth"])
    if not 0 <= d <= MAX_HEAP_DEPTH:
        raise ValueError(f"heap_max_depth must be in [0, {MAX_HEAP_DEPTH}], got {d}")
    b = int(opts["block_rows"])
    if not 0 <= b <= 1 << 16:
        raise ValueError(f"block_rows must be in [1, 65536] (or 0: auto), got {b}")
    opts["heap_max_depth"], opts["block_rows"] = d, b
    return opts


def auto_block_rows(tables: "Tables") -> int:
    """Rows per tree-major block when the user does not say.

    Shallow (heap) trees: 64 rows, so the block of rows and the tree stay in L1 while all trees
    pass over it (the AVX-512 walk takes 64 rows at a time). Big compact trees (deep random
    forests) do not fit in L1 anyway; there the block must be large enough that one tree's nodes
    are reused by many rows while they sit in L2/L3: measured on 100 unlimited-depth sklearn
    trees (12.6k internal nodes each): 64 rows 20 us/row, 2048 11.5, 8192 7.5, 65536 6.0. So:
    4x the mean compact tree's internal nodes, within [64, 65536], and at most 4M row values.

    Byte walks over heaps (layout "quant"): 512 rows, at most 32k row values (the block's
    transposed float32 copy <= 128 KB). The walk is vectorised over 32-row groups and pays a
    tree's setup (its table pointers, depth dispatch, leaf planes) once per block, so 64 rows
    (two groups) paid it too often: measured in one process against 64 rows, 100k rows, 512
    rows took 0.92x the time on XGBoost binary depth 6, 0.92x on 10 classes, 0.96x on depth 8,
    0.89x / 0.87x on sklearn GB regressor / classifier (256-2048 all within noise of it).
    """
    A = tables.arrays
    compact = A["tree_layout"] == 1
    if not compact.any():
        if tables.meta.get("quant"):
            return int(min(512, max(64, (1 << 15) // max(1, tables.meta["n_features"]) // 64 * 64)))
        return 64
    mean_nodes = float(A["tree_nint"][compact].mean())
    b = int(min(max(64, 4 * mean_nodes), 1 << 16, max(64, (1 << 22) // tables.meta["n_features"])))
    return -(-b // 64) * 64



SELF_TEST: dict[str, bool] = {}


def self_test_forest(comparison: str, acc: str) -> Forest:
    """Heap trees of depth 0..9 (every lookup strategy of the vector walks) plus padding."""
    rng = np.random.default_rng(1234)
    trees = []
    for depth in range(10):
        n_int = (1 << depth) - 1
        n = 2 * n_int + 1
        left = np.full(n, -1)
        left[:n_int] = 2 * np.arange(n_int) + 1
        right = np.where(left >= 0, left + 1, -1)
        feat = np.where(left >= 0, rng.integers(0, 7, n), -1)
        val = np.where(left >= 0, 0.0, rng.normal(size=n))
        trees.append(Tree(left=left, right=right, feature=feat, threshold=rng.normal(size=n).round(1),
                          default_left=rng.random(n) < 0.5, value=val))
    return Forest(trees=tuple(trees), n_features=7, n_outputs=1, tree_output=np.zeros(len(trees)),
                  base_score=[0.5], comparison=comparison, accumulate_dtype=acc)


def self_test(isa: str) -> bool:
    """Does the `isa` path agree bit for bit with the baseline path on this CPU?

    Run once per process before backend="auto" picks a vector path: a safety net against a
    miscompiled or CPU-specific vector path ever answering wrongly (the AVX-512 build could not
    be run on the machine it was developed on). Every layout with a vector kernel is checked:
    the float heap walk, the quantised heap walk and the interval walk, in blocks of 96 and 256
    rows (short and whole 32- and 64-row groups; the AVX-512 sweep's four groups at once).
    """
    ok = SELF_TEST.get(isa)
    if ok is None:
        rng = np.random.default_rng(99)
        X = rng.normal(size=(256, 7)).round(1).astype(np.float32)
        X[rng.random(X.shape) < 0.05] = np.nan
        X[rng.random(X.shape) < 0.02] = np.inf
        ok = True
        for cmp_, acc in (("<", "float32"), ("<=", "float64")):
            f = self_test_forest(cmp_, acc)
            for layout, depth in (("heap", 9), ("quant", 8), ("bitvec", 7)):
                g = f.replace(trees=f.trees[:depth + 1], tree_output=f.tree_output[:depth + 1])
                tables = flatten(g, layout, 9)
                for block in (96, 256):  # whole and short row groups (32 or 64 rows)
                    outs = []
                    for which in (isa, "scalar"):
                        k = ArraysKernel(tables, head_of(g), isa=which, block_rows=block)
                        out = np.empty((len(X), 1), np.dtype(acc))
                        k.run(X, out)
                        outs.append(out)
                    ok &= bool(np.array_equal(outs[0], outs[1]))
        if not ok:
            import warnings
            warnings.warn(f"treecomp arrays kernel: the {isa} path disagrees with the baseline "
                          "path on this CPU; backend='auto' will not use it (please report)")
        SELF_TEST[isa] = ok
    return ok


def supported_isas() -> list[str]:
    """The C-kernel paths this machine can run (none without the kernel: no prebuilt one that
    matches and no C compiler), then the compiler-free ones: "llvm-vec" (the byte walks as LLVM
    vector code, vec.py) and "llvm" (the JIT walker) when llvmlite builds them, then "numpy"."""
    return (native.native_isas() + (["llvm-vec"] if vec.available() else [])
            + (["llvm"] if native.have_llvm() else []) + ["numpy"])


def vec_self_test(x_dtype: str, acc_dtype: str) -> bool:
    """Does the llvm-vec kernel for (x_dtype, acc_dtype) agree bit for bit with the numpy
    walker (the compiler-free baseline) on this CPU? Once per process and dtype pair, before
    isa="auto" runs it (self_test's forest, its byte-walk layouts, short and whole blocks).
    Keyed by the IR flavour too (vec.host_flavour: $TREECOMP_LLVM_VEC_GENERIC can change it)."""
    key = f"llvm-vec:{vec.host_flavour()}:{x_dtype}:{acc_dtype}"
    ok = SELF_TEST.get(key)
    if ok is None:
        SELF_TEST[key] = True  # the kernels built below are forced (isa="llvm-vec"): no recursion
        rng = np.random.default_rng(99)
        X = rng.normal(size=(256, 7)).round(1).astype(x_dtype)
        X[rng.random(X.shape) < 0.05] = np.nan
        X[rng.random(X.shape) < 0.02] = np.inf
        ok = True
        for cmp_ in ("<", "<="):
            f = self_test_forest(cmp_, acc_dtype).replace(input_dtype=x_dtype)
            for layout, depth in (("quant", 8), ("bitvec", 7)):
                g = f.replace(trees=f.trees[:depth + 1], tree_output=f.tree_output[:depth + 1])
                tables = flatten(g, layout, 9)
                for block in (96, 256):
                    outs = []
                    for which in ("llvm-vec", "numpy"):
                        k = ArraysKernel(tables, head_of(g), isa=which, block_rows=block)
                        out = np.empty((len(X), 1), np.dtype(acc_dtype))
                        k.run(X, out)
                        outs.append(out)
                    ok &= bool(np.array_equal(outs[0], outs[1]))
        if not ok:
            import warnings
            warnings.warn(f"treecomp arrays kernel: the llvm-vec path ({x_dtype} rows, {acc_dtype} "
                          "sums) disagrees with the numpy walker on this CPU; backend='auto' will "
                          "not use it (please report)")
        SELF_TEST[key] = ok
    return ok


def resolve_isa(isa: str, strict: bool = True) -> str:
    """The path `isa` runs on here; "auto" is the best C-kernel path whose self-test passes,
    or without the C kernel (no prebuilt one that matches, no C compiler) "llvm-vec" (the byte
    walks as LLVM vector code; ArraysKernel runs tables without a byte walk, or a kernel that
    fails its self-test, through the llvmlite walker) where llvmlite works, else "numpy".
    Where a loaded artifact (strict=False) asks for a path this machine lacks, the best one
    runs, with one SlowPathWarning per process and path."""
    if isa == "numpy":  # needs no kernel: don't load (or build) one
        return "numpy"
    if strict and isa != "auto":  # a forced native path: PlatformError on an unverified platform
        platform.check_platform(f"the arrays kernel's {isa!r} path")
    paths = native.native_isas()
    if isa == "auto":
        if not paths:
            if vec.available():
                return "llvm-vec"
            return "llvm" if native.have_llvm() else "numpy"
        for cand in reversed([p for p in native.auto_isas() if p != "scalar"]):
            if self_test(cand):
                return cand
        return "scalar"
    have = supported_isas() if isa in FREE_ISAS else paths + ["numpy"]
    if isa in have:
        return isa
    if not strict:  # a loaded artifact asked for a path this machine lacks: use the best one
        best = resolve_isa("auto")
        warn_slow_path(f"isa-missing:{isa}",
                       f"treecomp: this artifact asks for the arrays kernel's {isa!r} path, which "
                       f"this machine lacks ({'its CPU' if paths else 'no C kernel here'}); running "
                       f"{best!r} instead (the same results, maybe slower). Recompile or load with "
                       "isa='auto' to choose for this machine and silence this warning.")
        return best
    if not paths and isa in native.NATIVE_ISAS:
        raise CompileError(f"isa={isa!r} needs the C arrays kernel: no prebuilt one "
                           f"({native.PREBUILT_ERROR}) and no C compiler to build it; use isa='auto' "
                           f"(the compiler-free paths), reinstall treecomp or install gcc/clang")
    raise CompileError(f"isa={isa!r} is not available on this machine (CPU or toolchain); "
                       f"available: {', '.join(supported_isas())}")


def warn_no_kernel(path: str) -> None:
    """One SlowPathWarning per process and path: the arrays backend runs `path` (a compiler-free
    one) because this install has no C kernel that loads and no C compiler to build one."""
    what = {"llvm-vec": "the byte walks as LLVM vector code (measured 0.4-0.9x the C kernel's "
                        "speed on byte-walk models)",
            "llvm": "the llvmlite tree walker (often 10x or more slower than the C kernel)",
            "numpy": "the numpy tree walker (much slower than the C kernel: llvmlite is not "
                     "usable here either)"}[path]
    if not platform.native_ok():  # the numpy walker: nothing native runs on this platform
        warn_slow_path("unverified-platform",
                       f"treecomp: native code is not verified on this platform "
                       f"({platform.system()} {platform.machine()}); running the numpy tree walker "
                       "(exact, much slower than the native kernels). See treecomp.platform.")
        return
    warn_slow_path(f"no-kernel:{path}",
                   f"treecomp: no native arrays kernel here ({native.PREBUILT_ERROR or 'none loads'}) "
                   f"and no working C compiler to build one; running {what}. For full speed "
                   "install gcc or clang (treecomp then builds its kernel once per machine, ~30 s) "
                   "or a treecomp wheel for this platform.")


class LinearSection(NamedTuple):
    """A .tc file's linear section (format's header key "linear"): the linear model's
    Head, the section's arrays (linear_section.SECTION), whether the trees average, the file's
    bytes and its IR file (None without)."""
    head: Head
    arrays: dict
    average: bool
    data: bytes
    ir: Any


class ArraysKernel:
    """A loaded table file: the kernel interface of treecomp.loader (run / to_bytes / save)."""

    kind = KIND
    backend = NAME
    #: a file with linear leaves: its section (load_bytes), else None
    linear_section: "LinearSection | None" = None

    def __init__(self, tables: Tables, head: Head, isa: str = "auto", block_rows: int = 0,
                 data: Any = None, strict_isa: bool = True, ir: Any = None,
                 written_by: str | None = __version__, sorts: dict[str, np.ndarray] | None = None):
        #: `data`: the file's bytes, or a read-only mapping of it (the tables are views of it)
        self.tables, self.head, self._data = tables, head, data
        #: the model's IR: a Forest (built from one) or its IR file's bytes (loaded), or None
        self._ir = ir
        if head.base_link != "identity":  # the margins of this host's numpy (native.set_base)
            self._file_tables = tables    # what to_bytes writes: the base as built
            base = outputs.base_margins(head).astype(tables.acc_dtype)
            if base.shape != tables.arrays["base"].shape:
                raise bad_table("base score length")
            self.tables = tables = dataclasses.replace(tables, arrays={**tables.arrays, "base": base})
        self.requested_block_rows = int(block_rows)
        self.block_rows = int(block_rows) or auto_block_rows(tables)
        self.requested_isa = isa
        self.isa = resolve_isa(isa, strict=strict_isa)
        m, A = tables.meta, tables.arrays
        #: the model's comparison is "<" (go right when x >= t) rather than "<="
        self.strict = m["comparison"] == "<"
        # derived offsets: cumulative sums of the validated counts, never read from the file.
        # Public for the walkers without the C kernel (walkers.py), which read the same tables.
        heap = A["tree_layout"] == 0
        nint, nleaf, w = A["tree_nint"], A["tree_nleaf"], A["tree_width"].astype(np.int64)
        hoff = excl_cumsum(np.where(heap, nint, 0))
        coff = excl_cumsum(np.where(heap, 0, nint))
        #: per tree: its first node in h_* (heap trees) or c_* (compact trees; -1: a lone leaf)
        self.tree_node = np.where(heap, hoff[:-1], np.where(nint > 0, coff[:-1], -1)).astype(np.int64)
        #: per tree: its first leaf value in leaf_values
        self.tree_leaf = excl_cumsum(nleaf * w)[:-1]
        #: per category set: its first word in cat_words, and its width in bits
        self.cat_off = excl_cumsum(A["cat_nwords"])[:-1]
        self.cat_nbits = (A["cat_nwords"].astype(np.int64) * 32).astype(np.int32)
        # the compact nodes' forest-wide children (c_left_global / c_right_global): derived
        # when asked, not kept beside the packed node records (peak memory of huge models)
        self._c_children: tuple[np.ndarray, np.ndarray] | None = None
        self._keep: dict[str, np.ndarray] = {}
        # the quantised walk's tables, derived; their sorts' results from the file where it has
        # them (`sorts`: checked to be exactly the sorts', derived.py)
        stored = sorts or {}
        q_stored = {k: v for k, v in stored.items() if k.startswith("q_")} or None
        #: the results of the derived tables' sorts (format.SORTS): a saved file stores them
        self.sorts: dict[str, np.ndarray] = {}
        self._quant = quant_tables(A["h_ff"], A["h_thr"], stored=q_stored) if m.get("quant") else {}
        self._bitvec = {}
        #: the interval walk's position bias (derived.interval_bias): nonzero for trees of
        #: 129-255 leaves, which llvm-vec's sweep does not take (the walker runs them)
        self._bv_bias = 0
        if m.get("bitvec"):  # the same column tables over the compact nodes, plus intervals
            bv = bitvec_tables(A, stored.get("bv_order"))
            order = bv.pop("order")
            self._bv_bias = bv.pop("bv_bias")
            sets = cat_byte_sets(A, order)
            if sets is not None:  # else: category sets beyond the codes: the float walk
                self._quant = quant_tables(A["c_ff"][order], A["c_thr"][order], sets,
                                           stored=q_stored)
                self._bitvec = bv if self._quant else {}
                if self._bitvec:
                    self.sorts["bv_order"] = order.astype(np.int32 if len(order) < 1 << 31 else np.int64,
                                                           copy=False)
        if self._quant:
            self.sorts.update(self._quant["sorted"])
        self._struct, self._tkind = None, 0
        self._vec = None
        auto = isa == "auto" or not strict_isa
        if self.isa == "llvm-vec" and (m.get("quant") or (self._bitvec and not self._bv_bias)):  # the byte walks
            try:
                self._vec = vec.vec_kernel(m["x_dtype"], m["acc_dtype"])
            except CompileError:
                if not auto:
                    raise
            if self._vec is not None and auto and not vec_self_test(m["x_dtype"], m["acc_dtype"]):
                self._vec = None
            if self._vec is not None:
                self._struct = self._pack()
                self._sref = ctypes.byref(self._struct)
            elif native.have_llvm():  # auto: the kernel does not build (or fails its self-test)
                self.isa = "llvm"
            else:
                self.isa = "numpy"
        elif self.isa == "llvm-vec" and (auto or not native.have_llvm()):  # no byte walk here
            self.isa = "llvm" if native.have_llvm() else "numpy"
        # the slow-path warning: where this host has no C kernel and the path was not the
        # caller's own choice (auto, or a loaded file's isa this machine lacks)
        if (isa == "auto" or self.isa != isa) and not native.native_isas() and self.isa in FREE_ISAS:
            warn_no_kernel("llvm-vec" if self._vec is not None else
                           "llvm" if self.isa in ("llvm", "llvm-vec") else "numpy")
        #: the Head as JSON, with the backend, the instruction set in use and the treecomp that
        #: wrote the tables (written_by: a loaded file's, None where its header has none)
        self.meta_json = head.to_json(backend=NAME, isa=self.isa,
                                      **({"treecomp_version": written_by} if written_by else {}))
        if self._vec is not None:
            pass
        elif self.isa in ("llvm", "llvm-vec"):  # llvm-vec on tables without a byte walk too
            #: the llvmlite walker, its table arrays (kept alive here) and their addresses
            self.llvm_walk = walkers.llvm_walker(m["x_dtype"], m["acc_dtype"])
            self.llvm_keep, self.llvm_args = walkers.llvm_tables(self)
        elif self.isa != "numpy":
            self._lib = native_library()
            self._struct = self._pack()
            self._sref = ctypes.byref(self._struct)
            isa_i = NATIVE_ISAS.index(self.isa)
            predict = self._lib.tc_arrays_predict
            tk = self._tkind = outputs.native_transform(head)
            # the small-batch entry point of loader.Predictor (addresses given); loader's flags
            # -> tc_arrays_predict's `transform`: tc_transform's kind | TC_PAIRS
            sref = self._sref
            self.run_ptr = lambda xp, bits, n, op, flags: predict(sref, xp, bits, n, op, isa_i,
                                                                  tk * (flags & 1) | flags & PAIRS)
            #: for loader's small-batch entry (runtime/pyentry.c): function, tables, isa, kind
            self.entry = (ctypes.cast(predict, ctypes.c_void_p).value,
                          ctypes.addressof(self._struct), isa_i, tk)
        in_c = self._struct is not None and self._vec is None
        #: run / run_ptr with TREECOMP_TRANSFORM apply the inverse link natively, exactly
        self.native_transform = in_c and self._tkind != 0
        #: run / run_ptr with loader.PAIRS write a binary classifier's (1 - p, p) rows
        self.native_pairs = in_c and head.n_outputs == 1 and head.n_classes == (2,) \
            and (self._tkind != 0 or head.transform == "identity")

    @property
    def c_left_global(self) -> np.ndarray:
        """The compact nodes' left children as forest-wide node numbers (a leaf: ~leaf, as in
        c_left), int32, read-only: for the walkers without the C kernel (walkers.py). Not kept
        beside the packed node records: where the tables are packed (a native or llvm-vec
        kernel), a view of the records' ``l`` field; else derived once, when first asked."""
        return self._children_global()[0]

    @property
    def c_right_global(self) -> np.ndarray:
        """The compact nodes' right children, as c_left_global."""
        return self._children_global()[1]

    def _children_global(self) -> tuple[np.ndarray, np.ndarray]:
        nodes = self._keep.get("c_nodes")
        if nodes is not None:  # the packed records hold them
            out = nodes["l"], nodes["r"]
            for v in out:
                v.flags.writeable = False
            return out
        if self._c_children is None:
            self._c_children = self.children_global()
            for v in self._c_children:
                v.flags.writeable = False
        return self._c_children

    def children_global(self) -> tuple[np.ndarray, np.ndarray]:
        """c_left_global and c_right_global computed afresh from the tables (not kept)."""
        A = self.tables.arrays
        heap = A["tree_layout"] == 0
        nint = A["tree_nint"]
        coff = excl_cumsum(np.where(heap, 0, nint))
        ctree_off = np.repeat(coff[:-1][~heap], nint[~heap])
        del coff
        return tuple(np.where(c >= 0, c + ctree_off, c).astype(np.int32)  # type: ignore[return-value]
                     for c in (A["c_left"], A["c_right"]))

    def _pack(self) -> CTables:
        scalars, keep = self.pack_arrays()
        # aligned, contiguous copies where the file's buffer is not (keeps them alive too)
        self._keep = {k: (v if v.flags.c_contiguous and v.ctypes.data % v.dtype.alignment == 0
                          else np.ascontiguousarray(v).copy()) for k, v in keep.items()}
        s = CTables(**scalars)
        for k, v in self._keep.items():
            setattr(s, k, v.ctypes.data if v.size else None)
        return s

    def pack_arrays(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """What the kernel's tc_tables holds: its scalar fields, and for its pointer fields the
        arrays they point at (derived tables included; a field not named, or an empty array, is
        NULL). _pack points a ctypes struct at them; so serialises them into a .so."""
        m, A = self.tables.meta, self.tables.arrays
        x64 = m["x_dtype"] == "float64"
        C = len(A["c_ff"])
        nodes = np.zeros(C, NODE64 if x64 else NODE32)
        c_left_g, c_right_g = self._c_children or self.children_global()
        nodes["ff"], nodes["l"], nodes["r"] = A["c_ff"], c_left_g, c_right_g
        del c_left_g, c_right_g  # (the records hold them: read below as their fields)
        if x64:
            nodes["cat"], nodes["t"] = A["c_cat"], A["c_thr"]
        else:  # the threshold's bits, or the category set of a categorical node
            is_cat = (A["c_ff"].view(np.uint32) & FF_CAT) != 0
            nodes["u"] = np.where(is_cat, A["c_cat"], A["c_thr"].view(np.int32))
        keep = {"tree_layout": A["tree_layout"].astype(np.int32), "tree_depth": A["tree_depth"],
                "tree_node": self.tree_node, "tree_leaf": self.tree_leaf,
                "tree_out": A["tree_out"], "tree_width": A["tree_width"],
                # padded: the vector walks load whole 8/16-entry level slices (arrays_impl.c)
                "h_ff": np.concatenate([A["h_ff"], np.zeros(HEAP_PAD, np.int32)]),
                "h_thr": np.concatenate([A["h_thr"], np.zeros(HEAP_PAD, A["h_thr"].dtype)]),
                "c_nodes": nodes, "cat_words": A["cat_words"],
                "cat_off": self.cat_off, "cat_nbits": self.cat_nbits,
                "cat_other_left": A["cat_other_left"], "leaf_values": A["leaf_values"],
                "base": A["base"]}
        if self._bitvec:
            keep.update(self._bitvec)
            keep["bv_nint"] = A["tree_nint"].astype(np.int64)
        q, cmux, cnan = self._quant, 0, False
        bv_catw = 0  # bytes a code's row of bv_catd (category_rows)
        if q and m.get("quant"):  # the column mux's width (tc_qlevelc), NaN twins merged
            q, n_mux, cnan = merge_nan_columns(q, QCIX_MAX_COLS)
            cmux = next((w for w in (16, 32, 64) if n_mux <= w <= QCIX_MAX_COLS), 0)
        if q:  # node bytes biased for the signed byte compare (quant_impl.c)
            keep.update({k: q[k] for k in QUANT_ARRAYS + ("q_kind", "h_qcat", "q_cat")
                         if k not in ("h_qcol", "h_qthr")})
            keep["h_qcol"] = q["h_qcol"] * np.int32(32)       # the column's offset in a group
            if q["q_thr"].dtype == np.float64:  # the float64 quantiser's first guess (rounded)
                with np.errstate(over="ignore"):
                    keep["q_thr32"] = q["q_thr"].astype(np.float32)
            if len(q["q_thr"]):  # level tables of the quantiser's rows in lanes (of the guess)
                keep["q_lvl"] = quant_levels(keep.get("q_thr32", q["q_thr"]), q["q_off"], q["q_len"])
            # padded: the heap walk reads a level's thresholds 16 at a time (quant_impl.c)
            keep["h_qthr"] = np.concatenate([(q["h_qthr"] ^ 0x80).view(np.int8), np.zeros(32, np.int8)])
            if cmux:  # each slot's column index as a byte, for levels wider than the columns
                # (quant_impl.c, tc_qlevelc); padded like h_qthr
                cix = q["h_qcix"] if cnan else q["h_qcol"].astype(np.uint8)
                keep["h_qcix"] = np.concatenate([cix, np.zeros(32, np.uint8)])
            if m.get("quant") and (cmux or len(q["q_feat"]) <= ZROW_MAX_COLS):
                # the AVX-512 few-row walk's slot indices into a row's 128-byte table
                # (quant_impl.c, zrows_w1): the mux column (bit 6: a merged NaN-left slot), or
                # the column; padded by 64 (64-slot masked loads)
                if cmux:
                    cix = keep["h_qcix"][:len(q["h_qthr"])]
                    c7 = (cix & 63) | ((cix >> 7) << 6)
                else:
                    c7 = q["h_qcol"]
                keep["h_qc7"] = np.concatenate([c7.astype(np.uint8), np.zeros(64, np.uint8)])
                heap = A["tree_layout"] == 0  # (quant: every tree; see derived.zrow_slots)
                keep["h_zq"] = zrow_slots(keep["h_qc7"], keep["h_qthr"], self.tree_node,
                                          A["tree_depth"], heap & (A["tree_depth"] <= 6), (0,))
                if np.any(heap & (A["tree_depth"] > 6)):  # depth 7, 8: four 64-slot windows
                    keep["h_zq8"] = zrow_slots(keep["h_qc7"], keep["h_qthr"], self.tree_node,
                                               A["tree_depth"], heap & (A["tree_depth"] > 6),
                                               (0, 63, 127, 191))
                dmax = int(A["tree_depth"].max(initial=0))
                if len(heap) >= ZLANES_MIN_TREES and np.all(heap) and np.all(A["tree_width"] == 1) \
                        and dmax <= ZLANES_MAX_DEPTH:
                    # every tree of depth <= 8: one row walks 64 trees a vector (zlanes)
                    keep["h_zt"] = zrow_lanes(keep["h_qc7"], keep["h_qthr"], self.tree_node,
                                              A["tree_depth"], 127 if dmax == 8 else 63)
                    if dmax >= ZREC_DEPTH:
                        # the last level and leaves as one record a tree and node (zlanes, h_zr)
                        keep["h_zr"] = zrow_records(keep["h_qc7"], keep["h_qthr"], self.tree_node,
                                                    A["tree_depth"], self.tree_leaf,
                                                    A["leaf_values"], dmax)
            if self._bitvec and len(q["q_feat"]) <= ZROW_MAX_COLS \
                    and int(A["tree_nleaf"].max()) <= 64:
                # the AVX-512 few-row interval walk (quant_impl.c, zbvrows_w1): each node's
                # column as a byte and its left subtree's leaves [lo, hi) as a 64-bit mask
                # (categorical nodes: decided per row by category code, category_rows)
                keep["h_qc7"] = np.concatenate([q["h_qcol"].astype(np.uint8), np.zeros(64, np.uint8)])
                keep["bv_lmask"] = interval_masks(self._bitvec["bv_lo1"], self._bitvec["bv_hi"])
                if np.any(q["q_kind"]):
                    rows = category_rows(q["h_qcol"], q["h_qcat"], q["q_kind"], q["q_cat"],
                                         self.tree_node, A["tree_nint"])
                    if rows is None:  # (too many categorical nodes: the float walk)
                        del keep["bv_lmask"]
                    else:
                        keep.update(rows)
                        bv_catw = len(rows["bv_catd"]) // (256 * int(np.sum(q["q_kind"] == 1)))
            if self._bitvec and not self._bv_bias and len(q["q_feat"]) <= ZROW_MAX_COLS \
                    and (not np.any(q["q_kind"]) or "bv_catd" in keep) \
                    and len(self.tree_node) >= BV_LANES_MIN_TREES and np.all(A["tree_width"] == 1):
                # the AVX-512 one-row interval walk, 64 trees in lanes (quant_impl.c, zbvlanes;
                # categorical nodes' decisions by code as bv_catd's, numbered in lane order);
                # its positions start at 0: unbiased tables only (trees of <= 128 leaves)
                lanes = interval_lanes(q["h_qcol"].astype(np.uint8), keep["h_qthr"],
                                       self._bitvec["bv_lo1"], self._bitvec["bv_hi"],
                                       self.tree_node, A["tree_nint"], q["h_qcat"], q["q_kind"],
                                       q["q_cat"], bv_catw)
                if len(lanes["bv_zl"]):
                    keep.update(lanes)
            if m.get("quant"):  # symmetric trees: one column and byte a level (zobl)
                keep["h_qobl"] = oblivious_heaps(q["h_qcol"], q["h_qthr"], A["tree_layout"] == 0,
                                                 A["tree_nint"])
            if m.get("quant") and np.all(A["tree_width"] == 1):
                keep["q_leafb"], keep["q_leafb_off"] = leaf_planes(A["leaf_values"], A["tree_depth"])
        deep = (deep_tables(A, nodes["l"], nodes["r"], m["n_features"], DEEP_TOP_MAX)
                if not m["naive"] else None)
        d_nint = 0
        if deep is not None:
            d_nint = deep.pop("d_nint")
            keep.update(deep)
        scalars = dict(n_trees=m["n_trees"], n_features=m["n_features"], n_outputs=m["n_outputs"],
                       x_bits=64 if x64 else 32, acc_bits=64 if m["acc_dtype"] == "float64" else 32,
                       strict=int(self.strict), average=int(bool(m["average"])),
                       naive=int(bool(m["naive"])), block_rows=self.block_rows,
                       cat_rule=CATEGORY_RULES.index(m["category_rule"]),
                       quant=int(bool(q) and bool(m.get("quant"))),
                       q_ncols=len(q["q_feat"]) if q else 0,
                       q_w1=int(bool(np.all(A["tree_width"] == 1))), bitvec=int(bool(self._bitvec)),
                       d_nint=int(d_nint), q_cmux=cmux, q_cnan=int(cnan),
                       bv_catw=bv_catw, bv_bias=self._bv_bias if self._bitvec else 0,
                       # the lanes walk's levels (quant_impl.c, zlanes)
                       h_ztd=int(A["tree_depth"].max(initial=0)) if "h_zt" in keep else 0,
                       # the few-row walk's plain steps (arrays_impl.c, plain_trees)
                       c_plain=int(m["n_features"] <= 1 << 16 and bool(np.any(A["tree_layout"] == 1))
                                   and not np.any(A["c_ff"].view(np.uint32) & FF_CAT)))
        return {k: int(v) for k, v in scalars.items()}, keep

    # -- the kernel interface ------------------------------------------------------------------
    def run(self, X: np.ndarray, out: np.ndarray, flags: int = 0) -> None:
        if X.dtype not in (np.float32, np.float64) or not X.flags.c_contiguous or X.ndim != 2 \
                or X.shape[1] != self.head.n_features:
            raise ValueError("run() needs a C-contiguous float32/float64 (n, n_features) matrix")
        width = 2 if flags & PAIRS else self.head.n_outputs
        if flags & PAIRS and not self.native_pairs:
            raise ValueError("PAIRS: only a native kernel of a binary classifier writes (1 - p, p)")
        if out.dtype != self.tables.acc_dtype or out.shape != (X.shape[0], width) \
                or not out.flags.c_contiguous:
            raise ValueError(f"run() needs a C-contiguous (n, {width}) output of the accumulate dtype")
        if self.isa == "numpy":
            out[...] = walkers.run_numpy(self, X)
        elif self._vec is not None:
            vec.run(self._vec, self._sref, X, out)
        elif self.isa in ("llvm", "llvm-vec"):
            walkers.run_llvm(self, X, out)
        else:
            nf = self._tkind * (flags & 1) | flags & PAIRS  # as run_ptr
            rc = self._lib.tc_arrays_predict(self._sref, X.ctypes.data,
                                             X.dtype.itemsize * 8, X.shape[0], out.ctypes.data,
                                             NATIVE_ISAS.index(self.isa), nf)
            if rc != 0:
                raise kernel_error(rc, f"the arrays kernel ({self.isa})")
            if nf & 0xff or not flags & 1:
                return
        if flags & 1:
            out[...] = outputs.transform(self.head, out)

    def ir_bytes(self) -> bytes | None:
        """The model's IR file (ir.Forest.to_bytes) this kernel carries, or None."""
        if self._ir is not None and not isinstance(self._ir, bytes):
            self._ir = self._ir.to_bytes()  # serialised once, when first saved or asked for
        return self._ir

    def to_bytes(self) -> bytes:
        if self._data is None:
            self._data = self.file_bytes(self.ir_bytes())
        if not isinstance(self._data, bytes):  # a loaded file's mapping: a copy, when asked
            return bytes(self._data)
        return self._data

    def file_bytes(self, ir: bytes | None, linear: tuple | None = None) -> bytes:
        """The .tc file of these tables with the IR file `ir` and (treecomp.linear) a linear
        section (the model's Head, its arrays, its meta), and the derived tables' sorts."""
        return tables_to_bytes(getattr(self, "_file_tables", self.tables), self.head,
                               {"isa": self.requested_isa, "block_rows": self.requested_block_rows},
                               ir, linear, self.sorts)

    def save(self, path: str | os.PathLike) -> None:
        """A .tc table file, or with a shared-library suffix (.so, .dylib) a self-contained
        shared library running the same kernel on the same tables (so.py)."""
        if Path(path).suffix.lower() in (".so", ".dll", ".dylib"):
            so.save(self, path)
            return
        data = self.to_bytes()
        toolchain.publish(Path(path).resolve(), lambda p: p.write_bytes(data))


# -- the backend interface ----------------------------------------------------------------------
def build(forest: Forest, progress: Callable[[str], None] | None = None, **overrides: Any) -> ArraysKernel:
    """Flatten `forest` into tables and load them (the kernel itself is built once per machine)."""
    opts = options(**overrides)
    tables = flatten(forest, opts["layout"], opts["heap_max_depth"])
    if progress:
        progress(f"flattened {forest.n_trees} trees into {tables.nbytes} bytes of tables")
    validate(tables)  # cheap (vectorised) and catches a flattening bug before native code runs
    if opts["isa"] not in FREE_ISAS:
        try:  # the package's prebuilt kernel, or its first-use build (reported through progress)
            native_library(progress)
        except CompileError:
            pass  # resolve_isa picks the compiler-free walker (or says why isa= cannot run)
    return ArraysKernel(tables, head_of(forest), isa=opts["isa"], block_rows=opts["block_rows"],
                        ir=forest if opts["ir"] else None)


def check_library(library: Any) -> None:
    """The backend interface's check of a loaded arrays library (a native.SharedLibrary):
    ArtifactError unless it runs valid tables:
    the .tc it carries validates (format.tables_from_bytes, as treecomp.load validates a
    .tc), describes this model (the same Head as the meta JSON), and its kernel's tc_tables
    holds exactly what those tables pack into (ArraysKernel.pack_arrays): every scalar, and
    every array byte for byte. Called (loader.check_library) before the first prediction,
    after the library's writable treecomp_base was set. A linear-leaf library (its meta JSON
    says linear_leaves; backends/linear_so.py) keeps its leaf kernel's tables to itself."""
    lib, head, name = library.lib, library.head, library.path.name
    if json.loads(library.meta_json).get("linear_leaves") is True:
        return

    def bad(why: str) -> ArtifactError:
        return ArtifactError(f"{name}: its tables {why} (a corrupt or tampered artifact)")
    try:
        size_fn, tc_fn, model_fn = (lib.treecomp_arrays_tc_size, lib.treecomp_arrays_tc,
                                    lib.treecomp_arrays_model)
    except AttributeError:
        raise bad("cannot be checked: the library exports no treecomp_arrays_tc / "
                  "treecomp_arrays_model") from None
    size_fn.restype, size_fn.argtypes = ctypes.c_int64, []
    tc_fn.restype = model_fn.restype = ctypes.c_void_p
    tc_fn.argtypes = model_fn.argtypes = []
    n, p, model = size_fn(), tc_fn(), model_fn()
    if not p or not model or not 0 < n <= 1 << 40:
        raise bad(f"are not where the library says (treecomp_arrays_tc_size() = {n})")
    try:  # read in place, not copied; the library's seal, checked, covers its digest too
        tables, thead, runtime, ir, linear, sorts = tables_from_bytes(
            memoryview(np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(p))), digest=False)
    except ArtifactError as exc:
        raise bad(f"file does not validate: {exc}") from None
    if linear is not None or ir is not None:
        raise bad("file has sections an arrays library keeps elsewhere")
    if thead.to_json() != head.to_json():
        raise bad("file describes another model than the library's meta JSON")
    block = runtime.get("block_rows", 0)
    if not isinstance(block, int) or not 0 <= block <= 1 << 16:
        raise bad("file's runtime options are corrupt")
    want_scalars, want = ArraysKernel(tables, thead, isa="numpy", block_rows=block,
                                      sorts=sorts).pack_arrays()
    got = CTables.from_address(model)
    for field in so.SCALAR_FIELDS:
        if getattr(got, field) != want_scalars.get(field, 0):
            raise bad(f"do not match: tc_tables.{field} = {getattr(got, field)}, the tables "
                      f"pack into {want_scalars.get(field, 0)}")
    for field in so.POINTER_FIELDS:
        a = want.get(field)
        ptr = getattr(got, field)
        if a is None or not a.size:
            if ptr:
                raise bad(f"do not match: tc_tables.{field} is set, the tables have none")
            continue
        a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        if not ptr or not np.array_equal(np.ctypeslib.as_array((ctypes.c_uint8 * len(a)).from_address(ptr)), a):
            raise bad(f"do not match: tc_tables.{field} is not what the tables pack into")


def so_kernel(forest: Any, **overrides: Any) -> Any:
    """The ArraysKernel whose tables a .so of `forest` holds (not loaded into the native
    kernel: its isa is the one the .so will request)."""
    opts = options(**overrides)
    tables = flatten(forest, opts["layout"], opts["heap_max_depth"])
    validate(tables)
    k = ArraysKernel(tables, head_of(forest), isa="numpy", block_rows=opts["block_rows"],
                     ir=forest if opts["ir"] else None)
    k.requested_isa = opts["isa"]
    return k


#: load_bytes also takes a read-only mapping of the file (mmap.mmap): treecomp.load(path,
#: mmap=True) maps table files (by default it reads them)
LOADS_MAPPED = True


def load_bytes(data: Any) -> Any:
    """A kernel from a table file (ArtifactError if it is corrupt or truncated): an ArraysKernel;
    for a file with a linear section, one that finds the leaves, with the section in its
    `linear_section` (a LinearSection: treecomp.linear evaluates it). `data`: bytes or a
    read-only mmap.mmap of the file, whose tables the kernel then uses in place."""
    tables, head, runtime, ir, linear, sorts = tables_from_bytes(data)
    version = written_by(data)
    isa = runtime.get("isa", "auto")
    block = runtime.get("block_rows", DEFAULTS["block_rows"])
    if isa not in ISAS or not isinstance(block, int) or not 0 <= block <= 1 << 16:
        raise bad_table("runtime options")
    if linear is None:
        return ArraysKernel(tables, head, isa=isa, block_rows=block, data=data,
                            strict_isa=False, ir=ir, written_by=version, sorts=sorts)
    # linear leaves: these tables find the leaves, the section evaluates them (the loader hands
    # a kernel with a linear_section to the "linear" feature: treecomp.linear)
    leaves = ArraysKernel(tables, head, isa=isa, block_rows=block, strict_isa=False,
                          written_by=version, sorts=sorts)
    lhead, arrays, meta = linear
    leaves.linear_section = LinearSection(lhead, arrays, meta["average"], bytes(data), ir)
    return leaves
