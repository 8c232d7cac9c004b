"""The arrays backend: a forest becomes flat tables, walked by a kernel compiled once per machine.

Code generation pays compile time that grows with the model; this backend instead flattens any
forest into contiguous struct-of-arrays tables in milliseconds (vectorised numpy, no per-node
Python loops) and evaluates them with one generic C kernel (runtime/kernels/arrays.c + arrays_impl.c) that is
shipped prebuilt in the package (or, from a source tree, built once per machine and compiler: see
arrays_native), never per model. The tables are the artifact: a versioned
``.tc`` file (``MAGIC`` + JSON header + raw arrays) that ``treecomp.load`` reads back; or, saved
as ``.so``, one self-contained shared library holding the tables and the kernel (arrays_so.py).

Layouts, chosen per tree (option ``layout``; see runtime/kernels/arrays.c for the exact format):

- ``heap``: a complete binary tree of depth D (node i -> 2i+1, 2i+2), padded so that the walk is
  exactly D branch-free steps ``i = 2*i + 1 + go_right``. Padding nodes have threshold NaN and
  send NaN left, so every row goes left (``x > NaN`` is false); a leaf above depth D is copied
  into every leaf slot below it. Used (layout="auto") for trees without categorical splits of
  depth <= heap_max_depth whose padding costs at most 4x their leaves (or 64 slots).
  The float32-input heap walk has explicit AVX2 (8 rows/vector) and AVX-512F (16 rows/vector)
  paths, four vectors interleaved to hide gather latency.
- ``quant`` (the default for numeric forests whose trees are all heaps of depth <= 8): the heap
  tables plus, derived when loading, per-feature sorted threshold tables. Each block of rows is
  first quantised to one byte per (feature, NaN direction) column: a row's bin counts the
  thresholds it goes right of, found exactly in the comparison precision; a node then compares
  bytes. The AVX2 kernel evaluates every node of a level for 32 rows at once (load + byte compare,
  no gathers), selects each row's node with byte blends, and looks leaves up with byte shuffles
  (runtime/kernels/quant_impl.c). Same decisions, same summation order: bit-exact.
  Measured on the 500-tree depth-6 XGBoost bench model: ~0.8 us/row vs ~2.5 for the float walk.
- ``bitvec`` (the default for other forests of trees with <= 128 leaves, e.g. LightGBM's and
  HistGradientBoosting's, categorical splits included): compact tables plus, derived when
  loading, the same byte columns (category codes for categorical features, each categorical node
  a 256-bit set over the codes: see cat_byte_sets) and each node's left-subtree leaf interval. A row's exit leaf is the first leaf not ruled out by a node where it goes
  right (QuickScorer's insight); the AVX2 kernel sweeps every node of a tree, sorted by interval
  start, for 2 x 32 rows with byte compares and byte max (quant_impl.c). The scalar path (and
  batches under 8 rows) walks the compact float tables. 500 LightGBM trees of 63 leaves:
  ~1.6 us/row vs 14 for generated C and 61 for LightGBM; HGB with categories 0.55 vs 5.0 (C).
- ``compact``: one packed 16-byte (float32) / 24-byte (float64) record per internal node with
  explicit children (leaf = negative child), 8 rows walked in flight. Deep, unbalanced and
  categorical trees. With float32 input, trees without categorical splits take the kernel's
  deep path instead (derived at load time by _deep_tables, not stored): the tree's complete top
  levels as a heap (the vector heap walk), then 8 rows in lockstep over records with a
  self-looping record per leaf and integer order keys as thresholds (rf-deep: 947 -> ~420
  ns/row, about 5.4x scikit-learn single-threaded; 100 deep trees, 3.8M nodes: 3.3x -> 5.3x).
- ``naive`` (layout="naive"): the compact tables walked one row at a time, one tree at a time,
  with branches: "a generic interpreter in native code", the benchmarks' baseline.

Exactness (same contract as the C backend): rows are cast to the forest's input dtype (round to
nearest), thresholds are lowered with passes.comparison_thresholds, NaN follows default_left
(folded into a ``nan_right`` bit), categorical nodes follow ir.py, and every row's margins start
at the base score and add the trees' leaf vectors in tree order in the accumulation dtype (leaf
values rounded to it once here), then divide by n_trees when averaging: the interpreter's order.

Instruction set (option ``isa``): "auto" picks the best path the CPU has at load time
(``__builtin_cpu_supports``) whose once-per-process self-test (bit-exact agreement with the
baseline path on a fixed forest, ~30 ms) passes; "scalar", "avx2", "avx512" force one (an error
if the CPU lacks it). The vector paths cover float32 input (sklearn trees, XGBoost); float64
input (LightGBM, HistGradientBoosting) runs the baseline code on every path. Without the C
kernel (no prebuilt one that matches the sources, and no C compiler to build it), "auto" runs
the same tables through a generic walker JIT-compiled once per process by llvmlite (isa "llvm": a row at a time, tree by tree,
about as fast as the naive layout, ~30 us/row on the 500-tree benchmark), or, if llvmlite
fails too, a vectorised numpy walker (isa "numpy"). Both can be forced, and both are exact.

Rows per block (option ``block_rows``, 0 = auto): 64 for shallow (heap) forests walked on
floats, so rows and trees stay in L1; 512 for byte walks over heaps (a tree's setup paid per
block); larger for big compact trees, so a tree's nodes are reused while cached (see
auto_block_rows for the measurements).

Loading: every index in a table file is validated (vectorised) before a pointer reaches native
code; a corrupt or truncated file raises ArtifactError.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import __version__, outputs, toolchain
from ..errors import ArtifactError, CompileError, InvalidModelError, UnsupportedModelError
from ..ir import Forest, Head, head_of
from ..passes import comparison_thresholds
# the native kernel's loading, ISA choice and self-test (re-exported: arrays.native_library etc.)
from . import arrays_native
from .arrays_native import (_NATIVE_ISAS, _NODE32, _NODE64, KERNEL_CFLAGS, KERNEL_DIR,  # noqa: F401
                            KERNEL_FILES, _Tables, _native_isas, _self_test, _self_test_forest,
                            kernel_origin, kernel_source_hash, native_library,
                            prebuilt_kernel_path, resolve_isa, supported_isas)

NAME = "arrays"
KIND = "arrays"
FORMAT_VERSION = 1
MAGIC = b"TCARRAYS"
_PREFIX = struct.Struct("<8sIIQ")  # magic, format version, reserved, header length

DEFAULTS: dict[str, Any] = {
    "layout": "auto",        # "auto" | "quant" | "bitvec" | "heap" | "compact" | "naive"
    "heap_max_depth": 8,     # deepest tree the heap layout takes (padding grows as 2^depth)
    "isa": "auto",           # "auto" | "scalar" | "avx2" | "avx512" | "llvm" | "numpy"
    "block_rows": 0,         # rows per tree-major block; 0 = auto (see auto_block_rows)
}

LAYOUTS = ("auto", "quant", "bitvec", "heap", "compact", "naive")
#: most leaves per tree of the interval ("bitvec") walk: leaf positions are signed bytes
BITVEC_MAX_LEAVES = 128
#: deepest tree of the quantised walk (its row positions are bytes: 2^8 leaf slots)
QUANT_MAX_DEPTH = 8
#: thresholds per quantisation column: bins 0..255 fit a byte
QUANT_CHUNK = 255
#: layout="auto" uses the quantised walk when every tree is a heap at most this deep
QUANT_AUTO_DEPTH = 8
ISAS = ("auto", "scalar", "avx2", "avx512", "llvm", "numpy")


def quant_chunk_size(n_thresholds: np.ndarray) -> np.ndarray:
    """Per feature of n distinct thresholds, how many a column takes: all of them up to
    QUANT_CHUNK, else chunks of one fewer, whose bins leave byte 255 free as a NaN code should
    the feature's nodes send NaN both ways (merge_nan_columns; XGBoost's hist method gives up to
    256 thresholds: as 255 + 1 they took three columns of the column mux, as 254 + 2 two)."""
    return np.where(n_thresholds > QUANT_CHUNK, QUANT_CHUNK - 1, QUANT_CHUNK)


_PAIRS = 0x100  # loader.PAIRS = arrays.c's TC_PAIRS
MAX_HEAP_DEPTH = 20
#: forest.category_rule values, in the kernel's numbering (tc_tables.cat_rule)
CATEGORY_RULES = ("nonneg", "trunc", "integral")

FF_FEAT = 0x3FFFFFFF
FF_CAT = 0x40000000
FF_NANR = 0x80000000



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


# -- the tables ---------------------------------------------------------------------------------
#: name -> dtype ("x": the input dtype, "acc": the accumulation dtype), in file order
_ARRAYS = {
    "tree_layout": "u1", "tree_depth": "<i4", "tree_nint": "<i8", "tree_nleaf": "<i8",
    "tree_out": "<i4", "tree_width": "<i4",
    "h_ff": "<i4", "h_thr": "x",
    "c_ff": "<i4", "c_thr": "x", "c_cat": "<i4", "c_left": "<i4", "c_right": "<i4",
    "leaf_values": "acc", "base": "acc",
    "cat_words": "<u4", "cat_nwords": "<i4", "cat_other_left": "u1",
}
_DT = {"float32": "<f4", "float64": "<f8"}


@dataclass(frozen=True, eq=False)
class Tables:
    """A flattened forest: `meta` (JSON-able) and the arrays of runtime/kernels/arrays.c.

    Per tree t: layout (0 heap / 1 compact), depth, number of internal slots (heap: 2^D - 1),
    number of leaf slots (heap: 2^D), first output column, leaf width. Compact children are
    local to their tree: >= 0 an internal node (always > its parent), < 0 ~leaf. All offsets are
    cumulative sums of these counts, recomputed (never trusted) when loading.
    """

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]

    @property
    def x_dtype(self) -> np.dtype:
        return np.dtype(self.meta["x_dtype"])

    @property
    def acc_dtype(self) -> np.dtype:
        return np.dtype(self.meta["acc_dtype"])

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays.values()))

    def expected_dtype(self, name: str) -> np.dtype:
        d = _ARRAYS[name]
        return np.dtype(_DT[self.meta["x_dtype"]] if d == "x" else _DT[self.meta["acc_dtype"]] if d == "acc" else d)


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


def quant_eligible(forest: Forest, heap_max_depth: int = 8) -> bool:
    """Would layout="auto" use a byte walk for `forest` (flatten's rule)? At least one split, and
    either every tree has <= BITVEC_MAX_LEAVES leaves (the interval walk, if not the heap one;
    categorical splits too) or every tree is a numeric heap for the quantised heap walk: depth <=
    min(heap_max_depth, QUANT_AUTO_DEPTH), padding at most 4x its leaves or 64 slots."""
    trees = forest.trees
    if all(t.n_leaves == 1 for t in trees):
        return False
    if all(t.n_leaves <= BITVEC_MAX_LEAVES for t in trees):
        return True
    if any(t.has_categorical for t in trees):
        return False
    limit = min(heap_max_depth, QUANT_AUTO_DEPTH)
    return all(d <= limit and (1 << d) <= max(64, 4 * t.n_leaves)
               for t, d in ((t, t.max_depth) for t in trees))


def _excl_cumsum(a: np.ndarray) -> np.ndarray:
    out = np.zeros(len(a) + 1, np.int64)
    np.cumsum(a, out=out[1:])
    return out


def flatten(forest: Forest, layout: str = "auto", heap_max_depth: int = 8) -> Tables:
    """The tables of `forest` (vectorised over all nodes of all trees at once)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}; expected one of {LAYOUTS}")
    if forest.n_features > FF_FEAT:
        raise UnsupportedModelError(f"the arrays backend supports at most {FF_FEAT} features "
                                    f"(the model has {forest.n_features})")
    trees = forest.trees
    T = len(trees)
    xdt, adt = np.dtype(forest.input_dtype), np.dtype(forest.accumulate_dtype)
    nn = np.fromiter((t.n_nodes for t in trees), np.int64, T)
    width = np.fromiter((t.width for t in trees), np.int64, T)
    start = _excl_cumsum(nn)
    tree_of = np.repeat(np.arange(T), nn)
    left = np.concatenate([t.left for t in trees]).astype(np.int64)
    right = np.concatenate([t.right for t in trees]).astype(np.int64)
    feature = np.concatenate([t.feature for t in trees]).astype(np.int64)
    nan_right = ~np.concatenate([t.default_left for t in trees])
    cidx = np.concatenate([t.cat_index for t in trees]).astype(np.int64)
    thr = np.concatenate([comparison_thresholds(t, forest) for t in trees]).astype(xdt, copy=False)
    internal = left >= 0
    gl = np.where(internal, left + start[tree_of], -1)
    gr = np.where(internal, right + start[tree_of], -1)

    # depth and heap position of every node: one vectorised step per level, all trees at once
    depth = np.zeros(len(left), np.int64)
    pos = np.zeros(len(left), np.int64)
    frontier = start[:-1]
    d = 0
    while True:
        fr = frontier[internal[frontier]]
        if not fr.size:
            break
        d += 1
        lc, rc = gl[fr], gr[fr]
        depth[lc] = d
        depth[rc] = d
        if d <= MAX_HEAP_DEPTH:  # deeper trees never use the heap layout (and 2^d overflows)
            p = pos[fr]
            pos[lc] = 2 * p + 1
            pos[rc] = 2 * p + 2
        frontier = np.concatenate([lc, rc])
    firsts = start[:-1]
    tdepth = np.maximum.reduceat(depth, firsts)
    n_int_real = np.add.reduceat(internal.astype(np.int64), firsts)
    n_leaf_real = nn - n_int_real
    has_cat = np.add.reduceat((cidx >= 0).astype(np.int64), firsts) > 0

    quant = bitvec = False
    small = int(n_leaf_real.max()) <= BITVEC_MAX_LEAVES and bool(internal.any())
    if layout in ("compact", "naive"):
        heap = np.zeros(T, bool)
    elif layout in ("bitvec", "quant"):
        if layout == "bitvec":
            need = f"trees of at most {BITVEC_MAX_LEAVES} leaves"
            have, ok = f"trees of {int(n_leaf_real.max())} leaves", small
        else:
            need = f"numeric splits of depth <= {QUANT_MAX_DEPTH}"
            ok = not has_cat.any() and int(tdepth.max()) <= QUANT_MAX_DEPTH
            have = f"{int(has_cat.sum())} trees with categorical splits" if has_cat.any() \
                else f"trees of depth {int(tdepth.max())}"
        if not ok:
            raise UnsupportedModelError(f"layout={layout!r} takes forests of {need}; this one "
                                        f"has {have} (use layout='auto')")
        heap = np.full(T, layout == "quant")
        quant, bitvec = layout == "quant" and bool(internal.any()), layout == "bitvec"
    else:
        heap = ~has_cat & (tdepth <= heap_max_depth)
        if layout == "auto":  # padding costs at most 4x the real leaves (always fine up to 64)
            heap &= (np.int64(1) << np.minimum(tdepth, 62)) <= np.maximum(64, 4 * n_leaf_real)
            # every tree a heap of depth <= QUANT_AUTO_DEPTH: the quantised walk (measured in
            # bench/: faster than the float walk there, see quant_tables)
            quant = bool(heap.all() and internal.any() and int(tdepth.max()) <= QUANT_AUTO_DEPTH)
            if not quant and small:  # deeper trees of <= 128 leaves (LightGBM's, HGB's kind)
                heap = np.zeros(T, bool)
                bitvec = True
    hd = np.where(heap, tdepth, 0)
    tree_nint = np.where(heap, (np.int64(1) << hd) - 1, n_int_real)
    tree_nleaf = np.where(heap, np.int64(1) << hd, n_leaf_real)

    nodeheap = heap[tree_of]
    ff = (feature & FF_FEAT) | np.where(nan_right, FF_NANR, 0) | np.where(cidx >= 0, FF_CAT, 0)
    ff32 = ff.astype(np.uint32).view(np.int32)

    # heap tables: padding = (feature 0, NaN goes left, threshold NaN) sends every row left
    hoff = _excl_cumsum(np.where(heap, tree_nint, 0))
    h_ff = np.zeros(int(hoff[-1]), np.int32)
    h_thr = np.full(int(hoff[-1]), np.nan, xdt)
    sel = internal & nodeheap
    slot = hoff[tree_of[sel]] + pos[sel]
    h_ff[slot] = ff32[sel]
    h_thr[slot] = thr[sel]

    # compact tables: internal nodes and leaves numbered in IR order within their tree
    int_rank = np.cumsum(internal) - 1 - _excl_cumsum(n_int_real)[tree_of]
    leaf_rank = np.cumsum(~internal) - 1 - _excl_cumsum(n_leaf_real)[tree_of]
    code = np.where(internal, int_rank, ~leaf_rank)
    csel = internal & ~nodeheap
    ncat = np.fromiter((t.cat_bits.shape[0] for t in trees), np.int64, T)
    set_start = _excl_cumsum(ncat)
    c_is_cat = cidx[csel] >= 0
    c_ff = ff32[csel]
    c_thr = np.where(c_is_cat, xdt.type(0), thr[csel]).astype(xdt)
    c_cat = np.where(c_is_cat, cidx[csel] + set_start[tree_of[csel]], -1).astype(np.int32)
    if int(csel.sum()) >= 1 << 31:  # node records hold int32 global child indices
        raise UnsupportedModelError("the arrays backend supports at most 2^31 - 1 internal nodes "
                                    "in compact trees")
    c_left = code[gl[csel]].astype(np.int32)
    c_right = code[gr[csel]].astype(np.int32)

    # leaves: heap leaves fill the slot range below them, compact leaves keep their rank
    lnode = np.flatnonzero(~internal)
    lt = tree_of[lnode]
    lheap = heap[lt]
    k = np.where(lheap, hd[lt] - depth[lnode], 0)
    slot_start = np.where(lheap, ((pos[lnode] + 1) << k) - (np.int64(1) << hd[lt]), leaf_rank[lnode])
    count = np.int64(1) << k
    item_off = _excl_cumsum(tree_nleaf)
    order = np.argsort(item_off[lt] + slot_start, kind="stable")
    src = np.repeat(lnode[order], count[order])       # source node of every leaf slot
    st = tree_of[src]
    vflat = np.concatenate([t.value.ravel() for t in trees])
    vstart = _excl_cumsum(nn * width)
    first_val = vstart[st] + (src - start[st]) * width[st]
    if np.all(width == 1):
        vals = vflat[first_val]
    else:
        iw = width[st]
        ipos = _excl_cumsum(iw)
        j = np.arange(int(ipos[-1])) - np.repeat(ipos[:-1], iw)
        vals = vflat[np.repeat(first_val, iw) + j]
    leaf_values = vals.astype(adt)  # rounded once, like the interpreter's vals.astype(acc_t)

    cat_words = np.concatenate([t.cat_bits.ravel() for t in trees]).astype(np.uint32)
    cat_nwords = np.repeat(np.fromiter((t.cat_bits.shape[1] for t in trees), np.int64, T), ncat)
    cat_other = np.concatenate([t.cat_other_left for t in trees]).astype(np.uint8)

    arrays = {
        "tree_layout": np.where(heap, 0, 1).astype(np.uint8),
        "tree_depth": tdepth.astype(np.int32),
        "tree_nint": tree_nint.astype(np.int64), "tree_nleaf": tree_nleaf.astype(np.int64),
        "tree_out": np.asarray(forest.tree_output, np.int32), "tree_width": width.astype(np.int32),
        "h_ff": h_ff, "h_thr": h_thr,
        "c_ff": c_ff, "c_thr": c_thr, "c_cat": c_cat, "c_left": c_left, "c_right": c_right,
        "leaf_values": leaf_values, "base": forest.base_score.astype(adt),
        "cat_words": cat_words, "cat_nwords": cat_nwords.astype(np.int32), "cat_other_left": cat_other,
    }
    meta = {"x_dtype": forest.input_dtype, "acc_dtype": forest.accumulate_dtype,
            "comparison": forest.comparison, "average": forest.average, "n_trees": T,
            "n_features": forest.n_features, "n_outputs": forest.n_outputs,
            "naive": layout == "naive", "layout": layout, "quant": quant, "bitvec": bitvec,
            "category_rule": getattr(forest, "category_rule", "nonneg")}
    tables = Tables(meta=meta, arrays={n: np.ascontiguousarray(a, Tables(meta, {}).expected_dtype(n))
                                       for n, a in arrays.items()})
    return tables


# -- the quantised walk's tables (derived from the heap tables when loading) --------------------
def quant_tables(h_ff: np.ndarray, h_thr: np.ndarray,
                 cat_sets: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The column and node tables of the byte walks (runtime/kernels/quant_impl.c).

    Derived from the (validated) heap tables every time a kernel is loaded (vectorised, a few ms
    for 30k slots), never stored: they cannot disagree with the thresholds they encode.
    A column is (feature, chunk of consecutive distinct thresholds (quant_chunk_size), NaN
    direction); a node's byte is its threshold's index within its column; padding slots
    (threshold NaN) get 255, which no bin exceeds. NaN's bin (q_nanc) is the column's count
    (right of every node) or 0 (left of every node; 255 after merge_nan_columns); a column may
    copy another's bins (q_src), only NaN's differs.

    Categorical entries (the interval walk only; cat_sets: one row of 32 bytes per entry, see
    cat_byte_sets) read a column of category codes instead (q_kind 1, one per feature: the
    category for a valid value below 254, 254 for any other value, 255 for NaN); h_qcat is the
    entry's row in q_cat (-1 for numeric entries).
    """
    ff = h_ff.view(np.uint32)
    is_cat = (ff & FF_CAT) != 0
    real = ~np.isnan(h_thr) & ~is_cat
    f = (ff[real] & FF_FEAT).astype(np.int64)
    t = h_thr[real]
    nanr = ((ff[real] & FF_NANR) != 0).astype(np.int64)
    H = len(h_ff)
    if not len(t) and not is_cat.any():
        return {}
    order = np.lexsort((t, f))
    fs, ts = f[order], t[order]
    new = np.ones(len(fs), bool)
    new[1:] = (fs[1:] != fs[:-1]) | (ts[1:] != ts[:-1])  # -0.0 == 0.0: one threshold
    uid = np.cumsum(new) - 1
    inv = np.empty(len(fs), np.int64)
    inv[order] = uid
    uf, ut = fs[new], ts[new]                       # distinct (feature, threshold), sorted
    _, ffirst = np.unique(uf, return_index=True)
    nthr = np.diff(np.append(ffirst, len(uf)))     # per feature
    rank = np.arange(len(uf)) - np.repeat(ffirst, nthr)
    size = np.repeat(quant_chunk_size(nthr), nthr)
    chunk, j = rank // size, rank % size
    # columns: distinct (feature, chunk, nan direction) over the real slots
    ckey = (uf[inv] * (1 << 24) + chunk[inv]) * 2 + nanr
    cols, slot_col = np.unique(ckey, return_inverse=True)
    if len(cols) >= 1 << 26:  # the kernel addresses columns as int32 byte offsets (col * 32)
        return {}
    c_f, c_chunk, c_nanr = cols >> 25, (cols >> 1) & ((1 << 24) - 1), cols & 1
    # each column's thresholds: the distinct thresholds of its (feature, chunk)
    gkey = uf * (1 << 24) + chunk
    # (no numeric split at all, only categorical ones: no group, not one at index 0)
    gstart = np.flatnonzero(np.r_[np.ones(min(1, len(gkey)), bool), gkey[1:] != gkey[:-1]])
    gcount = np.diff(np.append(gstart, len(gkey)))
    g = np.searchsorted(gkey[gstart], c_f * (1 << 24) + c_chunk)
    count = gcount[g]
    # a power of two > count (NaN padding after the thresholds), at least 16 (the AVX2
    # quantiser compares 16 at a time)
    P = np.maximum(16, np.int64(1) << np.ceil(np.log2(count + 1)).astype(np.int64))
    off = _excl_cumsum(P)
    q_thr = np.full(int(off[-1]), np.nan, h_thr.dtype)
    idx = np.repeat(off[:-1], count) + (np.arange(int(count.sum())) - np.repeat(_excl_cumsum(count)[:-1], count))
    q_thr[idx] = ut[np.repeat(gstart[g], count) + (idx - np.repeat(off[:-1], count))]
    h_qcol = np.zeros(H, np.int32)
    h_qthr = np.full(H, 255, np.uint8)
    h_qcol[real] = slot_col
    h_qthr[real] = j[inv]
    # columns are sorted by (feature, chunk, NaN direction): the two directions are neighbours,
    # the second (NaN right) a copy of the first's bins (q_src) but for NaN's code (q_nanc)
    same = np.zeros(len(cols), bool)
    same[1:] = (c_f[1:] == c_f[:-1]) & (c_chunk[1:] == c_chunk[:-1])
    src = np.where(same, np.arange(len(cols)) - 1, -1)
    kind = np.zeros(len(cols), np.uint8)
    h_qcat = np.full(H, -1, np.int32)
    q_cat = np.zeros((0, 32), np.uint8)
    if is_cat.any():  # category-code columns after the bin columns, one per feature
        cf = (ff[is_cat] & FF_FEAT).astype(np.int64)
        ufeat, cinv = np.unique(cf, return_inverse=True)
        h_qcol[is_cat] = len(cols) + cinv
        h_qthr[is_cat] = 0
        h_qcat[is_cat] = np.arange(int(is_cat.sum()))
        q_cat = np.ascontiguousarray(cat_sets[is_cat], np.uint8)
        n = len(ufeat)
        c_f = np.concatenate([c_f, ufeat])
        c_nanr = np.concatenate([c_nanr, np.zeros(n, np.int64)])
        src, kind = np.concatenate([src, np.full(n, -1)]), np.concatenate([kind, np.ones(n, np.uint8)])
        count = np.concatenate([count, np.zeros(n, np.int64)])
        P = np.concatenate([P, np.full(n, 16, np.int64)])       # an unused all-NaN table
        off = _excl_cumsum(P)
        q_thr = np.concatenate([q_thr, np.full(16 * n, np.nan, h_thr.dtype)])
    return {"q_feat": c_f.astype(np.int32), "q_nanc": np.where(c_nanr == 1, count, 0).astype(np.uint8),
            "q_src": src.astype(np.int32),
            "q_off": off[:-1].astype(np.int64), "q_len": P.astype(np.int32),
            "q_count": count.astype(np.int32), "q_kind": kind, "q_thr": q_thr,
            "h_qcol": h_qcol, "h_qthr": h_qthr, "h_qcat": h_qcat, "q_cat": q_cat.reshape(-1)}


def merge_nan_columns(q: dict[str, np.ndarray], max_cols: int) -> tuple[dict[str, np.ndarray], int, bool]:
    """The heap byte walk's columns for the column mux (quant_impl.c, tc_qlevelc): a feature
    whose nodes send NaN both ways has two columns (same bins, NaN's code 0 or the count); where
    its count is below 255 they become one column whose NaN code is 255 (no bin's: right of every
    node) and, after all such columns, a copy of its bins with NaN 0 for the node mux's NaN-left
    nodes. The column mux then covers only the first `n_mux` columns: a NaN-left node's column
    index byte there (h_qcix) carries bit 7, and the mux sends a row with code 255 left at it.

    Returns (tables, n_mux, merged); tables unchanged (n_mux: all columns) where nothing merges
    or the merged columns still exceed max_cols."""
    src, count, n = q["q_src"], q["q_count"], len(q["q_src"])
    b = np.flatnonzero((src >= 0) & (count <= 254))    # NaN-right columns that merge
    a = src[b]                                          # their NaN-left twins
    if not len(b) or n - len(a) > max_cols:
        return q, n, False
    base = np.ones(n, bool)
    base[a] = False
    order = np.concatenate([np.flatnonzero(base), a])  # new column i is old column order[i]
    new = np.empty(n, np.int64)
    new[order] = np.arange(n)
    n_mux = n - len(a)
    nanc = q["q_nanc"].copy()
    nanc[b] = 255
    srcn = np.where(src >= 0, new[np.maximum(src, 0)], -1)
    srcn[b] = -1                                        # merged: its own bins
    srcn[a] = new[b]                                    # the twins copy them
    out = dict(q)
    for k in ("q_feat", "q_off", "q_len", "q_count", "q_kind"):
        out[k] = q[k][order]
    out["q_nanc"], out["q_src"] = nanc[order], srcn[order].astype(np.int32)
    out["h_qcol"] = new[q["h_qcol"]].astype(np.int32)
    # the column mux's index: the merged column; bit 7 at the nodes that send NaN left there
    # (padding slots, threshold byte 255: 0)
    mux = np.arange(n)
    mux[a] = b
    flag = np.zeros(n, np.int64)
    flag[a] = 0x80
    old = q["h_qcol"]
    out["h_qcix"] = np.where(q["h_qthr"] == 255, 0, new[mux[old]] | flag[old]).astype(np.uint8)
    return out, n_mux, True


#: category codes of the byte walks: a valid category below this is itself; other values 254,
#: NaN 255 (quant_impl.c)
CAT_CODES = 254


def cat_byte_sets(A: dict[str, np.ndarray], nodes: np.ndarray) -> np.ndarray | None:
    """Each compact node's 256-bit "goes left" set over category codes (32 bytes, bit c of byte
    c >> 3): the node's own bits below its set size, cat_other_left for codes from there up to
    254 (invalid values), default_left for 255 (NaN). None if some set is larger than the codes
    and disagrees with cat_other_left above them (values >= 254 would then be misread)."""
    c_ff = A["c_ff"].view(np.uint32)[nodes]
    out = np.zeros((len(nodes), 32), np.uint8)
    cat = np.flatnonzero((c_ff & FF_CAT) != 0)
    if not len(cat):
        return out
    sets = A["c_cat"][nodes][cat].astype(np.int64)
    nw = A["cat_nwords"].astype(np.int64)[sets]
    woff = _excl_cumsum(A["cat_nwords"].astype(np.int64))[:-1][sets]
    other = A["cat_other_left"][sets].astype(bool)

    def words(k: int) -> np.ndarray:  # word k of every set (0 past a set's end)
        has = nw > k
        return np.where(has, A["cat_words"][np.where(has, woff + k, 0)], 0).astype(np.uint32)
    W = np.stack([words(k) for k in range(8)], axis=1)                  # codes 0..255
    bits = np.unpackbits(W.view(np.uint8), axis=1, bitorder="little").astype(bool)
    # codes >= 254 stand for every value >= 254: a set reaching there must send them all
    # where invalid values go
    big = nw * 32 > CAT_CODES
    if big.any():
        want = np.where(other, np.uint32(0xFFFFFFFF), np.uint32(0))
        tail = bits[big, CAT_CODES:256] != other[big, None]
        if tail.any() or any(np.any((words(k) != want)[big & (nw > k)]) for k in range(8, int(nw.max()))):
            return None
    nbits = np.minimum(32 * nw, CAT_CODES)
    bits = np.where(np.arange(256)[None, :] >= nbits[:, None], other[:, None], bits)
    bits[:, CAT_CODES] = other
    bits[:, 255] = (c_ff[cat] & FF_NANR) == 0
    out[cat] = np.packbits(bits, axis=1, bitorder="little")
    return out


def bitvec_tables(A: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The interval walk's tables (quant_impl.c), derived from the (validated) compact tables
    when loading; every tree has <= 128 leaves (positions, lo - 1 and hi fit a signed byte).

    Leaves are numbered left to right (in order); a node's left subtree holds the leaves
    [lo, hi). A row that goes right at a node cannot end in [lo, hi) (QuickScorer's leaf
    masks), and its exit leaf is the first leaf that no such interval covers: every leaf left of
    it lies in the left subtree of the node where its path and the exit path part, where the
    row went right; no node on the exit path covers the exit leaf. With each tree's nodes
    sorted by lo, a single sweep (pos = max(pos, hi) where the row goes right and lo <= pos)
    finds that first uncovered leaf.

    Returns "order" (compact node index, each tree's nodes sorted by lo), "bv_lo1" (lo - 1) and
    "bv_hi" in that order, and "bv_leaf": the leaf vectors in left-to-right order.
    """
    nint, nleaf = A["tree_nint"].astype(np.int64), A["tree_nleaf"].astype(np.int64)
    T, C = len(nint), len(A["c_ff"])
    coff = _excl_cumsum(nint)
    base = np.repeat(coff[:-1], nint)                       # global index of each tree's node 0
    cl, cr = A["c_left"].astype(np.int64), A["c_right"].astype(np.int64)
    gl, gr = np.where(cl >= 0, cl + base, -1), np.where(cr >= 0, cr + base, -1)
    # the levels top-down (children have larger indices than parents, so this terminates)
    frontier = coff[:-1][nint > 0]
    levels = []
    while frontier.size:
        levels.append(frontier)
        kids = np.concatenate([gl[frontier], gr[frontier]])
        frontier = kids[kids >= 0]
    nl = np.zeros(C, np.int64)                              # leaves below each node, bottom-up
    for fr in reversed(levels):
        nl[fr] = np.where(gl[fr] >= 0, nl[np.maximum(gl[fr], 0)], 1) + \
            np.where(gr[fr] >= 0, nl[np.maximum(gr[fr], 0)], 1)
    # a corrupt file could share a child between parents (validate only bounds each index):
    # every node reached exactly once and every leaf counted once, or the positions below
    # could leave the tree's leaves
    seen = np.concatenate(levels) if levels else np.zeros(0, np.int64)
    roots = coff[:-1][nint > 0]
    if len(seen) != C or len(np.unique(seen)) != C or np.any(nl[roots] != nleaf[nint > 0]):
        raise _bad("a tree's nodes do not form a tree")
    nl_left = np.where(gl >= 0, nl[np.maximum(gl, 0)], 1)
    lo = np.zeros(C, np.int64)                              # first leaf below each node, top-down
    for fr in levels:
        a, b = gl[fr], gr[fr]
        lo[a[a >= 0]] = lo[fr[a >= 0]]
        lo[b[b >= 0]] = (lo[fr] + nl_left[fr])[b >= 0]
    tree_of = np.repeat(np.arange(T), nint)
    order = np.lexsort((lo, tree_of))
    # a leaf child's position: its parent's lo, plus the parent's left leaves if it is the right one
    loff = _excl_cumsum(nleaf)
    leaf_pos = np.zeros(int(loff[-1]), np.int64)
    for child, right in ((cl, False), (cr, True)):
        is_leaf = child < 0
        leaf_pos[loff[tree_of[is_leaf]] + ~child[is_leaf]] = lo[is_leaf] + (nl_left[is_leaf] if right else 0)
    # leaf vectors to their positions (width w each; a one-leaf tree keeps its leaf 0)
    w = A["tree_width"].astype(np.int64)
    leaf_tree = np.repeat(np.arange(T), nleaf)
    iw = w[leaf_tree]
    voff = _excl_cumsum(nleaf * w)[leaf_tree]
    rank = np.arange(int(loff[-1])) - loff[leaf_tree]
    j = np.arange(int(iw.sum())) - np.repeat(_excl_cumsum(iw)[:-1], iw)
    src = np.repeat(voff + rank * iw, iw) + j
    dst = np.repeat(voff + leaf_pos * iw, iw) + j
    bv_leaf = np.zeros_like(A["leaf_values"])  # every entry is written (validate): zeros anyway
    bv_leaf[dst] = A["leaf_values"][src]
    return {"order": order, "bv_lo1": (lo[order] - 1).astype(np.int8),
            "bv_hi": (lo + nl_left)[order].astype(np.int8), "bv_leaf": bv_leaf}


def quant_levels(q_thr: np.ndarray, q_off: np.ndarray, q_len: np.ndarray) -> np.ndarray:
    """The quantiser's level tables, 64 floats per column (quant_impl.c, tc_qlanes8): of the
    float32 thresholds, or of float64 thresholds rounded to float32 (the first guess there).

    For a column of P sorted thresholds u (P a power of two >= 16, NaN padding after them),
    g1 = P / 8 and g2 = max(g1 / 8, 1): entries 0..6 are u[g1 i + g1 - 1] (level 1; 7 is
    unused), entry 8 + 8 j + b is u[g1 b + g2 j + g2 - 1] for j < g1 / g2 - 1 (level 2: table j,
    permuted by each row's level-1 count b), NaN elsewhere (never compared).
    """
    off, P = q_off.astype(np.int64), q_len.astype(np.int64)
    g1 = P // 8
    g2 = np.maximum(g1 // 8, 1)
    lv = np.full((len(off), 64), np.nan, np.float32)
    lv[:, :7] = q_thr[off[:, None] + g1[:, None] * np.arange(1, 8) - 1]
    j, b = np.arange(7)[None, :, None], np.arange(8)[None, None, :]
    o, g1_, g2_ = off[:, None, None], g1[:, None, None], g2[:, None, None]
    used = j < g1_ // g2_ - 1
    idx = np.where(used, o + g1_ * b + g2_ * j + g2_ - 1, 0)
    lv[:, 8:] = np.where(used, q_thr[idx], np.float32(np.nan)).reshape(len(off), 56)
    return lv.reshape(-1)


def leaf_planes(leaf_values: np.ndarray, depth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float32 / float64 heap leaves (one per slot) as byte planes for the AVX2 quantised walk:
    per tree, L = max(16, 2^D) leaves (repeated below 16), plane p = byte p of every leaf, the
    value's 4 or 8 planes in order. Returns (bytes, per-tree offset)."""
    w = leaf_values.dtype.itemsize
    n = np.int64(1) << depth.astype(np.int64)
    L = np.maximum(16, n)
    loff = _excl_cumsum(n)
    pos = np.arange(int(L.sum())) - np.repeat(_excl_cumsum(L)[:-1], L)   # leaf slot within tree
    src = np.repeat(loff[:-1], L) + pos % np.repeat(n, L)
    b = leaf_values.view(np.uint8).reshape(-1, w)[src]                   # (sum L, w)
    off = _excl_cumsum(w * L)
    dst = np.repeat(off[:-1], L) + pos
    out = np.empty(int(off[-1]), np.uint8)
    Lr = np.repeat(L, L)
    for p in range(w):
        out[dst + p * Lr] = b[:, p]
    return out, off[:-1].astype(np.int64)


# -- validation (every index a native pointer will follow) --------------------------------------
def _bad(msg: str) -> ArtifactError:
    return ArtifactError(f"corrupt arrays artifact: {msg}")


def validate(tables: Tables) -> None:
    """Raise ArtifactError unless every index in `tables` stays inside its array, every tree
    is a tree (each node and leaf reached exactly once: no table derived from it keeps an
    unwritten entry) and every path reads the same numbers (finite leaves, no NaN split)."""
    m, A = tables.meta, tables.arrays
    try:
        T, nf, no = m["n_trees"], m["n_features"], m["n_outputs"]
        # exactly JSON's ints and bools: int(2.5) or bool("false") would read another model
        flags = (m["average"], m["naive"], m.get("quant", False), m.get("bitvec", False))
        if not all(type(v) is int for v in (T, nf, no)) or not all(type(v) is bool for v in flags):
            raise _bad("table description fields of the wrong type")
        if m["x_dtype"] not in _DT or m["acc_dtype"] not in _DT or m["comparison"] not in ("<", "<="):
            raise _bad("unknown dtype or comparison")
        if m["category_rule"] not in CATEGORY_RULES:
            raise _bad("unknown category rule")
    except (KeyError, TypeError, ValueError):
        raise _bad("incomplete table description") from None
    if not (T >= 1 and 1 <= nf <= FF_FEAT and no >= 1):
        raise _bad(f"n_trees={T}, n_features={nf}, n_outputs={no}")
    for name in _ARRAYS:
        a = A.get(name)
        if a is None or a.ndim != 1 or a.dtype != tables.expected_dtype(name):
            raise _bad(f"array {name!r} missing or of the wrong type")
    for name in ("tree_layout", "tree_depth", "tree_nint", "tree_nleaf", "tree_out", "tree_width"):
        if len(A[name]) != T:
            raise _bad(f"{name} has {len(A[name])} entries for {T} trees")
    lay = A["tree_layout"]
    if np.any(lay > 1):
        raise _bad("unknown tree layout")
    heap = lay == 0
    if m["naive"] and heap.any():
        raise _bad("the naive walk needs compact trees")
    if not isinstance(m.get("quant", False), bool):
        raise _bad("quant flag")
    if m.get("quant") and (m["naive"] or not heap.all() or int(A["tree_depth"].max()) > QUANT_MAX_DEPTH):
        raise _bad(f"the quantised walk needs heap trees of depth <= {QUANT_MAX_DEPTH}")
    if not isinstance(m.get("bitvec", False), bool):
        raise _bad("bitvec flag")
    if m.get("bitvec") and (m["naive"] or m.get("quant") or heap.any()
                            or int(A["tree_nleaf"].max()) > BITVEC_MAX_LEAVES):
        raise _bad(f"the interval walk needs compact trees of <= {BITVEC_MAX_LEAVES} leaves")
    D = A["tree_depth"].astype(np.int64)
    nint, nleaf = A["tree_nint"], A["tree_nleaf"]
    w, o = A["tree_width"].astype(np.int64), A["tree_out"].astype(np.int64)
    if np.any(heap & ((D < 0) | (D > MAX_HEAP_DEPTH))):
        raise _bad("heap tree depth out of range")
    Dh = np.where(heap, D, 0)
    if np.any(heap & ((nint != (np.int64(1) << Dh) - 1) | (nleaf != np.int64(1) << Dh))):
        raise _bad("heap tree sizes do not match their depth")
    lim = np.int64(1) << 40  # no sums can overflow below this
    if np.any((nint < 0) | (nint > lim) | (nleaf < 1) | (nleaf > lim) | (w < 1) | (w > 1 << 20)):
        raise _bad("tree sizes out of range")
    if np.any((o < 0) | (o + w > no)):
        raise _bad("a tree writes outside the outputs")
    if len(A["base"]) != no:
        raise _bad("base score length")
    H, C = int(nint[heap].sum()), int(nint[~heap].sum())
    if C >= 1 << 31:
        raise _bad("too many compact nodes")
    if len(A["h_ff"]) != H or len(A["h_thr"]) != H:
        raise _bad("heap table length")
    for name in ("c_ff", "c_thr", "c_cat", "c_left", "c_right"):
        if len(A[name]) != C:
            raise _bad(f"{name} length")
    if len(A["leaf_values"]) != int((nleaf * w).sum()):
        raise _bad("leaf table length")
    h_ff = A["h_ff"].view(np.uint32)
    if np.any((h_ff & FF_FEAT) >= nf) or np.any(h_ff & FF_CAT):
        raise _bad("heap node feature out of range")
    c_ff = A["c_ff"].view(np.uint32)
    if np.any((c_ff & FF_FEAT) >= nf):
        raise _bad("node feature out of range")
    # the walks must agree on every path: a NaN threshold is heap padding (feature 0, NaN goes
    # left: the byte walks encode it as "left of every bin") and never a numeric split
    if np.any(np.isnan(A["h_thr"]) & (A["h_ff"] != 0)) or \
            np.any(np.isnan(A["c_thr"]) & ((c_ff & FF_CAT) == 0)):
        raise _bad("NaN threshold at a split")
    if not (np.all(np.isfinite(A["leaf_values"])) and np.all(np.isfinite(A["base"]))):
        raise _bad("non-finite leaf value or base score")
    ntrees_c = np.flatnonzero(~heap)
    ctree = np.repeat(ntrees_c, nint[~heap])
    cstart = _excl_cumsum(nint[~heap])
    local = np.arange(C, dtype=np.int64) - np.repeat(cstart[:-1], nint[~heap])
    for name in ("c_left", "c_right"):
        ch = A[name].astype(np.int64)
        is_int = ch >= 0
        bad = np.where(is_int, (ch <= local) | (ch >= nint[ctree]), ~ch >= nleaf[ctree])
        if bad.any():
            raise _bad(f"child index out of range in {name}")
    # in range is not enough: a child shared by two parents orphans another node or leaf, whose
    # entries in the derived tables (bitvec_tables' leaf order, the deep path's records) nothing
    # would write. So: nint + 1 leaves per compact tree, every node but the root and every leaf
    # of a split tree the child of exactly one node (children > parents: no cycles either)
    if np.any(nleaf[~heap] != nint[~heap] + 1):
        raise _bad("a compact tree's leaf count is not its internal node count + 1")
    kids = np.concatenate([A["c_left"], A["c_right"]]).astype(np.int64)
    kid_tree = np.concatenate([ctree, ctree])
    node_refs = np.bincount(np.concatenate([np.arange(C) - local] * 2)[kids >= 0] + kids[kids >= 0],
                            minlength=C)
    loff = _excl_cumsum(np.where(heap, 0, nleaf))
    leaf_refs = np.bincount(loff[kid_tree[kids < 0]] + ~kids[kids < 0], minlength=int(loff[-1]))
    split = np.repeat(nint > 0, np.where(heap, 0, nleaf))  # a one-leaf tree: no parent
    if np.any(node_refs != (local > 0)) or np.any(leaf_refs != split):
        raise _bad("a tree's nodes do not form a tree (a node or leaf without or with several parents)")
    nw = A["cat_nwords"].astype(np.int64)
    S = len(nw)
    if np.any((nw < 1) | (nw > 1 << 25)) or int(nw.sum()) != len(A["cat_words"]) or len(A["cat_other_left"]) != S:
        raise _bad("category sets")
    is_cat = (c_ff & FF_CAT) != 0
    cc = A["c_cat"][is_cat]
    if np.any((cc < 0) | (cc >= S)):
        raise _bad("category set index out of range")


# -- the file format ----------------------------------------------------------------------------
def tables_to_bytes(tables: Tables, head: Head, runtime: dict[str, Any]) -> bytes:
    """MAGIC, version, header length, JSON header, then each array at a 64-byte boundary."""
    descr, off = [], 0
    for name in _ARRAYS:
        a = tables.arrays[name]
        descr.append({"name": name, "dtype": a.dtype.str, "length": int(a.shape[0]), "offset": off})
        off += -(-a.nbytes // 64) * 64
    header = json.dumps({"format": "treecomp-arrays", "version": FORMAT_VERSION,
                         "treecomp_version": __version__, "head": head.to_json(backend=NAME),
                         "tables": tables.meta, "runtime": runtime, "arrays": descr},
                        sort_keys=True).encode()
    start = -(-(_PREFIX.size + len(header)) // 64) * 64
    buf = bytearray(start + off)
    _PREFIX.pack_into(buf, 0, MAGIC, FORMAT_VERSION, 0, len(header))
    buf[_PREFIX.size:_PREFIX.size + len(header)] = header
    for d in descr:
        a = tables.arrays[d["name"]]
        buf[start + d["offset"]:start + d["offset"] + a.nbytes] = a.tobytes()
    return bytes(buf)


def tables_from_bytes(data: bytes) -> tuple[Tables, Head, dict[str, Any]]:
    """Parse and validate a table file (ArtifactError on anything malformed)."""
    data = bytes(data)
    if len(data) < _PREFIX.size or not data.startswith(MAGIC):
        raise ArtifactError("not a treecomp arrays artifact (bad magic)")
    _, version, _, hlen = _PREFIX.unpack_from(data, 0)
    if version != FORMAT_VERSION:
        raise ArtifactError(f"arrays artifact format {version} is not supported (this treecomp "
                            f"reads format {FORMAT_VERSION}): recompile the model")
    if _PREFIX.size + hlen > len(data):
        raise _bad("truncated header")
    try:
        hdr = json.loads(data[_PREFIX.size:_PREFIX.size + hlen])
        head = Head.from_json(hdr["head"])
        meta, runtime, descr = dict(hdr["tables"]), dict(hdr["runtime"]), list(hdr["arrays"])
        if hdr.get("format") != "treecomp-arrays":
            raise _bad("unknown format")
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, InvalidModelError) as exc:
        raise _bad(f"unreadable header ({exc})") from None
    start = -(-(_PREFIX.size + hlen) // 64) * 64
    arrays: dict[str, np.ndarray] = {}
    end = start
    try:
        for d in descr:
            name = str(d["name"])
            if name not in _ARRAYS or name in arrays:
                raise _bad(f"unexpected array {name!r}")
            dt, n, off = np.dtype(str(d["dtype"])), d["length"], d["offset"]
            if type(n) is not int or type(off) is not int:
                raise _bad(f"array {name!r}: length and offset must be integers")
            if dt.hasobject or n < 0 or off < 0 or off % 64 or start + off + n * dt.itemsize > len(data):
                raise _bad(f"array {name!r} lies outside the file (truncated?)")
            arrays[name] = np.frombuffer(data, dt, n, start + off)
            end = max(end, start + off + -(-n * dt.itemsize // 64) * 64)
    except ArtifactError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise _bad(f"bad array descriptor ({exc})") from None
    if len(data) != end:  # tables_to_bytes pads the last array to 64 bytes, no more
        raise _bad(f"{len(data) - end} bytes after the last array (a damaged or concatenated file?)"
                   if len(data) > end else "truncated (the last array's padding is missing)")
    tables = Tables(meta=meta, arrays=arrays)
    validate(tables)
    if (head.n_features, head.n_outputs, head.n_trees, head.input_dtype, head.accumulate_dtype) != \
            (meta["n_features"], meta["n_outputs"], meta["n_trees"], meta["x_dtype"], meta["acc_dtype"]):
        raise _bad("header and tables disagree")
    return tables, head, runtime


#: the heap byte walk muxes a level's bytes by column instead of by node (tc_qlevelc) where
#: the level has more nodes than the model has columns, up to this many columns
QCIX_MAX_COLS = 64

_QUANT_ARRAYS = ("q_feat", "q_nanc", "q_off", "q_len", "q_count", "q_src", "q_thr", "h_qcol", "h_qthr")


_HEAP_PAD = 64
#: tc_drec (arrays.c): the deep path's records, children as byte offsets
_DREC = np.dtype([("ff", "<i4"), ("tk", "<i4"), ("l", "<i4"), ("r", "<i4")])
#: deepest top heap of the deep path, and how full its levels must be (padding below leaves).
#: The AVX2 heap walk looks levels 0..5 up in registers and gathers below; on rf-deep (same
#: process, ns/row): complete levels only (K = 4..6) 472, K = 6 with half-full levels 453,
#: K = 7 466, K = 8 483 (the gathers cost more than the lockstep rounds they save)
DEEP_TOP_MAX = 6
DEEP_TOP_FULL = 0.5
#: rows walked in lockstep by the deep path (TC_DG in arrays_impl.c)
DEEP_GROUP = 8


def float_keys(v: np.ndarray) -> np.ndarray:
    """int32 keys of float32 values whose signed order is the values' order (arrays_impl.c,
    fkey): -0.0 is read as +0.0, then negative values get their magnitude bits flipped."""
    b = np.ascontiguousarray(v, np.float32).view(np.uint32).copy()
    b[b == 0x80000000] = 0
    return np.where(b >> 31 != 0, b ^ np.uint32(0x7FFFFFFF), b).astype(np.uint32).view(np.int32)


def _deep_tables(A: dict[str, np.ndarray], c_left_g: np.ndarray, c_right_g: np.ndarray,
                 nf: int, top_max: int) -> dict | None:
    """The derived tables of the kernel's deep path for compact trees (arrays_impl.c, deep_s),
    or None where it does not apply (float64 input, no eligible tree, too many records or
    features for int32 byte offsets).

    Built from validated tables at load time, vectorised (a few numpy passes per top level), and
    never stored: the file format is unchanged. Records: the compact internal nodes in c_nodes
    order, then from a power of two on one self-looping record per leaf of every compact tree
    (a gap of at most as many unused records); children are byte
    offsets, ff is the feature's byte offset in a feature-major group of DEEP_GROUP rows, the
    threshold is its order key (float_keys; NaN-goes-right bits in a separate array). A tree
    takes the path when it has no categorical split and no NaN threshold (a NaN has no key);
    its top heap covers the levels that are at least DEEP_TOP_FULL full (at most DEEP_TOP_MAX),
    padded below leaves above its depth K.

    Record order matters (all records shuffled: 1.5x slower on rf-deep) but the IR's preorder,
    left child next to its parent, is as good as a profile-guided one: hot child first by visit
    counts of 5,000 sample rows gave 1.02x slower on rf-deep and on 20 trees of ~20k nodes.
    """
    if A["c_thr"].dtype != np.float32:
        return None
    lay, nint, nleaf = A["tree_layout"], A["tree_nint"], A["tree_nleaf"]
    T = len(lay)
    C = len(A["c_ff"])
    compact = (lay == 1) & (nint > 0)
    if not compact.any():
        return None
    coff = _excl_cumsum(np.where(lay == 1, nint, 0))
    loff = _excl_cumsum(np.where(compact, nleaf, 0))
    # leaf records start at a power of two L (in records) above the internal ones and end
    # below 2L: a record is a leaf iff its byte offset has bit log2(16 L) set, so the lockstep
    # walk tests "all rows finished" with one AND per row (the gap is never touched)
    L = 1 << max(int(C), int(loff[-1]), 1).bit_length()
    n_rec = L + int(loff[-1])
    if 2 * L * _DREC.itemsize >= 1 << 31:  # byte offsets are int32
        return None
    ctrees = np.flatnonzero(lay == 1)
    ctree = np.repeat(ctrees, nint[ctrees])                        # tree of each compact record
    ff = A["c_ff"]
    slow = np.zeros(T, bool)  # categorical splits or NaN thresholds: the slot walk (compact_s)
    is_cat = (ff.view(np.uint32) & FF_CAT) != 0
    slow[ctree[is_cat | np.isnan(A["c_thr"])]] = True
    fast = compact & ~slow
    if not fast.any():
        return None
    leaf0 = L + loff[:-1]                                          # record of leaf 0 of tree t

    def rec_of(ch: np.ndarray) -> np.ndarray:                      # child code -> record index
        return np.where(ch >= 0, ch, leaf0[ctree] + ~ch)
    if nf * 4 * DEEP_GROUP >= 1 << 31:  # ff is a byte offset into a group of rows
        return None
    recs = np.zeros(n_rec, _DREC)
    recs["ff"][:C] = (ff.view(np.uint32) & FF_FEAT).astype(np.int64) * (4 * DEEP_GROUP)
    nanr = np.zeros(n_rec, np.uint8)
    nanr[:C] = (ff.view(np.uint32) & FF_NANR) != 0
    recs["tk"][:C] = float_keys(A["c_thr"])
    recs["l"][:C] = rec_of(c_left_g.astype(np.int64)) * _DREC.itemsize
    recs["r"][:C] = rec_of(c_right_g.astype(np.int64)) * _DREC.itemsize
    self_off = np.arange(L, n_rec, dtype=np.int64) * _DREC.itemsize
    recs["l"][L:] = self_off
    recs["r"][L:] = self_off

    # top levels of every fast tree at once: (tree, heap position, record) per level, leaves
    # not expanded
    ft = np.flatnonzero(fast)
    tr, pos, rec = ft, np.zeros(len(ft), np.int64), coff[:-1][ft]
    levels = []
    n_inner = np.zeros((T, top_max + 1), np.int64)  # internal nodes per tree and level
    for d in range(top_max + 1):
        levels.append((tr, pos, rec))
        inner = rec < L
        np.add.at(n_inner[:, d], tr[inner], 1)
        if d == top_max:
            break
        tr, pos, rec = tr[inner], pos[inner], rec[inner]
        tr = np.concatenate([tr, tr])
        rec = np.concatenate([recs["l"][rec], recs["r"][rec]]).astype(np.int64) // _DREC.itemsize
        pos = np.concatenate([2 * pos + 1, 2 * pos + 2])
    # K: every level above it at least DEEP_TOP_FULL full (a cheap heap step replaces a lockstep
    # round); a leaf above K becomes padding (NaN threshold, NaN goes left: every row goes left)
    # down to the leftmost exit below it, which holds the leaf
    full = n_inner >= DEEP_TOP_FULL * (np.int64(1) << np.arange(top_max + 1))
    K = np.where(fast, np.argmin(np.concatenate([full[:, :top_max], np.zeros((T, 1), bool)], 1), 1), 0)
    K = np.maximum(np.where(fast, 1, 0), K)   # the root is internal: at least one level
    topoff = _excl_cumsum(np.where(fast, (np.int64(1) << K) - 1, 0))
    exitoff = _excl_cumsum(np.where(fast, np.int64(1) << K, 0))
    top_ff = np.zeros(int(topoff[-1]) + _HEAP_PAD, np.int32)
    # padding: feature 0, NaN goes left, key above every non-NaN key: every row goes left
    top_tk = np.full(int(topoff[-1]) + _HEAP_PAD, np.iinfo(np.int32).max, np.int32)
    exits = np.full(int(exitoff[-1]), -1, np.int64)
    for d, (tr, pos, rec) in enumerate(levels):
        Kt = K[tr]
        inner = (d < Kt) & (rec < L)
        top_ff[topoff[tr[inner]] + pos[inner]] = ff[rec[inner]]
        top_tk[topoff[tr[inner]] + pos[inner]] = recs["tk"][rec[inner]]
        # exits: a node at depth K, or a leaf above it (every exit slot below it)
        at = (d == Kt) | ((d < Kt) & (rec >= L))
        span = np.int64(1) << (Kt[at] - d)
        first = ((pos[at] + 1) * span - 1) - ((np.int64(1) << Kt[at]) - 1)
        slot = np.repeat(exitoff[tr[at]] + first, span) + (
            np.arange(int(span.sum())) - np.repeat(_excl_cumsum(span)[:-1], span))
        exits[slot] = np.repeat(rec[at] * _DREC.itemsize, span)
    if np.any(exits < 0):  # every exit slot is covered: a bug, not bad input
        raise AssertionError("deep path: incomplete top heap")
    return {"d_recs": recs, "d_topd": K.astype(np.int32), "d_topoff": topoff[:-1],
            "d_exitoff": exitoff[:-1], "d_leaf0": leaf0.astype(np.int64), "d_top_ff": top_ff,
            "d_top_tk": top_tk, "d_exit": exits.astype(np.int32), "d_nint": L, "d_nanr": nanr}


class ArraysKernel:
    """A loaded table file: the kernel interface of treecomp.loader (run / to_bytes / save)."""

    kind = KIND
    backend = NAME

    def __init__(self, tables: Tables, head: Head, isa: str = "auto", block_rows: int = 0,
                 data: bytes | None = None, strict_isa: bool = True):
        self.tables, self.head, self._data = tables, head, data
        self.requested_block_rows = int(block_rows)
        self.block_rows = int(block_rows) or auto_block_rows(tables)
        self.requested_isa = isa
        self.isa = resolve_isa(isa, strict=strict_isa)
        self.meta_json = head.to_json(backend=NAME, isa=self.isa)
        m, A = tables.meta, tables.arrays
        self._strict = m["comparison"] == "<"
        # derived offsets: cumulative sums of the validated counts, never read from the file
        heap = A["tree_layout"] == 0
        nint, nleaf, w = A["tree_nint"], A["tree_nleaf"], A["tree_width"].astype(np.int64)
        hoff = _excl_cumsum(np.where(heap, nint, 0))
        coff = _excl_cumsum(np.where(heap, 0, nint))
        self._tree_node = np.where(heap, hoff[:-1], np.where(nint > 0, coff[:-1], -1)).astype(np.int64)
        self._tree_leaf = _excl_cumsum(nleaf * w)[:-1]
        self._cat_off = _excl_cumsum(A["cat_nwords"])[:-1]
        self._cat_nbits = (A["cat_nwords"].astype(np.int64) * 32).astype(np.int32)
        ctree_off = np.repeat(coff[:-1][~heap], nint[~heap])
        self._c_left_g = np.where(A["c_left"] >= 0, A["c_left"] + ctree_off, A["c_left"]).astype(np.int32)
        self._c_right_g = np.where(A["c_right"] >= 0, A["c_right"] + ctree_off, A["c_right"]).astype(np.int32)
        # the quantised walk's tables, derived (never read from a file: see quant_tables)
        self._quant = quant_tables(A["h_ff"], A["h_thr"]) if m.get("quant") else {}
        self._bitvec = {}
        if m.get("bitvec"):  # the same column tables over the compact nodes, plus intervals
            bv = bitvec_tables(A)
            order = bv.pop("order")
            sets = cat_byte_sets(A, order)
            if sets is not None:  # else: category sets beyond the codes: the float walk
                self._quant = quant_tables(A["c_ff"][order], A["c_thr"][order], sets)
                self._bitvec = bv if self._quant else {}
        self._struct, self._tkind = None, 0
        if self.isa == "llvm":
            self._walk = llvm_walker(m["x_dtype"], m["acc_dtype"])
            self._llvm_args = self._llvm_tables()
        elif self.isa != "numpy":
            self._lib = native_library()
            self._struct = self._pack()
            self._sref = ctypes.byref(self._struct)
            isa_i = _NATIVE_ISAS.index(self.isa)
            predict = self._lib.tc_arrays_predict
            tk = self._tkind = outputs.native_transform(head)
            # the small-batch entry point of loader.Predictor (addresses given); loader's flags
            # -> tc_arrays_predict's `transform`: tc_transform's kind | TC_PAIRS
            sref = self._sref
            self.run_ptr = lambda xp, bits, n, op, flags: predict(sref, xp, bits, n, op, isa_i,
                                                                  tk * (flags & 1) | flags & _PAIRS)
            #: for loader's small-batch entry (runtime/pyentry.c): function, tables, isa, kind
            self.entry = (ctypes.cast(predict, ctypes.c_void_p).value,
                          ctypes.addressof(self._struct), isa_i, tk)
        native = self._struct is not None
        #: run / run_ptr with TREECOMP_TRANSFORM apply the inverse link natively, exactly
        self.native_transform = native and self._tkind != 0
        #: run / run_ptr with loader.PAIRS write a binary classifier's (1 - p, p) rows
        self.native_pairs = native and head.n_outputs == 1 and head.n_classes == (2,) \
            and (self._tkind != 0 or head.transform == "identity")

    def _pack(self) -> _Tables:
        scalars, keep = self.pack_arrays()
        # aligned, contiguous copies where the file's buffer is not (keeps them alive too)
        self._keep = {k: (v if v.flags.c_contiguous and v.ctypes.data % v.dtype.alignment == 0
                          else np.ascontiguousarray(v).copy()) for k, v in keep.items()}
        s = _Tables(**scalars)
        for k, v in self._keep.items():
            setattr(s, k, v.ctypes.data if v.size else None)
        return s

    def pack_arrays(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """What the kernel's tc_tables holds: its scalar fields, and for its pointer fields the
        arrays they point at (derived tables included; a field not named, or an empty array, is
        NULL). _pack points a ctypes struct at them; arrays_so serialises them into a .so."""
        m, A = self.tables.meta, self.tables.arrays
        x64 = m["x_dtype"] == "float64"
        C = len(A["c_ff"])
        nodes = np.zeros(C, _NODE64 if x64 else _NODE32)
        nodes["ff"], nodes["l"], nodes["r"] = A["c_ff"], self._c_left_g, self._c_right_g
        if x64:
            nodes["cat"], nodes["t"] = A["c_cat"], A["c_thr"]
        else:  # the threshold's bits, or the category set of a categorical node
            is_cat = (A["c_ff"].view(np.uint32) & FF_CAT) != 0
            nodes["u"] = np.where(is_cat, A["c_cat"], A["c_thr"].view(np.int32))
        keep = {"tree_layout": A["tree_layout"].astype(np.int32), "tree_depth": A["tree_depth"],
                "tree_node": self._tree_node, "tree_leaf": self._tree_leaf,
                "tree_out": A["tree_out"], "tree_width": A["tree_width"],
                # padded: the vector walks load whole 8/16-entry level slices (arrays_impl.c)
                "h_ff": np.concatenate([A["h_ff"], np.zeros(_HEAP_PAD, np.int32)]),
                "h_thr": np.concatenate([A["h_thr"], np.zeros(_HEAP_PAD, A["h_thr"].dtype)]),
                "c_nodes": nodes, "cat_words": A["cat_words"],
                "cat_off": self._cat_off, "cat_nbits": self._cat_nbits,
                "cat_other_left": A["cat_other_left"], "leaf_values": A["leaf_values"],
                "base": A["base"]}
        if self._bitvec:
            keep.update(self._bitvec)
            keep["bv_nint"] = A["tree_nint"].astype(np.int64)
        q, cmux, cnan = self._quant, 0, False
        if q and m.get("quant"):  # the column mux's width (tc_qlevelc), NaN twins merged
            q, n_mux, cnan = merge_nan_columns(q, QCIX_MAX_COLS)
            cmux = next((w for w in (16, 32, 64) if n_mux <= w <= QCIX_MAX_COLS), 0)
        if q:  # node bytes biased for the signed byte compare (quant_impl.c)
            keep.update({k: q[k] for k in _QUANT_ARRAYS + ("q_kind", "h_qcat", "q_cat")
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
            if m.get("quant") and np.all(A["tree_width"] == 1):
                keep["q_leafb"], keep["q_leafb_off"] = leaf_planes(A["leaf_values"], A["tree_depth"])
        deep = (_deep_tables(A, self._c_left_g, self._c_right_g, m["n_features"], DEEP_TOP_MAX)
                if not m["naive"] else None)
        d_nint = 0
        if deep is not None:
            d_nint = deep.pop("d_nint")
            keep.update(deep)
        scalars = dict(n_trees=m["n_trees"], n_features=m["n_features"], n_outputs=m["n_outputs"],
                       x_bits=64 if x64 else 32, acc_bits=64 if m["acc_dtype"] == "float64" else 32,
                       strict=int(self._strict), average=int(bool(m["average"])),
                       naive=int(bool(m["naive"])), block_rows=self.block_rows,
                       cat_rule=CATEGORY_RULES.index(m["category_rule"]),
                       quant=int(bool(q) and bool(m.get("quant"))),
                       q_ncols=len(q["q_feat"]) if q else 0,
                       q_w1=int(bool(np.all(A["tree_width"] == 1))), bitvec=int(bool(self._bitvec)),
                       d_nint=int(d_nint), q_cmux=cmux, q_cnan=int(cnan))
        return {k: int(v) for k, v in scalars.items()}, keep

    # -- the kernel interface ------------------------------------------------------------------
    def run(self, X: np.ndarray, out: np.ndarray, flags: int = 0) -> None:
        if X.dtype not in (np.float32, np.float64) or not X.flags.c_contiguous or X.ndim != 2 \
                or X.shape[1] != self.head.n_features:
            raise ValueError("run() needs a C-contiguous float32/float64 (n, n_features) matrix")
        width = 2 if flags & _PAIRS else self.head.n_outputs
        if flags & _PAIRS and not self.native_pairs:
            raise ValueError("PAIRS: only a native kernel of a binary classifier writes (1 - p, p)")
        if out.dtype != self.tables.acc_dtype or out.shape != (X.shape[0], width) \
                or not out.flags.c_contiguous:
            raise ValueError(f"run() needs a C-contiguous (n, {width}) output of the accumulate dtype")
        if self.isa == "numpy":
            out[...] = self._run_numpy(X)
        elif self.isa == "llvm":
            self._run_llvm(X, out)
        else:
            nf = self._tkind * (flags & 1) | flags & _PAIRS  # as run_ptr
            rc = self._lib.tc_arrays_predict(self._sref, X.ctypes.data,
                                             X.dtype.itemsize * 8, X.shape[0], out.ctypes.data,
                                             _NATIVE_ISAS.index(self.isa), nf)
            if rc != 0:
                raise RuntimeError(f"arrays kernel failed with code {rc}"
                                   + (" (out of memory)" if rc == -2 else ""))
            if nf & 0xff or not flags & 1:
                return
        if flags & 1:
            out[...] = outputs.transform(self.head, out)

    def to_bytes(self) -> bytes:
        if self._data is None:
            self._data = tables_to_bytes(self.tables, self.head,
                                         {"isa": self.requested_isa,
                                          "block_rows": self.requested_block_rows})
        return self._data

    def save(self, path: str | os.PathLike) -> None:
        """A .tc table file, or with a shared-library suffix (.so, .dylib) a self-contained
        shared library running the same kernel on the same tables (arrays_so.py)."""
        if Path(path).suffix.lower() in (".so", ".dll", ".dylib"):
            from . import arrays_so
            arrays_so.save(self, path)
            return
        data = self.to_bytes()
        toolchain.publish(Path(path).resolve(), lambda p: p.write_bytes(data))

    # -- the compiler-free paths -------------------------------------------------------------
    def _llvm_tables(self) -> tuple:
        """One explicit-children node table for the llvmlite walker: the compact nodes, then the
        heap trees' slots (children 2i+1, 2i+2; slots past the last level are leaves)."""
        A = self.tables.arrays
        heap = A["tree_layout"] == 0
        nint = A["tree_nint"]
        C, H = len(A["c_ff"]), len(A["h_ff"])
        if C + H >= 1 << 31:
            raise UnsupportedModelError("the llvmlite walker supports at most 2^31 - 1 nodes")
        hstart = _excl_cumsum(np.where(heap, nint, 0))
        slot_n = np.repeat(nint[heap], nint[heap])
        local = np.arange(H, dtype=np.int64) - np.repeat(hstart[:-1][heap], nint[heap])
        base = C + np.repeat(hstart[:-1][heap], nint[heap])

        def child(c):
            return np.where(c < slot_n, base + c, ~(c - slot_n))
        keep = {
            "root": np.where(heap, np.where(nint > 0, C + hstart[:-1], -1), self._tree_node).astype(np.int64),
            "leafoff": self._tree_leaf.astype(np.int64),
            "tout": A["tree_out"], "twidth": A["tree_width"],
            "ff": np.concatenate([A["c_ff"], A["h_ff"]]),
            "thr": np.concatenate([A["c_thr"], A["h_thr"]]),
            "cat": np.concatenate([A["c_cat"], np.full(H, -1, np.int32)]),
            "cl": np.concatenate([self._c_left_g, child(2 * local + 1)]).astype(np.int32),
            "cr": np.concatenate([self._c_right_g, child(2 * local + 2)]).astype(np.int32),
            "words": A["cat_words"], "woff": self._cat_off.astype(np.int64), "nbits": self._cat_nbits,
            "other": A["cat_other_left"], "lv": A["leaf_values"]}
        keep = {k: np.ascontiguousarray(v) for k, v in keep.items()}
        self._llvm_keep = keep
        return tuple(v.ctypes.data for v in keep.values())

    def _run_llvm(self, X: np.ndarray, out: np.ndarray) -> None:
        m, A = self.tables.meta, self.tables.arrays
        x = np.ascontiguousarray(X, dtype=self.tables.x_dtype)  # round to nearest, like numpy
        out[...] = A["base"]
        self._walk(x.shape[0], x.ctypes.data, out.ctypes.data, m["n_trees"], m["n_features"],
                   m["n_outputs"], *self._llvm_args, int(self._strict),
                   CATEGORY_RULES.index(m["category_rule"]))
        if m["average"]:
            out /= self.tables.acc_dtype.type(m["n_trees"])

    # the same tables walked with numpy (when not even llvmlite works)
    def _run_numpy(self, X: np.ndarray) -> np.ndarray:
        m, A = self.tables.meta, self.tables.arrays
        x = X.astype(self.tables.x_dtype)  # round to nearest, like the library's conversion
        n, adt = x.shape[0], self.tables.acc_dtype
        rows = np.arange(n)
        acc = np.empty((n, m["n_outputs"]), adt)
        acc[:] = A["base"]
        nint, w = A["tree_nint"], A["tree_width"]
        c_ff = A["c_ff"].view(np.uint32)
        with np.errstate(invalid="ignore"):
            for t in range(m["n_trees"]):
                if A["tree_layout"][t] == 0:
                    off, first = int(self._tree_node[t]), int(nint[t])
                    ff, th = A["h_ff"][off:off + first].view(np.uint32), A["h_thr"][off:off + first]
                    idx = np.zeros(n, np.int64)
                    for _ in range(int(A["tree_depth"][t])):
                        f = ff[idx]
                        v = x[rows, f & FF_FEAT]
                        gr = self._num_right(v, th[idx], f)
                        idx = 2 * idx + 1 + gr
                    leaf = idx - first
                else:
                    leaf = self._walk_compact(x, int(self._tree_node[t]), c_ff)
                wt = int(w[t])
                o = int(A["tree_out"][t])
                vals = A["leaf_values"][self._tree_leaf[t] + leaf[:, None] * wt + np.arange(wt)]
                acc[:, o:o + wt] += vals
        if m["average"]:
            acc /= adt.type(m["n_trees"])
        return acc

    def _num_right(self, v: np.ndarray, t: np.ndarray, f: np.ndarray) -> np.ndarray:
        gr = (v >= t) if self._strict else (v > t)
        return gr | (np.isnan(v) & ((f & FF_NANR) != 0))

    def _walk_compact(self, x: np.ndarray, root: int, c_ff: np.ndarray) -> np.ndarray:
        A = self.tables.arrays
        n = x.shape[0]
        node = np.full(n, root, np.int64)
        active = np.arange(n) if root >= 0 else np.arange(0)
        while active.size:
            nd = node[active]
            f = c_ff[nd]
            v = x[active, f & FF_FEAT]
            gr = self._num_right(v, A["c_thr"][nd], f)
            cat = (f & FF_CAT) != 0
            if cat.any():
                s = A["c_cat"][nd[cat]]
                vc = v[cat]
                nbits = self._cat_nbits[s]
                rule = self.tables.meta["category_rule"]
                valid = ((vc > -1) if rule == "trunc" else (vc >= 0)) & (vc < nbits)
                if rule == "integral":
                    valid &= vc == np.trunc(vc)
                c = np.where(valid, vc, 0).astype(np.int64)
                bit = (A["cat_words"][self._cat_off[s] + (c >> 5)] >> (c & 31).astype(np.uint32)) & 1
                left = np.where(valid, bit.astype(bool), A["cat_other_left"][s].astype(bool))
                left = np.where(np.isnan(vc), (f[cat] & FF_NANR) == 0, left)
                gr[cat] = ~left
            nxt = np.where(gr, self._c_right_g[nd], self._c_left_g[nd]).astype(np.int64)
            node[active] = nxt
            active = active[nxt >= 0]
        return ~node


# -- the backend interface ----------------------------------------------------------------------
def build(forest: Forest, progress: Callable[[str], None] | None = None, **overrides: Any) -> ArraysKernel:
    """Flatten `forest` into tables and load them (the kernel itself is built once per machine)."""
    opts = options(**overrides)
    tables = flatten(forest, opts["layout"], opts["heap_max_depth"])
    if progress:
        progress(f"flattened {forest.n_trees} trees into {tables.nbytes} bytes of tables")
    validate(tables)  # cheap (vectorised) and catches a flattening bug before native code runs
    if opts["isa"] not in ("llvm", "numpy"):
        try:  # the package's prebuilt kernel, or its first-use build (reported through progress)
            native_library(progress)
        except CompileError:
            pass  # resolve_isa picks the compiler-free walker (or says why isa= cannot run)
    return ArraysKernel(tables, head_of(forest), isa=opts["isa"], block_rows=opts["block_rows"])


def load_bytes(data: bytes) -> ArraysKernel:
    """A kernel from a table file (ArtifactError if it is corrupt or truncated)."""
    tables, head, runtime = tables_from_bytes(data)
    isa = runtime.get("isa", "auto")
    block = runtime.get("block_rows", DEFAULTS["block_rows"])
    if isa not in ISAS or not isinstance(block, int) or not 0 <= block <= 1 << 16:
        raise _bad("runtime options")
    return ArraysKernel(tables, head, isa=isa, block_rows=block, data=bytes(data), strict_isa=False)


# -- the compiler-free native path: one generic walker JIT-compiled by llvmlite ----------------
_WALK_IR = r"""
define void @tc_arrays_walk(i64 %n, ptr noalias %X, ptr noalias %out, i64 %T, i64 %nf, i64 %no,
    ptr %root, ptr %leafoff, ptr %tout, ptr %twidth, ptr %ff, ptr %thr, ptr %cat, ptr %cl,
    ptr %cr, ptr %words, ptr %woff, ptr %nbits, ptr %other, ptr %lv, i32 %strict, i32 %rule) {
entry:
  %st = icmp ne i32 %strict, 0
  %isTrunc = icmp eq i32 %rule, 1
  %isIntg = icmp eq i32 %rule, 2
  br label %rowhead
rowhead:
  %r = phi i64 [0, %entry], [%r1, %rowend]
  %rc = icmp slt i64 %r, %n
  br i1 %rc, label %rowbody, label %exit
rowbody:
  %xo = mul i64 %r, %nf
  %xrow = getelementptr XT, ptr %X, i64 %xo
  %ao = mul i64 %r, %no
  %arow = getelementptr AT, ptr %out, i64 %ao
  br label %treehead
treehead:
  %t = phi i64 [0, %rowbody], [%t1, %leafdone]
  %tc = icmp slt i64 %t, %T
  br i1 %tc, label %treebody, label %rowend
treebody:
  %rp = getelementptr i64, ptr %root, i64 %t
  %root0 = load i64, ptr %rp
  br label %walk
walk:
  %nd = phi i64 [%root0, %treebody], [%next, %step]
  %isint = icmp sge i64 %nd, 0
  br i1 %isint, label %node, label %leaf
node:
  %ffp = getelementptr i32, ptr %ff, i64 %nd
  %f = load i32, ptr %ffp
  %feat32 = and i32 %f, 1073741823
  %feat = zext i32 %feat32 to i64
  %vp = getelementptr XT, ptr %xrow, i64 %feat
  %v = load XT, ptr %vp
  %isnan = fcmp uno XT %v, %v
  br i1 %isnan, label %nanstep, label %notnan
nanstep:
  %nanr = icmp slt i32 %f, 0
  br label %step
notnan:
  %catbit = and i32 %f, 1073741824
  %iscat = icmp ne i32 %catbit, 0
  br i1 %iscat, label %catnode, label %numnode
numnode:
  %tp = getelementptr XT, ptr %thr, i64 %nd
  %th = load XT, ptr %tp
  %ge = fcmp oge XT %v, %th
  %gt = fcmp ogt XT %v, %th
  %gr = select i1 %st, i1 %ge, i1 %gt
  br label %step
catnode:
  %sp = getelementptr i32, ptr %cat, i64 %nd
  %s32 = load i32, ptr %sp
  %s = sext i32 %s32 to i64
  %nbp = getelementptr i32, ptr %nbits, i64 %s
  %nb32 = load i32, ptr %nbp
  %nbf = sitofp i32 %nb32 to XT
  %ltn = fcmp olt XT %v, %nbf
  %gtm1 = fcmp ogt XT %v, -1.0
  %ge0 = fcmp oge XT %v, 0.0
  %lo = select i1 %isTrunc, i1 %gtm1, i1 %ge0
  %valid0 = and i1 %lo, %ltn
  br i1 %valid0, label %catvalid, label %catinvalid
catvalid:
  %c = fptosi XT %v to i32
  %cb = sitofp i32 %c to XT
  %integral = fcmp oeq XT %cb, %v
  %notint = xor i1 %integral, true
  %bad = and i1 %isIntg, %notint
  br i1 %bad, label %catinvalid, label %catbits
catbits:
  %wop = getelementptr i64, ptr %woff, i64 %s
  %wo = load i64, ptr %wop
  %c5 = lshr i32 %c, 5
  %c5e = zext i32 %c5 to i64
  %wi = add i64 %wo, %c5e
  %wp = getelementptr i32, ptr %words, i64 %wi
  %w = load i32, ptr %wp
  %c31 = and i32 %c, 31
  %sh = lshr i32 %w, %c31
  %bit = and i32 %sh, 1
  %grc = icmp eq i32 %bit, 0
  br label %step
catinvalid:
  %op = getelementptr i8, ptr %other, i64 %s
  %o8 = load i8, ptr %op
  %gri = icmp eq i8 %o8, 0
  br label %step
step:
  %g = phi i1 [%gr, %numnode], [%grc, %catbits], [%gri, %catinvalid], [%nanr, %nanstep]
  %clp = getelementptr i32, ptr %cl, i64 %nd
  %crp = getelementptr i32, ptr %cr, i64 %nd
  %chp = select i1 %g, ptr %crp, ptr %clp
  %ch = load i32, ptr %chp
  %next = sext i32 %ch to i64
  br label %walk
leaf:
  %leafi = xor i64 %nd, -1
  %wdp = getelementptr i32, ptr %twidth, i64 %t
  %wd32 = load i32, ptr %wdp
  %wd = sext i32 %wd32 to i64
  %toutp = getelementptr i32, ptr %tout, i64 %t
  %o32 = load i32, ptr %toutp
  %oo = sext i32 %o32 to i64
  %lop = getelementptr i64, ptr %leafoff, i64 %t
  %lo0 = load i64, ptr %lop
  %lm = mul i64 %leafi, %wd
  %lb = add i64 %lo0, %lm
  br label %jhead
jhead:
  %j = phi i64 [0, %leaf], [%j1, %jbody]
  %jc = icmp slt i64 %j, %wd
  br i1 %jc, label %jbody, label %leafdone
jbody:
  %li = add i64 %lb, %j
  %lvp = getelementptr AT, ptr %lv, i64 %li
  %val = load AT, ptr %lvp
  %ai = add i64 %oo, %j
  %ap = getelementptr AT, ptr %arow, i64 %ai
  %acc = load AT, ptr %ap
  %sum = fadd AT %acc, %val
  store AT %sum, ptr %ap
  %j1 = add i64 %j, 1
  br label %jhead
leafdone:
  %t1 = add i64 %t, 1
  br label %treehead
rowend:
  %r1 = add i64 %r, 1
  br label %rowhead
exit:
  ret void
}
"""

_JIT: dict[tuple[str, str], Any] = {}
_JIT_LOCK = threading.Lock()


def llvm_walker(x_dtype: str, acc_dtype: str):
    """The JIT-compiled generic walker for one dtype pair (built once per process; no C
    compiler needed). A row at a time, trees in order, explicit-children node tables: the
    compiler-free path, slower than the C kernel but native. No fast-math flags: each leaf
    value is added once with an IEEE fadd, exactly as in the C kernel."""
    key = (x_dtype, acc_dtype)
    with _JIT_LOCK:
        fn = _JIT.get(key)
        if fn is not None:
            return fn
        try:
            import llvmlite.binding as llvm
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
        except Exception as exc:  # pragma: no cover - llvmlite is a core dependency
            raise CompileError(f"the arrays backend's compiler-free kernel needs llvmlite: {exc}") from None
        ty = {"float32": "float", "float64": "double"}
        text = _WALK_IR.replace("XT", ty[x_dtype]).replace("AT", ty[acc_dtype])
        try:
            mod = llvm.parse_assembly(text)
            mod.verify()
            tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.finalize_object()
        except RuntimeError as exc:
            raise CompileError(f"LLVM rejected the arrays walker: {exc}") from None
        proto = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                 *([ctypes.c_void_p] * 14), ctypes.c_int32, ctypes.c_int32)
        fn = proto(engine.get_function_address("tc_arrays_walk"))
        fn._engine = engine  # keep the JIT'd code alive with the function
        _JIT[key] = fn
        return fn


def have_llvm() -> bool:
    try:
        llvm_walker("float32", "float64")
        return True
    except CompileError:
        return False


def __getattr__(name: str) -> Any:
    """The native kernel's state (KERNEL_ORIGIN, KERNEL_PATH, PREBUILT_ERROR, _LIB, _SELF_TEST)
    read live from arrays_native, where it changes."""
    if name in ("KERNEL_ORIGIN", "KERNEL_PATH", "PREBUILT_ERROR", "_LIB", "_LIB_LOCK", "_SELF_TEST"):
        return getattr(arrays_native, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
