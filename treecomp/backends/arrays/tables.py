"""The arrays backend's tables: a forest flattened into flat struct-of-arrays, and their check.

Shape: per tree one entry of tree_layout / tree_depth / tree_nint / tree_nleaf / tree_out /
tree_width; the heap trees' slots in h_ff / h_thr (complete binary trees, node i -> 2i+1, 2i+2);
the compact trees' internal nodes in c_ff / c_thr / c_cat / c_left / c_right (children local to
their tree, leaf = ~index); every tree's leaf vectors in leaf_values; categorical sets as words.
Floating point: thresholds in the input dtype (passes.comparison_thresholds), leaf values
rounded once to the accumulation dtype; nothing else is computed here.

Layouts, chosen per tree (option ``layout``; see runtime/kernels/arrays.c for the exact format):

- ``heap``: a complete binary tree of depth D (node i -> 2i+1, 2i+2), padded so that the walk is
  exactly D branch-free steps ``i = 2*i + 1 + go_right``. Padding nodes have threshold NaN and
  send NaN left, so every row goes left (``x > NaN`` is false); a leaf above depth D is copied
  into every leaf slot below it. Used (layout="auto") for trees without categorical splits of
  depth <= heap_max_depth whose padding costs at most 4x their leaves (or 64 slots), where
  no byte walk runs.
  The float32-input heap walk has explicit AVX2 (8 rows/vector) and AVX-512F (16 rows/vector)
  paths, four vectors interleaved to hide gather latency.
- ``quant`` (the default for numeric forests whose trees are all at most 8 deep, padded into
  heaps, unless the interval walk is measured faster: byte_walk, quant_pays): the heap
  tables plus, derived when loading, per-feature sorted threshold tables (derived). Each
  block of rows is first quantised to one byte per (feature, NaN direction) column: a row's bin
  counts the thresholds it goes right of, found exactly in the comparison precision; a node then
  compares bytes. The AVX2 kernel evaluates every node of a level for 32 rows at once (load +
  byte compare, no gathers), selects each row's node with byte blends, and looks leaves up with
  byte shuffles (runtime/kernels/quant_impl.c). Same decisions, same summation order: bit-exact.
  Measured on the 500-tree depth-6 XGBoost bench model: ~0.8 us/row vs ~2.5 for the float walk.
  Symmetric heaps (CatBoost's: one split a level) are flagged at load and walked one column a
  level on AVX-512 (derived.oblivious_heaps; docs/backends.md).
- ``bitvec`` (the default for other forests of trees with <= 255 leaves, and for sparse
  depth-8 heaps over wide rows where it is faster: byte_walk; e.g. LightGBM's and
  HistGradientBoosting's, categorical splits included): compact tables plus, derived when
  loading, the same byte columns (category codes for categorical features, each categorical node
  a 256-bit set over the codes: see derived.cat_byte_sets) and each node's left-subtree
  leaf interval. A row's exit leaf is the first leaf not ruled out by a node where it goes
  right (QuickScorer's insight); the AVX2 kernel sweeps every node of a tree, sorted by interval
  start, for 2 x 32 rows with byte compares and byte max (quant_impl.c). The scalar path (and
  batches under 8 rows) walks the compact float tables. 500 LightGBM trees of 63 leaves:
  ~1.6 us/row vs 14 for generated C and 61 for LightGBM; HGB with categories 0.55 vs 5.0 (C).
- ``compact``: one packed 16-byte (float32) / 24-byte (float64) record per internal node with
  explicit children (leaf = negative child), 8 rows walked in flight. Deep, unbalanced and
  categorical trees. With float32 input, trees without categorical splits take the kernel's
  deep path instead (derived at load time by derived.deep_tables, not stored): the tree's
  complete top levels as a heap (the vector heap walk), then 8 rows in lockstep over records
  with a self-looping record per leaf and integer order keys as thresholds (rf-deep: 947 -> ~420
  ns/row, about 5.4x scikit-learn single-threaded; 100 deep trees, 3.8M nodes: 3.3x -> 5.3x).
- ``naive`` (layout="naive"): the compact tables walked one row at a time, one tree at a time,
  with branches: "a generic interpreter in native code", the benchmarks' baseline.

Validation: every index a native pointer will follow is checked (vectorised) before the tables
reach native code; a corrupt table raises ArtifactError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ArtifactError, UnsupportedModelError
from ...ir import Forest
from ...outputs import base_margins
from ...passes import lowered_thresholds

LAYOUTS = ("auto", "quant", "bitvec", "heap", "compact", "naive")
#: most leaves per tree of the interval ("bitvec") walk: leaf positions are signed bytes
#: (biased beyond 128 leaves: derived.interval_bias)
BITVEC_MAX_LEAVES = 255
#: layout="auto" weighs the interval walk against the quantised heap walk (quant_pays) for
#: trees of up to this many leaves, as measured; beyond, heaps of <= 8 levels stay quantised
BITVEC_VS_QUANT_LEAVES = 128
#: deepest tree of the quantised walk (its row positions are bytes: 2^8 leaf slots)
QUANT_MAX_DEPTH = 8
#: layout="auto" uses the quantised walk when every tree is a heap at most this deep
QUANT_AUTO_DEPTH = 8


MAX_HEAP_DEPTH = 20
#: forest.category_rule values, in the kernel's numbering (tc_tables.cat_rule)
CATEGORY_RULES = ("nonneg", "trunc", "integral")

FF_FEAT = 0x3FFFFFFF
FF_CAT = 0x40000000
FF_NANR = 0x80000000


#: name -> dtype ("x": the input dtype, "acc": the accumulation dtype), in file order
TABLE_ARRAYS = {
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
        d = TABLE_ARRAYS[name]
        return np.dtype(_DT[self.meta["x_dtype"]] if d == "x" else _DT[self.meta["acc_dtype"]] if d == "acc" else d)



def quant_eligible(forest: Forest, heap_max_depth: int = 8) -> bool:
    """Would layout="auto" use a byte walk for `forest` (flatten's rule, byte_walk)? At least
    one split, and either every tree has <= BITVEC_MAX_LEAVES leaves (the interval walk, if
    not the heap one; categorical splits too) or every tree is numeric and at most
    min(heap_max_depth, QUANT_AUTO_DEPTH) deep (the quantised heap walk)."""
    return forest_byte_walk(forest, heap_max_depth) is not None


def forest_byte_walk(forest: Forest, heap_max_depth: int = 8) -> str | None:
    """byte_walk for `forest`: "quant", "bitvec" or None (see byte_walk)."""
    trees = forest.trees
    return byte_walk([t.max_depth for t in trees], [t.n_leaves for t in trees],
                     used_features((t.feature[t.left >= 0] for t in trees), forest.n_features),
                     any(t.has_categorical for t in trees), forest.n_features, heap_max_depth)


def used_features(split_features: Any, n_features: int) -> int:
    """How many distinct features the splits test (`split_features`: arrays of the internal
    nodes' features, e.g. one per tree); byte_walk's measure of the quantised row's width."""
    # (marked a chunk of arrays at a time: no node-sized temporaries, the peak memory of huge
    # models)
    seen = np.zeros(max(int(n_features), 0), bool)
    chunk: list = []
    size = 0

    def mark(seen: np.ndarray) -> np.ndarray:
        a = np.concatenate(chunk)
        chunk.clear()
        if int(a.min()) < 0:
            raise ValueError("negative feature index")
        top = int(a.max())
        if top >= len(seen):
            seen = np.concatenate([seen, np.zeros(top + 1 - len(seen), bool)])
        seen[a] = True
        return seen
    for a in split_features:
        a = np.asarray(a).ravel()
        if len(a):
            chunk.append(a)
            size += len(a)
            if size >= 1 << 16:
                seen, size = mark(seen), 0
    if chunk:
        seen = mark(seen)
    return int(np.count_nonzero(seen))


#: quant_pays's constants, ns per row (one thread), fitted by bench/layout_ab.py: the quantised
#: heap walk's cost minus the interval walk's is about
#:     SLOT * slots + SLOT_FEAT * slots * used - TREE * trees - INNER * inner - INNER_FEAT * inner * used
#: (slots: 2^depth summed over the trees; inner: internal nodes summed; used: used_features).
#: The byte walk compares every node of a level, padding included, the interval walk only the
#: tree's nodes; both load a quantised column per node, which costs more per node as the
#: quantised block of rows outgrows the first-level cache (used features times 512 rows);
#: the interval walk pays about 1 ns a tree-row more for its setup (sort keys, leaf maxima).
QUANT_VS_BITVEC = {"slot": 4.64e-3, "slot_feat": 3.65e-5, "tree": 1.13, "inner": 5.55e-3,
                   "inner_feat": 1.24e-5}
#: the widest rows (features) on which byte_walk weighs the interval walk against the quantised
#: heap walk (quant_pays, fitted on rows of 13-1,000 features); wider rows take the quantised
#: walk. Measured 2026-11-28 on the 8 forests of bench/calibrate_auto-grid-2026-11-28.json over
#: 1,581-4,055 features (166-2,520 used) that quant_pays would send to the interval walk: the
#: quantised walk was faster on 7 (1.26-2.1x), the interval walk on 1 (1.04x); on synthetic
#: rows of 1,200-1,600 features, all used, the interval walk was 1.04-1.24x faster.
QUANT_VS_BITVEC_MAX_FEATURES = 1000


def quant_pays(depth: Any, n_leaves: Any, n_used: int) -> bool:
    """Is the quantised heap walk estimated no slower than the interval walk on numeric trees
    of these depths and leaf counts whose splits test `n_used` features (QUANT_VS_BITVEC)?"""
    d = np.asarray(depth, np.int64)
    slots = float((np.int64(1) << np.minimum(d, 62)).sum())
    inner = float((np.asarray(n_leaves, np.int64) - 1).sum())
    k = QUANT_VS_BITVEC
    return (slots * (k["slot"] + k["slot_feat"] * n_used)
            <= k["tree"] * len(d) + inner * (k["inner"] + k["inner_feat"] * n_used))


def byte_walk(depth: Any, n_leaves: Any, n_used: int, has_categorical: bool, n_features: int,
              heap_max_depth: int = 8) -> str | None:
    """layout="auto"'s byte walk for trees of these depths and leaf counts whose splits test
    `n_used` distinct features of rows of `n_features`: "quant" (the quantised heap walk:
    every tree numeric and at most min(heap_max_depth, QUANT_AUTO_DEPTH) deep), "bitvec" (the
    interval walk: every tree of <= BITVEC_MAX_LEAVES leaves), where both can run the faster by
    quant_pays (rows of up to QUANT_VS_BITVEC_MAX_FEATURES features; wider: quant), or None
    (neither; no split at all).

    No bound on the heaps' padding: measured (bench/layout_ab.py, 2026-11-28, the shared
    2-core AMD EPYC (Zen 4) KVM guest at load 2-3, 1 thread, thread CPU time, medians of 5
    rounds with the layouts alternating in one process; 82 grid forests of depth 6-8, 1/16 to
    all of the 2^depth leaves and chains, 13-500 features, plus 40 held-out ones, 10-400 trees,
    trained XGBoost models among both), the quantised walk beat the deep walk over compact
    records on every forest, 1.03-7.9x; the 4x padding bound this replaces sent a trained
    XGBoost model of 100 trees of depth 8 over 13 features (~57 leaves a tree, some over 128)
    there: 748 vs 149 ns/row. Against the interval walk it depends on the padding and the
    row's width (quant_pays): quant wins on narrow rows (1.1-2.7x), loses sparse depth-8
    forests over 100+ features (up to 1.5x). The layout auto picks is within 10% of the
    fastest of the three on 81 of 82 grid forests (the 4x bound: 70, worst 5.0x) and on 40 of
    40 held-out ones (the 4x bound: 33, worst 1.55x); worst 1.12x. LightGBM-like float64
    forests of depth 8 (not in the fit): the faster walk on 3 of 4, the other 5% slower.
    Memory: a tree of depth d <= 8 has 2^d leaf slots and 2^d - 1 node slots against at least
    d + 1 leaves, so the padding is at most 256 / 9 (28x) a tree's leaves, 256 slots a tree
    (the 4x bound allowed 4x): a slot costs a feature word and a threshold (8-12 bytes) and a
    leaf value, and when loading a byte and a column index (5,000 sparse depth-8 trees, 480k
    nodes in 1.28M slots: compile peak 282 bytes a node against 190 for the deep walk)."""
    d = np.asarray(depth, np.int64)
    n = np.asarray(n_leaves, np.int64)
    if not len(d) or int(n.max()) <= 1:
        return None
    quant = not has_categorical and int(d.max()) <= min(heap_max_depth, QUANT_AUTO_DEPTH)
    bitvec = int(n.max()) <= (BITVEC_VS_QUANT_LEAVES if quant else BITVEC_MAX_LEAVES)
    if quant and bitvec:
        wide = n_features > QUANT_VS_BITVEC_MAX_FEATURES
        return "quant" if wide or quant_pays(d, n, n_used) else "bitvec"
    return "quant" if quant else "bitvec" if bitvec else None


def excl_cumsum(a: np.ndarray) -> np.ndarray:
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
    start = excl_cumsum(nn)
    # (node arrays in their IR dtypes, int32, and temporaries freed once used: the peak memory
    # of a forest of millions of nodes is a few of these arrays at a time)
    tree_of = np.repeat(np.arange(T, dtype=np.int32), nn)
    feature = np.concatenate([t.feature for t in trees])
    nan_right = ~np.concatenate([t.default_left for t in trees])
    cidx = np.concatenate([t.cat_index for t in trees])
    thr = lowered_thresholds(np.concatenate([t.threshold for t in trees]), forest).astype(xdt, copy=False)
    # node-wide indices in int32 where every node number fits (4 bytes a node less per array
    # at the peak than int64: a 10M-node forest's peak is a few of these arrays at once)
    idt = np.dtype(np.int32) if int(start[-1]) < 1 << 31 else np.dtype(np.int64)
    first = start.astype(idt)[tree_of]
    left = np.concatenate([t.left for t in trees])
    internal = left >= 0
    gl = np.where(internal, left.astype(idt, copy=False) + first, idt.type(-1))
    del left
    gr = np.where(internal, np.concatenate([t.right for t in trees]).astype(idt, copy=False) + first,
                  idt.type(-1))
    del first

    # depth and heap position of every node: one vectorised step per level, all trees at once
    # (pos < 2^(MAX_HEAP_DEPTH + 1) and depth < the node count: int32 holds both)
    depth = np.zeros(len(internal), np.int32)
    pos = np.zeros(len(internal), np.int32)
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
        if layout == "auto":
            walk = byte_walk(tdepth, n_leaf_real, used_features([feature[internal]], forest.n_features),
                             bool(has_cat.any()), forest.n_features, heap_max_depth)
            quant, bitvec = walk == "quant", walk == "bitvec"
            if bitvec:
                heap = np.zeros(T, bool)
            elif not quant:  # float heaps: padding at most 4x the tree's leaves (or 64 slots)
                heap &= (np.int64(1) << np.minimum(tdepth, 62)) <= np.maximum(64, 4 * n_leaf_real)
    hd = np.where(heap, tdepth, 0)
    tree_nint = np.where(heap, (np.int64(1) << hd) - 1, n_int_real)
    tree_nleaf = np.where(heap, np.int64(1) << hd, n_leaf_real)

    nodeheap = heap[tree_of]
    ff = (feature.astype(np.int64) & FF_FEAT) | np.where(nan_right, FF_NANR, 0) \
        | np.where(cidx >= 0, FF_CAT, 0)
    ff32 = ff.astype(np.uint32).view(np.int32)
    del ff, nan_right

    # heap tables: padding = (feature 0, NaN goes left, threshold NaN) sends every row left
    hoff = excl_cumsum(np.where(heap, tree_nint, 0))
    h_ff = np.zeros(int(hoff[-1]), np.int32)
    h_thr = np.full(int(hoff[-1]), np.nan, xdt)
    sel = internal & nodeheap
    slot = hoff[tree_of[sel]] + pos[sel]
    h_ff[slot] = ff32[sel]
    h_thr[slot] = thr[sel]
    del sel, slot

    # compact tables: internal nodes and leaves numbered in IR order within their tree
    int_rank = np.cumsum(internal, dtype=idt)
    int_rank -= excl_cumsum(n_int_real).astype(idt)[tree_of] + 1
    leaf_rank = np.cumsum(~internal, dtype=idt)
    leaf_rank -= excl_cumsum(n_leaf_real).astype(idt)[tree_of] + 1
    code = np.where(internal, int_rank, ~leaf_rank)
    csel = internal & ~nodeheap
    ncat = np.fromiter((t.cat_bits.shape[0] for t in trees), np.int64, T)
    set_start = excl_cumsum(ncat)
    c_is_cat = cidx[csel] >= 0
    c_ff = ff32[csel]
    c_thr = np.where(c_is_cat, xdt.type(0), thr[csel]).astype(xdt)
    c_cat = np.where(c_is_cat, cidx[csel] + set_start[tree_of[csel]], -1).astype(np.int32)
    if int(csel.sum()) >= 1 << 31:  # node records hold int32 global child indices
        raise UnsupportedModelError("the arrays backend supports at most 2^31 - 1 internal nodes "
                                    "in compact trees")
    c_left = code[gl[csel]].astype(np.int32)
    c_right = code[gr[csel]].astype(np.int32)
    del code, gl, gr, csel, int_rank, ff32, thr, feature, cidx

    # leaves: heap leaves fill the slot range below them, compact leaves keep their rank
    lnode = np.flatnonzero(~internal)
    lt = tree_of[lnode]
    lheap = heap[lt]
    k = np.where(lheap, hd[lt] - depth[lnode], 0)
    slot_start = np.where(lheap, ((pos[lnode] + 1) << k) - (np.int64(1) << hd[lt]), leaf_rank[lnode])
    item_off = excl_cumsum(tree_nleaf)
    # the source node of every leaf slot: each leaf covers the 2^k slots from its first one,
    # and the leaves' ranges tile the slots; so each slot's leaf is the one whose first slot
    # is the last first slot at or before it (a running maximum, not a sort of the leaves)
    first = item_off[lt] + slot_start
    del k, slot_start
    n_slots = int(item_off[-1])
    src = np.zeros(n_slots, np.int64)
    src[first] = first
    np.maximum.accumulate(src, out=src)
    owner = np.zeros(n_slots, np.int64)
    owner[first] = lnode
    src = owner[src]
    del owner, first
    st = tree_of[src]
    vflat = np.concatenate([t.value.ravel() for t in trees])
    vstart = excl_cumsum(nn * width)
    first_val = vstart[st] + (src - start[st]) * width[st]
    if np.all(width == 1):
        vals = vflat[first_val]
    else:
        iw = width[st]
        ipos = excl_cumsum(iw)
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
        "leaf_values": leaf_values,
        # a base_link's margins with libm's log / exp (ArraysKernel sets this host's at load)
        "base": base_margins(forest, "libm").astype(adt),
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



# -- validation (every index a native pointer will follow) --------------------------------------
def bad_table(msg: str) -> ArtifactError:
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
            raise bad_table("table description fields of the wrong type")
        if m["x_dtype"] not in _DT or m["acc_dtype"] not in _DT or m["comparison"] not in ("<", "<="):
            raise bad_table("unknown dtype or comparison")
        if m["category_rule"] not in CATEGORY_RULES:
            raise bad_table("unknown category rule")
    except (KeyError, TypeError, ValueError):
        raise bad_table("incomplete table description") from None
    if not (T >= 1 and 1 <= nf <= FF_FEAT and no >= 1):
        raise bad_table(f"n_trees={T}, n_features={nf}, n_outputs={no}")
    for name in TABLE_ARRAYS:
        a = A.get(name)
        if a is None or a.ndim != 1 or a.dtype != tables.expected_dtype(name):
            raise bad_table(f"array {name!r} missing or of the wrong type")
    for name in ("tree_layout", "tree_depth", "tree_nint", "tree_nleaf", "tree_out", "tree_width"):
        if len(A[name]) != T:
            raise bad_table(f"{name} has {len(A[name])} entries for {T} trees")
    lay = A["tree_layout"]
    if np.any(lay > 1):
        raise bad_table("unknown tree layout")
    heap = lay == 0
    if m["naive"] and heap.any():
        raise bad_table("the naive walk needs compact trees")
    if not isinstance(m.get("quant", False), bool):
        raise bad_table("quant flag")
    if m.get("quant") and (m["naive"] or not heap.all() or int(A["tree_depth"].max()) > QUANT_MAX_DEPTH):
        raise bad_table(f"the quantised walk needs heap trees of depth <= {QUANT_MAX_DEPTH}")
    if not isinstance(m.get("bitvec", False), bool):
        raise bad_table("bitvec flag")
    if m.get("bitvec") and (m["naive"] or m.get("quant") or heap.any()
                            or int(A["tree_nleaf"].max()) > BITVEC_MAX_LEAVES):
        raise bad_table(f"the interval walk needs compact trees of <= {BITVEC_MAX_LEAVES} leaves")
    D = A["tree_depth"].astype(np.int64)
    nint, nleaf = A["tree_nint"], A["tree_nleaf"]
    w, o = A["tree_width"].astype(np.int64), A["tree_out"].astype(np.int64)
    if np.any(heap & ((D < 0) | (D > MAX_HEAP_DEPTH))):
        raise bad_table("heap tree depth out of range")
    Dh = np.where(heap, D, 0)
    if np.any(heap & ((nint != (np.int64(1) << Dh) - 1) | (nleaf != np.int64(1) << Dh))):
        raise bad_table("heap tree sizes do not match their depth")
    lim = np.int64(1) << 40  # no sums can overflow below this
    if np.any((nint < 0) | (nint > lim) | (nleaf < 1) | (nleaf > lim) | (w < 1) | (w > 1 << 20)):
        raise bad_table("tree sizes out of range")
    if np.any((o < 0) | (o + w > no)):
        raise bad_table("a tree writes outside the outputs")
    if len(A["base"]) != no:
        raise bad_table("base score length")
    H, C = int(nint[heap].sum()), int(nint[~heap].sum())
    if C >= 1 << 31:
        raise bad_table("too many compact nodes")
    if len(A["h_ff"]) != H or len(A["h_thr"]) != H:
        raise bad_table("heap table length")
    for name in ("c_ff", "c_thr", "c_cat", "c_left", "c_right"):
        if len(A[name]) != C:
            raise bad_table(f"{name} length")
    if len(A["leaf_values"]) != int((nleaf * w).sum()):
        raise bad_table("leaf table length")
    h_ff = A["h_ff"].view(np.uint32)
    if np.any((h_ff & FF_FEAT) >= nf) or np.any(h_ff & FF_CAT):
        raise bad_table("heap node feature out of range")
    c_ff = A["c_ff"].view(np.uint32)
    if np.any((c_ff & FF_FEAT) >= nf):
        raise bad_table("node feature out of range")
    # the walks must agree on every path: a NaN threshold is heap padding (feature 0, NaN goes
    # left: the byte walks encode it as "left of every bin") and never a numeric split
    if np.any(np.isnan(A["h_thr"]) & (A["h_ff"] != 0)) or \
            np.any(np.isnan(A["c_thr"]) & ((c_ff & FF_CAT) == 0)):
        raise bad_table("NaN threshold at a split")
    if not (np.all(np.isfinite(A["leaf_values"])) and np.all(np.isfinite(A["base"]))):
        raise bad_table("non-finite leaf value or base score")
    ntrees_c = np.flatnonzero(~heap)
    ctree = np.repeat(ntrees_c, nint[~heap])
    cstart = excl_cumsum(nint[~heap])
    local = np.arange(C, dtype=np.int64) - np.repeat(cstart[:-1], nint[~heap])
    for name in ("c_left", "c_right"):
        ch = A[name].astype(np.int64)
        is_int = ch >= 0
        bad = np.where(is_int, (ch <= local) | (ch >= nint[ctree]), ~ch >= nleaf[ctree])
        if bad.any():
            raise bad_table(f"child index out of range in {name}")
    # in range is not enough: a child shared by two parents orphans another node or leaf, whose
    # entries in the derived tables (bitvec_tables' leaf order, the deep path's records) nothing
    # would write. So: nint + 1 leaves per compact tree, every node but the root and every leaf
    # of a split tree the child of exactly one node (children > parents: no cycles either)
    if np.any(nleaf[~heap] != nint[~heap] + 1):
        raise bad_table("a compact tree's leaf count is not its internal node count + 1")
    kids = np.concatenate([A["c_left"], A["c_right"]]).astype(np.int64)
    kid_tree = np.concatenate([ctree, ctree])
    node_refs = np.bincount(np.concatenate([np.arange(C) - local] * 2)[kids >= 0] + kids[kids >= 0],
                            minlength=C)
    loff = excl_cumsum(np.where(heap, 0, nleaf))
    leaf_refs = np.bincount(loff[kid_tree[kids < 0]] + ~kids[kids < 0], minlength=int(loff[-1]))
    split = np.repeat(nint > 0, np.where(heap, 0, nleaf))  # a one-leaf tree: no parent
    if np.any(node_refs != (local > 0)) or np.any(leaf_refs != split):
        raise bad_table("a tree's nodes do not form a tree (a node or leaf without or with several parents)")
    nw = A["cat_nwords"].astype(np.int64)
    S = len(nw)
    if np.any((nw < 1) | (nw > 1 << 25)) or int(nw.sum()) != len(A["cat_words"]) or len(A["cat_other_left"]) != S:
        raise bad_table("category sets")
    is_cat = (c_ff & FF_CAT) != 0
    cc = A["c_cat"][is_cat]
    if np.any((cc < 0) | (cc >= S)):
        raise bad_table("category set index out of range")

